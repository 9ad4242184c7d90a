/* SPDX-License-Identifier: MIT */
/*
 * snapshot.c - opening a snapshot, reading it through its index without
 * folding it, walking it, and checking every byte of it when asked.
 *
 * Opening reads and checks the HEADER, the MANIFEST and where the INDEX
 * lies (snapindex.c looks entries up through it); the walks hand out the
 * records after it one by one, in the total order; the full check
 * (bundles, verify, compaction) is a walk that reads every record and
 * counts what it cannot read; envlog(5) says what each damage costs.
 */
#include "snap_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


size_t envlog_snap_damages(const envlog_snap *s, const envlog_damage **v)
{
    *v = s->dmg;
    return s->n_dmg;
}

void envlog_snap_free(envlog_snap *s)
{
    if (!s)
        return;
    envlog_arena_free(&s->marena);
    envlog_arena_free(&s->arena);
    envlog_buf_free(&s->index);
    envlog_free(s->idx_ok);
    envlog_free(s->wm_sorted);
    envlog_frame_reader_free(&s->fr);
    envlog_h128_free(&s->walk_hash);
    for (unsigned i = 0; i < SNAP_SLOTS; i++)
        envlog_free(s->slot[i].b);
    envlog_buf_free(&s->rec);
    envlog_free(s->near);
    envlog_free(s->raw);
    if (s->fd >= 0)
        envlog_io_get()->close(s->fd);
    envlog_free(s);
}

static envlog_err check_all_items(envlog_snap *s);

/* The HEADER and the MANIFEST through `fr`: their statuses. */
static envlog_fr_status read_head(envlog_frame_reader *fr, envlog_fr_status *manifest)
{
    envlog_fr_status st = envlog_frame_reader_next(fr);
    *manifest = st == ENVLOG_FR_RECORD ? envlog_frame_reader_next(fr) : st;
    return st;
}

envlog_err envlog_snap_load(const uint8_t *p, size_t n, bool check_all,
                            envlog_snap **out)
{
    return envlog_snap_load_fd(p, n, -1, check_all, out);
}

static envlog_err load(const uint8_t *p, size_t n, int fd, bool check_all,
                       const envlog_snap_feed *feed, envlog_snap **out);

envlog_err envlog_snap_load_fd(const uint8_t *p, size_t n, int fd, bool check_all,
                               envlog_snap **out)
{
    return load(p, n, fd, check_all, NULL, out);
}

envlog_err envlog_snap_load_fed(const uint8_t *p, const envlog_snap_feed *feed,
                                envlog_snap **out)
{
    *out = NULL;
    size_t now;
    bool done;
    envlog_err e = feed->wait(feed->ctx, 0, false, &now, &done);
    if (e)
        return e;
    if (!done && !load(p, now, -1, false, feed, out))
        return ENVLOG_OK;
    /* What the part refused, the whole decides (as if it had never been
     * fed). */
    if (!done && (e = feed->wait(feed->ctx, 0, true, &now, &done)))
        return e;
    return load(p, now, -1, false, NULL, out);
}

/* Reads on into what the feed has written since: more than fr.pos, or
 * (`all`) everything. */
static envlog_err fed_more(envlog_snap *s, bool all)
{
    if (!all && s->fr.pos < s->n)
        return ENVLOG_OK;
    size_t now;
    bool done;
    envlog_err e = s->feed.wait(s->feed.ctx, s->fr.pos, all, &now, &done);
    if (!e) {
        s->n = s->fr.n = now;
        s->fed_all = done;
    }
    return e;
}

envlog_err envlog_snap_fed_end(envlog_snap *s)
{
    if (!s->feed.wait)
        return ENVLOG_OK;
    envlog_err e = s->fed_all ? ENVLOG_OK : fed_more(s, true);
    return e ? e : envlog_snap_check_sealed(s);
}

