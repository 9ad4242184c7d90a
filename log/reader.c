/* SPDX-License-Identifier: MIT */
/*
 * reader.c - reading a session back, and the summary of every session.
 *
 * The reader walks a session's segments in order and checks what framing
 * alone cannot: each HEADER against the file name and the previous segment
 * (segment seq, first seq, chain value), each SEAL against what was read,
 * and seq continuity.  A torn tail (a partial record at the end of an
 * unsealed last segment whose writer is gone) is ENVLOG_TRUNCATED; any other
 * damage is ENVLOG_CORRUPT with its place, and reading resumes after it.  A
 * damaged record is never handed out.
 */
#include "log_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_MAX ((uint64_t)ENVLOG_SEGMENT_MAX + ENVLOG_RECORD_MAX + (1u << 20))

struct envlog_reader {
    envlog_id128 id;
    char name[33];
    int dirfd;
    bool live;
    envlog_seg_name *segs;
    size_t n_segs, cur;
    bool seg_open, seg_sealed, seg_header;
    bool header_ok;        /* the segment being read has a good HEADER */
    uint64_t seg_count;
    envlog_buf file;       /* the last segment, read */
    uint8_t *map;          /* an earlier segment, mapped */
    size_t map_len;
    envlog_buf copy[2];    /* windows of an earlier segment (map_segment):
                              the second only while one is held */
    int win_held;          /* the window a held record is in, -1: none
                              (envlog_reader_hold) */
    bool in_place;         /* earlier segments read from their mapping */
    size_t window;         /* the most read at a time, 0: the default */
    size_t dropped_to;     /* in place: the mapping's pages given back
                              below here (drop_behind) */
    const uint8_t *data;   /* the segment being read: file, map, or a
                              window of it (copy) */
    size_t data_len;
    bool windowed;         /* data is a window of the segment (copy) */
    uint64_t base;         /* data's offset in the segment (0 unless
                              windowed) */
    uint64_t seg_size;     /* the segment's size */
    int seg_fd;            /* open while windows of it are left to read */
    envlog_frame_reader fr;
    uint64_t chain;        /* across segments: events only */
    uint32_t expect_seg;
    bool have_seq;
    uint64_t last_seq;
    uint64_t dropped;      /* from the session record */
    envlog_record rec;
    envlog_arena arena;
    bool pending;          /* rec is ready, held back behind a damage report */
    envlog_damage dmg;
    bool damaged, torn, done;
    bool fold;
    uint64_t damaged_bytes;
    envlog_text slices[ENVLOG_FIELDS_MAX]; /* fold: the record's text fields */
    envlog_dec_memo memo;  /* fold: the candidates checked last */
    envlog_keep_fn keep;   /* takes the segments' bytes instead of freeing */
    void *keep_ctx;
};

static void unmap_segment(envlog_reader *r);

size_t envlog_reader_window = (size_t)1 << 20;

/* envlog_reader_window, or the reader's own window where less, whole
 * blocks (one at least). */
static size_t window_size(const envlog_reader *r)
{
    size_t w = envlog_reader_window;
    if (r->window && r->window < w)
        w = r->window;
    w -= w % ENVLOG_BLOCK;
    return w ? w : ENVLOG_BLOCK;
}

/* Where in the segment open an offset of the frame reader's lies. */
static uint64_t at_of(const envlog_reader *r, size_t off)
{
    return r->base + off;
}

const char *envlog_session_state_name(envlog_session_state st)
{
    switch (st) {
    case ENVLOG_STATE_SEALED: return "sealed";
    case ENVLOG_STATE_LIVE: return "live";
    case ENVLOG_STATE_UNSEALED: return "unsealed";
    case ENVLOG_STATE_TORN: return "torn";
    case ENVLOG_STATE_DAMAGED: return "damaged";
    }
    return "unknown";
}

