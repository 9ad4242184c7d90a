/* SPDX-License-Identifier: MIT */
/*
 * snapread.c - reading the places of a snapshot: its blocks, the
 * fragments and records in them, decoded and checked as every reader
 * must, and the damage found, noted once per place.
 *
 * A snapshot opened from its file for lookups reads what they need (its
 * first page, its tail, a few KiB of INDEX pairs or, checked, INDEX
 * blocks, an entry) by pread into a few buffers of its own; walks read
 * the mapping, made by the first of them (envlog_snap_mapped).  A first touch of a
 * mapped page costs a page fault, and unmapping what was touched costs
 * more: on a virtual machine tens of microseconds each, most of a cold
 * lookup when the four places it reads are mapped.
 */
#include "snap_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void envlog_snap_note_first(envlog_snap *s, size_t off, size_t bytes, const char *why)
{
    if (s->any_bad)
        return;
    s->any_bad = true;
    memset(&s->first_bad, 0, sizeof s->first_bad);
    s->first_bad.session = s->id;
    s->first_bad.offset = off;
    s->first_bad.bytes = bytes;
    snprintf(s->first_bad.reason, sizeof s->first_bad.reason, "%s", why);
}

/* Damage a walk in file order met at `off`. */
void envlog_snap_note_bad(envlog_snap *s, size_t off, size_t bytes, const char *why)
{
    envlog_snap_note_first(s, off, bytes, why);
    if (off < s->bad_seen_to)
        return;
    s->bad++;
    s->bad_seen_to = off + (bytes ? bytes : 1);
    if (s->n_dmg < ENVLOG_SNAP_DAMAGE_KEPT) {
        envlog_damage *d = &s->dmg[s->n_dmg++];
        memset(d, 0, sizeof *d);
        d->session = s->id;
        d->offset = off;
        d->bytes = bytes;
        snprintf(d->reason, sizeof d->reason, "%s", why);
    }
}

/* Block `b` of the file (its `*len` bytes): in the mapping, or read by
 * pread into one of the slots (kept until SNAP_SLOTS other blocks are
 * read).  NULL past the end, or when the read fails (io_err says why). */
const uint8_t *envlog_snap_block(envlog_snap *s, size_t b, size_t *len)
{
    size_t off = b * ENVLOG_BLOCK;
    if (off >= s->n)
        return NULL;
    *len = s->n - off < ENVLOG_BLOCK ? s->n - off : ENVLOG_BLOCK;
    if (s->fd < 0)
        return s->p + off;
    for (unsigned i = 0; i < SNAP_SLOTS; i++)
        if (s->slot[i].b && s->slot[i].no == b && s->slot[i].len == *len)
            return s->slot[i].b;
    struct snap_slot *sl = &s->slot[s->slot_next++ % SNAP_SLOTS];
    if (!sl->b && !(sl->b = envlog_malloc(ENVLOG_BLOCK))) {
        s->io_err = ENOMEM;
        return NULL;
    }
    sl->len = 0;
    if (envlog_pread_full(s->fd, sl->b, *len, (off_t)off)) {
        s->io_err = errno ? errno : EIO;
        return NULL;
    }
    sl->no = b;
    sl->len = *len;
    return sl->b;
}

/* The fragment at file offset `at` when it is whole and passes its
 * checksum: its type, payload length and payload; 0 otherwise. */
int envlog_snap_frag(envlog_snap *s, size_t at, size_t *len, const uint8_t **payload)
{
    size_t bl;
    const uint8_t *bp = envlog_snap_block(s, at / ENVLOG_BLOCK, &bl);
    if (!bp)
        return 0;
    envlog_frame_reader fr;
    envlog_frame_reader_init(&fr, bp, bl, s->seed, 0);
    int type = envlog_frag_check(&fr, at % ENVLOG_BLOCK, len);
    if (type)
        *payload = bp + at % ENVLOG_BLOCK + ENVLOG_FRAG_HDR;
    return type;
}

/* Bytes a lookup reads at first from where its ENTRY starts: most entries
 * are one fragment shorter than this, read by one pread that copies little. */
#define NEAR_FIRST 1024

