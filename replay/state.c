/* SPDX-License-Identifier: MIT */
/*
 * state.c - the cache state and the fold rules.
 *
 * Entries live in a chained hash table keyed by (table, namespace, key,
 * checksum) for tunes and (table, namespace, kernel key) for kernels.  An
 * entry never changes once made: a replacement is a new entry, and the old
 * one stays allocated until the state closes, so a pointer a lookup handed
 * out is never left dangling while other threads record.
 */
#include "replay_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    envlog_table table;
    uint64_t hash;
    bool live;             /* false: a tombstone or a known miss, kept in its
                              bucket so a lookup does not fall through to the
                              snapshot */
    bool miss;             /* a known miss: the snapshot gave nothing for it */
    uint8_t *payload;      /* the record that set it (kernels always: the
                              binary points into it; tunes when kept) */
    size_t payload_len;
    envlog_origin origin;
    uint64_t unix_ns;
    struct entry *all_next;
    union {                /* by table; an entry is allocated only as large
                              as its table's member */
        envlog_tune_entry t;
        envlog_kernel_entry k;
    };
} entry;

#define ENTRY_SIZE(table)                                                      \
    (offsetof(entry, t) +                                                      \
     ((table) == ENVLOG_TABLE_TUNE ? sizeof(envlog_tune_entry)                 \
                                   : sizeof(envlog_kernel_entry)))

/* Tune entries of one tune set share its candidate list: the names are kept
 * once per distinct list, found through a small cache by checksum. */
#define CANDS_CACHE 64

typedef struct cands_ref {
    const char *const *v;
    size_t n;
    uint64_t checksum;
} cands_ref;

/* A slot holds the hash beside the entry, so a probe that misses never
 * touches an entry. */
typedef struct slot {
    uint64_t hash;
    entry *e;
} slot;

typedef struct user_rec {
    char *kind;
    uint8_t *body;
    size_t size;
    envlog_stamp stamp;
    uint64_t unix_ns;
    uint8_t *payload;      /* the record, when the state keeps payloads */
    size_t payload_len;
} user_rec;

struct envlog_state {
    pthread_rwlock_t lock;
    slot *slots;           /* open addressing, linear probing, half full at most */
    size_t n_slots;
    size_t n_tunes, n_kernels;
    size_t n_known;        /* entries and tombstones in the table */
    entry *all;
    envlog_arena strings;  /* entries, their keys and names */
    cands_ref cands[CANDS_CACHE];
    user_rec *users;
    size_t n_users, cap_users;
    envlog_state_stats st;
    envlog_id128 last_session;
    bool any_session;
    bool keep_payloads;    /* for compaction and export */
    bool lean;             /* kernels without their binaries (a read-back
                              that only compares answers) */
    envlog_snap *snap;     /* the checkpoint under the folded sessions */
    bool snap_loaded;      /* every snapshot entry is in the table */
    int snap_gen;          /* which generation snap is (ENVLOG_GEN_*) */
    uint64_t snap_reported; /* damaged snapshot records reported while opening */
    uint64_t snap_lost;    /* entries the snapshot claims that did not read */
    uint64_t snap_users;   /* user records read from the snapshot */
    void *owned;           /* a buffer the snapshot lives in, freed at close */
    const char *last_ns;   /* the namespace kept last: most records share it */
};

static envlog_err load_users(envlog_state *st);

const char *envlog_rule_name(envlog_rule rule)
{
    switch (rule) {
    case ENVLOG_RULE_FIRST_LOCAL: return "first local value stands";
    case ENVLOG_RULE_LOCAL_OVER_IMPORTED: return "local value replaced an imported one";
    case ENVLOG_RULE_IMPORTED: return "imported; nothing local since";
    case ENVLOG_RULE_FORGOTTEN: return "forgotten";
    case ENVLOG_RULE_NOT_STORED: return "not stored: the pick was not measured";
    case ENVLOG_RULE_KEPT_FIRST: return "a later local value; the first one stands";
    case ENVLOG_RULE_IMPORT_IGNORED: return "imported value ignored: an entry existed";
    }
    return "unknown rule";
}

envlog_err envlog_state_new_x(bool keep_payloads, envlog_state **out)
{
    envlog_err e = envlog_state_new(out);
    if (!e)
        (*out)->keep_payloads = keep_payloads;
    return e;
}

envlog_err envlog_state_from_snap(envlog_snap *snap, void *owned, envlog_state **out)
{
    envlog_err e = envlog_state_new(out);
    if (e) {
        envlog_snap_unmap(snap);
        envlog_free(owned);
        return e;
    }
    envlog_state *st = *out;
    const envlog_snap_manifest *m = envlog_snap_manifest_get(snap);
    st->snap = snap;
    st->owned = owned;
    st->n_tunes = (size_t)m->tunes;
    st->n_kernels = (size_t)m->kernels;
    if (m->users && (e = load_users(st))) {
        envlog_state_close(st);
        *out = NULL;
    }
    return e;
}

envlog_err envlog_state_new(envlog_state **out)
{
    envlog_state *st = envlog_calloc(1, sizeof *st);
    if (!st)
        return envlog__fail(ENVLOG_NOMEM, "creating a state");
    st->n_slots = 1024;
    if (!(st->slots = envlog_calloc(st->n_slots, sizeof *st->slots))) {
        envlog_free(st);
        return envlog__fail(ENVLOG_NOMEM, "creating a state");
    }
    pthread_rwlock_init(&st->lock, NULL);
    *out = st;
    return ENVLOG_OK;
}

void envlog_state_close(envlog_state *st)
{
    if (!st)
        return;
    for (entry *e = st->all; e; e = e->all_next)
        envlog_free(e->payload);
    for (size_t i = 0; i < st->n_users; i++) {
        envlog_free(st->users[i].kind);
        envlog_free(st->users[i].body);
        envlog_free(st->users[i].payload);
    }
    envlog_free(st->users);
    envlog_free(st->slots);
    envlog_arena_free(&st->strings);
    envlog_snap_unmap(st->snap);
    envlog_free(st->owned);
    pthread_rwlock_destroy(&st->lock);
    envlog_free(st);
}

