/* SPDX-License-Identifier: MIT */
/*
 * fold.c - the fold rules (envlog(5), REPLAY: the seeds' storage rules):
 * what each record, taken in the total order, does to the entries.  Between
 * two local values the first stands; a local value replaces an imported
 * one; an imported value never replaces anything; a forget removes one; a
 * tune that was not stored, or a compile that made no binary, makes none.
 */
#include "state_int.h"

#include <string.h>

/* Where the fold's text fields stand in their kinds' schemas (their keys:
 * a tune's namespace 4 and key 5, a compile's namespace 4). */
static size_t tune_ns_i, tune_key_i, compile_ns_i;
static pthread_once_t fields_once = PTHREAD_ONCE_INIT;

static size_t index_of(envlog_kind kind, uint64_t key)
{
    const envlog_schema *s = envlog_schema_of(kind);
    return (size_t)(envlog_schema_field(s, key) - s->fields);
}

static void find_fields(void)
{
    tune_ns_i = index_of(ENVLOG_KIND_TUNE, 4);
    tune_key_i = index_of(ENVLOG_KIND_TUNE, 5);
    compile_ns_i = index_of(ENVLOG_KIND_COMPILE, 4);
}

envlog_text envlog_fold_text(const envlog_fold_in *in, size_t index, const char *str)
{
    if (in->slices)
        return in->slices[index];
    return (envlog_text){str, str ? strlen(str) : 0};
}

static envlog_rule rule_for(const envlog_entry_x *old, envlog_origin origin)
{
    if (!old || !old->live)
        return origin == ENVLOG_LOCAL ? ENVLOG_RULE_FIRST_LOCAL : ENVLOG_RULE_IMPORTED;
    return ENVLOG_RULE_LOCAL_OVER_IMPORTED;
}

/* The seeds' storage rules: may a value of `origin` replace `old`? */
static bool may_set(const envlog_entry_x *old, envlog_origin origin)
{
    if (!old || !old->live)
        return true;
    return old->origin == ENVLOG_IMPORTED && origin == ENVLOG_LOCAL;
}

/* The rule a value that stands now stands by.  A snapshot's ENTRY that
 * finds its key empty keeps the rule it was written with: what it replaced
 * (an imported value, a forgotten one) is not in the snapshot to replace
 * again, and a compaction must not change what `why` says. */
static envlog_rule standing_rule(const envlog_entry_x *old, envlog_origin origin,
                                 const envlog_snap_item *it)
{
    if (it && it->kind == ENVLOG_KIND_ENTRY && (!old || !old->live))
        return (envlog_rule)it->rule;
    return rule_for(old, origin);
}

/* A value for key `k` from the record of `in`, if the rules let it stand. */
static envlog_err set(envlog_state *st, const envlog_fold_in *in, const envlog_key_ref *k,
                      envlog_origin origin)
{
    envlog_entry_x *old, *e;
    envlog_err err = envlog_state_known(st, k, &old);
    if (err || !may_set(old, origin))
        return err;
    if ((err = envlog_entry_from(st, in, k, origin, standing_rule(old, origin, in->item), &e)))
        return err;
    /* A record recorded at level off has no bytes: its view is made now. */
    if (!in->rec->payload.size && (err = envlog_entry_view_of(st, e, in->rec)))
        return err;
    return envlog_table_install(&st->tab, e, k->hash, old, false);
}

/* The key a tune or compile record sets, hashed, and whether it sets one
 * (a tune stored with a winner, a compile that compiled), and its origin. */
static bool setting_key(const envlog_fold_in *in, envlog_key_ref *k, envlog_origin *origin)
{
    const envlog_record *rec = in->rec;
    if (rec->kind == ENVLOG_KIND_TUNE) {
        const envlog_tune *t = &rec->u.tune;
        if (!t->stored || t->winner < 0 || (size_t)t->winner >= t->n_candidates)
            return false;
        *k = (envlog_key_ref){.table = ENVLOG_TABLE_TUNE,
                              .ns = envlog_fold_text(in, tune_ns_i, t->ns),
                              .key = envlog_fold_text(in, tune_key_i, t->key),
                              .checksum = t->checksum};
        if (!k->ns.p || !k->key.p)
            return false;
        *origin = t->imported ? ENVLOG_IMPORTED : ENVLOG_LOCAL;
    } else if (rec->kind == ENVLOG_KIND_COMPILE) {
        const envlog_compile *c = &rec->u.compile;
        *k = (envlog_key_ref){.table = ENVLOG_TABLE_KERNEL,
                              .ns = envlog_fold_text(in, compile_ns_i, c->ns),
                              .kernel_key = &c->kernel_key};
        if (c->outcome != ENVLOG_COMPILED || !c->binary.size || !k->ns.p)
            return false;
        *origin = c->imported ? ENVLOG_IMPORTED : ENVLOG_LOCAL;
    } else {
        return false;
    }
    if (in->has_key_hash)
        k->hash = in->key_hash;
    else
        envlog_key_ref_hash(k);
    return true;
}