/* The fragment at `at` (as envlog_snap_frag()) read by pread: NEAR_FIRST
 * bytes, then the rest of the fragment when its header says it is longer,
 * as far as the end of the page after `at`'s (at most its block's end): 0
 * when it does not end there. */
static int frag_near(envlog_snap *s, size_t at, size_t *len, const uint8_t **payload)
{
    size_t end = (at / 4096 + 2) * 4096, bend = (at / ENVLOG_BLOCK + 1) * ENVLOG_BLOCK;
    if (end > bend)
        end = bend;
    if (end > s->n)
        end = s->n;
    if (at >= end || (!s->near && !(s->near = envlog_malloc(8192))))
        return 0;
    size_t got = end - at < NEAR_FIRST ? end - at : NEAR_FIRST, flen;
    if (envlog_pread_full(s->fd, s->near, got, (off_t)at))
        return 0; /* envlog_snap_frag() reads it again, and says why */
    if (got >= ENVLOG_FRAG_HDR && envlog_frag_head(s->near, at, s->n, &flen) &&
        ENVLOG_FRAG_HDR + flen > got && at + ENVLOG_FRAG_HDR + flen <= end) {
        size_t want = ENVLOG_FRAG_HDR + flen;
        if (envlog_pread_full(s->fd, s->near + got, want - got, (off_t)(at + got)))
            return 0;
        got = want;
    }
    envlog_frame_reader fr;
    envlog_frame_reader_init(&fr, s->near, got, s->seed, 0);
    int type = envlog_frag_check(&fr, 0, len);
    if (type)
        *payload = s->near + ENVLOG_FRAG_HDR;
    return type;
}

/* The shape of the fragment at `at` from its header alone (envlog_frag_peek). */
int envlog_snap_peek(envlog_snap *s, size_t at, size_t *len)
{
    if (s->fd < 0)
        return envlog_frag_peek(s->p, s->n, at, len);
    uint8_t h[ENVLOG_FRAG_HDR];
    if (at > s->n || s->n - at < sizeof h)
        return 0;
    if (envlog_pread_full(s->fd, h, sizeof h, (off_t)at)) {
        s->io_err = errno ? errno : EIO;
        return 0;
    }
    return envlog_frag_head(h, at, s->n, len);
}

/* The failure of a lookup's read: the pread's, else the damage `what`. */
envlog_err envlog_snap_read_fail(envlog_snap *s, const char *what)
{
    int err = s->io_err;
    s->io_err = 0;
    if (err == ENOMEM)
        return envlog__fail(ENVLOG_NOMEM, "reading a snapshot");
    if (err) { /* the disk's failure, never the data's */
        envlog__fail_errno(err, "reading the snapshot");
        return ENVLOG_IO;
    }
    return envlog__fail(ENVLOG_CORRUPT, "%s", what);
}

/* The record that starts at `at`, its fragments checked: in place when it
 * is one fragment, else gathered from its blocks into s->rec. */
envlog_err envlog_snap_record(envlog_snap *s, size_t at, const uint8_t **p, size_t *n)
{
    size_t len, from = at;
    const uint8_t *pl;
    int type;
    at = (size_t)envlog_snap_record_start(at);
    /* By pread, a record of one fragment (an entry, most of all) is read
     * from its page on, without the rest of its block. */
    if (s->fd >= 0 && (type = frag_near(s, at, &len, &pl)) == ENVLOG_FRAG_FULL) {
        *p = pl;
        *n = len;
        return ENVLOG_OK;
    }
    type = envlog_snap_frag(s, at, &len, &pl);
    if (type == ENVLOG_FRAG_FULL) {
        *p = pl;
        *n = len;
        return ENVLOG_OK;
    }
    s->rec.len = 0;
    /* A FIRST and every MIDDLE fill their blocks to the end. */
    for (int want = ENVLOG_FRAG_FIRST;
         type == want && at % ENVLOG_BLOCK + ENVLOG_FRAG_HDR + len == ENVLOG_BLOCK;
         want = ENVLOG_FRAG_MIDDLE) {
        if (envlog_buf_append(&s->rec, pl, len))
            return envlog__fail(ENVLOG_NOMEM, "reading a snapshot record");
        at = (at / ENVLOG_BLOCK + 1) * ENVLOG_BLOCK;
        type = envlog_snap_frag(s, at, &len, &pl);
        if (type == ENVLOG_FRAG_LAST) {
            if (envlog_buf_append(&s->rec, pl, len))
                return envlog__fail(ENVLOG_NOMEM, "reading a snapshot record");
            *p = s->rec.p;
            *n = s->rec.len;
            return ENVLOG_OK;
        }
    }
    char what[80];
    snprintf(what, sizeof what, "snapshot record at offset %zu is damaged", from);
    return envlog_snap_read_fail(s, what);
}