void envlog_state_lean(envlog_state *st) { st->lean = true; }

void envlog_state_wrlock(envlog_state *st) { pthread_rwlock_wrlock(&st->lock); }
void envlog_state_unlock(envlog_state *st) { pthread_rwlock_unlock(&st->lock); }

/* ------------------------------------------------------------------ keys */

static uint64_t tune_hash(const char *ns, const char *key, uint64_t checksum)
{
    return envlog_entry_key_hash(ENVLOG_TABLE_TUNE, ns, key, strlen(key), checksum);
}

static uint64_t kernel_hash(const char *ns, const envlog_hash128 *k)
{
    return envlog_entry_key_hash(ENVLOG_TABLE_KERNEL, ns, k->b, 16, 0);
}

/* The tune entry of key hash `h` (tune_hash's). */
static entry *find_tune_h(const envlog_state *st, uint64_t h, const char *ns,
                          const char *key, uint64_t checksum)
{
    size_t mask = st->n_slots - 1;
    for (size_t i = h & mask; st->slots[i].e; i = (i + 1) & mask) {
        const entry *e = st->slots[i].e;
        if (st->slots[i].hash == h && e->table == ENVLOG_TABLE_TUNE &&
            e->t.checksum == checksum && !strcmp(e->t.key, key) && !strcmp(e->t.ns, ns))
            return st->slots[i].e;
    }
    return NULL;
}

static entry *find_tune(const envlog_state *st, const char *ns, const char *key,
                        uint64_t checksum)
{
    return find_tune_h(st, tune_hash(ns, key, checksum), ns, key, checksum);
}

static entry *find_kernel(const envlog_state *st, const char *ns,
                          const envlog_hash128 *k)
{
    uint64_t h = kernel_hash(ns, k);
    size_t mask = st->n_slots - 1;
    for (size_t i = h & mask; st->slots[i].e; i = (i + 1) & mask) {
        const entry *e = st->slots[i].e;
        if (st->slots[i].hash == h && e->table == ENVLOG_TABLE_KERNEL &&
            !memcmp(e->k.kernel_key.b, k->b, 16) && !strcmp(e->k.ns, ns))
            return st->slots[i].e;
    }
    return NULL;
}

static void put_slot(slot *slots, size_t n, uint64_t h, entry *e)
{
    size_t i = h & (n - 1);
    while (slots[i].e)
        i = (i + 1) & (n - 1);
    slots[i].hash = h;
    slots[i].e = e;
}

static envlog_err grow(envlog_state *st)
{
    size_t n = st->n_slots * 2;
    slot *v = envlog_malloc_big(n * sizeof *v, true);
    if (!v)
        return envlog__fail(ENVLOG_NOMEM, "growing the state");
    for (size_t i = 0; i < st->n_slots; i++)
        if (st->slots[i].e)
            put_slot(v, n, st->slots[i].hash, st->slots[i].e);
    envlog_free(st->slots);
    st->slots = v;
    st->n_slots = n;
    return ENVLOG_OK;
}

static void count(envlog_state *st, envlog_table table, int d)
{
    if (table == ENVLOG_TABLE_TUNE)
        st->n_tunes += (size_t)(ptrdiff_t)d;
    else
        st->n_kernels += (size_t)(ptrdiff_t)d;
}

/* Turns a standing entry into a tombstone (it stays in its bucket). */
static void kill_entry(envlog_state *st, entry *old)
{
    if (old->live)
        count(st, old->table, -1);
    old->live = false;
}

/* Puts `e` in the table in place of `old` (which stays allocated, since a
 * lookup may have handed it out).  `counted`: e is already counted (it comes
 * from the snapshot, whose entries the counts start with). */
static envlog_err install(envlog_state *st, entry *e, entry *old, bool counted)
{
    if (old) {
        /* Same key, same hash: the new entry takes the old one's slot. */
        size_t mask = st->n_slots - 1, i = old->hash & mask;
        while (st->slots[i].e != old)
            i = (i + 1) & mask;
        st->slots[i].e = e;
        if (old->live && e->live)
            counted = true;
        else if (old->live)
            count(st, old->table, -1);
    } else {
        if (2 * (st->n_known + 1) > st->n_slots) {
            envlog_err err = grow(st);
            if (err)
                return err;
        }
        put_slot(st->slots, st->n_slots, e->hash, e);
        st->n_known++;
    }
    e->all_next = st->all;
    st->all = e;
    if (e->live && !counted)
        count(st, e->table, +1);
    return ENVLOG_OK;
}

/* ------------------------------------------------------------------ fold */

static const char *keep(envlog_state *st, const char *s, bool *oom)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = envlog_arena_alloc(&st->strings, n);
    if (!d) {
        *oom = true;
        return NULL;
    }
    memcpy(d, s, n);
    return d;
}

/* Namespaces repeat across entries: the last one kept is reused. */
static const char *keep_ns(envlog_state *st, const char *ns, bool *oom)
{
    if (st->last_ns && !strcmp(st->last_ns, ns))
        return st->last_ns;
    const char *k = keep(st, ns, oom);
    if (k)
        st->last_ns = k;
    return k;
}

/* A zeroed entry of `table`'s size, owned by the state. */
static entry *new_entry(envlog_state *st, envlog_table table)
{
    size_t n = ENTRY_SIZE(table);
    entry *e = envlog_arena_alloc(&st->strings, n);
    if (e)
        memset(e, 0, n);
    return e;
}

/* The state's copy of a tune set's candidate names, shared by every entry
 * of that set. */
static const char *const *keep_cands(envlog_state *st, const envlog_tune *t, bool *oom)
{
    if (!t->n_candidates)
        return NULL;
    cands_ref *c = &st->cands[t->checksum % CANDS_CACHE];
    bool same = c->v && c->checksum == t->checksum && c->n == t->n_candidates;
    for (size_t i = 0; same && i < c->n; i++)
        same = !strcmp(c->v[i], t->candidates[i]);
    if (same)
        return c->v;
    const char **v = envlog_arena_alloc(&st->strings, t->n_candidates * sizeof(char *));
    if (!v) {
        *oom = true;
        return NULL;
    }
    for (size_t i = 0; i < t->n_candidates; i++)
        v[i] = keep(st, t->candidates[i], oom);
    if (!*oom)
        *c = (cands_ref){v, t->n_candidates, t->checksum};
    return v;
}