static envlog_err load(const uint8_t *p, size_t n, int fd, bool check_all,
                       const envlog_snap_feed *feed, envlog_snap **out)
{
    *out = NULL;
    if (fd >= 0 && check_all) {
        envlog_io_get()->close(fd); /* a full check reads the mapping */
        fd = -1;
    }
    envlog_snap *s = envlog_calloc(1, sizeof *s);
    if (!s) {
        if (fd >= 0)
            envlog_io_get()->close(fd);
        return envlog__fail(ENVLOG_NOMEM, "reading a snapshot");
    }
    s->p = p;
    s->n = n;
    s->fd = fd;
    if (feed)
        s->feed = *feed;
    envlog_err e = ENVLOG_OK;
    if (n < ENVLOG_FRAG_HDR) {
        e = envlog__fail(ENVLOG_FORMAT, "too short to be a snapshot (%zu bytes)", n);
        goto fail;
    }
    /* The seed comes from the id in the HEADER, so the header's fragment is
     * decoded first and its checksum checked with the seed it names.  By
     * pread, the HEADER and the MANIFEST are read from the first page
     * when they end in it (as they do but for a hundred sessions or
     * more), else from the first block, else from the mapping. */
    size_t hl = 0, b0l = 0;
    envlog_seg_header h;
    uint8_t page[4096];
    const uint8_t *b0;
    if (s->fd >= 0) {
        b0l = n < sizeof page ? n : sizeof page;
        b0 = page;
        if (envlog_pread_full(s->fd, page, b0l, 0)) {
            s->io_err = errno ? errno : EIO;
            b0 = NULL;
        } else if (b0l < n && envlog_frag_peek(b0, b0l, 0, &hl) != ENVLOG_FRAG_FULL) {
            b0 = envlog_snap_block(s, 0, &b0l); /* let the whole block say */
        }
    } else {
        b0 = envlog_snap_block(s, 0, &b0l);
    }
    if (!b0) {
        e = envlog_snap_read_fail(s, "");
        goto fail;
    }
    if (envlog_frag_peek(b0, b0l, 0, &hl) != ENVLOG_FRAG_FULL ||
        (e = envlog_snap_decode_as(b0 + ENVLOG_FRAG_HDR, hl, &envlog_seg_header_schema, &h, &s->marena,
                       ENVLOG_KIND_HEADER)) ||
        !h.magic || strcmp(h.magic, ENVLOG_MAGIC)) {
        if (e != ENVLOG_NOMEM) /* out of memory is not the data's fault */
            e = envlog__fail(ENVLOG_FORMAT, "not an envlog snapshot or bundle (bad header)");
        goto fail;
    }
    if (h.version < ENVLOG_LOG_VERSION_MIN || h.version > ENVLOG_LOG_VERSION) {
        e = envlog__fail(ENVLOG_FORMAT, "log format version %llu is unknown",
                         (unsigned long long)h.version);
        goto fail;
    }
    s->id = h.id;
    s->seed = envlog_seg_seed(&h.id, 0);
    envlog_frame_reader_init(&s->fr, p, n, s->seed, 0);
    const uint8_t *rp;
    size_t rn;
    envlog_frame_reader fr0, *fr = &s->fr;
    envlog_frame_reader_init(&fr0, b0, b0l, s->seed, 0);
    envlog_fr_status st, hs = ENVLOG_FR_END;
    bool in_b0 = false;
    if (s->fd >= 0) {
        in_b0 = (hs = read_head(&fr0, &st)) == ENVLOG_FR_RECORD && st == ENVLOG_FR_RECORD;
        if (!in_b0 && b0 == page && b0l < n) {
            envlog_frame_reader_free(&fr0);
            if (!(b0 = envlog_snap_block(s, 0, &b0l))) {
                e = envlog_snap_read_fail(s, "");
                goto fail;
            }
            envlog_frame_reader_init(&fr0, b0, b0l, s->seed, 0);
            in_b0 = (hs = read_head(&fr0, &st)) == ENVLOG_FR_RECORD && st == ENVLOG_FR_RECORD;
        }
    }
    if (in_b0) {
        fr = &fr0;
        s->fr.pos = fr0.pos;
        s->fr.chain = fr0.chain;
        s->fr.chain_start = fr0.chain_start;
    } else if ((e = envlog_snap_mapped(s))) {
        envlog_frame_reader_free(&fr0);
        goto fail;
    } else {
        hs = read_head(&s->fr, &st);
    }
    if (hs != ENVLOG_FR_RECORD) {
        envlog_frame_reader_free(&fr0);
        e = envlog__fail(ENVLOG_FORMAT, "snapshot header fails its checksum");
        goto fail;
    }
    if (st != ENVLOG_FR_RECORD) {
        e = st == ENVLOG_FR_NOMEM ? envlog__fail(ENVLOG_NOMEM, "reading a snapshot manifest")
                                  : envlog__fail(ENVLOG_BAD_DATA, "snapshot manifest is damaged");
        goto fail;
    }
    rp = fr->out;
    rn = fr->out_len;
    /* The manifest's strings outlive the frame buffer: copied by decode. */
    uint8_t *mcopy = envlog_arena_alloc(&s->marena, rn);
    if (mcopy)
        memcpy(mcopy, rp, rn);
    envlog_frame_reader_free(&fr0);
    if (!mcopy) {
        e = envlog__fail(ENVLOG_NOMEM, "reading a snapshot");
        goto fail;
    }
    s->mraw.data = mcopy;
    s->mraw.size = rn;
    if ((e = envlog_snap_decode_as(mcopy, rn, &envlog_snap_manifest_schema, &s->m, &s->marena, ENVLOG_KIND_MANIFEST))) {
        if (e != ENVLOG_NOMEM)
            e = envlog__fail(ENVLOG_BAD_DATA, "snapshot manifest: %s", envlog_errmsg());
        goto fail;
    }
    if (s->m.schema != ENVLOG_BUNDLE_SCHEMA) {
        e = envlog__fail(ENVLOG_FORMAT, "bundle schema %llu is unknown (this envlog reads %d)",
                         (unsigned long long)s->m.schema, ENVLOG_BUNDLE_SCHEMA);
        goto fail;
    }
    /* The INDEX follows, past the zero bytes that end a block when fewer
     * than a fragment header's were left in it. */
    s->idx_pos = (size_t)envlog_snap_record_start(s->fr.pos);
    e = check_all ? envlog_snap_index_load(s) : envlog_snap_index_locate(s);
    if (e)
        goto fail;
    if (check_all && (e = check_all_items(s)))
        goto fail;
    if (!check_all)
        envlog_snap_rewind(s);
    *out = s;
    return ENVLOG_OK;
fail:
    envlog_snap_free(s);
    return e;
}

