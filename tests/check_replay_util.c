/* SPDX-License-Identifier: MIT */
/*
 * check_replay_util.c - the helpers of the replay suite (check_replay.c and
 * check_replay_history.c): environments in the runner's temporary root,
 * recording calls that assert success, lookups that assert what stands,
 * dumps to memory, directory listings and the total order as replay gives
 * it.  It holds no test of its own.
 */
#include "check_replay.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *const SET_A[3] = {"a", "b", "c"};
const char *const SET_B[3] = {"a", "b", "d"};

void rp_settle(void)
{
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

void rp_nap_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

rp_renv rp_renv_bare(const char *tag)
{
    rp_renv r;
    r.dir = tu_mkdtemp(tag);
    r.env = tu_env(r.dir);
    return r;
}

rp_renv rp_renv_new(const char *tag)
{
    rp_renv r = rp_renv_bare(tag);
    /* A compaction in a detached process, started by a session end when
     * it pleases, would race every test that reads or copies session
     * directories: tests of automatic compaction turn it on themselves. */
    envlog_config c;
    envlog_config_defaults(&c);
    c.auto_compact = false;
    ck_assert_ok(envlog_config_write(r.env, &c));
    return r;
}

void rp_renv_free(rp_renv *r)
{
    envlog_env_close(r->env);
    free(r->dir);
    r->env = NULL;
    r->dir = NULL;
}

envlog_session *rp_sbegin(envlog_env *env, const char *label, uint64_t seg)
{
    envlog_session_opts o = tu_opts(label, seg);
    o.sync = ENVLOG_SYNC_NONE;
    envlog_session *s;
    ck_assert_ok(envlog_session_begin(env, &o, &s));
    return s;
}

uint64_t rp_csum(const char *const *set)
{
    return envlog_tune_checksum(set, 3);
}

envlog_stamp rp_rtune_full(envlog_session *s, const char *ns, const char *key,
                           const char *const *set, int64_t winner, bool stored,
                           bool imported)
{
    envlog_trial tr[3];
    for (uint32_t i = 0; i < 3; i++)
        tr[i] = (envlog_trial){.name = set[i], .index = i, .samples = 5,
                               .min_ns = 100 + i, .median_ns = 110 + i,
                               .mean_ns = 111 + i, .max_ns = 130 + i,
                               .stddev_ns = 1};
    envlog_tune t = {.ns = ns, .key = key, .checksum = rp_csum(set),
                     .candidates = set, .n_candidates = 3, .trials = tr,
                     .n_trials = 3, .policy = "test", .winner = winner,
                     .margin = 0.25, .within_noise = false, .wall_ns = 1000,
                     .stored = stored};
    envlog_stamp st;
    ck_assert_ok(imported ? envlog_record_imported(s, ENVLOG_KIND_TUNE, &t, &st)
                          : envlog_record_tune(s, &t, &st));
    return st;
}

envlog_stamp rp_rtune(envlog_session *s, const char *ns, const char *key,
                      int64_t winner)
{
    return rp_rtune_full(s, ns, key, SET_A, winner, true, false);
}

envlog_hash128 rp_kkey(uint8_t id)
{
    envlog_hash128 h;
    for (int i = 0; i < 16; i++)
        h.b[i] = (uint8_t)(id * 17 + i);
    return h;
}

envlog_stamp rp_rcompile(envlog_session *s, const char *ns, uint8_t key,
                         envlog_outcome outcome, bool imported, uint8_t fill,
                         size_t size)
{
    uint8_t bin[256];
    ck_assert_uint_le(size, sizeof bin);
    for (size_t i = 0; i < size; i++)
        bin[i] = (uint8_t)(fill + i);
    char name[32];
    snprintf(name, sizeof name, "kernel_%u", key);
    envlog_compile c = {.ns = ns, .name = name, .kernel_key = rp_kkey(key),
                        .options = "-O3", .compiler_version = "12.4", .arch = "sm_90",
                        .outcome = outcome, .duration_ns = 10,
                        .binary_hash = envlog_hash128_bytes(bin, size),
                        .binary_size = size, .binary = {size ? bin : NULL, size}};
    envlog_stamp st;
    ck_assert_ok(imported ? envlog_record_imported(s, ENVLOG_KIND_COMPILE, &c, &st)
                          : envlog_record_compile(s, &c, &st));
    return st;
}

envlog_stamp rp_rforget(envlog_session *s, envlog_table table, const char *ns,
                        const char *key, uint64_t checksum)
{
    envlog_forget f = {table, ns, key, checksum, "test", NULL};
    envlog_stamp st;
    ck_assert_ok(envlog_record_forget(s, &f, &st));
    return st;
}

envlog_stamp rp_rforget_kernel(envlog_session *s, const char *ns, uint8_t key)
{
    char hex[33];
    envlog_hash128 k = rp_kkey(key);
    envlog_id_format(&k, hex);
    return rp_rforget(s, ENVLOG_TABLE_KERNEL, ns, hex, 0);
}

void rp_end(envlog_session *s)
{
    ck_assert_ok(envlog_session_end(s));
}

envlog_state *rp_sopen(envlog_env *env, const envlog_replay_opts *o)
{
    envlog_state *st;
    ck_assert_ok(envlog_state_open(env, o, &st));
    ck_assert_ptr_nonnull(st);
    return st;
}

bool rp_stamp_eq(const envlog_stamp *a, const envlog_stamp *b)
{
    return !memcmp(a->session.b, b->session.b, 16) && a->seq == b->seq &&
           a->offset_ns == b->offset_ns;
}


/* The winner of (ns, key, SET_A), asserting it stands. */
envlog_tune_entry rp_winner(envlog_state *st, const char *ns, const char *key)
{
    envlog_tune_entry e;
    ck_assert_ok(envlog_state_winner(st, ns, key, rp_csum(SET_A), &e));
    return e;
}

void rp_no_winner(envlog_state *st, const char *ns, const char *key,
                  uint64_t checksum)
{
    envlog_tune_entry e;
    ck_assert_err(envlog_state_winner(st, ns, key, checksum, &e), ENVLOG_NOT_FOUND);
}

envlog_kernel_entry rp_kernel(envlog_state *st, const char *ns, uint8_t key)
{
    envlog_kernel_entry e;
    envlog_hash128 k = rp_kkey(key);
    ck_assert_ok(envlog_state_kernel(st, ns, &k, &e));
    return e;
}

void rp_no_kernel(envlog_state *st, const char *ns, uint8_t key)
{
    envlog_kernel_entry e;
    envlog_hash128 k = rp_kkey(key);
    ck_assert_err(envlog_state_kernel(st, ns, &k, &e), ENVLOG_NOT_FOUND);
}

envlog_err rp_mem_write(void *ctx, const char *text, size_t len)
{
    return fwrite(text, 1, len, ctx) == len ? ENVLOG_OK : ENVLOG_IO;
}

/* The canonical dump as one string (caller frees). */
char *rp_dump_of(envlog_state *st)
{
    char *p = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&p, &n);
    ck_assert_ptr_nonnull(f);
    ck_assert_ok(envlog_state_dump(st, rp_mem_write, f));
    ck_assert_int_eq(fclose(f), 0);
    return p;
}

