/* SPDX-License-Identifier: MIT */
/*
 * bundle_cols.h - the column image of a format 2 bundle (envlog(5),
 * BUNDLES, "Format 2"): a snapshot's records without their framing, the
 * bytes of every CBOR item sent to a column by where the item sits in its
 * record, unsigned integers as differences from the one before in their
 * column.  The image is a lossless transform of the snapshot file: the
 * framing follows from the records and the snapshot's id, so decoding
 * gives back the snapshot byte for byte, and its hash says so.
 */
#ifndef ENVLOG_BUNDLE_COLS_H
#define ENVLOG_BUNDLE_COLS_H

#include "replay_int.h"

/* The skippable zstd frame a format 2 bundle begins with: its magic
 * (0x184D2A5E, little-endian), its length (16), "envlog-bundle", a zero
 * byte and the format version (u16le). */
#define ENVLOG_BUNDLE_MARK_LEN 24
#define ENVLOG_BUNDLE_FORMAT 2

/* The image's fixed header (before the column lengths). */
#define ENVLOG_COLS_MAGIC "envlogc2"
#define ENVLOG_COLS_HDR 64
/* The context depth envlog writes, and the limits a reader keeps. */
#define ENVLOG_COLS_DEPTH 3
#define ENVLOG_COLS_DEPTH_MAX 64
#define ENVLOG_COLS_CONTEXTS_MAX 4096
#define ENVLOG_COLS_MAX (2 * ENVLOG_COLS_CONTEXTS_MAX)

/* Writing: the snapshot's bytes go in as a snapshot writer's sink hands
 * them out (envlog_cols_sink()); envlog_cols_finish() then hands the image
 * out in pieces, its size first. */
typedef struct envlog_cols_enc envlog_cols_enc;

envlog_err envlog_cols_enc_new(envlog_cols_enc **out);
void envlog_cols_enc_free(envlog_cols_enc *c);
/* A sink (replay_int.h) feeding `c`. */
envlog_sink envlog_cols_sink(envlog_cols_enc *c);
/* The image: `begin` hears its size, `write` its bytes in order; the
 * columns are freed as they go.  ENVLOG_BAD_DATA when what went in was not
 * a whole snapshot in envlog's framing. */
envlog_err envlog_cols_finish(envlog_cols_enc *c, const envlog_sink *out);

/* Reading: the snapshot an image of `n` bytes holds, into *out (n_out
 * bytes; free with envlog_free()).  Memory grows with the bytes the image
 * really gives, never with what it states.  @return ENVLOG_OK;
 * ENVLOG_BAD_DATA naming what is wrong (a column that ends early or holds
 * more, a count or length that lies, a hash that does not match);
 * ENVLOG_TOO_BIG (it states more than ENVLOG_BUNDLE_MAX_SIZE); ENVLOG_NOMEM. */
envlog_err envlog_cols_decode(const uint8_t *img, size_t n, uint8_t **out, size_t *n_out);

/* envlog_cols_decode() that keeps of the snapshot only what a load
 * without the full check reads: the same checks and verdicts, each record
 * framed into memory used again once its bytes are hashed, so that a
 * check of a large image touches a window of memory, not the whole
 * snapshot's.  *snap: *size bytes of address space (free with
 * envlog_unreserve(*snap, *size)) holding the snapshot's head (HEADER,
 * MANIFEST, INDEX) and its last block(s) (the SEAL) where they lie, never
 * a page between them. */
envlog_err envlog_cols_check(const uint8_t *img, size_t n, uint8_t **snap, uint64_t *size);

/* Where envlog_cols_decode_to() writes the snapshot while it decodes it,
 * for a reader that follows it: `room` gives memory for all `size` bytes
 * the image states (written in order, never moved; NULL: no memory), and
 * `made` hears how many are written after each record.  The memory stays
 * the caller's, on failure too. */
typedef struct envlog_cols_out {
    uint8_t *(*room)(void *ctx, uint64_t size);
    void (*made)(void *ctx, uint64_t written);
    void *ctx;
} envlog_cols_out;

/* envlog_cols_decode() into `to`'s memory (or, `to` NULL, its own, freed
 * with envlog_free()): *out, *n_out the snapshot on success. */
envlog_err envlog_cols_decode_to(const uint8_t *img, size_t n, const envlog_cols_out *to,
                                 uint8_t **out, uint64_t *n_out);

#endif /* ENVLOG_BUNDLE_COLS_H */