/* A forget of a prefix: every standing entry under it, in both tables,
 * becomes a tombstone (the snapshot's too: they are brought in first). */
static envlog_err forget_under(envlog_state *st, const char *prefix)
{
    envlog_err e = envlog_state_load_all(st);
    if (e)
        return e;
    for (size_t i = 0; i < st->tab.n_slots; i++) {
        envlog_entry_x *x = st->tab.slots[i].e;
        if (x && x->live && envlog_ns_under(x->ns, prefix))
            envlog_table_kill(&st->tab, x);
    }
    return ENVLOG_OK;
}

static envlog_err fold_forget(envlog_state *st, const envlog_forget *f)
{
    if (f->under)
        return forget_under(st, f->under);
    if (!f->ns || !f->key)
        return ENVLOG_OK;
    envlog_hash128 kk;
    envlog_key_ref k = {.table = (envlog_table)f->table, .ns = {f->ns, strlen(f->ns)}};
    if (f->table == ENVLOG_TABLE_TUNE) {
        k.key = (envlog_text){f->key, strlen(f->key)};
        k.checksum = f->checksum;
    } else if (f->table == ENVLOG_TABLE_KERNEL && envlog_id_parse(f->key, &kk) == ENVLOG_OK) {
        k.kernel_key = &kk;
    } else {
        return ENVLOG_OK;
    }
    envlog_key_ref_hash(&k);
    envlog_entry_x *old;
    envlog_err e = envlog_state_known(st, &k, &old);
    if (!e && old)
        envlog_table_kill(&st->tab, old);
    return e;
}

envlog_err envlog_state_fold_in(envlog_state *st, const envlog_fold_in *in)
{
    const envlog_record *rec = in->rec;
    pthread_once(&fields_once, find_fields);
    st->st.records++;
    if (rec->kind == ENVLOG_KIND_SESSION)
        st->st.sessions++;
    if (rec->effect == ENVLOG_CHANGED && in->unix_ns > st->st.last_change_unix_ns)
        st->st.last_change_unix_ns = in->unix_ns;
    envlog_key_ref k;
    envlog_origin origin;
    switch (rec->kind) {
    case ENVLOG_KIND_TUNE:
    case ENVLOG_KIND_COMPILE: return setting_key(in, &k, &origin) ? set(st, in, &k, origin) : ENVLOG_OK;
    case ENVLOG_KIND_FORGET: return fold_forget(st, &rec->u.forget);
    case ENVLOG_KIND_USER: return envlog_state_add_user(st, in);
    default: return ENVLOG_OK;
    }
}

static envlog_fold_in fold_in_of(const envlog_merge_rec *m)
{
    return (envlog_fold_in){.rec = m->r.rec, .slices = m->slices, .unix_ns = m->r.unix_ns,
                            .item = m->item, .kept = m->kept, .loc = m->loc,
                            .key_hash = m->hinted, .has_key_hash = m->has_hinted};
}

envlog_err envlog_state_fold_merged(envlog_state *st, const envlog_merge_rec *m)
{
    envlog_fold_in in = fold_in_of(m);
    return envlog_state_fold_in(st, &in);
}

bool envlog_state_fold_hint(const envlog_state *st, const envlog_merge_rec *m, uint64_t *hash)
{
    envlog_fold_in in = fold_in_of(m);
    envlog_key_ref k;
    envlog_origin origin;
    pthread_once(&fields_once, find_fields);
    if (!setting_key(&in, &k, &origin))
        return false;
    envlog_table_prefetch(&st->tab, k.hash);
    *hash = k.hash;
    return true;
}

envlog_err envlog_state_fold_item(envlog_state *st, const envlog_record *rec,
                                  uint64_t unix_ns, const envlog_snap_item *item)
{
    envlog_fold_in in = {.rec = rec, .unix_ns = unix_ns, .item = item};
    return envlog_state_fold_in(st, &in);
}

envlog_err envlog_state_fold(envlog_state *st, const envlog_record *rec, uint64_t unix_ns)
{
    return envlog_state_fold_item(st, rec, unix_ns, NULL);
}