char *rp_dump_env(envlog_env *env, const envlog_replay_opts *o)
{
    envlog_state *st = rp_sopen(env, o);
    char *d = rp_dump_of(st);
    envlog_state_close(st);
    return d;
}

envlog_state_stats rp_stats(envlog_state *st)
{
    envlog_state_stats s;
    envlog_state_stats_get(st, &s);
    return s;
}

/* Sorted names in a directory (no dot entries); caller frees each and v. */
size_t rp_list_dir(const char *dir, char ***out)
{
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "opendir %s: %s", dir, strerror(errno));
    char **v = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        v = realloc(v, (n + 1) * sizeof *v);
        ck_assert_ptr_nonnull(v);
        v[n++] = strdup(de->d_name);
    }
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && strcmp(v[k - 1], v[k]) > 0; k--) {
            char *t = v[k];
            v[k] = v[k - 1];
            v[k - 1] = t;
        }
    *out = v;
    return n;
}

void rp_free_names(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

char *rp_session_dir(const char *envdir, const envlog_id128 *id)
{
    char hex[33], *p;
    envlog_id_format(id, hex);
    ck_assert_int_ge(asprintf(&p, "%s/sessions/%s", envdir, hex), 0);
    return p;
}

/* The file of segment `seg` of session `id`. */
char *rp_segment_file(const char *envdir, const envlog_id128 *id, uint32_t seg)
{
    char *dir = rp_session_dir(envdir, id), **names, *found = NULL, prefix[16];
    size_t n = rp_list_dir(dir, &names);
    snprintf(prefix, sizeof prefix, "%08u-", seg);
    for (size_t i = 0; i < n; i++)
        if (!strncmp(names[i], prefix, strlen(prefix)) && strstr(names[i], ".log") &&
            !strstr(names[i], ".broken"))
            ck_assert_int_ge(asprintf(&found, "%s/%s", dir, names[i]), 0);
    ck_assert_msg(found != NULL, "no segment %u in %s", seg, dir);
    rp_free_names(names, n);
    free(dir);
    return found;
}

/* One record as the total order gave it. */
envlog_err rp_collect(void *ctx, const envlog_replay_rec *r)
{
    rp_placed_list *l = ctx;
    l->v = realloc(l->v, (l->n + 1) * sizeof *l->v);
    ck_assert_ptr_nonnull(l->v);
    rp_placed *p = &l->v[l->n++];
    p->id = r->rec->stamp.session;
    p->seq = r->rec->stamp.seq;
    p->unix_ns = r->unix_ns;
    p->kind = r->rec->kind;
    p->segment = r->rec->segment;
    p->file_offset = r->rec->file_offset;
    p->file_end = r->rec->file_end;
    p->size = r->rec->payload.size;
    p->payload = malloc(p->size ? p->size : 1);
    memcpy(p->payload, r->rec->payload.data, p->size);
    return ENVLOG_OK;
}

rp_placed_list rp_order_of(envlog_env *env, const envlog_replay_opts *o)
{
    rp_placed_list l = {0};
    ck_assert_ok(envlog_replay_each(env, o, rp_collect, &l));
    return l;
}

void rp_placed_free(rp_placed_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].payload);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* Damage reports collected through on_damage. */
void rp_on_dmg(void *ctx, const envlog_damage *d, bool torn)
{
    rp_dmg_list *l = ctx;
    if (l->n < 32) {
        l->d[l->n] = *d;
        l->torn[l->n] = torn;
    }
    l->n++;
}