envlog_err envlog_reader_open(envlog_env *env, const envlog_id128 *id,
                              envlog_reader **out)
{
    *out = NULL;
    if (!env || !id)
        return envlog__fail(ENVLOG_INVALID_ARG, "no environment or session id");
    if (env->sessions_fd < 0)
        return envlog__fail(ENVLOG_NOT_FOUND, "%s has no sessions", env->path);
    envlog_reader *r = envlog_calloc(1, sizeof *r);
    if (!r)
        return envlog__fail(ENVLOG_NOMEM, "opening a reader");
    r->id = *id;
    r->dirfd = r->seg_fd = -1;
    r->win_held = -1;
    envlog_id_format(id, r->name);
    envlog_err e = envlog_open_dir(env->sessions_fd, r->name, &r->dirfd);
    if (e == ENVLOG_NOT_FOUND)
        e = envlog__fail(ENVLOG_NOT_FOUND, "no session %s in %s", r->name, env->path);
    if (!e) {
        r->live = envlog_session_dir_live(r->dirfd);
        e = envlog_list_segments(r->dirfd, &r->segs, &r->n_segs);
    }
    if (e) {
        envlog_reader_close(r);
        return e;
    }
    *out = r;
    return ENVLOG_OK;
}

void envlog_reader_close(envlog_reader *r)
{
    if (!r)
        return;
    if (r->dirfd >= 0)
        close(r->dirfd);
    envlog_free(r->segs);
    unmap_segment(r);
    if (r->keep && r->file.p) {
        r->keep(r->keep_ctx, r->file.p, r->file.cap, false);
        r->file = (envlog_buf){0};
    }
    envlog_buf_free(&r->file);
    envlog_buf_free(&r->copy[0]);
    envlog_buf_free(&r->copy[1]);
    envlog_frame_reader_free(&r->fr);
    envlog_arena_free(&r->arena);
    envlog_free(r);
}

void envlog_reader_set_fold(envlog_reader *r, bool fold)
{
    r->fold = fold;
}

void envlog_reader_set_keep(envlog_reader *r, envlog_keep_fn keep, void *ctx)
{
    r->keep = keep;
    r->keep_ctx = ctx;
}

void envlog_reader_set_in_place(envlog_reader *r, bool in_place)
{
    r->in_place = in_place;
}

void envlog_reader_set_window(envlog_reader *r, size_t bytes)
{
    r->window = bytes;
}

/* The window data is in: the second only once a hold made one. */
static int win_at(const envlog_reader *r)
{
    return r->copy[1].p && r->data == r->copy[1].p;
}

bool envlog_reader_hold(envlog_reader *r)
{
    const uint8_t *p = r->rec.payload.data;
    size_t n = r->rec.payload.size;
    r->win_held = -1;
    if (!n || !r->data || p < r->data || p + n > r->data + r->data_len)
        return false; /* put together from fragments, or no bytes */
    if (r->data == r->map && !r->keep)
        return false; /* read in place: unmapped at the segment's end */
    if (r->windowed)
        r->win_held = win_at(r);
    return true;
}

/* Where the keeper holds the segment the reader reads: a window's bytes
 * are the mapping's at their offsets. */
static const uint8_t *kept_base(const envlog_reader *r)
{
    return r->windowed ? r->map : r->data;
}

const uint8_t *envlog_reader_kept(const envlog_reader *r)
{
    const uint8_t *p = r->rec.payload.data;
    if (!r->keep || !r->data || p < r->data || p + r->rec.payload.size > r->data + r->data_len)
        return NULL;
    return kept_base(r) + r->base + (p - r->data);
}

bool envlog_reader_loc(const envlog_reader *r, envlog_frag_loc *loc)
{
    if (!r->keep || !r->data || envlog_reader_kept(r) || r->rec.file_end > r->seg_size)
        return false;
    *loc = (envlog_frag_loc){kept_base(r), r->seg_size,
                             envlog_seg_seed(&r->id, r->segs[r->cur].segment),
                             r->rec.file_offset, r->rec.payload.size};
    return true;
}

const envlog_text *envlog_reader_slices(const envlog_reader *r)
{
    return r->slices;
}

const envlog_damage *envlog_reader_damage(const envlog_reader *r)
{
    return &r->dmg;
}

envlog_session_state envlog_reader_state(const envlog_reader *r)
{
    if (r->damaged)
        return ENVLOG_STATE_DAMAGED;
    if (r->torn)
        return ENVLOG_STATE_TORN;
    if (r->live)
        return ENVLOG_STATE_LIVE;
    if (r->n_segs && r->cur >= r->n_segs && r->seg_sealed)
        return ENVLOG_STATE_SEALED;
    return ENVLOG_STATE_UNSEALED;
}