envlog_err envlog_snap_decode_as(const uint8_t *p, size_t n, const envlog_schema *sc,
                            void *out, envlog_arena *a, uint64_t kind)
{
    envlog_pull pl = {p, n, 0};
    envlog_tok t;
    memset(out, 0, sc->size);
    envlog_err e = envlog_pull_next(&pl, &t);
    if (!e)
        e = envlog_struct_decode(&pl, &t, sc, out, a);
    if (!e && *(const uint64_t *)out != kind)
        e = envlog__fail(ENVLOG_BAD_DATA, "expected a %s record", sc->name);
    if (!e && pl.pos != n)
        e = envlog__fail(ENVLOG_BAD_DATA, "bytes after the %s record", sc->name);
    return e;
}

/* Decodes an ENTRY/EVIDENCE payload and the record inside it, and checks
 * that it is one envlog(5) allows: a record that decodes as an event
 * record, its envelope agreeing with the stamp, and for an ENTRY a value
 * that stands (a stored tune with a winner, a compiled kernel with its
 * binary, a user record) of its table's kind, whose origin is its record's
 * own.  Anything else is damage: no reader ever takes it. */
envlog_err envlog_snap_decode_item(envlog_arena *a, const uint8_t *p, size_t n, bool fold,
                              envlog_snap_item *it, envlog_record *rec)
{
    envlog_arena_reset(a);
    envlog_pull pl = {p, n, 0};
    envlog_tok t;
    memset(it, 0, sizeof *it);
    envlog_err e = envlog_pull_next(&pl, &t);
    if (!e)
        e = envlog_struct_decode_with_record(&pl, &t, &envlog_snap_item_schema, it, a, rec,
                                             fold);
    if (!e && pl.pos != n)
        e = envlog__fail(ENVLOG_BAD_DATA, "bytes after the record");
    if (e)
        return e;
    bool entry = it->kind == ENVLOG_KIND_ENTRY;
    if ((!entry && it->kind != ENVLOG_KIND_EVIDENCE) || !it->record.size)
        return envlog__fail(ENVLOG_BAD_DATA, "not an entry or evidence record");
    if (entry && it->rule > ENVLOG_RULE_IMPORTED)
        return envlog__fail(ENVLOG_BAD_DATA, "an entry whose rule does not make it stand");
    if (rec->stamp.seq != it->stamp.seq || rec->stamp.offset_ns != it->stamp.offset_ns)
        return envlog__fail(ENVLOG_BAD_DATA, "a record whose stamp is not its own");
    rec->stamp = it->stamp;
    if (!entry)
        return ENVLOG_OK;
    const char *why = NULL;
    bool imported = false;
    if (it->table == ENVLOG_TABLE_TUNE) {
        const envlog_tune *tu = &rec->u.tune;
        imported = tu->imported;
        if (rec->kind != ENVLOG_KIND_TUNE || !tu->ns || !tu->key)
            why = "a tune entry that holds no tune";
        else if (!tu->stored || tu->winner < 0)
            why = "a tune entry without a stored winner";
    } else if (it->table == ENVLOG_TABLE_KERNEL) {
        const envlog_compile *c = &rec->u.compile;
        imported = c->imported;
        if (rec->kind != ENVLOG_KIND_COMPILE || !c->ns)
            why = "a kernel entry that holds no compile";
        else if (c->outcome != ENVLOG_COMPILED || !c->binary.size)
            why = "a kernel entry without its binary";
    } else if (rec->kind != ENVLOG_KIND_USER) {
        why = "a user entry that holds no user record";
    }
    if (!why && it->table != ENVLOG_TABLE_USER && it->origin != (int)imported)
        why = "an entry whose origin is not its record's";
    return why ? envlog__fail(ENVLOG_BAD_DATA, "%s", why) : ENVLOG_OK;
}