static envlog_rule rule_for(const entry *old, envlog_origin origin)
{
    if (!old || !old->live)
        return origin == ENVLOG_LOCAL ? ENVLOG_RULE_FIRST_LOCAL : ENVLOG_RULE_IMPORTED;
    return ENVLOG_RULE_LOCAL_OVER_IMPORTED;
}

/* The seeds' storage rules: may a value of `origin` replace `old`? */
static bool may_set(const entry *old, envlog_origin origin)
{
    if (!old || !old->live)
        return true;
    return old->origin == ENVLOG_IMPORTED && origin == ENVLOG_LOCAL;
}

/* A copy of the record's payload, when the entry keeps one. */
static envlog_err keep_payload(entry *e, const envlog_bytes *payload)
{
    if (!payload || !payload->size)
        return ENVLOG_OK;
    if (!(e->payload = envlog_malloc(payload->size)))
        return envlog__fail(ENVLOG_NOMEM, "keeping a record");
    memcpy(e->payload, payload->data, payload->size);
    e->payload_len = payload->size;
    return ENVLOG_OK;
}

/* Makes the entry a tune record sets (not yet installed). */
static envlog_err make_tune(envlog_state *st, const envlog_tune *t, uint64_t h,
                            const envlog_stamp *stamp, uint64_t unix_ns,
                            const envlog_bytes *payload, envlog_origin origin,
                            envlog_rule rule, entry **out)
{
    entry *e = new_entry(st, ENVLOG_TABLE_TUNE);
    if (!e)
        return envlog__fail(ENVLOG_NOMEM, "folding a tune");
    bool oom = false;
    e->table = ENVLOG_TABLE_TUNE;
    e->live = true;
    e->hash = h;
    e->unix_ns = unix_ns;
    e->t.ns = keep_ns(st, t->ns, &oom);
    e->t.key = keep(st, t->key, &oom);
    e->t.checksum = t->checksum;
    const char *const *cands = keep_cands(st, t, &oom);
    e->t.candidates = cands;
    e->t.n_candidates = t->n_candidates;
    e->t.winner_index = t->winner;
    e->t.winner = cands ? cands[t->winner] : NULL;
    e->t.margin = t->margin;
    e->t.within_noise = t->within_noise;
    e->t.winner_cost_ns = t->winner_ns;
    e->t.origin = e->origin = origin;
    e->t.rule = rule;
    e->t.stamp = *stamp;
    if (oom || (st->keep_payloads && keep_payload(e, payload))) {
        envlog_free(e->payload);
        return envlog__fail(ENVLOG_NOMEM, "folding a tune");
    }
    *out = e;
    return ENVLOG_OK;
}

/* Makes the entry a compile record sets.  The binary is kept inside a copy
 * of the record when there is one (the binary is a byte string in it), else
 * on its own. */
static envlog_err make_kernel(envlog_state *st, const envlog_compile *c,
                              const envlog_stamp *stamp, uint64_t unix_ns,
                              const envlog_bytes *payload, envlog_origin origin,
                              envlog_rule rule, entry **out)
{
    entry *e = new_entry(st, ENVLOG_TABLE_KERNEL);
    if (!e)
        return envlog__fail(ENVLOG_NOMEM, "folding a compile");
    bool oom = false;
    const uint8_t *pp = payload ? payload->data : NULL;
    const uint8_t *bp = c->binary.data;
    if (st->lean) {
        e->k.binary.data = NULL;
    } else if (pp && bp >= pp && bp + c->binary.size <= pp + payload->size) {
        if (keep_payload(e, payload))
            oom = true;
        else
            e->k.binary.data = e->payload + (bp - pp);
    } else if ((e->payload = envlog_malloc(c->binary.size))) {
        memcpy(e->payload, bp, c->binary.size);
        e->payload_len = 0; /* not a record: just the binary */
        e->k.binary.data = e->payload;
    } else {
        oom = true;
    }
    e->k.binary.size = c->binary.size;
    e->table = ENVLOG_TABLE_KERNEL;
    e->live = true;
    e->hash = kernel_hash(c->ns, &c->kernel_key);
    e->unix_ns = unix_ns;
    e->k.ns = keep_ns(st, c->ns, &oom);
    e->k.name = keep(st, c->name, &oom);
    e->k.kernel_key = c->kernel_key;
    e->k.source_hash = c->source_hash;
    e->k.options = keep(st, c->options, &oom);
    e->k.compiler_version = keep(st, c->compiler_version, &oom);
    e->k.arch = keep(st, c->arch, &oom);
    e->k.binary_hash = c->binary_hash;
    e->k.origin = e->origin = origin;
    e->k.rule = rule;
    e->k.stamp = *stamp;
    if (oom) {
        envlog_free(e->payload);
        return envlog__fail(ENVLOG_NOMEM, "folding a compile");
    }
    *out = e;
    return ENVLOG_OK;
}

/* A known miss that stops lookups from falling through to the snapshot.
 * It keeps its key, as lookups compare it. */
static envlog_err make_dead(envlog_state *st, envlog_table table, const char *ns,
                            const char *key, const envlog_hash128 *kkey,
                            uint64_t checksum, uint64_t hash, entry **out)
{
    entry *e = new_entry(st, table);
    bool oom = !e;
    if (e) {
        e->table = table;
        e->hash = hash;
        e->miss = true;
        if (table == ENVLOG_TABLE_TUNE) {
            e->t.ns = keep(st, ns, &oom);
            e->t.key = keep(st, key, &oom);
            e->t.checksum = checksum;
        } else {
            e->k.ns = keep(st, ns, &oom);
            e->k.kernel_key = *kkey;
        }
    }
    if (oom)
        return envlog__fail(ENVLOG_NOMEM, "keeping a known miss");
    *out = e;
    return ENVLOG_OK;
}