static envlog_err report(envlog_reader *r, uint64_t off, uint64_t bytes,
                         const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static envlog_err report(envlog_reader *r, uint64_t off, uint64_t bytes,
                         const char *fmt, ...)
{
    va_list ap;
    r->dmg.session = r->id;
    r->dmg.segment = r->cur < r->n_segs ? r->segs[r->cur].segment : 0;
    r->dmg.offset = off;
    r->dmg.bytes = bytes;
    va_start(ap, fmt);
    vsnprintf(r->dmg.reason, sizeof r->dmg.reason, fmt, ap);
    va_end(ap);
    r->damaged = true;
    r->damaged_bytes += bytes;
    return envlog__fail(ENVLOG_CORRUPT, "session %s segment %" PRIu32
                        " offset %" PRIu64 ": %s (%" PRIu64 " bytes dropped)",
                        r->name, r->dmg.segment, off, r->dmg.reason, bytes);
}

/* Reads the window of the segment open (`fd`, its name `name`) that starts
 * at `base` (a block's start) and holds `want` bytes, or what is left of
 * the segment. */
static envlog_err read_window(envlog_reader *r, int fd, const char *name, uint64_t base,
                              size_t want)
{
    size_t n = r->seg_size - base < want ? (size_t)(r->seg_size - base) : want;
    /* Never into the window a held record is in. */
    int w = r->win_held >= 0 ? !r->win_held : win_at(r);
    envlog_buf *b = &r->copy[w];
    b->len = 0;
    envlog_err e = envlog_buf_reserve(b, n);
    if (e)
        return e;
    if (envlog_pread_full(fd, b->p, n, (off_t)base))
        return envlog__fail_errno(errno, "reading %s", name);
    b->len = n;
    r->data = b->p;
    r->data_len = n;
    r->base = base;
    r->windowed = true;
    return ENVLOG_OK;
}

/* In place, the mapping's pages come in as the frame reader reads them
 * (a fault maps a whole folio of the page cache: cheaper than a copy into
 * a window, and cheaper than asking for them ahead), and those more than
 * a step behind the reader leave the resident set again (a record handed
 * out before stays valid: its page comes back from the page cache when it
 * is read; a keeper gives back the rest at the segment's end,
 * envlog_entry_keep): a merge of many sessions holds a few steps of each,
 * not each one's segment whole. */
#define DROP_STEP ((size_t)256 << 10)
static void drop_behind(envlog_reader *r)
{
    size_t pos = r->fr.pos;
    if (pos >= r->dropped_to + 2 * DROP_STEP) {
        size_t to = (pos - DROP_STEP) & ~(DROP_STEP - 1);
        (void)madvise(r->map + r->dropped_to, to - r->dropped_to, MADV_DONTNEED);
        r->dropped_to = to;
    }
}

/* The next frame of the segment open.  A window that ends before its
 * segment does vouches for the records it holds whole and for nothing
 * else: anything but a record read from one (its end, damage, a record
 * cut short) is read again from the start of that record's block in the
 * next window, a window twice as long when the record began at the
 * window's start, until a window reaches the segment's end, where the
 * frame reader sees what it sees of the whole segment (it looks at
 * nothing before where it starts, and windows start on blocks). */
static envlog_fr_status next_frame(envlog_reader *r, envlog_err *err)
{
    *err = ENVLOG_OK;
    if (r->in_place && r->map && r->data == r->map)
        drop_behind(r);
    for (;;) {
        size_t pos = r->fr.pos;
        uint64_t chain = r->fr.chain;
        envlog_fr_status st = envlog_frame_reader_next(&r->fr);
        if (st == ENVLOG_FR_RECORD || st == ENVLOG_FR_NOMEM || !r->windowed ||
            r->base + r->data_len >= r->seg_size)
            return st;
        uint64_t at = r->base + pos;
        uint64_t base = at - at % ENVLOG_BLOCK;
        size_t want = base == r->base ? 2 * r->data_len : r->data_len;
        if (want < window_size(r))
            want = window_size(r);
        envlog_buf rec = r->fr.rec;
        uint64_t seed = r->fr.seed;
        if ((*err = read_window(r, r->seg_fd, r->segs[r->cur].name, base, want)))
            return ENVLOG_FR_END;
        if (r->base + r->data_len >= r->seg_size) {
            envlog_io_get()->close(r->seg_fd); /* the last window */
            r->seg_fd = -1;
        }
        envlog_frame_reader_init(&r->fr, r->data, r->data_len, seed, chain);
        r->fr.rec = rec;
        r->fr.pos = (size_t)(at - base);
    }
}

/* A segment that nothing changes any more (one before the session's last,
 * sealed and trimmed before the next was made; or the last when it ends in
 * its SEAL and no writer holds the session: a writer seals once, repair
 * never touches a sealed segment) is read a window at a time into memory
 * the reader reuses, and, when a keeper takes the segments, mapped as well
 * without being read: a record handed out stays in the mapping at its
 * offset (envlog_reader_kept), and only the pages a later lookup asks for
 * are ever brought in.  With envlog_reader_set_in_place the reader reads
 * the mapping itself (what the merge's worker threads do): nothing is
 * copied, a fault maps a whole folio of the page cache (on Linux 6.18
 * here, 17 MB of a segment in 0.6 ms against 5-7 ms to copy it by pread,
 * though in another state of the same VM 6-7 ms against 0.8-1.1, which
 * is why a merge read by one thread reads windows: bench/RESULTS.md,
 * "the fold reads windows"), a record stays valid
 * after the next is read (a reader whose records another thread folds),
 * and the pages behind the reader leave the resident set as it goes
 * (drop_behind).  Any other segment may still be written, trimmed or
 * repaired, which would pull pages from under a mapping: it is read whole
 * into memory the keeper takes.  With `last`, *mapped says which was
 * done. */
static envlog_err map_segment(envlog_reader *r, const char *name, bool last, bool *mapped)
{
    const envlog_io *io = envlog_io_get();
    int fd;
    struct stat st;
    envlog_err e = envlog_open_regular(r->dirfd, name, O_RDONLY, 0, &fd, &st);
    if (e)
        return e;
    if ((uint64_t)st.st_size > FILE_MAX)
        e = envlog__fail(ENVLOG_TOO_BIG, "%s is %" PRIu64 " bytes, over %" PRIu64, name,
                         (uint64_t)st.st_size, (uint64_t)FILE_MAX);
    else if (last) {
        uint8_t tail[ENVLOG_SEAL_TAIL];
        size_t tl = st.st_size < (off_t)sizeof tail ? (size_t)st.st_size : sizeof tail;
        *mapped = tl && io->pread(fd, tail, tl, st.st_size - (off_t)tl) == (ssize_t)tl &&
                  envlog_tail_is_seal(tail, tl, (uint64_t)st.st_size,
                                      envlog_seg_seed(&r->id, r->segs[r->cur].segment));
    }
    size_t n = (size_t)st.st_size;
    bool fixed = !e && n > 0 && (!last || *mapped);
    if (fixed && (r->keep || r->in_place)) {
        void *m = io->mmap(n, PROT_READ, fd);
        if (m == MAP_FAILED)
            e = envlog__fail_errno(errno, "mapping %s", name);
        else {
            r->map = m;
            r->map_len = n;
            r->dropped_to = 0;
        }
    }
    if (fixed && !e) {
        r->seg_size = n;
        if (r->in_place) {
            r->data = r->map;
            r->data_len = n;
        } else {
            e = read_window(r, fd, name, 0, window_size(r));
        }
    }
    /* A segment the first window does not hold whole keeps its descriptor
     * for the windows after it: the file may be removed meanwhile (a
     * compaction retiring the session), and what is open stays readable. */
    if (!e && r->windowed && r->data_len < r->seg_size)
        r->seg_fd = fd;
    else
        io->close(fd);
    return e;
}

static void unmap_segment(envlog_reader *r)
{
    if (r->seg_fd >= 0)
        envlog_io_get()->close(r->seg_fd);
    r->seg_fd = -1;
    if (r->map && r->keep)
        r->keep(r->keep_ctx, r->map, r->map_len, true);
    else if (r->map)
        envlog_io_get()->munmap(r->map, r->map_len);
    r->map = NULL;
    r->map_len = 0;
}

static envlog_err open_segment(envlog_reader *r)
{
    const envlog_seg_name *sn = &r->segs[r->cur];
    envlog_err e = ENVLOG_OK;
    unmap_segment(r);
    r->data = NULL;
    r->data_len = 0;
    r->base = r->seg_size = 0;
    r->windowed = false;
    bool last = r->cur + 1 == r->n_segs, mapped = false;
    if (!last || !r->live)
        e = map_segment(r, sn->name, last, &mapped);
    if (last && !mapped && (r->live || !e)) {
        e = envlog_read_file(r->dirfd, sn->name, FILE_MAX, &r->file);
        r->data = r->file.p;
        r->data_len = r->seg_size = r->file.len;
    }
    r->seg_open = true;
    r->seg_sealed = r->seg_header = r->header_ok = false;
    r->seg_count = 0;
    /* The reassembly buffer goes on from segment to segment: its memory
     * is touched once a reader, not a fresh huge page for each segment. */
    envlog_buf rec = r->fr.rec;
    rec.len = 0;
    envlog_frame_reader_init(&r->fr, r->data, e ? 0 : r->data_len,
                             envlog_seg_seed(&r->id, sn->segment), r->chain);
    r->fr.rec = rec;
    if (e == ENVLOG_NOMEM || e == ENVLOG_IO)
        return e;
    if (e)
        return report(r, 0, 0, "unreadable segment: %s", envlog_errmsg());
    /* A record reassembled from fragments is never longer than its file:
     * take the room now, so running out of memory is ENVLOG_NOMEM here
     * and never "damage" in the middle of the segment. */
    if (r->seg_size > ENVLOG_BLOCK && (e = envlog_buf_reserve(&r->fr.rec, r->seg_size)))
        return e;
    if (sn->segment != r->expect_seg) {
        uint32_t want = r->expect_seg;
        r->expect_seg = sn->segment + 1;
        return report(r, 0, 0, "segment %" PRIu32 " missing before segment %" PRIu32,
                      want, sn->segment);
    }
    r->expect_seg = sn->segment + 1;
    return ENVLOG_OK;
}

static envlog_err check_header(envlog_reader *r, const uint8_t *p, size_t n)
{
    const envlog_seg_name *sn = &r->segs[r->cur];
    envlog_seg_header h = {0};
    envlog_pull pl = {p, n, 0};
    envlog_tok t;
    envlog_arena_reset(&r->arena);
    envlog_err e = envlog_pull_next(&pl, &t);
    if (!e)
        e = envlog_struct_decode(&pl, &t, &envlog_seg_header_schema, &h, &r->arena);
    r->seg_header = true;
    if (e == ENVLOG_NOMEM)
        return e; /* not the data's fault */
    if (e)
        return report(r, at_of(r, r->fr.rec_off), n, "undecodable segment header");
    if (!h.magic || strcmp(h.magic, ENVLOG_MAGIC))
        return report(r, at_of(r, r->fr.rec_off), n, "bad magic in segment header");
    if (h.version < ENVLOG_LOG_VERSION_MIN || h.version > ENVLOG_LOG_VERSION)
        return report(r, at_of(r, r->fr.rec_off), n, "log format version %" PRIu64 " unknown",
                      h.version);
    if (memcmp(h.id.b, r->id.b, 16) || h.segment != sn->segment ||
        h.first_seq != sn->first_seq)
        return report(r, at_of(r, r->fr.rec_off), n, "segment header does not match its file name");
    if (h.prev_chain != r->chain) {
        /* Carry on from what this segment says, so one break is reported
         * once, not for every segment after it. */
        r->fr.chain = r->fr.chain_start = r->chain = h.prev_chain;
        return report(r, at_of(r, r->fr.rec_off), 0,
                      "chain broken: a segment before this one is missing or altered");
    }
    r->header_ok = at_of(r, r->fr.rec_off) == 0;
    return ENVLOG_OK;
}

static envlog_err check_seal(envlog_reader *r, const uint8_t *p, size_t n)
{
    envlog_seg_seal s = {0};
    envlog_pull pl = {p, n, 0};
    envlog_tok t;
    envlog_err e = envlog_pull_next(&pl, &t);
    if (!e)
        e = envlog_struct_decode(&pl, &t, &envlog_seg_seal_schema, &s, NULL);
    r->seg_sealed = true;
    if (e)
        return report(r, at_of(r, r->fr.rec_off), n, "undecodable seal");
    if (s.count != r->seg_count || (r->seg_count && s.last_seq != r->last_seq))
        return report(r, at_of(r, r->fr.rec_off), 0,
                      "seal counts %" PRIu64 " records to seq %" PRIu64
                      ", read %" PRIu64 " to seq %" PRIu64,
                      s.count, s.last_seq, r->seg_count, r->last_seq);
    if (s.chain != r->fr.chain_start)
        return report(r, at_of(r, r->fr.rec_off), 0, "seal chain value does not match the records");
    return ENVLOG_OK;
}

/* An event record whose frame was whole: decode it and check its seq. */
static envlog_err take_event(envlog_reader *r, const uint8_t *p, size_t n)
{
    envlog_arena_reset(&r->arena);
    envlog_err e = r->fold ? envlog_event_decode_slices(p, n, &r->rec, &r->arena, r->slices,
                                                      &r->memo)
                           : envlog_event_decode(p, n, &r->rec, &r->arena);
    if (e == ENVLOG_NOMEM)
        return e;
    if (e)
        return report(r, at_of(r, r->fr.rec_off), n, "undecodable record: %s", envlog_errmsg());
    r->rec.stamp.session = r->id;
    r->rec.segment = r->segs[r->cur].segment;
    r->rec.file_offset = at_of(r, r->fr.rec_off);
    r->rec.file_end = at_of(r, r->fr.pos);
    uint64_t seq = r->rec.stamp.seq;
    r->seg_count++;
    if (r->rec.kind == ENVLOG_KIND_SESSION && seq == 0)
        r->dropped = r->rec.u.session.dropped;
    if (r->have_seq && seq <= r->last_seq)
        return report(r, at_of(r, r->fr.rec_off), n,
                      "seq %" PRIu64 " after seq %" PRIu64 "; record dropped",
                      seq, r->last_seq);
    bool gap = r->have_seq ? seq != r->last_seq + 1 &&
                                 !(r->last_seq == 0 && seq == r->dropped + 1)
                           : seq != r->segs[r->cur].first_seq;
    uint64_t from = r->have_seq ? r->last_seq + 1 : r->segs[r->cur].first_seq;
    r->have_seq = true;
    r->last_seq = seq;
    if (gap) {
        r->pending = true;
        return report(r, at_of(r, r->fr.rec_off), 0,
                      "records %" PRIu64 " to %" PRIu64 " are missing", from, seq - 1);
    }
    return ENVLOG_OK;
}

envlog_err envlog_reader_next(envlog_reader *r, const envlog_record **rec)
{
    envlog_err e;
    *rec = NULL;
    if (r->pending) {
        r->pending = false;
        *rec = &r->rec;
        return ENVLOG_OK;
    }
    while (!r->done) {
        if (!r->seg_open) {
            if (r->cur >= r->n_segs) {
                r->done = true;
                break;
            }
            if ((e = open_segment(r)))
                return e;
        }
        bool last = r->cur + 1 == r->n_segs;
        envlog_fr_status st = next_frame(r, &e);
        if (e)
            return e;
        if (st == ENVLOG_FR_RECORD) {
            const uint8_t *p = r->fr.out;
            size_t n = r->fr.out_len;
            int kind = envlog_payload_kind(p, n);
            bool framing = kind == ENVLOG_KIND_HEADER || kind == ENVLOG_KIND_SEAL;
            if (framing)
                r->fr.chain = r->fr.chain_start;
            if (r->seg_sealed)
                return report(r, at_of(r, r->fr.rec_off), n, "record after the seal");
            if (kind == ENVLOG_KIND_HEADER) {
                if (r->seg_header)
                    return report(r, at_of(r, r->fr.rec_off), n, "second segment header");
                if ((e = check_header(r, p, n)))
                    return e;
                continue;
            }
            if (!r->seg_header) {
                r->seg_header = true;
                if (at_of(r, r->fr.rec_off) == 0) /* a header in the clear would be here */
                    return report(r, 0, 0, "segment does not start with a header");
            }
            if (kind == ENVLOG_KIND_SEAL) {
                if ((e = check_seal(r, p, n)))
                    return e;
                continue;
            }
            if ((e = take_event(r, p, n)))
                return e;
            *rec = &r->rec;
            return ENVLOG_OK;
        }
        if (st == ENVLOG_FR_NOMEM)
            return envlog__fail(ENVLOG_NOMEM, "reassembling a record of session %s",
                                r->name);
        if (st == ENVLOG_FR_BAD && last && !r->seg_sealed && r->live) {
            /* The writer is mid-record: a read racing its memcpy can see a
             * header not yet written before bytes already there.  What
             * follows is not stable yet; stop here, as at a live tail. */
            r->seg_open = false;
            r->cur++;
            r->chain = r->fr.chain;
            continue;
        }
        if (st == ENVLOG_FR_BAD)
            return report(r, at_of(r, r->fr.bad_off), r->fr.bad_len, "%s", r->fr.why);
        /* A bad tail at the end of the last segment of a session whose
         * segment was never sealed is the record its writer was appending
         * when it stopped: while the writer lives, a record in progress;
         * once it is gone, a torn tail, but only when it looks like one
         * (envlog(5), "torn tails"): the segment's HEADER is good, nothing
         * before was damaged, and the bad bytes lie where one append cut
         * short leaves them.  Anything else is damage, which a repair
         * never cuts. */
        bool at_end = st == ENVLOG_FR_TAIL && last && !r->seg_sealed &&
                      !envlog_tail_is_seal(r->data, r->data_len, r->seg_size, r->fr.seed);
        if (at_end && r->live) {
            r->seg_open = false;
            r->cur++;
            r->chain = r->fr.chain;
            continue; /* the writer is mid-record: not damage */
        }
        if (at_end && r->header_ok && !r->damaged && r->fr.bad_confined) {
            r->seg_open = false;
            r->cur++;
            r->chain = r->fr.chain;
            r->torn = true;
            r->dmg.session = r->id;
            r->dmg.segment = r->segs[r->cur - 1].segment;
            r->dmg.offset = at_of(r, r->fr.bad_off);
            r->dmg.bytes = r->fr.bad_len;
            snprintf(r->dmg.reason, sizeof r->dmg.reason, "torn tail");
            r->damaged_bytes += r->fr.bad_len;
            return envlog__fail(ENVLOG_TRUNCATED,
                                "session %s segment %" PRIu32 ": torn tail at offset %"
                                PRIu64 " (%" PRIu64 " bytes)", r->name,
                                r->dmg.segment, r->dmg.offset, r->dmg.bytes);
        }
        if (st == ENVLOG_FR_TAIL) {
            e = report(r, at_of(r, r->fr.bad_off), r->fr.bad_len, "%s at the end of the segment",
                       r->fr.why);
            r->seg_open = false;
            r->chain = r->fr.chain;
            r->cur++;
            return e;
        }
        /* ENVLOG_FR_END */
        bool unsealed = !r->seg_sealed && !last;
        uint64_t size = r->seg_size;
        r->seg_open = false;
        r->chain = r->fr.chain;
        if (unsealed) {
            e = report(r, size, 0, "segment not sealed but followed by another");
            r->cur++;
            return e;
        }
        r->cur++;
    }
    return ENVLOG_END;
}

/* ------------------------------------------------------------- summaries */

static int info_cmp(const void *a, const void *b)
{
    const envlog_session_info *x = a, *y = b;
    return memcmp(x->id.b, y->id.b, 16);
}

typedef struct strays {
    int dirfd;
    uint64_t n;
} strays;

static envlog_err count_stray(void *ctx, const char *nm)
{
    strays *c = ctx;
    char seg[30];
    bool ours = false;
    if (strlen(nm) >= 29) {
        memcpy(seg, nm, 29);
        seg[29] = 0;
        uint32_t s;
        uint64_t f;
        char canon[40];
        if (sscanf(seg, "%8" SCNu32 "-%16" SCNu64, &s, &f) == 2) {
            envlog_seg_name_format(canon, s, f);
            const char *rest = nm + 29;
            ours = !strcmp(canon, seg) &&
                   (!*rest || !strcmp(rest, ".broken") ||
                    (!strncmp(rest, ".broken.", 8) && rest[8] &&
                     strspn(rest + 8, "0123456789") == strlen(rest + 8)));
            /* Named as ours, but a FIFO, a link, a directory: not. */
            struct stat st;
            if (ours && (envlog_io_get()->fstatat(c->dirfd, nm, &st) || !S_ISREG(st.st_mode)))
                ours = false;
        }
    }
    c->n += !ours;
    return ENVLOG_OK;
}

/* Entries of a session directory that are neither segments nor the
 * .broken copies a repair keeps (none counted when it cannot be listed:
 * the reader says why). */
static uint64_t count_strays(int dirfd)
{
    strays c = {dirfd, 0};
    if (envlog_dir_each(dirfd, "a session directory", count_stray, &c))
        return 0;
    return c.n;
}

static envlog_err summarize(envlog_env *env, const envlog_id128 *id,
                            envlog_session_info *in)
{
    envlog_reader *r;
    memset(in, 0, sizeof *in);
    in->id = *id;
    envlog_id_format(id, in->id_hex);
    envlog_err e = envlog_reader_open(env, id, &r);
    if (e == ENVLOG_NOMEM || e == ENVLOG_IO)
        return e;
    if (e) {
        in->state = ENVLOG_STATE_DAMAGED;
        goto strings;
    }
    const envlog_record *rec;
    while ((e = envlog_reader_next(r, &rec)) != ENVLOG_END) {
        if (e == ENVLOG_NOMEM || e == ENVLOG_IO)
            break;
        if (e != ENVLOG_OK)
            continue;
        in->records++;
        in->last_seq = rec->stamp.seq;
        if (rec->kind == ENVLOG_KIND_SESSION && !in->label) {
            const envlog_session_rec *s = &rec->u.session;
            in->start_unix_ns = s->start_unix_ns;
            if (!(in->label = envlog_strdup(s->label ? s->label : "")) ||
                !(in->host = envlog_strdup(s->host ? s->host : "")) ||
                !(in->runtime = envlog_strdup(s->runtime ? s->runtime : ""))) {
                e = envlog__fail(ENVLOG_NOMEM, "summarizing sessions");
                break;
            }
        }
    }
    if (e == ENVLOG_END)
        e = ENVLOG_OK;
    in->segments = r->n_segs;
    in->dropped_bytes = r->damaged_bytes;
    in->state = envlog_reader_state(r);
    in->strays = count_strays(r->dirfd);
    for (size_t i = 0; i < r->n_segs; i++) {
        struct stat st;
        if (envlog_io_get()->fstatat(r->dirfd, r->segs[i].name, &st) == 0)
            in->bytes += (uint64_t)st.st_size;
    }
    envlog_reader_close(r);
    if (e)
        return e;
strings:
    if ((!in->label && !(in->label = envlog_strdup(""))) ||
        (!in->host && !(in->host = envlog_strdup(""))) ||
        (!in->runtime && !(in->runtime = envlog_strdup(""))))
        return envlog__fail(ENVLOG_NOMEM, "summarizing sessions");
    return ENVLOG_OK;
}

void envlog_sessions_free(envlog_session_info *infos, size_t n)
{
    if (!infos)
        return;
    for (size_t i = 0; i < n; i++) {
        envlog_free(infos[i].label);
        envlog_free(infos[i].host);
        envlog_free(infos[i].runtime);
    }
    envlog_free(infos);
}

static envlog_err sessions_list(envlog_env *env, envlog_session_info **out, size_t *n);

envlog_err envlog_sessions_list(envlog_env *env, envlog_session_info **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (env->sessions_fd < 0)
        return ENVLOG_OK;
    /* No session vanishes under the listing (see envlog_env_lock). */
    int lk;
    envlog_err e = envlog_env_lock(env, false, &lk);
    if (!e)
        e = sessions_list(env, out, n);
    envlog_env_unlock(env, lk);
    return e;
}

static envlog_err sessions_list(envlog_env *env, envlog_session_info **out, size_t *n)
{
    envlog_id128 *ids;
    size_t k;
    envlog_err e = envlog_session_ids(env, &ids, &k);
    if (e)
        return e;
    envlog_session_info *infos = NULL;
    if (!e && k && !(infos = envlog_calloc(k, sizeof *infos)))
        e = envlog__fail(ENVLOG_NOMEM, "listing sessions");
    size_t done = 0;
    for (; !e && done < k; done++)
        e = summarize(env, &ids[done], &infos[done]);
    envlog_free(ids);
    if (e) {
        envlog_sessions_free(infos, done);
        return e;
    }
    if (k)
        qsort(infos, k, sizeof *infos, info_cmp);
    *out = infos;
    *n = k;
    return ENVLOG_OK;
}

static int id_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

envlog_err envlog_sessions_ids(envlog_env *env, envlog_id128 **ids, size_t *n)
{
    envlog_err e = envlog_session_ids(env, ids, n);
    if (!e && *n)
        qsort(*ids, *n, sizeof **ids, id_cmp);
    return e;
}

void envlog_ids_free(envlog_id128 *ids)
{
    envlog_free(ids);
}
