/* SPDX-License-Identifier: MIT */
/*
 * writer.c - the process the kill -9 loop kills.
 *
 *   crash-writer ENVDIR SEED [MAX_RECORDS]
 *
 * Opens (creating) ENVDIR and records generated tunes, compiles and marks
 * (tests/crash/crash.h) in one session after another, each with its own
 * level, sync policy, segment size and one or two recording threads; now
 * and then it flushes, or compacts the environment between sessions (and
 * its session ends compact it on their own, all history kept).  After
 * every recording call that returned ENVLOG_OK it writes one crash_ack to
 * file descriptor 3, so whoever kills it knows exactly what was
 * acknowledged.  It stops after MAX_RECORDS records (default 4000).
 * Public API only.
 */
#include "crash.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

static uint64_t seed;
static uint64_t max_records = 4000;
static _Atomic uint64_t next_n;
static pthread_mutex_t ack_mu = PTHREAD_MUTEX_INITIALIZER;

static void die(const char *what, envlog_err e)
{
    fprintf(stderr, "crash-writer: %s: %s (%s)\n", what, envlog_errmsg(), envlog_strerror(e));
    exit(2);
}

static void send_ack(const crash_ack *a)
{
    pthread_mutex_lock(&ack_mu);
    ssize_t w;
    do
        w = write(3, a, sizeof *a);
    while (w < 0 && errno == EINTR);
    pthread_mutex_unlock(&ack_mu);
    if (w != (ssize_t)sizeof *a)
        exit(3); /* nobody is listening any more */
}

typedef struct job {
    envlog_session *s;
    int level;
    envlog_sync sync;
    unsigned records;
    uint64_t rng;
} job;

static void *record_some(void *arg)
{
    job *j = arg;
    for (unsigned i = 0; i < j->records; i++) {
        uint64_t n = atomic_fetch_add(&next_n, 1);
        if (n >= max_records)
            break;
        crash_rec r;
        crash_make(&r, seed, n, j->level, true);
        envlog_stamp st;
        envlog_err e = crash_record(j->s, &r, &st);
        if (e)
            die("recording", e);
        envlog_session_stats ss;
        envlog_session_stats_get(j->s, &ss);
        crash_ack a = {.seq = st.seq, .seed = seed, .n = n,
                       .hash = crash_hash_made(&r, j->level), .kind = (uint8_t)r.kind,
                       .level = (uint8_t)j->level, .on_disk = ss.on_disk,
                       .synced = j->sync == ENVLOG_SYNC_RECORD && ss.on_disk};
        memcpy(a.session, st.session.b, 16);
        crash_rec_free(&r);
        send_ack(&a);
        if (crash_mix(&j->rng) % 97 == 0 && (e = envlog_session_flush(j->s)))
            die("flushing", e);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: crash-writer ENVDIR SEED [MAX_RECORDS]\n");
        return 2;
    }
    seed = strtoull(argv[2], NULL, 10);
    if (argc == 4)
        max_records = strtoull(argv[3], NULL, 10);
    alarm(60); /* never outlive a broken driver for long */
    envlog_env *env;
    envlog_err e = envlog_env_open(argv[1], ENVLOG_OPEN_CREATE, &env);
    if (e)
        die("opening the environment", e);
    /* Every record must stay readable, so the checker finds each one: the
     * compactions its session ends start on their own (every 4 sessions)
     * keep all of the history, as the ones it runs itself do. */
    envlog_config cfg;
    envlog_config_defaults(&cfg);
    cfg.evidence = ENVLOG_EVIDENCE_ALL;
    cfg.history_sessions = 0;
    if ((e = envlog_config_write(env, &cfg)))
        die("writing the config", e);
    uint64_t rng = seed ^ 0x5bd1e995u;
    static const uint64_t segsizes[] = {2 * 32768, 4 * 32768, 1u << 20, 0};
    while (atomic_load(&next_n) < max_records) {
        envlog_session_opts o;
        envlog_session_opts_init(&o);
        o.label = "crash";
        o.level = crash_mix(&rng) % 4 == 0 ? ENVLOG_LEVEL_FULL : ENVLOG_LEVEL_BASIC;
        uint64_t sy = crash_mix(&rng) % 8;
        o.sync = sy < 2 ? ENVLOG_SYNC_NONE : sy < 6 ? ENVLOG_SYNC_CLOSE : ENVLOG_SYNC_RECORD;
        o.segment_size = segsizes[crash_mix(&rng) % 4];
        o.pending_budget = 64u << 20; /* nothing held is ever dropped */
        envlog_session *s;
        if ((e = envlog_session_begin(env, &o, &s)))
            die("beginning a session", e);
        int threads = crash_mix(&rng) % 4 == 0 ? 2 : 1;
        unsigned per = 1 + (unsigned)(crash_mix(&rng) % 300);
        job jobs[2];
        pthread_t tid[2];
        for (int t = 0; t < threads; t++) {
            jobs[t] = (job){s, (int)o.level, o.sync, per, crash_mix(&rng)};
            if (threads == 1)
                record_some(&jobs[t]);
            else if (pthread_create(&tid[t], NULL, record_some, &jobs[t]))
                die("starting a thread", ENVLOG_OK);
        }
        for (int t = 0; threads > 1 && t < threads; t++)
            pthread_join(tid[t], NULL);
        if ((e = envlog_session_end(s)))
            die("ending a session", e);
        if (crash_mix(&rng) % 10 == 0) {
            /* All evidence: every record stays readable, so the checker
             * finds each acknowledged one in the snapshot or its session. */
            e = envlog_compact(env, ENVLOG_EVIDENCE_ALL, NULL);
            if (e && e != ENVLOG_BUSY)
                die("compacting", e);
        }
    }
    envlog_env_close(env);
    return 0;
}
