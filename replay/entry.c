/* SPDX-License-Identifier: MIT */
/*
 * entry.c - entries made from records.  An entry points at its record's
 * bytes where something keeps them (a session segment the reader handed
 * over, a snapshot the state holds); only a record nothing keeps (one a
 * process just recorded, one put together from fragments outside a kept
 * segment) is copied.  A record that spans several fragments of a kept
 * segment is not put together at all until its bytes are asked for: a
 * kernel's binary costs nothing to fold.  Namespaces, which most entries
 * share, are interned.
 */
#include "state_int.h"

#include <string.h>
#include <sys/mman.h>

/* ------------------------------------------------ interned strings */

static uint64_t intern_hash(const char *p, size_t n)
{
    return envlog_xxh64(p, n, 0x6e73);
}

static envlog_err intern_grow(envlog_intern *set)
{
    size_t n = set->slots ? 2 * set->slots : 64;
    const char **v = envlog_calloc(n, sizeof *v);
    if (!v)
        return envlog__fail(ENVLOG_NOMEM, "interning a name");
    for (size_t i = 0; i < set->slots; i++) {
        const char *s = set->set[i];
        if (!s)
            continue;
        size_t j = intern_hash(s, envlog_interned_len(s)) & (n - 1);
        while (v[j])
            j = (j + 1) & (n - 1);
        v[j] = s;
    }
    envlog_free(set->set);
    set->set = v;
    set->slots = n;
    return ENVLOG_OK;
}

envlog_err envlog_state_intern(envlog_state *st, envlog_intern *set, const void *p, size_t n,
                               const char **out)
{
    if (set->last && set->last_len == n && !memcmp(set->last, p, n)) {
        *out = set->last;
        return ENVLOG_OK;
    }
    if (2 * (set->n + 1) > set->slots) {
        envlog_err e = intern_grow(set);
        if (e)
            return e;
    }
    size_t mask = set->slots - 1, i = intern_hash(p, n) & mask;
    for (; set->set[i]; i = (i + 1) & mask) {
        const char *s = set->set[i];
        if (envlog_interned_len(s) == n && !memcmp(s, p, n))
            break;
    }
    if (!set->set[i]) {
        /* A name comes from a record: ENVLOG_RECORD_MAX bytes at most. */
        uint32_t len = (uint32_t)n;
        char *d = envlog_arena_alloc(&st->mem, sizeof len + n + 1);
        if (!d)
            return envlog__fail(ENVLOG_NOMEM, "interning a name");
        memcpy(d, &len, sizeof len);
        d += sizeof len;
        memcpy(d, p, n);
        d[n] = 0;
        set->set[i] = d;
        set->n++;
    }
    set->last = *out = set->set[i];
    set->last_len = n;
    return ENVLOG_OK;
}

/* --------------------------------------------------------- entries */

static envlog_entry_x *new_entry(envlog_state *st, const envlog_key_ref *k)
{
    envlog_entry_x *e = envlog_arena_alloc(&st->mem, sizeof *e);
    if (!e)
        return NULL;
    memset(e, 0, sizeof *e);
    e->table = (uint8_t)k->table;
    if (k->table == ENVLOG_TABLE_TUNE)
        e->k.checksum = k->checksum;
    else
        e->k.kernel_key = *k->kernel_key;
    if (envlog_state_intern(st, &st->ns, k->ns.p, k->ns.n, &e->ns))
        return NULL;
    /* A known miss has no stamp: all zeros. */
    static const envlog_id128 none;
    e->session = &none;
    return e;
}

/* `n` bytes copied into memory the state owns. */
static const uint8_t *own_copy(envlog_state *st, const void *p, size_t n)
{
    uint8_t *d = envlog_arena_alloc(&st->bytes, n ? n : 1);
    if (d && n)
        memcpy(d, p, n);
    return d;
}

envlog_err envlog_entry_from(envlog_state *st, const envlog_fold_in *in,
                             const envlog_key_ref *k, envlog_origin origin, envlog_rule rule,
                             envlog_entry_x **out)
{
    const envlog_record *rec = in->rec;
    envlog_entry_x *e = new_entry(st, k);
    if (!e)
        return envlog__fail(ENVLOG_NOMEM, "folding a record");
    e->live = true;
    e->origin = (uint8_t)origin;
    e->rule = (uint8_t)rule;
    const char *session;
    if (envlog_state_intern(st, &st->sessions, rec->stamp.session.b, sizeof rec->stamp.session,
                            &session))
        return envlog__fail(ENVLOG_NOMEM, "folding a record");
    e->session = (const envlog_id128 *)(const void *)session;
    e->seq = rec->stamp.seq;
    e->offset_ns = rec->stamp.offset_ns;
    e->unix_ns = in->unix_ns;
    /* Records are ENVLOG_RECORD_MAX bytes at most. */
    e->rec_len = (uint32_t)(in->loc && !in->kept ? in->loc->size : rec->payload.size);
    const uint8_t *p = rec->payload.data;
    if (in->kept) {
        e->at.rec = in->kept;
    } else if (in->loc) {
        envlog_frag_loc *l = envlog_arena_alloc(&st->mem, sizeof *l);
        if (!l)
            return envlog__fail(ENVLOG_NOMEM, "folding a record");
        *l = *in->loc;
        e->at.loc = l;
        e->at_loc = true;
    } else if (!(e->at.rec = own_copy(st, p, rec->payload.size))) {
        return envlog__fail(ENVLOG_NOMEM, "keeping a record");
    }
    if (k->table == ENVLOG_TABLE_TUNE) {
        const char *kp = k->key.p;
        bool inside = !e->at_loc && (const uint8_t *)kp >= p &&
                      (const uint8_t *)kp + k->key.n <= p + rec->payload.size;
        if (inside)
            e->key = (const char *)e->at.rec + ((const uint8_t *)kp - p);
        else if (!(e->key = (const char *)own_copy(st, kp, k->key.n)))
            return envlog__fail(ENVLOG_NOMEM, "keeping a key");
        e->key_len = (uint32_t)k->key.n;
    }
    *out = e;
    return ENVLOG_OK;
}