/* Brings the snapshot's entry for a key (or a known miss) into the table. */
static envlog_err materialize(envlog_state *st, envlog_table table, const char *ns,
                              const char *key, const envlog_hash128 *kkey,
                              uint64_t checksum, entry **out)
{
    envlog_snap_item it;
    envlog_record rec;
    *out = NULL;
    envlog_err e = envlog_snap_find(st->snap, table, ns, key, kkey, checksum, &it, &rec);
    uint64_t h = table == ENVLOG_TABLE_TUNE ? tune_hash(ns, key, checksum)
                                            : kernel_hash(ns, kkey);
    entry *n = NULL;
    if (e == ENVLOG_NOT_FOUND || e == ENVLOG_CORRUPT) {
        /* A damaged snapshot entry is a miss; the damage shows in verify. */
        if ((e = make_dead(st, table, ns, key, kkey, checksum, h, &n)))
            return e;
        e = install(st, n, NULL, true);
    } else if (!e) {
        e = table == ENVLOG_TABLE_TUNE
                ? make_tune(st, &rec.u.tune, h, &it.stamp, it.unix_ns, &it.record,
                            (envlog_origin)it.origin, (envlog_rule)it.rule, &n)
                : make_kernel(st, &rec.u.compile, &it.stamp, it.unix_ns, &it.record,
                              (envlog_origin)it.origin, (envlog_rule)it.rule, &n);
        if (!e)
            e = install(st, n, NULL, true);
    }
    if (!e)
        *out = n;
    return e;
}

/* The table's entry for a key, the snapshot's when the table has none yet;
 * NULL when neither knows it.  The write lock must be held. */
static envlog_err find_known(envlog_state *st, envlog_table table, const char *ns,
                             const char *key, const envlog_hash128 *kkey,
                             uint64_t checksum, entry **out)
{
    *out = table == ENVLOG_TABLE_TUNE ? find_tune(st, ns, key, checksum)
                                      : find_kernel(st, ns, kkey);
    if (*out || !st->snap || st->snap_loaded)
        return ENVLOG_OK;
    return materialize(st, table, ns, key, kkey, checksum, out);
}

/* The rule a value that stands now stands by.  A snapshot's ENTRY that
 * finds its key empty keeps the rule it was written with: what it replaced
 * (an imported value, a forgotten one) is not in the snapshot to replace
 * again, and a compaction must not change what `why` says. */
static envlog_rule standing_rule(const entry *old, envlog_origin origin,
                                 const envlog_snap_item *it)
{
    if (it && it->kind == ENVLOG_KIND_ENTRY && (!old || !old->live))
        return (envlog_rule)it->rule;
    return rule_for(old, origin);
}

static envlog_err fold_tune(envlog_state *st, const envlog_record *rec, uint64_t unix_ns,
                            const envlog_snap_item *it)
{
    const envlog_tune *t = &rec->u.tune;
    if (!t->stored || !t->ns || !t->key || t->winner < 0 ||
        (size_t)t->winner >= t->n_candidates)
        return ENVLOG_OK;
    envlog_origin origin = t->imported ? ENVLOG_IMPORTED : ENVLOG_LOCAL;
    /* The key is hashed once, for the probe and for the entry. */
    uint64_t h = tune_hash(t->ns, t->key, t->checksum);
    entry *old = find_tune_h(st, h, t->ns, t->key, t->checksum), *e;
    envlog_err err = ENVLOG_OK;
    if (!old && st->snap && !st->snap_loaded)
        err = materialize(st, ENVLOG_TABLE_TUNE, t->ns, t->key, NULL, t->checksum, &old);
    if (err || !may_set(old, origin))
        return err;
    if ((err = make_tune(st, t, h, &rec->stamp, unix_ns, &rec->payload, origin,
                         standing_rule(old, origin, it), &e)))
        return err;
    return install(st, e, old, false);
}

static envlog_err fold_compile(envlog_state *st, const envlog_record *rec,
                               uint64_t unix_ns, const envlog_snap_item *it)
{
    const envlog_compile *c = &rec->u.compile;
    if (c->outcome != ENVLOG_COMPILED || !c->binary.size || !c->ns)
        return ENVLOG_OK;
    envlog_origin origin = c->imported ? ENVLOG_IMPORTED : ENVLOG_LOCAL;
    entry *old, *e;
    envlog_err err = find_known(st, ENVLOG_TABLE_KERNEL, c->ns, NULL, &c->kernel_key, 0, &old);
    if (err || !may_set(old, origin))
        return err;
    if ((err = make_kernel(st, c, &rec->stamp, unix_ns, &rec->payload, origin,
                           standing_rule(old, origin, it), &e)))
        return err;
    return install(st, e, old, false);
}

static envlog_err load_all(envlog_state *st);

static const char *entry_ns(const entry *e)
{
    return e->table == ENVLOG_TABLE_TUNE ? e->t.ns : e->k.ns;
}

/* A forget of a prefix: every standing entry under it, in both tables,
 * becomes a tombstone (the snapshot's too: they are brought in first). */
static envlog_err forget_under(envlog_state *st, const char *prefix)
{
    envlog_err e = load_all(st);
    if (e)
        return e;
    for (size_t i = 0; i < st->n_slots; i++) {
        entry *x = st->slots[i].e;
        if (x && x->live && envlog_ns_under(entry_ns(x), prefix))
            kill_entry(st, x);
    }
    return ENVLOG_OK;
}

static envlog_err fold_forget(envlog_state *st, const envlog_forget *f)
{
    entry *old = NULL;
    envlog_hash128 k;
    envlog_err e = ENVLOG_OK;
    if (f->under)
        return forget_under(st, f->under);
    if (!f->ns || !f->key)
        return ENVLOG_OK;
    if (f->table == ENVLOG_TABLE_TUNE)
        e = find_known(st, ENVLOG_TABLE_TUNE, f->ns, f->key, NULL, f->checksum, &old);
    else if (f->table == ENVLOG_TABLE_KERNEL && envlog_id_parse(f->key, &k) == ENVLOG_OK)
        e = find_known(st, ENVLOG_TABLE_KERNEL, f->ns, NULL, &k, 0, &old);
    if (!e && old)
        kill_entry(st, old);
    return e;
}