envlog_bytes envlog_snap_manifest_raw(const envlog_snap *s)
{
    return s->mraw;
}

const envlog_snap_manifest *envlog_snap_manifest_get(const envlog_snap *s)
{
    return &s->m;
}

uint64_t envlog_snap_bad_records(const envlog_snap *s) { return s->bad; }
uint64_t envlog_snap_lookup_damage(const envlog_snap *s) { return s->lookup_bad; }
const envlog_damage *envlog_snap_first_damage(const envlog_snap *s)
{
    return s->any_bad ? &s->first_bad : NULL;
}
envlog_id128 envlog_snap_id(const envlog_snap *s) { return s->id; }

bool envlog_snap_read_counts(const envlog_snap *s, envlog_snap_counts *c)
{
    memset(c, 0, sizeof *c);
    if (!s->checked)
        return false;
    c->tunes = s->read_tunes;
    c->kernels = s->read_kernels;
    c->users = s->read_users;
    c->evidence = s->read_evidence;
    c->sealed = s->sealed;
    c->content_ok = s->content_ok;
    uint64_t want = s->m.tunes + s->m.kernels + s->m.users, got = c->tunes + c->kernels + c->users;
    c->lost = want > got ? want - got : 0;
    c->intact = !s->bad && !s->index_bad && s->sealed && s->content_ok && !c->lost &&
                c->evidence == s->m.evidence && c->tunes == s->m.tunes &&
                c->kernels == s->m.kernels && c->users == s->m.users;
    return true;
}
uint64_t envlog_snap_size(const envlog_snap *s) { return s->n; }
bool envlog_snap_content_ok(const envlog_snap *s) { return s->content_ok; }

static int wm_cmp(const void *a, const void *b)
{
    const envlog_snap_wm *const *x = a, *const *y = b;
    return memcmp((*x)->session.b, (*y)->session.b, 16);
}

