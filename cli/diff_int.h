/* SPDX-License-Identifier: MIT */
/*
 * diff_int.h - what the files of `envlog diff` share: a side (an
 * environment or a bundle, its entries in canonical order and what its
 * history says), read by diff_side.c, paired by diff_pair.c and told by
 * cmd_diff.c; nothing else includes it.
 */
#ifndef ENVLOG_DIFF_INT_H
#define ENVLOG_DIFF_INT_H

#include "cli.h"

/* A forget in a side's history, to say why an entry is missing there. */
typedef struct gone {
    envlog_forget f; /* strings owned */
    uint64_t unix_ns;
} gone;

/* A tune record's wall time, to tell a standing entry's (by its stamp). */
typedef struct tune_time {
    envlog_stamp stamp;
    uint64_t wall_ns;
} tune_time;

typedef struct side {
    const char *path;
    envlog_env *env;
    envlog_state *st;
    envlog_entry *v;
    size_t n, cap;
    /* history */
    uint64_t sessions;
    char **runtimes, **devices;
    size_t n_runtimes, n_devices;
    gone *gone;
    size_t n_gone;
    tune_time *times;
    size_t n_times, cap_times;
    bool *paired; /* per entry: told with an entry of the other side */
} side;

/* ---------------------------------------------------------- diff_side.c */

/* Reads side `s` (s->path: an environment directory, a bundle, or "-"):
 * its entries in canonical order and its history.  @return EXIT_OK, or the
 * exit code after saying why; diff_side_close() frees it either way. */
int diff_side_open(side *s);
void diff_side_close(side *s);
/* The last forget of side `s` that removed an entry with e's key, or
 * NULL. */
const gone *diff_forgotten(const side *s, const envlog_entry *e);
/* The wall time of the tune that set `t` (0: not known, as for a bundle). */
uint64_t diff_wall_of(const side *s, const envlog_tune_entry *t);

/* ---------------------------------------------------------- diff_pair.c */

/* Namespace component `i` (0: the table) of `ns`, and its length. */
const char *diff_component(const char *ns, int i, size_t *len);
/* True when component `i` of namespaces `a` and `b` is the same. */
bool diff_same_component(const char *a, const char *b, int i);
/* Pairs the tunes only one side has with the other side's by the pairing
 * rule (envlog(1), diff), fewest differences first, ties to canonical
 * order: sets a->paired and b->paired, and b_of[i], A's entry i's partner
 * in B, or SIZE_MAX.  @return 0, or 1 out of memory. */
int diff_pair_up(side *a, side *b, const bool *only_a, const bool *only_b, size_t *b_of);

#endif /* ENVLOG_DIFF_INT_H */
