/* SPDX-License-Identifier: MIT */
/*
 * view.c - the public entry (envlog_tune_entry, envlog_kernel_entry) of an
 * entry, made from its record the first time a lookup or a walk asks for
 * it and kept with the state: the fold itself never decodes more of a
 * record than its key.  Strings of a view stay valid until the state
 * closes, as envlog_state_winner() promises.
 */
#include "state_int.h"

#include <string.h>

static const char *copy_str(envlog_state *st, const char *s, bool *oom)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = envlog_arena_alloc(&st->views, n);
    if (!d) {
        *oom = true;
        return NULL;
    }
    memcpy(d, s, n);
    return d;
}

/* The state's copy of a tune set's candidate names, shared by every entry
 * of that set. */
static const char *const *keep_cands(envlog_state *st, const envlog_tune *t, bool *oom)
{
    if (!t->n_candidates)
        return NULL;
    envlog_cands_ref *c = &st->cands[t->checksum % ENVLOG_CANDS_CACHE];
    bool same = c->v && c->checksum == t->checksum && c->n == t->n_candidates;
    for (size_t i = 0; same && i < c->n; i++)
        same = !strcmp(c->v[i], t->candidates[i]);
    if (same)
        return c->v;
    const char **v = envlog_arena_alloc(&st->views, t->n_candidates * sizeof(char *));
    if (!v) {
        *oom = true;
        return NULL;
    }
    for (size_t i = 0; i < t->n_candidates; i++)
        v[i] = copy_str(st, t->candidates[i], oom);
    if (!*oom)
        *c = (envlog_cands_ref){v, t->n_candidates, t->checksum};
    return v;
}

static envlog_err tune_view(envlog_state *st, const envlog_entry_x *e, const envlog_tune *t,
                            envlog_tune_entry **out)
{
    bool oom = false;
    envlog_tune_entry *v = envlog_arena_alloc(&st->views, sizeof *v);
    char *key = envlog_arena_alloc(&st->views, e->key_len + 1);
    if (!v || !key)
        return envlog__fail(ENVLOG_NOMEM, "looking up an entry");
    memcpy(key, e->key, e->key_len);
    key[e->key_len] = 0;
    const char *const *cands = keep_cands(st, t, &oom);
    if (oom)
        return envlog__fail(ENVLOG_NOMEM, "looking up an entry");
    *v = (envlog_tune_entry){
        .ns = e->ns,
        .key = key,
        .checksum = e->k.checksum,
        .winner = cands && t->winner >= 0 ? cands[t->winner] : NULL,
        .winner_index = t->winner,
        .candidates = cands,
        .n_candidates = t->n_candidates,
        .margin = t->margin,
        .within_noise = t->within_noise,
        .winner_cost_ns = t->winner_ns,
        .origin = (envlog_origin)e->origin,
        .rule = (envlog_rule)e->rule,
        .stamp = envlog_entry_stamp(e),
    };
    *out = v;
    return ENVLOG_OK;
}

static envlog_err kernel_view(envlog_state *st, const envlog_entry_x *e,
                              const envlog_compile *c, envlog_kernel_entry **out)
{
    bool oom = false;
    envlog_kernel_entry *v = envlog_arena_alloc(&st->views, sizeof *v);
    if (!v)
        return envlog__fail(ENVLOG_NOMEM, "looking up an entry");
    /* The binary is a byte string of the record, which stays where it is. */
    *v = (envlog_kernel_entry){
        .ns = e->ns,
        .name = copy_str(st, c->name, &oom),
        .kernel_key = e->k.kernel_key,
        .source_hash = c->source_hash,
        .options = copy_str(st, c->options, &oom),
        .compiler_version = copy_str(st, c->compiler_version, &oom),
        .arch = copy_str(st, c->arch, &oom),
        .binary_hash = c->binary_hash,
        .binary = c->binary,
        .origin = (envlog_origin)e->origin,
        .rule = (envlog_rule)e->rule,
        .stamp = envlog_entry_stamp(e),
    };
    if (oom)
        return envlog__fail(ENVLOG_NOMEM, "looking up an entry");
    *out = v;
    return ENVLOG_OK;
}

/* Makes the view of `e` (the view lock held). */
static envlog_err make_view(envlog_state *st, envlog_entry_x *e, void **out)
{
    envlog_bytes b;
    envlog_err err = envlog_entry_bytes(st, e, &b);
    if (err)
        return err;
    envlog_arena scratch = {0};
    envlog_record rec;
    /* Read back as the fold read it: the record was checked then. */
    err = envlog_event_decode_fold(b.data, b.size, &rec, &scratch);
    if (!err && rec.kind != (e->table == ENVLOG_TABLE_TUNE ? ENVLOG_KIND_TUNE
                                                              : ENVLOG_KIND_COMPILE))
        err = envlog__fail(ENVLOG_CORRUPT, "an entry's record is of another kind");
    if (!err && e->table == ENVLOG_TABLE_TUNE)
        err = tune_view(st, e, &rec.u.tune, (envlog_tune_entry **)out);
    else if (!err)
        err = kernel_view(st, e, &rec.u.compile, (envlog_kernel_entry **)out);
    envlog_arena_free(&scratch);
    return err;
}

envlog_err envlog_entry_view_of(envlog_state *st, envlog_entry_x *e, const envlog_record *rec)
{
    void *v = NULL;
    envlog_err err;
    pthread_mutex_lock(&st->view_mu);
    if (e->table == ENVLOG_TABLE_TUNE) {
        err = tune_view(st, e, &rec->u.tune, (envlog_tune_entry **)&v);
    } else {
        envlog_compile c = rec->u.compile;
        uint8_t *bin = envlog_arena_alloc(&st->bytes, c.binary.size ? c.binary.size : 1);
        if (bin && c.binary.size)
            memcpy(bin, c.binary.data, c.binary.size);
        c.binary.data = bin;
        err = bin ? kernel_view(st, e, &c, (envlog_kernel_entry **)&v)
                  : envlog__fail(ENVLOG_NOMEM, "keeping a binary");
    }
    if (!err)
        __atomic_store_n(&e->view, v, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&st->view_mu);
    return err;
}

envlog_err envlog_entry_view(envlog_state *st, envlog_entry_x *e, const void **view)
{
    void *v = __atomic_load_n(&e->view, __ATOMIC_ACQUIRE);
    envlog_err err = ENVLOG_OK;
    if (!v) {
        pthread_mutex_lock(&st->view_mu);
        if (!(v = e->view) && !(err = make_view(st, e, &v)))
            __atomic_store_n(&e->view, v, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&st->view_mu);
    }
    *view = v;
    return err;
}
