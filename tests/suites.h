/* SPDX-License-Identifier: MIT */
/*
 * suites.h - one Check suite per module, each from tests/check_<module>.c.
 * To add a suite: declare it here and add one line to runner.c's table.
 */
#ifndef ENVLOG_SUITES_H
#define ENVLOG_SUITES_H

#include <check.h>

Suite *suite_core(void);    /* check_core.c: codec, renderers, allocation */
Suite *suite_log(void);     /* check_log.c: framing, reader, damage */
Suite *suite_session(void); /* check_session.c: recorder, effects, faults,
                               processes and threads */
Suite *suite_replay(void);  /* check_replay.c: order, fold rules, state, damage */

Suite *suite_snapshot(void); /* check_snapshot.c: compaction, bundles, hostile input */
Suite *suite_upkeep(void);   /* check_upkeep.c: config, automatic compaction,
                                retention, forget by prefix, size bound */
Suite *suite_cuda(void);     /* check_cuda*.c: NVRTC, modes, statistics, tuner, GPU */
Suite *suite_reliability(void); /* check_reliability.c: power loss, faults, full
                                   disk, security */

#endif /* ENVLOG_SUITES_H */