bool envlog_snap_watermark_x(envlog_snap *s, const envlog_id128 *session,
                             uint64_t *last_seq, bool *complete)
{
    /* Sorted once, on the first question: thousands of sessions are each
     * asked about at every open. */
    if (!s->wm_sorted && s->m.n_wms > 8) {
        s->wm_sorted = envlog_malloc(s->m.n_wms * sizeof *s->wm_sorted);
        if (s->wm_sorted) {
            for (size_t i = 0; i < s->m.n_wms; i++)
                s->wm_sorted[i] = &s->m.wms[i];
            qsort(s->wm_sorted, s->m.n_wms, sizeof *s->wm_sorted, wm_cmp);
        }
    }
    const envlog_snap_wm *w = NULL;
    if (s->wm_sorted) {
        size_t lo = 0, hi = s->m.n_wms;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            int c = memcmp(s->wm_sorted[mid]->session.b, session->b, 16);
            if (!c) {
                w = s->wm_sorted[mid];
                break;
            }
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
    } else {
        for (size_t i = 0; i < s->m.n_wms && !w; i++)
            if (!memcmp(s->m.wms[i].session.b, session->b, 16))
                w = &s->m.wms[i];
    }
    if (!w)
        return false;
    *last_seq = w->last_seq;
    if (complete)
        *complete = w->complete;
    return true;
}

bool envlog_snap_watermark(envlog_snap *s, const envlog_id128 *session, uint64_t *last_seq)
{
    return envlog_snap_watermark_x(s, session, last_seq, NULL);
}

/* ------------------------------------------------------------- walks
 *
 * One walk serves every reader that reads the records one by one (the fold
 * of `replay --until`, compaction, export, import, `verify`): the records
 * after the INDEX in file order, each ENTRY or EVIDENCE that passes every
 * check handed out once, in the total order; damage noted once per place;
 * at the end, the SEAL's count and chain and the content hash checked.
 * The full check is a walk from the start with nothing handed out. */

/* The chain value before the INDEX, which the walk's frame reader and
 * the SEAL's chain continue: read from the MANIFEST's fragment headers
 * (their checksums were checked when the snapshot was loaded; a wrong one
 * only makes the SEAL disagree). */
static uint64_t chain_before_index(const envlog_snap *s)
{
    size_t hl = 0; /* the HEADER's fragment is not chained */
    envlog_frag_peek(s->p, s->n, 0, &hl);
    return envlog_frags_chain(s->p, s->n, ENVLOG_FRAG_HDR + hl, s->idx_pos, 0);
}

/* Sets the walk's chain to its value at the INDEX, worked out once (a
 * lookup never needs it). */
static void walk_chain(envlog_snap *s)
{
    if (!s->chain0_known) {
        s->chain0 = chain_before_index(s);
        s->chain0_known = true;
    }
    s->fr.chain = s->fr.chain_start = s->chain0;
    s->chain_pending = false;
}

void envlog_snap_rewind_fold(envlog_snap *s)
{
    envlog_snap_rewind(s);
    s->walk_fold = true;
}

void envlog_snap_rewind(envlog_snap *s)
{
    s->walk_fold = false;
    /* Every walk reads the INDEX as a record (checked as every record,
     * whatever a lookup read of it) and goes on to the entries. */
    s->fr.pos = s->idx_pos;
    s->chain_pending = true;
    s->walk_count = 1; /* the MANIFEST */
    s->walk_have_last = false;
    envlog_h128_free(&s->walk_hash);
    s->walk_hashing = envlog_h128_begin(&s->walk_hash) == ENVLOG_OK;
    s->walk_from_start = true;
    s->walk_tunes = s->walk_kernels = s->walk_users = s->walk_evidence = 0;
}

/* The end of a walk: the SEAL (when one was read) checked, and, when the
 * walk read everything from the start, what it found kept as the
 * snapshot's own. */
