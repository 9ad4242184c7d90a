/* SPDX-License-Identifier: MIT */
/*
 * verify.h - checking an environment against what its writers
 * acknowledged (verify.c).
 */
#ifndef ENVLOG_CRASH_VERIFY_H
#define ENVLOG_CRASH_VERIFY_H

#include "crash.h"

/* A growable list of acknowledgements. */
typedef struct crash_acks {
    crash_ack *a;
    size_t n, cap;
} crash_acks;

void crash_acks_add(crash_acks *s, const crash_ack *a);
void crash_acks_free(crash_acks *s);

typedef struct crash_verdict {
    bool corrupt_allowed;  /* in: damage other than a torn tail is no failure */
    uint64_t records;      /* records replay handed out */
    uint64_t torn;         /* torn tails reported */
    uint64_t corrupt;      /* other damage reported */
    uint64_t bad_records;  /* records that differ from what was recorded */
    uint64_t promised;     /* acknowledged records that must be there */
    uint64_t missing;      /* promised records not there (or not as acked) */
} crash_verdict;

/* Replays the environment at `dir` (snapshot and sessions) and checks it
 * against `acks` (sorted in place).  `big` as for crash_make().  Prints the
 * first problems to stderr.  @return the number of problems. */
int crash_verify_env(const char *dir, crash_acks *acks, bool big, crash_verdict *v);

#endif /* ENVLOG_CRASH_VERIFY_H */
