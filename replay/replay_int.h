/* SPDX-License-Identifier: MIT */
/*
 * replay_int.h - the replay module: the total order over all sessions, the
 * fold into the cache state, lookups and the canonical dump.  replay reads
 * the log through log's reader; log never calls replay except through the
 * environment's state hook.
 */
#ifndef ENVLOG_REPLAY_INT_H
#define ENVLOG_REPLAY_INT_H

#include "log_int.h"

/* Folds one record into `st` (the state's lock must be held for writing).
 * `unix_ns` is the record's time on the common axis. */
envlog_err envlog_state_fold(envlog_state *st, const envlog_record *rec,
                             uint64_t unix_ns);

/* A state with nothing folded yet. */
envlog_err envlog_state_new(envlog_state **st);

/* Write-locks / unlocks a state. */
void envlog_state_wrlock(envlog_state *st);
void envlog_state_unlock(envlog_state *st);

/* Compares two replay positions: (unix_ns, session id, seq). */
int envlog_order_cmp(uint64_t a_ns, const envlog_id128 *a_id, uint64_t a_seq,
                     uint64_t b_ns, const envlog_id128 *b_id, uint64_t b_seq);

#endif /* ENVLOG_REPLAY_INT_H */