envlog_err envlog_entry_miss(envlog_state *st, const envlog_key_ref *k, envlog_entry_x **out)
{
    envlog_entry_x *e = new_entry(st, k);
    if (e && k->table == ENVLOG_TABLE_TUNE) {
        e->key = (const char *)own_copy(st, k->key.p, k->key.n);
        e->key_len = (uint32_t)k->key.n;
        if (!e->key)
            e = NULL;
    }
    if (!e)
        return envlog__fail(ENVLOG_NOMEM, "keeping a known miss");
    e->miss = true;
    *out = e;
    return ENVLOG_OK;
}

envlog_err envlog_state_add_user(envlog_state *st, const envlog_fold_in *in)
{
    const envlog_user *u = &in->rec->u.user;
    if (st->n_users == st->cap_users) {
        size_t cap = st->cap_users ? st->cap_users * 2 : 16;
        envlog_user_rec *p = envlog_realloc(st->users, cap * sizeof *p);
        if (!p)
            return envlog__fail(ENVLOG_NOMEM, "keeping a user record");
        st->users = p;
        st->cap_users = cap;
    }
    envlog_user_rec *r = &st->users[st->n_users];
    const envlog_bytes *pl = &in->rec->payload;
    r->kind = envlog_strdup(u->kind ? u->kind : "");
    r->body = envlog_malloc(u->body.size);
    r->payload = in->kept ? in->kept : own_copy(st, pl->data, pl->size);
    if (!r->kind || !r->body || !r->payload) {
        envlog_free(r->kind);
        envlog_free(r->body);
        return envlog__fail(ENVLOG_NOMEM, "keeping a user record");
    }
    memcpy(r->body, u->body.data, u->body.size);
    r->size = u->body.size;
    r->payload_len = pl->size;
    r->stamp = in->rec->stamp;
    r->unix_ns = in->unix_ns;
    st->n_users++;
    return ENVLOG_OK;
}

void envlog_state_keep(void *ctx, void *p, size_t n, bool mapped)
{
    envlog_state *st = ctx;
    if (st->n_kept == st->cap_kept) {
        size_t cap = st->cap_kept ? 2 * st->cap_kept : 16;
        envlog_kept *v = envlog_realloc(st->kept, cap * sizeof *v);
        if (!v) {
            /* Left mapped: entries may point into it.  What folded it
             * fails (a leak for want of memory, never a dangling pointer). */
            st->keep_failed = true;
            return;
        }
        st->kept = v;
        st->cap_kept = cap;
    }
    st->kept[st->n_kept++] = (envlog_kept){p, n, mapped};
    /* The reader is done with it: its pages leave this process's resident
     * set (they stay in the page cache), and the few records a lookup
     * asks for later fault theirs back in.  A fold's peak memory is its
     * entries, not the log it read. */
    if (mapped)
        (void)madvise(p, n, MADV_DONTNEED);
}

envlog_err envlog_entry_bytes(envlog_state *st, envlog_entry_x *e, envlog_bytes *out)
{
    if (!e->at_loc) {
        *out = (envlog_bytes){e->at.rec, e->at.rec ? e->rec_len : 0};
        return ENVLOG_OK;
    }
    const envlog_frag_loc *l = e->at.loc;
    envlog_frame_reader fr;
    envlog_frame_reader_init(&fr, l->seg, l->seg_len, l->seed, 0);
    fr.pos = (size_t)l->offset;
    envlog_fr_status s = envlog_frame_reader_next(&fr);
    envlog_err err = ENVLOG_OK;
    if (s == ENVLOG_FR_NOMEM)
        err = envlog__fail(ENVLOG_NOMEM, "reading a record back");
    else if (s != ENVLOG_FR_RECORD || fr.rec_off != l->offset || fr.out_len != l->size)
        /* A segment kept unchanged reads as it did: only a file changed
         * under its mapping reads otherwise. */
        err = envlog__fail(ENVLOG_CORRUPT, "a record read back from its segment differs");
    const uint8_t *rec = err ? NULL : own_copy(st, fr.out, fr.out_len);
    if (!err && !rec)
        err = envlog__fail(ENVLOG_NOMEM, "reading a record back");
    envlog_frame_reader_free(&fr);
    if (err) {
        *out = (envlog_bytes){NULL, 0};
        return err;
    }
    e->at.rec = rec;
    e->at_loc = false;
    *out = (envlog_bytes){rec, e->rec_len};
    return ENVLOG_OK;
}