static envlog_err fold_user(envlog_state *st, const envlog_user *u,
                            const envlog_stamp *stamp, uint64_t unix_ns,
                            const envlog_bytes *payload)
{
    if (st->n_users == st->cap_users) {
        size_t cap = st->cap_users ? st->cap_users * 2 : 16;
        user_rec *p = envlog_realloc(st->users, cap * sizeof *p);
        if (!p)
            return envlog__fail(ENVLOG_NOMEM, "keeping a user record");
        st->users = p;
        st->cap_users = cap;
    }
    user_rec *r = &st->users[st->n_users];
    r->kind = envlog_strdup(u->kind ? u->kind : "");
    r->body = envlog_malloc(u->body.size);
    if (!r->kind || !r->body) {
        envlog_free(r->kind);
        envlog_free(r->body);
        return envlog__fail(ENVLOG_NOMEM, "keeping a user record");
    }
    memcpy(r->body, u->body.data, u->body.size);
    r->size = u->body.size;
    r->stamp = *stamp;
    r->unix_ns = unix_ns;
    r->payload = NULL;
    r->payload_len = 0;
    if (st->keep_payloads && payload && payload->size) {
        if (!(r->payload = envlog_malloc(payload->size))) {
            envlog_free(r->kind);
            envlog_free(r->body);
            return envlog__fail(ENVLOG_NOMEM, "keeping a user record");
        }
        memcpy(r->payload, payload->data, payload->size);
        r->payload_len = payload->size;
    }
    st->n_users++;
    return ENVLOG_OK;
}

envlog_err envlog_state_fold(envlog_state *st, const envlog_record *rec,
                             uint64_t unix_ns)
{
    return envlog_state_fold_item(st, rec, unix_ns, NULL);
}

envlog_err envlog_state_fold_item(envlog_state *st, const envlog_record *rec,
                                  uint64_t unix_ns, const envlog_snap_item *it)
{
    envlog_err e = ENVLOG_OK;
    st->st.records++;
    if (!st->any_session || memcmp(st->last_session.b, rec->stamp.session.b, 16)) {
        /* Records of one session arrive together only when folded live; the
         * count is of session records, which every session has once. */
        st->any_session = true;
        st->last_session = rec->stamp.session;
    }
    if (rec->kind == ENVLOG_KIND_SESSION)
        st->st.sessions++;
    if (rec->effect == ENVLOG_CHANGED && unix_ns > st->st.last_change_unix_ns)
        st->st.last_change_unix_ns = unix_ns;
    switch (rec->kind) {
    case ENVLOG_KIND_TUNE: e = fold_tune(st, rec, unix_ns, it); break;
    case ENVLOG_KIND_COMPILE: e = fold_compile(st, rec, unix_ns, it); break;
    case ENVLOG_KIND_FORGET: e = fold_forget(st, &rec->u.forget); break;
    case ENVLOG_KIND_USER:
        e = fold_user(st, &rec->u.user, &rec->stamp, unix_ns, &rec->payload);
        break;
    default: break;
    }
    return e;
}

/* --------------------------------------------------------------- opening */

typedef struct fold_ctx {
    envlog_state *st;
    const envlog_replay_opts *user;
} fold_ctx;

static envlog_err fold_one(void *ctx, const envlog_replay_rec *r, const envlog_snap_item *it,
                           size_t source)
{
    (void)source;
    fold_ctx *f = ctx;
    return envlog_state_fold_item(f->st, r->rec, r->unix_ns, it);
}

static void count_damage(void *ctx, const envlog_damage *d, bool torn)
{
    fold_ctx *f = ctx;
    f->st->st.damaged++;
    if (d->file == ENVLOG_DAMAGE_SNAPSHOT || d->file == ENVLOG_DAMAGE_PREVIOUS)
        f->st->snap_reported++;
    if (f->user && f->user->on_damage)
        f->user->on_damage(f->user->ctx, d, torn);
}

static void pass_progress(void *ctx, uint64_t done, uint64_t total)
{
    fold_ctx *f = ctx;
    if (f->user && f->user->on_progress)
        f->user->on_progress(f->user->ctx, done, total);
}

/* The snapshot's user records, which come before every session's. */
static envlog_err load_users(envlog_state *st)
{
    envlog_snap_item it;
    envlog_record rec;
    envlog_err e = ENVLOG_OK;
    envlog_snap_rewind(st->snap);
    while (!e && !(e = envlog_snap_next(st->snap, &it, &rec)))
        if (it.kind == ENVLOG_KIND_ENTRY && it.table == ENVLOG_TABLE_USER &&
            !(e = fold_user(st, &rec.u.user, &it.stamp, it.unix_ns, &it.record)))
            st->snap_users++;
    return e == ENVLOG_END ? ENVLOG_OK : e;
}

envlog_err envlog_state_open_x(envlog_env *env, const envlog_replay_opts *opts,
                               bool keep_payloads, envlog_state **out)
{
    return envlog_state_open_on(env, opts, NULL, keep_payloads, out);
}

