/* SPDX-License-Identifier: MIT */
/*
 * snapfmt.c - what a snapshot's records are (envlog(5), SNAPSHOTS): the
 * schemas of the MANIFEST, ENTRY/EVIDENCE and INDEX records and the key
 * hash the INDEX sorts by.  The writer (snapwrite.c) and the readers
 * (snapshot.c, snapindex.c, snapread.c) take them from here, so they
 * cannot disagree.
 */
#include "replay_int.h"

#include <string.h>

#define NOPRES SIZE_MAX
#define FLD(k, ty, nm, st, mem)                                                \
    {k, ty, 0, nm, offsetof(st, mem), 0, NOPRES, NULL, NULL, 0, 0, 0}
#define ARRF(k, ty, nm, st, mem, cnt, sub)                                     \
    {k, ty, 0, nm, offsetof(st, mem), offsetof(st, cnt), NOPRES, sub, NULL, 0, 0, 0}
#define ENUMF(k, nm, st, mem, names)                                           \
    {k, ENVLOG_F_ENUM, 0, nm, offsetof(st, mem), 0, NOPRES, NULL, names, 0, 0, 0}
#define SCHEMA(var, nm, st, tab)                                               \
    static const envlog_schema var = {nm, sizeof(st), tab, sizeof tab / sizeof tab[0], 0, 0}
#define PUB_SCHEMA(var, nm, st, tab)                                           \
    const envlog_schema var = {nm, sizeof(st), tab, sizeof tab / sizeof tab[0], 0, 0}

static const envlog_field env_f[] = {
    FLD(0, ENVLOG_F_TEXT, "label", envlog_snap_env, label),
    FLD(1, ENVLOG_F_TEXT, "host", envlog_snap_env, host),
    FLD(2, ENVLOG_F_TEXT, "os", envlog_snap_env, os),
    FLD(3, ENVLOG_F_TEXT, "arch", envlog_snap_env, arch),
    ARRF(4, ENVLOG_F_TEXTS, "devices", envlog_snap_env, devices, n_devices, NULL),
};
SCHEMA(env_s, "environment", envlog_snap_env, env_f);

static const envlog_field wm_f[] = {
    FLD(0, ENVLOG_F_H128, "session", envlog_snap_wm, session),
    FLD(1, ENVLOG_F_U64, "last_seq", envlog_snap_wm, last_seq),
    FLD(2, ENVLOG_F_BOOL, "complete", envlog_snap_wm, complete),
};
SCHEMA(wm_s, "watermark", envlog_snap_wm, wm_f);

static const envlog_field source_f[] = {
    FLD(0, ENVLOG_F_TEXT, "path", envlog_snap_source, path),
    FLD(1, ENVLOG_F_U64, "sessions", envlog_snap_source, sessions),
    FLD(2, ENVLOG_F_U64, "records", envlog_snap_source, records),
};
SCHEMA(source_s, "source", envlog_snap_source, source_f);

static const char *const evidence_names[] = {"none", "winners", "all", NULL};
static const char *const table_names[] = {"tune", "kernel", "user", NULL};
static const char *const origin_names[] = {"local", "imported", NULL};
static const char *const rule_names[] = {"first-local", "local-over-imported", "imported",
                                         "forgotten", "not-stored", "kept-first",
                                         "import-ignored", NULL};

