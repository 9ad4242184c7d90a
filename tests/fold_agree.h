/* SPDX-License-Identifier: MIT */
/*
 * fold_agree.h - whether the fold's reading of a record gives the values the
 * full reader's gives, field by field of the fields the fold reads, and
 * whether two full readings give the same record: shared by the unit tests
 * (check_core) and the event fuzzer (fuzz_event), which hold the readers'
 * own path for the encoder's shape (decode.c, fold_fast) to the walk of a
 * record's map (envlog_decode_walk_only).
 */
#ifndef ENVLOG_FOLD_AGREE_H
#define ENVLOG_FOLD_AGREE_H

#include "core_int.h"

#include <stdbool.h>
#include <string.h>

/* The bytes a fold field of type `f` takes in the struct; 0 for texts and
 * arrays, compared apart. */
static inline size_t fold_agree_size(const envlog_field *f)
{
    switch ((envlog_fty)f->type) {
    case ENVLOG_F_U64:
    case ENVLOG_F_I64: return 8;
    case ENVLOG_F_U32: return 4;
    case ENVLOG_F_ENUM: return sizeof(int);
    case ENVLOG_F_F64: return sizeof(double);
    case ENVLOG_F_BOOL: return sizeof(bool);
    case ENVLOG_F_H128: return 16;
    case ENVLOG_F_BYTES:
    case ENVLOG_F_RAW:
    case ENVLOG_F_RECORD: return sizeof(envlog_bytes);
    case ENVLOG_F_STAMP: return sizeof(envlog_stamp);
    default: return 0;
    }
}

static inline bool fold_agree_text(const char *a, const char *b)
{
    return a && b ? !strcmp(a, b) : a == b;
}

/* The name of the first field (or "the envelope") in which `got` (its
 * texts in `sl`, or as strings when `sl` is NULL) differs from `want`, the
 * full reader's record of a kind with a detail; NULL when none does. */
static inline const char *fold_agree(const envlog_record *got, const envlog_text *sl,
                                     const envlog_record *want)
{
    const envlog_schema *s = envlog_schema_of(want->kind);
    if (got->kind != want->kind || got->effect != want->effect ||
        got->stamp.seq != want->stamp.seq || got->stamp.offset_ns != want->stamp.offset_ns)
        return "the envelope";
    for (size_t i = 0; s && i < s->n_fields && s->fields[i].fold; i++) {
        const envlog_field *f = &s->fields[i];
        const char *pg = (const char *)&got->u + f->off, *pw = (const char *)&want->u + f->off;
        if (f->type == ENVLOG_F_TEXT) {
            const char *w = *(const char *const *)pw;
            bool same = !sl ? fold_agree_text(*(const char *const *)pg, w)
                        : w ? sl[i].p && sl[i].n == strlen(w) && !memcmp(sl[i].p, w, sl[i].n)
                            : !sl[i].p;
            if (!same)
                return f->name;
        } else if (f->count_off) {
            size_t n = *(const size_t *)((const char *)&want->u + f->count_off);
            if (*(const size_t *)((const char *)&got->u + f->count_off) != n)
                return f->name;
            const char *const *g = *(const char *const *const *)pg,
                              *const *w = *(const char *const *const *)pw;
            for (size_t k = 0; !sl && f->type == ENVLOG_F_TEXTS && k < n; k++)
                if (!fold_agree_text(g[k], w[k]))
                    return f->name;
        } else {
            size_t n = fold_agree_size(f);
            if (!n || memcmp(pg, pw, n))
                return f->name;
        }
    }
    return NULL;
}

/* Whether two full readings of a record are the same record: both encoded
 * again (every field, the detail's included) to the same bytes, or refused
 * by the encoder alike, with the same detail problem. */
static inline bool fold_agree_whole(const envlog_record *a, const envlog_record *b)
{
    envlog_buf x = {0}, y = {0};
    envlog_err ex = envlog_event_encode(&x, a->kind, &a->stamp, a->effect, ENVLOG_LEVEL_FULL,
                                        &a->u);
    envlog_err ey = envlog_event_encode(&y, b->kind, &b->stamp, b->effect, ENVLOG_LEVEL_FULL,
                                        &b->u);
    bool same = a->kind == b->kind && ex == ey &&
                (ex || (x.len == y.len && !memcmp(x.p, y.p, x.len))) &&
                fold_agree_text(a->detail_problem, b->detail_problem);
    envlog_buf_free(&x);
    envlog_buf_free(&y);
    return same;
}

#endif /* ENVLOG_FOLD_AGREE_H */