envlog_err envlog_state_open_on(envlog_env *env, const envlog_replay_opts *opts,
                                const char *base, bool keep_payloads, envlog_state **out)
{
    envlog_state *st;
    *out = NULL;
    envlog_err e = envlog_state_new(&st);
    if (e)
        return e;
    int lk = -1;
    st->keep_payloads = keep_payloads;
    envlog_snap *snap = NULL;
    /* No compaction removes a session between the snapshot mapped here and
     * the end of the fold (see envlog_env_lock). */
    fold_ctx f = {st, opts};
    envlog_replay_opts o = {0};
    if (opts)
        o = *opts;
    o.on_damage = count_damage;
    o.on_progress = opts && opts->on_progress ? pass_progress : NULL;
    o.ctx = &f;
    if ((e = envlog_env_lock(env, false, &lk)))
        goto fail;
    if (base) {
        /* A given generation, read whole, as far as it reads. */
        if ((e = envlog_snap_map_file(env, base, true, &snap)))
            goto fail;
        st->snap_gen = !snap ? ENVLOG_GEN_NONE : strcmp(base, "previous")
                                                     ? ENVLOG_GEN_CURRENT
                                                     : ENVLOG_GEN_PREVIOUS;
        if (snap)
            st->snap_reported += envlog_snap_bad_records(snap);
    } else if ((e = envlog_snap_pick(env, o.check_snapshot, count_damage, &f, &snap,
                                     &st->snap_gen))) {
        goto fail;
    }
    /* Up to a point in time, the snapshot's own records are folded with the
     * sessions; otherwise it stands as the layer under them, read through
     * its index. */
    bool until = opts && (opts->until_time || opts->until_stamp);
    if (snap && !until) {
        const envlog_snap_manifest *m = envlog_snap_manifest_get(snap);
        st->snap = snap;
        st->n_tunes = (size_t)m->tunes;
        st->n_kernels = (size_t)m->kernels;
        if (m->users && (e = load_users(st)))
            goto fail;
    }
    e = envlog_replay_each_with(env, &o, snap, until, true, fold_one, &f);
    envlog_env_unlock(lk);
    lk = -1;
    if (until) {
        /* What the walk of its records met and nobody reported yet. */
        if (snap && !o.check_snapshot)
            st->snap_reported += envlog_snap_bad_records(snap);
        envlog_snap_unmap(snap);
        snap = NULL;
    }
    if (e)
        goto fail;
    *out = st;
    return ENVLOG_OK;
fail:
    envlog_env_unlock(lk);
    if (!st->snap)
        envlog_snap_unmap(snap);
    envlog_state_close(st);
    return e;
}

envlog_err envlog_state_open(envlog_env *env, const envlog_replay_opts *opts,
                             envlog_state **out)
{
    return envlog_state_open_x(env, opts, false, out);
}

/* --------------------------------------------------- the live env state */

/* The record a session of this process accepted, as the fold of its log
 * would take it. */
static void live_hook(void *ctx, const envlog_record *rec, uint64_t unix_ns)
{
    envlog_state *st = ctx;
    pthread_rwlock_wrlock(&st->lock);
    /* A state that cannot take the record (out of memory) only misses a
     * cache entry; the record itself is already in the log. */
    (void)envlog_state_fold(st, rec, unix_ns);
    pthread_rwlock_unlock(&st->lock);
}

static void live_free(void *ctx)
{
    envlog_state_close(ctx);
}

envlog_err envlog_env_state(envlog_env *env, envlog_state **out)
{
    *out = NULL;
    if (!env)
        return envlog__fail(ENVLOG_INVALID_ARG, "no environment");
    pthread_mutex_lock(&env->state_mu);
    envlog_err e = ENVLOG_OK;
    if (!env->state) {
        envlog_state *st;
        if (!(e = envlog_state_open(env, NULL, &st))) {
            env->state = st;
            env->state_free = live_free;
            /* Published last: sessions read the hook without the mutex. */
            __atomic_store_n(&env->state_hook, live_hook, __ATOMIC_RELEASE);
        }
    }
    *out = env->state;
    pthread_mutex_unlock(&env->state_mu);
    return e;
}

/* --------------------------------------------------------------- lookups */

/* A lookup: the read lock for the table; the write lock only when the
 * snapshot must be asked (once per key: the answer is kept). */
static envlog_err lookup(envlog_state *st, envlog_table table, const char *ns,
                         const char *key, const envlog_hash128 *kkey,
                         uint64_t checksum, entry **out)
{
    pthread_rwlock_rdlock(&st->lock);
    entry *e = table == ENVLOG_TABLE_TUNE ? find_tune(st, ns, key, checksum)
                                          : find_kernel(st, ns, kkey);
    pthread_rwlock_unlock(&st->lock);
    envlog_err err = ENVLOG_OK;
    if (!e && st->snap && !st->snap_loaded) {
        pthread_rwlock_wrlock(&st->lock);
        err = find_known(st, table, ns, key, kkey, checksum, &e);
        pthread_rwlock_unlock(&st->lock);
    }
    *out = e && e->live ? e : NULL;
    return err;
}

envlog_err envlog_state_winner(envlog_state *st, const char *ns, const char *key,
                               uint64_t checksum, envlog_tune_entry *out)
{
    if (!st || !ns || !key || !out)
        return envlog__fail(ENVLOG_INVALID_ARG, "winner lookup needs ns and key");
    entry *e;
    envlog_err err = lookup(st, ENVLOG_TABLE_TUNE, ns, key, NULL, checksum, &e);
    if (err)
        return err;
    if (!e)
        return envlog__fail(ENVLOG_NOT_FOUND, "no winner for %s in %s", key, ns);
    *out = e->t; /* entries never change once made */
    return ENVLOG_OK;
}

envlog_err envlog_state_kernel(envlog_state *st, const char *ns,
                               const envlog_hash128 *kernel_key,
                               envlog_kernel_entry *out)
{
    if (!st || !ns || !kernel_key || !out)
        return envlog__fail(ENVLOG_INVALID_ARG, "kernel lookup needs ns and key");
    entry *e;
    envlog_err err = lookup(st, ENVLOG_TABLE_KERNEL, ns, NULL, kernel_key, 0, &e);
    if (err)
        return err;
    if (!e)
        return envlog__fail(ENVLOG_NOT_FOUND, "no kernel in %s", ns);
    *out = e->k;
    return ENVLOG_OK;
}

void envlog_state_stats_get(envlog_state *st, envlog_state_stats *out)
{
    pthread_rwlock_rdlock(&st->lock);
    *out = st->st;
    out->tunes = st->n_tunes;
    out->kernels = st->n_kernels;
    out->user_records = st->n_users;
    out->snapshot_generation = st->snap_gen;
    out->snapshot_damaged = st->snap_reported;
    out->snapshot_lost = st->snap_lost;
    if (st->snap) {
        const envlog_snap_manifest *m = envlog_snap_manifest_get(st->snap);
        out->snapshot_bytes = envlog_snap_size(st->snap);
        out->snapshot_entries = m->tunes + m->kernels + m->users - st->snap_lost;
        out->snapshot_sessions = m->n_wms;
        if (!out->last_change_unix_ns)
            out->last_change_unix_ns = m->created_unix_ns;
        /* Damage met since opening, by lookups and walks, and not yet
         * counted: without check_snapshot the snapshot is read as needed. */
        uint64_t walked = envlog_snap_bad_records(st->snap) +
                          envlog_snap_lookup_damage(st->snap);
        if (walked > out->snapshot_damaged)
            out->snapshot_damaged = walked;
    }
    pthread_rwlock_unlock(&st->lock);
}