static const envlog_field manifest_f[] = {
    FLD(0, ENVLOG_F_U64, "kind", envlog_snap_manifest, kind),
    FLD(4, ENVLOG_F_U64, "schema", envlog_snap_manifest, schema),
    FLD(5, ENVLOG_F_TEXT, "name", envlog_snap_manifest, name),
    FLD(6, ENVLOG_F_TEXT, "envlog_version", envlog_snap_manifest, envlog_version),
    FLD(7, ENVLOG_F_U64, "created_unix_ns", envlog_snap_manifest, created_unix_ns),
    ARRF(8, ENVLOG_F_TEXTS, "runtimes", envlog_snap_manifest, runtimes, n_runtimes, NULL),
    ARRF(9, ENVLOG_F_OBJS, "environments", envlog_snap_manifest, envs, n_envs, &env_s),
    ARRF(10, ENVLOG_F_OBJS, "sessions", envlog_snap_manifest, wms, n_wms, &wm_s),
    FLD(11, ENVLOG_F_U64, "tunes", envlog_snap_manifest, tunes),
    FLD(12, ENVLOG_F_U64, "kernels", envlog_snap_manifest, kernels),
    FLD(13, ENVLOG_F_U64, "users", envlog_snap_manifest, users),
    FLD(14, ENVLOG_F_U64, "evidence", envlog_snap_manifest, evidence),
    FLD(15, ENVLOG_F_H128, "content_hash", envlog_snap_manifest, content_hash),
    ENUMF(16, "evidence_level", envlog_snap_manifest, evidence_level, evidence_names),
    ARRF(17, ENVLOG_F_TEXTS, "namespaces", envlog_snap_manifest, namespaces,
         n_namespaces, NULL),
    FLD(18, ENVLOG_F_TEXT, "compacted_by", envlog_snap_manifest, compacted_by),
    ARRF(19, ENVLOG_F_OBJS, "sources", envlog_snap_manifest, sources, n_sources, &source_s),
};
PUB_SCHEMA(envlog_snap_manifest_schema, "manifest", envlog_snap_manifest, manifest_f);

static const envlog_field item_f[] = {
    FLD(0, ENVLOG_F_U64, "kind", envlog_snap_item, kind),
    ENUMF(4, "table", envlog_snap_item, table, table_names),
    ENUMF(5, "origin", envlog_snap_item, origin, origin_names),
    FLD(6, ENVLOG_F_STAMP, "stamp", envlog_snap_item, stamp),
    FLD(7, ENVLOG_F_U64, "unix_ns", envlog_snap_item, unix_ns),
    FLD(8, ENVLOG_F_RECORD, "record", envlog_snap_item, record),
    ENUMF(9, "rule", envlog_snap_item, rule, rule_names),
};
PUB_SCHEMA(envlog_snap_item_schema, "entry", envlog_snap_item, item_f);

static const envlog_field index_f[] = {
    FLD(0, ENVLOG_F_U64, "kind", envlog_snap_index, kind),
    FLD(4, ENVLOG_F_U64, "count", envlog_snap_index, count),
    FLD(5, ENVLOG_F_BYTES, "pairs", envlog_snap_index, pairs),
};
PUB_SCHEMA(envlog_snap_index_schema, "index", envlog_snap_index, index_f);

void envlog_put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}


uint64_t envlog_entry_key_hash_n(envlog_table table, const char *ns, size_t ns_len,
                                 const void *key, size_t key_len, uint64_t checksum)
{
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(checksum >> (8 * i));
    /* The namespace with its NUL, as envlog(5) INDEX hashes it. */
    char buf[512];
    uint64_t h;
    if (ns_len < sizeof buf) {
        memcpy(buf, ns, ns_len);
        buf[ns_len] = 0;
        h = envlog_xxh64(buf, ns_len + 1, (uint64_t)table);
    } else {
        h = envlog_xxh64_2(ns, ns_len, "", 1, (uint64_t)table);
    }
    h = envlog_xxh64(key, key_len, h);
    return envlog_xxh64(le, sizeof le, h);
}

uint64_t envlog_entry_key_hash(envlog_table table, const char *ns, const void *key,
                               size_t key_len, uint64_t checksum)
{
    return envlog_entry_key_hash_n(table, ns, strlen(ns), key, key_len, checksum);
}

int envlog_snap_pair_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

static uint64_t pair_hash(const void *p)
{
    return envlog_get_be64(p);
}

void envlog_snap_pairs_sort(uint8_t *pairs, size_t n)
{
    static const envlog_sort_key by[] = {pair_hash};
    envlog_sort_keyed(pairs, n, 16, by, 1, envlog_snap_pair_cmp, false);
}

/* The total order of REPLAY, which a snapshot's records follow too. */
int envlog_order_cmp(uint64_t a_ns, const envlog_id128 *a_id, uint64_t a_seq,
                     uint64_t b_ns, const envlog_id128 *b_id, uint64_t b_seq)
{
    if (a_ns != b_ns)
        return a_ns < b_ns ? -1 : 1;
    int c = memcmp(a_id->b, b_id->b, 16);
    if (c)
        return c < 0 ? -1 : 1;
    return a_seq < b_seq ? -1 : a_seq > b_seq;
}