static void walk_end(envlog_snap *s, const uint8_t *seal, size_t seal_len, size_t off)
{
    bool sealed = false;
    if (seal) {
        envlog_seg_seal sl;
        if (envlog_snap_decode_as(seal, seal_len, &envlog_seg_seal_schema, &sl, NULL, ENVLOG_KIND_SEAL))
            envlog_snap_note_bad(s, off, seal_len, "undecodable seal");
        else if (sl.count != s->walk_count || sl.chain != s->fr.chain_start)
            envlog_snap_note_bad(s, off, 0, "the seal does not count the records read");
        else
            sealed = true;
    } else {
        envlog_snap_note_bad(s, s->n, 0, "no seal ends the snapshot");
    }
    envlog_hash128 h = envlog_h128_end(&s->walk_hash);
    if (s->walk_from_start && s->walk_hashing) {
        s->checked = true;
        s->sealed = sealed;
        s->content_ok = !memcmp(h.b, s->m.content_hash.b, 16);
        s->read_tunes = s->walk_tunes;
        s->read_kernels = s->walk_kernels;
        s->read_users = s->walk_users;
        s->read_evidence = s->walk_evidence;
    }
    s->walk_from_start = false;
    s->fr.pos = s->n;
}

envlog_err envlog_snap_next(envlog_snap *s, envlog_snap_item *it, envlog_record *rec)
{
    return envlog_snap_next_in(s, &s->arena, NULL, it, rec);
}

envlog_err envlog_snap_next_in(envlog_snap *s, envlog_arena *a, envlog_buf *copy,
                               envlog_snap_item *it, envlog_record *rec)
{
    if (s->chain_pending) { /* a walk's start (every walk rewinds first) */
        envlog_err e = envlog_snap_mapped(s);
        if (e)
            return e;
        walk_chain(s);
    }
    for (;;) {
        envlog_err e;
        bool fed = s->feed.wait && !s->fed_all;
        if (fed && (e = fed_more(s, false)))
            return e;
        if (s->fr.pos >= s->n && !s->walk_from_start)
            return ENVLOG_END;
        size_t pos = s->fr.pos;
        uint64_t chain = s->fr.chain, chain_start = s->fr.chain_start;
        envlog_fr_status st = envlog_frame_reader_next(&s->fr);
        if (st == ENVLOG_FR_NOMEM)
            return envlog__fail(ENVLOG_NOMEM, "reading a snapshot record");
        /* A part of a fed snapshot that does not read as a record is read
         * again in the whole: its damage, and where it ends, are the
         * whole's. */
        if (st != ENVLOG_FR_RECORD && fed && !s->fed_all) {
            s->fr.pos = pos;
            s->fr.chain = chain;
            s->fr.chain_start = chain_start;
            if ((e = fed_more(s, true)))
                return e;
            continue;
        }
        if (st == ENVLOG_FR_END || st == ENVLOG_FR_TAIL) {
            if (st == ENVLOG_FR_TAIL)
                envlog_snap_note_bad(s, s->fr.bad_off, s->fr.bad_len, s->fr.why);
            walk_end(s, NULL, 0, 0);
            return ENVLOG_END;
        }
        if (st == ENVLOG_FR_BAD) {
            envlog_snap_note_bad(s, s->fr.bad_off, s->fr.bad_len, s->fr.why);
            continue;
        }
        const uint8_t *p = s->fr.out;
        size_t n = s->fr.out_len, off = s->fr.rec_off;
        int kind = envlog_payload_kind(p, n);
        if (kind == ENVLOG_KIND_SEAL) {
            s->fr.chain = s->fr.chain_start; /* the SEAL is not in the chain */
            walk_end(s, p, n, off);
            return ENVLOG_END;
        }
        s->walk_count++;
        if (kind == ENVLOG_KIND_INDEX && off == s->idx_pos)
            continue;
        if (kind == ENVLOG_KIND_ENTRY || kind == ENVLOG_KIND_EVIDENCE) {
            uint8_t len[4];
            envlog_put_le32(len, (uint32_t)n);
            envlog_h128_update(&s->walk_hash, len, 4);
            envlog_h128_update(&s->walk_hash, p, n);
        }
        /* A record gathered from its fragments lies in the frame reader's
         * buffer, which the next record overwrites. */
        if (copy && (p < s->fr.p || p >= s->fr.p + s->fr.n)) {
            copy->len = 0;
            if (envlog_buf_append(copy, p, n))
                return envlog__fail(ENVLOG_NOMEM, "reading a snapshot record");
            p = copy->p;
        }
        e = envlog_snap_decode_item(a, p, n, s->walk_fold, it, rec);
        if (e == ENVLOG_NOMEM)
            return e; /* not damage: the caller must not skip the record */
        if (!e && s->walk_have_last &&
            envlog_order_cmp(it->unix_ns, &it->stamp.session, it->stamp.seq,
                             s->walk_last_ns, &s->walk_last.session, s->walk_last.seq) <= 0)
            e = envlog__fail(ENVLOG_BAD_DATA, "a record out of the total order");
        if (e) {
            char why[96];
            snprintf(why, sizeof why, "%s", envlog_errmsg());
            envlog_snap_note_bad(s, off, n, why);
            continue;
        }
        s->walk_have_last = true;
        s->walk_last = it->stamp;
        s->walk_last_ns = it->unix_ns;
        if (it->kind == ENVLOG_KIND_EVIDENCE)
            s->walk_evidence++;
        else if (it->table == ENVLOG_TABLE_TUNE)
            s->walk_tunes++;
        else if (it->table == ENVLOG_TABLE_KERNEL)
            s->walk_kernels++;
        else
            s->walk_users++;
        return ENVLOG_OK;
    }
}