/* ------------------------------------------------------ canonical order */

static int entry_cmp(const void *a, const void *b)
{
    const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
    if (x->table != y->table)
        return x->table < y->table ? -1 : 1;
    const char *xn = x->table == ENVLOG_TABLE_TUNE ? x->t.ns : x->k.ns;
    const char *yn = y->table == ENVLOG_TABLE_TUNE ? y->t.ns : y->k.ns;
    int c = strcmp(xn, yn);
    if (c)
        return c;
    if (x->table == ENVLOG_TABLE_KERNEL)
        return memcmp(x->k.kernel_key.b, y->k.kernel_key.b, 16);
    if ((c = strcmp(x->t.key, y->t.key)))
        return c;
    return x->t.checksum < y->t.checksum ? -1 : x->t.checksum > y->t.checksum;
}

/* The live entries sorted canonically (caller holds the read lock). */
static envlog_err sorted(envlog_state *st, entry ***out, size_t *n)
{
    size_t total = st->n_tunes + st->n_kernels, k = 0;
    entry **v = envlog_malloc((total ? total : 1) * sizeof *v);
    if (!v)
        return envlog__fail(ENVLOG_NOMEM, "sorting the state");
    for (size_t i = 0; i < st->n_slots; i++)
        if (st->slots[i].e && st->slots[i].e->live && k < total)
            v[k++] = st->slots[i].e;
    qsort(v, k, sizeof *v, entry_cmp);
    *out = v;
    *n = k;
    return ENVLOG_OK;
}

/* Brings every snapshot entry into the table, for walks over all of them. */
static envlog_err load_all(envlog_state *st)
{
    if (!st->snap || st->snap_loaded)
        return ENVLOG_OK;
    envlog_snap_item it;
    envlog_record rec;
    envlog_err e = ENVLOG_OK;
    uint64_t read[2] = {0, 0};
    envlog_snap_rewind(st->snap);
    while (!e && !(e = envlog_snap_next(st->snap, &it, &rec))) {
        if (it.kind != ENVLOG_KIND_ENTRY || it.table == ENVLOG_TABLE_USER)
            continue;
        /* The walk hands out only entries that stand (decode_item). */
        read[it.table]++;
        bool tune = it.table == ENVLOG_TABLE_TUNE;
        uint64_t h = tune ? tune_hash(rec.u.tune.ns, rec.u.tune.key, rec.u.tune.checksum) : 0;
        entry *old = tune ? find_tune_h(st, h, rec.u.tune.ns, rec.u.tune.key,
                                        rec.u.tune.checksum)
                          : find_kernel(st, rec.u.compile.ns, &rec.u.compile.kernel_key);
        /* What sessions set or forgot since stands; a miss a lookup could
         * not resolve through a damaged INDEX does not. */
        if (old && !old->miss)
            continue;
        entry *n;
        e = tune ? make_tune(st, &rec.u.tune, h, &it.stamp, it.unix_ns, &it.record,
                             (envlog_origin)it.origin, (envlog_rule)it.rule, &n)
                 : make_kernel(st, &rec.u.compile, &it.stamp, it.unix_ns, &it.record,
                               (envlog_origin)it.origin, (envlog_rule)it.rule, &n);
        if (!e)
            e = install(st, n, old, true);
    }
    if (e == ENVLOG_END)
        e = ENVLOG_OK;
    if (e)
        return e;
    /* The counts began as the MANIFEST's claims: now they are what was read
     * (entries that do not read are lost, and said so in the stats). */
    const envlog_snap_manifest *m = envlog_snap_manifest_get(st->snap);
    st->n_tunes += (size_t)read[0] - (size_t)m->tunes;
    st->n_kernels += (size_t)read[1] - (size_t)m->kernels;
    uint64_t claimed = m->tunes + m->kernels, got = read[0] + read[1];
    st->snap_lost = claimed > got ? claimed - got : 0;
    if (m->users > st->snap_users)
        st->snap_lost += m->users - st->snap_users;
    st->snap_loaded = true;
    return ENVLOG_OK;
}

envlog_err envlog_state_each(envlog_state *st,
                             envlog_err (*fn)(void *ctx, const envlog_entry *e), void *ctx)
{
    if (st->snap && !st->snap_loaded) {
        pthread_rwlock_wrlock(&st->lock);
        envlog_err e = load_all(st);
        pthread_rwlock_unlock(&st->lock);
        if (e)
            return e;
    }
    pthread_rwlock_rdlock(&st->lock);
    entry **v = NULL;
    size_t n = 0;
    envlog_err err = sorted(st, &v, &n);
    for (size_t i = 0; !err && i < n; i++) {
        envlog_entry pub = {v[i]->table,
                            v[i]->table == ENVLOG_TABLE_TUNE ? &v[i]->t : NULL,
                            v[i]->table == ENVLOG_TABLE_KERNEL ? &v[i]->k : NULL};
        err = fn(ctx, &pub);
    }
    envlog_free(v);
    pthread_rwlock_unlock(&st->lock);
    return err;
}

/* ------------------------------------------------------------------ dump */

typedef struct dump_ctx {
    envlog_write_fn fn;
    void *ctx;
    envlog_err failed; /* what the writer returned that was not ENVLOG_OK */
} dump_ctx;

static void dput(dump_ctx *d, const char *s)
{
    if (!d->failed)
        d->failed = d->fn(d->ctx, s, strlen(s));
}

static void dstr(dump_ctx *d, const char *s)
{
    if (!d->failed)
        d->failed = envlog__write_json_str(d->fn, d->ctx, s ? s : "", s ? strlen(s) : 0);
}

