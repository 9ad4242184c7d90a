/* SPDX-License-Identifier: MIT */
/*
 * check_snapshot.h - what the two files of the snapshot suite share:
 * check_snapshot.c (compaction, bundles, hostile input),
 * check_snapshot_trust.c (the snapshot held to the log's standard:
 * generations, damage catalogues, one reader, planted files) and
 * check_bundle2.c (bundle format 2).
 */
#ifndef ENVLOG_CHECK_SNAPSHOT_H
#define ENVLOG_CHECK_SNAPSHOT_H

#include "replay_int.h"
#include "testutil.h"

/* A session of `env` with every fold rule in it (round picks the keys). */
void sn_populate(envlog_env *env, int round);
/* Asserts that every entry of each state stands in the other with the
 * same winner or binary; returns how many there are. */
size_t sn_compare_states(envlog_state *a, envlog_state *b);
/* The canonical dump of the environment at `dir`, standing on
 * snapshot/`base` (NULL: the generation readers pick); caller frees. */
char *sn_dump(const char *dir, const char *base);
/* The tcases of check_snapshot_trust.c and check_bundle2.c. */
void sn_add_trust_tcases(Suite *s);
void sn_add_bundle2_tcases(Suite *s);

#endif /* ENVLOG_CHECK_SNAPSHOT_H */