/* Reads every record: checksums, the decode and checks of each item, the
 * total order, the SEAL's count and chain, the content hash. */
static envlog_err check_all_items(envlog_snap *s)
{
    bool rebuild = s->n_index == 0 && s->m.tunes + s->m.kernels > 0;
    envlog_snap_rewind_fold(s);
    if (!s->walk_hashing)
        return envlog__fail(ENVLOG_NOMEM, "checking a snapshot");
    /* The pairs the entries read give, to hold against the INDEX: a pair
     * that points elsewhere would make a lookup miss an entry that reads. */
    envlog_buf stored = s->index;
    uint64_t n_stored = s->n_index;
    if (!rebuild) {
        s->index = (envlog_buf){0};
        s->n_index = 0;
    }
    envlog_snap_item it;
    envlog_record rec;
    envlog_err e;
    while (!(e = envlog_snap_next(s, &it, &rec)))
        if (it.kind == ENVLOG_KIND_ENTRY && (e = envlog_snap_index_item(s, &it, &rec, s->fr.rec_off)))
            break;
    if (e == ENVLOG_END) {
        e = ENVLOG_OK;
        if (s->n_index)
            envlog_snap_pairs_sort(s->index.p, (size_t)s->n_index);
        if (!rebuild && !envlog_snap_index_agrees(&stored, n_stored, &s->index, s->n_index)) {
            /* Past the walk's places: counted on its own. */
            size_t seen = s->bad_seen_to;
            s->bad_seen_to = 0;
            envlog_snap_note_bad(s, s->items_start, 0, "the INDEX does not match the entries");
            s->bad_seen_to = seen;
            s->index_bad = true;
        }
    }
    if (!rebuild) {
        envlog_buf_free(&s->index);
        s->index = stored;
        s->n_index = n_stored;
    }
    if (e)
        return e;
    envlog_snap_rewind(s);
    return ENVLOG_OK;
}

/* ------------------------------------------------------------- the file */

void envlog_snap_own_map(envlog_snap *s, void *map, size_t len)
{
    s->map = map;
    s->map_len = len;
}

envlog_err envlog_snap_mapped(envlog_snap *s)
{
    if (s->p)
        return ENVLOG_OK;
    void *map = envlog_io_get()->mmap(s->n, PROT_READ, s->fd);
    if (map == MAP_FAILED) /* the system's failure, never the file's */
        return envlog__fail_errno(errno, "mapping a snapshot");
    envlog_snap_own_map(s, map, s->n);
    s->p = s->fr.p = map;
    return ENVLOG_OK;
}

const uint8_t *envlog_snap_holds(const envlog_snap *s, const void *p, size_t n)
{
    const uint8_t *b = p;
    return s && s->p && b >= s->p && b <= s->p + s->n && n <= (size_t)(s->p + s->n - b) ? b
                                                                                         : NULL;
}

void envlog_snap_unmap(envlog_snap *s)
{
    if (!s)
        return;
    void *map = s->map;
    size_t len = s->map_len;
    envlog_snap_free(s);
    if (map)
        envlog_io_get()->munmap(map, len);
}