static void dhex(dump_ctx *d, const uint8_t *p, size_t n)
{
    dput(d, "\"");
    if (!d->failed)
        d->failed = envlog__write_hex(d->fn, d->ctx, p, n);
    dput(d, "\"");
}

static void dstamp(dump_ctx *d, const envlog_stamp *s)
{
    char buf[64];
    dput(d, ",\"set_by\":{\"session\":");
    dhex(d, s->session.b, 16);
    snprintf(buf, sizeof buf, ",\"seq\":%llu}", (unsigned long long)s->seq);
    dput(d, buf);
}

static envlog_err dump_entry(void *ctx, const envlog_entry *e)
{
    dump_ctx *d = ctx;
    char buf[128];
    if (e->tune) {
        const envlog_tune_entry *t = e->tune;
        dput(d, "{\"type\":\"entry\",\"schema_version\":1,\"table\":\"tune\",\"namespace\":");
        dstr(d, t->ns);
        dput(d, ",\"key\":");
        dstr(d, t->key);
        snprintf(buf, sizeof buf, ",\"checksum\":\"0x%016llx\",\"winner\":",
                 (unsigned long long)t->checksum);
        dput(d, buf);
        dstr(d, t->winner);
        char margin[40];
        envlog__fmt_double(t->margin, margin, sizeof margin);
        snprintf(buf, sizeof buf, ",\"winner_index\":%lld,\"margin\":%s,"
                 "\"within_noise\":%s,\"origin\":\"%s\"",
                 (long long)t->winner_index, margin, t->within_noise ? "true" : "false",
                 t->origin == ENVLOG_IMPORTED ? "imported" : "local");
        dput(d, buf);
        dstamp(d, &t->stamp);
    } else {
        const envlog_kernel_entry *k = e->kernel;
        dput(d, "{\"type\":\"entry\",\"schema_version\":1,\"table\":\"kernel\",\"namespace\":");
        dstr(d, k->ns);
        dput(d, ",\"kernel_key\":");
        dhex(d, k->kernel_key.b, 16);
        dput(d, ",\"name\":");
        dstr(d, k->name);
        dput(d, ",\"arch\":");
        dstr(d, k->arch);
        dput(d, ",\"binary_hash\":");
        dhex(d, k->binary_hash.b, 16);
        snprintf(buf, sizeof buf, ",\"binary_size\":%zu,\"origin\":\"%s\"",
                 k->binary.size, k->origin == ENVLOG_IMPORTED ? "imported" : "local");
        dput(d, buf);
        dstamp(d, &k->stamp);
    }
    dput(d, "}\n");
    return d->failed;
}

envlog_err envlog_state_dump(envlog_state *st, envlog_write_fn fn, void *ctx)
{
    dump_ctx d = {fn, ctx, ENVLOG_OK};
    envlog_err e = envlog_state_each(st, dump_entry, &d);
    if (e)
        return e;
    pthread_rwlock_rdlock(&st->lock);
    for (size_t i = 0; !d.failed && i < st->n_users; i++) {
        dput(&d, "{\"type\":\"entry\",\"schema_version\":1,\"table\":\"user\",\"kind\":");
        dstr(&d, st->users[i].kind);
        dput(&d, ",\"body_cbor\":");
        dhex(&d, st->users[i].body, st->users[i].size);
        dstamp(&d, &st->users[i].stamp);
        dput(&d, "}\n");
    }
    pthread_rwlock_unlock(&st->lock);
    return d.failed;
}

/* ------------------------------------------------------- for snapshots */

envlog_err envlog_state_items(envlog_state *st,
                              envlog_err (*fn)(void *ctx, const envlog_state_item *it),
                              void *ctx)
{
    pthread_rwlock_wrlock(&st->lock);
    envlog_err e = load_all(st);
    entry **v = NULL;
    size_t n = 0;
    if (!e)
        e = sorted(st, &v, &n);
    for (size_t i = 0; !e && i < n; i++) {
        const entry *x = v[i];
        envlog_state_item it = {
            .table = (int)x->table,
            .origin = (int)(x->table == ENVLOG_TABLE_TUNE ? x->t.origin : x->k.origin),
            .rule = (int)(x->table == ENVLOG_TABLE_TUNE ? x->t.rule : x->k.rule),
            .stamp = x->table == ENVLOG_TABLE_TUNE ? x->t.stamp : x->k.stamp,
            .unix_ns = x->unix_ns,
            .ns = x->table == ENVLOG_TABLE_TUNE ? x->t.ns : x->k.ns,
            .key_hash = x->hash,
            .payload = {x->payload, x->payload_len},
        };
        e = fn(ctx, &it);
    }
    for (size_t i = 0; !e && i < st->n_users; i++) {
        const user_rec *u = &st->users[i];
        envlog_state_item it = {.table = ENVLOG_TABLE_USER, .stamp = u->stamp,
                                .unix_ns = u->unix_ns, .ns = "",
                                .payload = {u->payload, u->payload_len}};
        e = fn(ctx, &it);
    }
    envlog_free(v);
    pthread_rwlock_unlock(&st->lock);
    return e;
}

/* ------------------------------------------------------------- digest */

static envlog_err digest_write(void *ctx, const char *text, size_t len)
{
    envlog_h128_update(ctx, text, len);
    return ENVLOG_OK;
}

static envlog_err digest_rule(void *ctx, const envlog_entry *e)
{
    uint8_t r = (uint8_t)(e->tune ? e->tune->rule : e->kernel->rule);
    envlog_h128_update(ctx, &r, 1);
    return ENVLOG_OK;
}

envlog_err envlog_state_digest(envlog_state *st, envlog_hash128 *out)
{
    envlog_h128 h;
    envlog_err e = envlog_h128_begin(&h);
    if (e)
        return e;
    if (!(e = envlog_state_dump(st, digest_write, &h)) &&
        !(e = envlog_state_each(st, digest_rule, &h))) {
        *out = envlog_h128_end(&h);
        return ENVLOG_OK;
    }
    envlog_h128_free(&h);
    return e;
}
