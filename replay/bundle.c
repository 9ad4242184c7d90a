/* SPDX-License-Identifier: MIT */
/*
 * bundle.c - bundles: snapshots for shipping, compressed as standard zstd
 * frames (so `zstd -d` opens one): reading, inspecting and exporting them.
 * Format 1 compresses the snapshot file as it is; format 2 (the default)
 * compresses its column image (bundle_cols.c) after a mark that says so.
 *
 * A bundle is never trusted.  Before memory is taken its decompressed size
 * is read from the frame headers and checked against ENVLOG_BUNDLE_MAX_SIZE;
 * decompression stops at that size whatever the frames claim; every length
 * inside is checked by the column decoder, the snapshot reader and the
 * codec; each entry is checked on its own (names, namespaces, binary
 * hashes) and rejected on its own (import.c).
 */
#include "bundle_cols.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
/* for ZSTD_customMem: zstd's own memory taken as envlog's large blocks */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

/* zstd's windows and tables (megabytes, touched all over and freshly, as a
 * snapshot build's are) on huge pages where the kernel has them.  Its
 * failures are zstd's memory_allocation errors, told apart below. */
static void *z_alloc(void *opaque, size_t size)
{
    (void)opaque;
    return envlog_malloc_big(size, false);
}

static void z_free(void *opaque, void *p)
{
    (void)opaque;
    envlog_free(p);
}

static const ZSTD_customMem z_mem = {z_alloc, z_free, NULL};

#define BUNDLE_LEVEL 19   /* format 1 */
#define BUNDLE_LEVEL_2 3  /* format 2: its columns compress at a fast level */
#define MT_LEVEL 10       /* the levels worth compressing on several threads */
#define NAME_MAX_LEN ENVLOG_BUNDLE_NAME_MAX

/* ------------------------------------------------------------- reading */

static const uint8_t zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
/* The skippable frame that begins a format 2 bundle (bundle_cols.h). */
static const uint8_t format2_mark[ENVLOG_BUNDLE_MARK_LEN] = {
    0x5e, 0x2a, 0x4d, 0x18, 16, 0, 0, 0,
    'e', 'n', 'v', 'l', 'o', 'g', '-', 'b', 'u', 'n', 'd', 'l', 'e', 0,
    ENVLOG_BUNDLE_FORMAT, 0};

/* Decompresses a bundle: the sizes in its frame headers are checked first,
 * so a lying or enormous frame is refused before memory is taken; with
 * `checksums` every frame must carry its content checksum (format 2). */
static envlog_err inflate(const void *data, size_t size, size_t base, bool checksums,
                          uint8_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    const uint8_t *z = data;
    if (size < 4 || memcmp(z, zstd_magic, 4))
        return checksums ? envlog__fail(ENVLOG_BAD_DATA, "bundle: no zstd frame after its "
                                        "format 2 mark")
                         : envlog__fail(ENVLOG_FORMAT, "not a bundle: no zstd frame");
    /* The sum of the sizes the frames state, frame by frame. */
    unsigned long long total = 0;
    for (size_t at = 0; at < size;) {
        size_t fsz = ZSTD_findFrameCompressedSize(z + at, size - at);
        if (ZSTD_isError(fsz))
            return envlog__fail(ENVLOG_BAD_DATA, "bundle: damaged or truncated zstd frame "
                                "at byte %zu", base + at);
        unsigned long long c = ZSTD_getFrameContentSize(z + at, size - at);
        if (c == ZSTD_CONTENTSIZE_ERROR)
            return envlog__fail(ENVLOG_BAD_DATA, "bundle: bad zstd frame at byte %zu",
                                base + at);
        if (c == ZSTD_CONTENTSIZE_UNKNOWN)
            return envlog__fail(ENVLOG_BAD_DATA, "bundle: the zstd frame at byte %zu does "
                                "not state its size (envlog writes it)", base + at);
        /* (the frame header descriptor's Content_Checksum_flag, RFC 8878) */
        if (checksums && (memcmp(z + at, zstd_magic, 4) || !(z[at + 4] & 4)))
            return envlog__fail(ENVLOG_BAD_DATA, "bundle: the zstd frame at byte %zu does "
                                "not carry its checksum (format 2 needs it)",
                                base + at);
        if (c > ENVLOG_BUNDLE_MAX_SIZE - total)
            return envlog__fail(ENVLOG_TOO_BIG,
                                "bundle inflates past the %llu-byte limit",
                                (unsigned long long)ENVLOG_BUNDLE_MAX_SIZE);
        total += c;
        at += fsz;
    }
    /* Memory grows with what the frames really produce, never with what
     * they claim: a lying header costs nothing.  It starts at 1 MiB, or
     * at 16 times the compressed bytes when that is more. */
    uint64_t first = size < (1u << 16) ? (1u << 20) : (uint64_t)size * 16;
    size_t cap = total < first ? (size_t)total + 1 : (size_t)first;
    /* On huge pages where large: a fault per 2 MiB written, not per 4 KiB. */
    uint8_t *p = envlog_malloc_big(cap, false);
    ZSTD_DStream *ds = ZSTD_createDStream_advanced(z_mem);
    if (!p || !ds) {
        envlog_free(p);
        ZSTD_freeDStream(ds);
        return envlog__fail(ENVLOG_NOMEM, "inflating a bundle");
    }
    ZSTD_inBuffer in = {data, size, 0};
    size_t got = 0, rc = 1;
    envlog_err e = ENVLOG_OK;
    while (!e && in.pos < in.size) {
        if (got == cap) {
            if (cap > total) {
                e = envlog__fail(ENVLOG_BAD_DATA, "bundle: frames hold more than they claim");
                break;
            }
            size_t ncap = cap * 2 > total + 1 ? (size_t)total + 1 : cap * 2;
            /* (grown in place where it can be: memory held at once never
             * exceeds what the frames gave and twice that, even for a
             * bundle whose frames hold more than they claim) */
            uint8_t *np = envlog_realloc(p, ncap);
            if (!np) {
                e = envlog__fail(ENVLOG_NOMEM, "inflating a bundle");
                break;
            }
            p = np;
            cap = ncap;
        }
        ZSTD_outBuffer ob = {p, cap, got};
        rc = ZSTD_decompressStream(ds, &ob, &in);
        if (ZSTD_isError(rc))
            e = ZSTD_getErrorCode(rc) == ZSTD_error_memory_allocation
                    ? envlog__fail(ENVLOG_NOMEM, "inflating a bundle")
                    : envlog__fail(ENVLOG_BAD_DATA, "bundle: %s", ZSTD_getErrorName(rc));
        got = ob.pos;
        if (!e && rc != 0 && in.pos == in.size && got < cap)
            e = envlog__fail(ENVLOG_BAD_DATA, "bundle: truncated zstd frame");
    }
    ZSTD_freeDStream(ds);
    if (!e && (got != total || rc != 0))
        e = envlog__fail(ENVLOG_BAD_DATA, "bundle: frames hold %zu bytes, not the %llu they claim",
                         got, total);
    if (e) {
        envlog_free(p);
        return e;
    }
    *out = p;
    *n = got;
    return ENVLOG_OK;
}

envlog_err envlog_bundle_read_path(const char *path, envlog_buf *b)
{
    int fd = envlog_io_get()->open(path, O_RDONLY, 0);
    if (fd < 0)
        return envlog__fail_errno(errno, "opening bundle %s", path);
    struct stat st;
    envlog_err e = ENVLOG_OK;
    if (envlog_io_get()->fstat(fd, &st))
        e = envlog__fail_errno(errno, "stat %s", path);
    else if (!S_ISREG(st.st_mode))
        e = envlog__fail(ENVLOG_FORMAT, "%s is not a regular file", path);
    else if ((uint64_t)st.st_size > ENVLOG_BUNDLE_MAX_SIZE)
        e = envlog__fail(ENVLOG_TOO_BIG, "%s is over the bundle size limit", path);
    else if (!(e = envlog_buf_reserve(b, (size_t)st.st_size + 1))) {
        while (b->len < (size_t)st.st_size) {
            ssize_t r = envlog_io_get()->pread(fd, b->p + b->len,
                                               (size_t)st.st_size - b->len, (off_t)b->len);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                e = r < 0 ? envlog__fail_errno(errno, "reading %s", path)
                          : envlog__fail(ENVLOG_BAD_DATA, "%s shrank while read", path);
                break;
            }
            b->len += (size_t)r;
        }
    }
    envlog_io_get()->close(fd);
    return e;
}

bool envlog_bundle_is_format2(const void *data, size_t size)
{
    return size >= 4 && !memcmp(data, format2_mark, 4);
}

envlog_err envlog_bundle_image(const void *data, size_t size, uint8_t **img, size_t *n)
{
    const uint8_t *z = data;
    if (size < ENVLOG_BUNDLE_MARK_LEN && !memcmp(z, format2_mark, size))
        return envlog__fail(ENVLOG_BAD_DATA, "bundle: cut short in its format 2 mark");
    if (size < ENVLOG_BUNDLE_MARK_LEN || memcmp(z + 4, format2_mark + 4, 18))
        return envlog__fail(ENVLOG_FORMAT, "not a bundle: a skippable zstd frame that is not "
                            "a bundle's mark");
    unsigned version = envlog_get_le16(z + 22);
    if (version != ENVLOG_BUNDLE_FORMAT)
        return envlog__fail(ENVLOG_FORMAT, "bundle format %u: this envlog reads formats 1 "
                            "and 2", version);
    return inflate(z + ENVLOG_BUNDLE_MARK_LEN, size - ENVLOG_BUNDLE_MARK_LEN,
                   ENVLOG_BUNDLE_MARK_LEN, true, img, n);
}

/* A format 2 bundle: its mark, its frames, then the snapshot its column
 * image gives. */
static envlog_err open_format2(const uint8_t *z, size_t size, uint8_t **raw, size_t *n)
{
    uint8_t *img;
    size_t in;
    envlog_err e = envlog_bundle_image(z, size, &img, &in);
    if (e)
        return e;
    e = envlog_cols_decode(img, in, raw, n);
    envlog_free(img);
    return e;
}

envlog_err envlog_bundle_open_mem(const void *data, size_t size, bool check_all,
                                  envlog_bundle_opened *o)
{
    memset(o, 0, sizeof *o);
    const uint8_t *z = data;
    o->format = envlog_bundle_is_format2(data, size) ? 2 : 1;
    envlog_err e = o->format == 2 ? open_format2(z, size, &o->raw, &o->n)
                                  : inflate(data, size, 0, false, &o->raw, &o->n);
    if (e)
        return e;
    if ((e = envlog_snap_load(o->raw, o->n, check_all, &o->snap))) {
        envlog_free(o->raw);
        o->raw = NULL;
    }
    return e;
}

envlog_err envlog_bundle_open_to_walk(const void *data, size_t size, envlog_bundle_opened *o)
{
    return envlog_bundle_open_mem(data, size, !envlog_bundle_is_format2(data, size), o);
}

void envlog_bundle_close(envlog_bundle_opened *o)
{
    envlog_snap_free(o->snap);
    if (o->sparse)
        envlog_unreserve(o->raw, o->n);
    else
        envlog_free(o->raw);
    memset(o, 0, sizeof *o);
}

/* ------------------------------------------------------------- inspect */

void envlog_bundle_info_free(envlog_bundle_info *info)
{
    if (!info)
        return;
    envlog_free(info->name);
    envlog_free(info->envlog_version);
    for (size_t i = 0; i < info->n_runtimes; i++)
        envlog_free(info->runtimes[i]);
    envlog_free(info->runtimes);
    for (size_t i = 0; i < info->n_environments; i++)
        envlog_free(info->environments[i]);
    envlog_free(info->environments);
    for (size_t i = 0; i < info->n_namespaces; i++)
        envlog_free(info->namespaces[i]);
    envlog_free(info->namespaces);
    envlog_free(info->namespace_entries);
    for (size_t i = 0; i < info->n_sources; i++)
        envlog_free(info->sources[i].path);
    envlog_free(info->sources);
    envlog_free(info);
}

/* The walk of every record that counts the entries under each namespace. */
static envlog_err count_entries(envlog_bundle_opened *o, envlog_bundle_info *in)
{
    envlog_snap_item it;
    envlog_record rec;
    envlog_snap_rewind_fold(o->snap);
    envlog_err e;
    while (!(e = envlog_snap_next(o->snap, &it, &rec))) {
        if (it.kind != ENVLOG_KIND_ENTRY)
            continue;
        const char *ns = rec.kind == ENVLOG_KIND_TUNE      ? rec.u.tune.ns
                         : rec.kind == ENVLOG_KIND_COMPILE ? rec.u.compile.ns
                                                           : NULL;
        for (size_t i = 0; ns && i < in->n_namespaces; i++)
            if (!strcmp(in->namespaces[i], ns))
                in->namespace_entries[i]++;
    }
    return e == ENVLOG_END ? ENVLOG_OK : e;
}

/* Describes an opened bundle.  Its entries are counted by namespace as a
 * walk reads every record (the bad ones counted, the content hash checked),
 * unless `written` gives the counts: those of the entries an export laid
 * out itself, of the snapshot its column image was checked to give byte for
 * byte (so that it holds what the writer put in, its content hash too). */
static envlog_err describe(envlog_bundle_opened *o, size_t compressed,
                           const envlog_build_result *written, envlog_bundle_info **out)
{
    const envlog_snap_manifest *m = envlog_snap_manifest_get(o->snap);
    envlog_bundle_info *in = envlog_calloc(1, sizeof *in);
    if (!in)
        return envlog__fail(ENVLOG_NOMEM, "describing a bundle");
    bool oom = false;
    in->schema = m->schema;
    in->name = envlog_strdup(m->name ? m->name : "");
    in->envlog_version = envlog_strdup(m->envlog_version ? m->envlog_version : "");
    oom |= !in->name || !in->envlog_version;
    in->created_unix_ns = m->created_unix_ns;
    in->runtimes = envlog_calloc(m->n_runtimes + 1, sizeof(char *));
    in->environments = envlog_calloc(m->n_envs + 1, sizeof(char *));
    in->namespaces = envlog_calloc(m->n_namespaces + 1, sizeof(char *));
    in->namespace_entries = envlog_calloc(m->n_namespaces + 1, sizeof(uint64_t));
    oom |= !in->runtimes || !in->environments || !in->namespaces || !in->namespace_entries;
    for (size_t i = 0; !oom && i < m->n_runtimes; i++, in->n_runtimes++)
        oom |= !(in->runtimes[i] = envlog_strdup(m->runtimes[i]));
    for (size_t i = 0; !oom && i < m->n_envs; i++, in->n_environments++) {
        const envlog_snap_env *v = &m->envs[i];
        char buf[1024];
        /* (an anonymous bundle's label and host are empty: shown as "-") */
        int k = snprintf(buf, sizeof buf, "%s %s %s %s", v->label && *v->label ? v->label : "-",
                         v->host && *v->host ? v->host : "-", v->os ? v->os : "-",
                         v->arch ? v->arch : "-");
        for (size_t d = 0; d < v->n_devices && k > 0 && (size_t)k < sizeof buf; d++)
            k += snprintf(buf + k, sizeof buf - (size_t)k, "%s%s", d ? ", " : " [",
                          v->devices[d]);
        if (v->n_devices && k > 0 && (size_t)k < sizeof buf - 1)
            strcat(buf, "]");
        oom |= !(in->environments[i] = envlog_strdup(buf));
    }
    for (size_t i = 0; !oom && i < m->n_namespaces; i++, in->n_namespaces++)
        oom |= !(in->namespaces[i] = envlog_strdup(m->namespaces[i]));
    if (!oom && m->n_sources)
        oom = !(in->sources = envlog_calloc(m->n_sources, sizeof *in->sources));
    for (size_t i = 0; !oom && i < m->n_sources; i++, in->n_sources++) {
        in->sources[i].sessions = m->sources[i].sessions;
        in->sources[i].records = m->sources[i].records;
        oom |= !(in->sources[i].path = envlog_strdup(m->sources[i].path ? m->sources[i].path
                                                                          : ""));
    }
    if (oom) {
        envlog_bundle_info_free(in);
        return envlog__fail(ENVLOG_NOMEM, "describing a bundle");
    }
    envlog_err e;
    if (written && written->n_ns_entries == in->n_namespaces) {
        for (size_t i = 0; i < in->n_namespaces; i++)
            in->namespace_entries[i] = written->ns_entries[i];
        in->content_ok = true;
    } else if ((e = count_entries(o, in))) {
        envlog_bundle_info_free(in);
        return e;
    } else {
        in->content_ok = envlog_snap_content_ok(o->snap);
        in->bad_records = envlog_snap_bad_records(o->snap);
    }
    in->sessions = m->n_wms;
    in->tunes = m->tunes;
    in->kernels = m->kernels;
    in->users = m->users;
    in->evidence = m->evidence;
    in->content_hash = m->content_hash;
    in->compressed_size = compressed;
    in->size = o->n;
    in->format = o->format;
    *out = in;
    return ENVLOG_OK;
}

envlog_err envlog_bundle_inspect_memory(const void *data, size_t size,
                                        envlog_bundle_info **info)
{
    envlog_bundle_opened o;
    *info = NULL;
    envlog_err e = envlog_bundle_open_mem(data, size, true, &o);
    if (!e)
        e = describe(&o, size, NULL, info);
    envlog_bundle_close(&o);
    return e;
}

envlog_err envlog_bundle_inspect(const char *path, envlog_bundle_info **info)
{
    envlog_buf b = {0};
    *info = NULL;
    envlog_err e = envlog_bundle_read_path(path, &b);
    if (!e)
        e = envlog_bundle_inspect_memory(b.p, b.len, info);
    envlog_buf_free(&b);
    return e;
}

envlog_err envlog_bundle_state_memory(const void *data, size_t size, envlog_state **st)
{
    envlog_bundle_opened o;
    *st = NULL;
    if (!data)
        return envlog__fail(ENVLOG_INVALID_ARG, "no bundle");
    /* Read with the full check: a bundle is never trusted, and its INDEX
     * is made from its entries (envlog(5)). */
    envlog_err e = envlog_bundle_open_mem(data, size, true, &o);
    if (e)
        return e;
    return envlog_state_from_snap(o.snap, o.raw, st);
}

envlog_err envlog_bundle_state(const char *path, envlog_state **st)
{
    envlog_buf b = {0};
    *st = NULL;
    envlog_err e = envlog_bundle_read_path(path, &b);
    if (!e)
        e = envlog_bundle_state_memory(b.p, b.len, st);
    envlog_buf_free(&b);
    return e;
}

/* -------------------------------------------------------------- export */

/* One standard zstd frame (its content size in its header), made as the
 * snapshot (format 1) or its column image (format 2, after the mark, with
 * the frame's checksum) is laid out, at a high level on as many threads as
 * there are CPUs (up to 8) where libzstd has them: the level 19 a format 1
 * bundle is shipped at is slow on one.  Only the compressed bytes are
 * held. */
typedef struct zsink {
    ZSTD_CCtx *cc;
    int level;
    int format;
    envlog_buf z;
    uint64_t size;
    const envlog_bundle_opts *o; /* on_progress */
    uint64_t pushed;
} zsink;

/* A bundle no reader would take is never written. */
static envlog_err over_limit(uint64_t size)
{
    return envlog__fail(ENVLOG_TOO_BIG, "the bundle would hold %llu bytes, over the "
                        "%llu-byte limit readers keep: export fewer namespaces "
                        "(--namespace)", (unsigned long long)size,
                        (unsigned long long)ENVLOG_BUNDLE_MAX_SIZE);
}

static envlog_err z_begin(void *ctx, uint64_t size)
{
    zsink *s = ctx;
    if (size > ENVLOG_BUNDLE_MAX_SIZE)
        return over_limit(size);
    s->size = size;
    if (!(s->cc = ZSTD_createCCtx_advanced(z_mem)))
        return envlog__fail(ENVLOG_NOMEM, "compressing a bundle");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t r = ZSTD_CCtx_setParameter(s->cc, ZSTD_c_compressionLevel, s->level);
    if (!ZSTD_isError(r) && s->format == 2) {
        envlog_err e = envlog_buf_append(&s->z, format2_mark, sizeof format2_mark);
        if (e)
            return e;
        r = ZSTD_CCtx_setParameter(s->cc, ZSTD_c_checksumFlag, 1);
    }
    /* (the fast levels lose more to the workers' setup than they gain) */
    if (!ZSTD_isError(r) && cpus > 1 && size > (1u << 20) && s->level >= MT_LEVEL)
        (void)ZSTD_CCtx_setParameter(s->cc, ZSTD_c_nbWorkers, cpus < 8 ? (int)cpus : 8);
    if (!ZSTD_isError(r))
        r = ZSTD_CCtx_setPledgedSrcSize(s->cc, size);
    if (ZSTD_isError(r))
        return envlog__fail(ENVLOG_IO, "compressing a bundle: %s", ZSTD_getErrorName(r));
    return envlog_buf_reserve(&s->z, ZSTD_CStreamOutSize());
}

static envlog_err z_push(zsink *s, const uint8_t *p, size_t n, ZSTD_EndDirective how)
{
    ZSTD_inBuffer in = {p, n, 0};
    for (;;) {
        envlog_err e = envlog_buf_reserve(&s->z, ZSTD_CStreamOutSize());
        if (e)
            return e;
        ZSTD_outBuffer out = {s->z.p, s->z.cap, s->z.len};
        size_t left = ZSTD_compressStream2(s->cc, &out, &in, how);
        if (ZSTD_isError(left))
            return envlog__fail(ZSTD_getErrorCode(left) == ZSTD_error_memory_allocation
                                    ? ENVLOG_NOMEM : ENVLOG_IO,
                                "compressing a bundle: %s", ZSTD_getErrorName(left));
        s->z.len = out.pos;
        if (how == ZSTD_e_end ? left == 0 : in.pos == in.size)
            return ENVLOG_OK;
    }
}

static envlog_err z_write(void *ctx, const uint8_t *p, size_t n)
{
    zsink *s = ctx;
    envlog_err e = z_push(s, p, n, ZSTD_e_continue);
    s->pushed += n;
    if (!e && s->o->on_progress)
        s->o->on_progress(s->o->ctx, "compressing", s->pushed, s->size);
    return e;
}

/* The snapshot on its way to the column encoder, held to the limit
 * readers keep as a format 1 bundle's is. */
typedef struct fmt2_sink {
    envlog_cols_enc *enc;
    envlog_sink in;
} fmt2_sink;

static envlog_err f2_begin(void *ctx, uint64_t size)
{
    fmt2_sink *f = ctx;
    return size > ENVLOG_BUNDLE_MAX_SIZE ? over_limit(size) : f->in.begin(f->in.ctx, size);
}

static envlog_err f2_write(void *ctx, const uint8_t *p, size_t n)
{
    fmt2_sink *f = ctx;
    return f->in.write(f->in.ctx, p, n);
}

/* A temporary name beside `path`, after removing what killed exports left
 * there. */
static envlog_err bundle_tmp(const char *path, char *tmp, size_t size)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        envlog_tmp_clean(dfd, slash ? slash + 1 : path);
        close(dfd);
    }
    return envlog_tmp_name(tmp, size, path);
}

/* A format 2 bundle opened to be described: its snapshot decoded and
 * checked by its hash as a window of it at a time (envlog_cols_check()),
 * then loaded from the head and tail that keeps, with every check a load
 * makes. */
static envlog_err open_sparse(const uint8_t *z, size_t size, envlog_bundle_opened *o)
{
    memset(o, 0, sizeof *o);
    o->format = 2;
    o->sparse = true;
    uint8_t *img;
    size_t in;
    uint64_t total;
    envlog_err e = envlog_bundle_image(z, size, &img, &in);
    if (e)
        return e;
    e = envlog_cols_check(img, in, &o->raw, &total);
    envlog_free(img);
    o->n = (size_t)total;
    if (!e && (e = envlog_snap_load(o->raw, o->n, false, &o->snap)))
        envlog_bundle_close(o);
    return e;
}

/* The export's read-back of the bundle `z` it made, and its description.
 * A format 2 one (`written` its build) is checked whole as it is decoded,
 * and described from what was written, the snapshot never held whole (a
 * large one took as much fresh memory again as the export); where the
 * description would walk the entries (its namespaces not those written),
 * and for format 1, it is opened whole. */
static envlog_err read_back(const envlog_buf *z, const envlog_build_result *written,
                            envlog_bundle_info **info)
{
    envlog_bundle_opened back;
    envlog_err e = written ? open_sparse(z->p, z->len, &back) : ENVLOG_OK;
    if (e)
        return e;
    if (written &&
        written->n_ns_entries != envlog_snap_manifest_get(back.snap)->n_namespaces) {
        envlog_bundle_close(&back);
        written = NULL; /* never so when the build is right: described whole */
    }
    if (!written && (e = envlog_bundle_open_mem(z->p, z->len, false, &back)))
        return e;
    e = describe(&back, z->len, written, info);
    envlog_bundle_close(&back);
    return e;
}

/* The bundle of `env` compressed in *z (*zn bytes), checked as its readers
 * check it, and described in *info. */
static envlog_err export_bytes(envlog_env *env, const envlog_bundle_opts *opts, uint8_t **z,
                               size_t *zn, envlog_bundle_info **info)
{
    *z = NULL;
    *zn = 0;
    *info = NULL;
    if (!opts || !opts->name || !*opts->name || strlen(opts->name) > NAME_MAX_LEN ||
        !envlog_utf8_valid(opts->name, strlen(opts->name)))
        return envlog__fail(ENVLOG_INVALID_ARG, "a bundle needs a name (UTF-8, at most %d bytes)",
                            NAME_MAX_LEN);
    if ((unsigned)opts->evidence > ENVLOG_EVIDENCE_ALL || (opts->n_prefixes && !opts->prefixes) ||
        (opts->n_more && !opts->more))
        return envlog__fail(ENVLOG_INVALID_ARG, "bad bundle options");
    for (size_t i = 0; i < opts->n_more; i++)
        if (!opts->more[i])
            return envlog__fail(ENVLOG_INVALID_ARG, "bundle options: environment %zu of "
                                "`more` is missing", i + 1);
    for (size_t i = 0; i < opts->n_prefixes; i++) {
        const char *why = opts->prefixes[i] ? envlog_ns_prefix_problem(opts->prefixes[i])
                                            : "it is missing";
        if (why)
            return envlog__fail(ENVLOG_INVALID_ARG, "namespace prefix '%s': %s",
                                opts->prefixes[i] ? opts->prefixes[i] : "", why);
    }
    if (opts->format < 0 || opts->format > ENVLOG_BUNDLE_FORMAT)
        return envlog__fail(ENVLOG_INVALID_ARG, "bundle format %d: envlog writes formats 1 "
                            "and 2", opts->format);
    int format = opts->format ? opts->format : ENVLOG_BUNDLE_FORMAT;
    zsink zs = {NULL, opts->zstd_level ? opts->zstd_level
                      : format == 2 ? BUNDLE_LEVEL_2 : BUNDLE_LEVEL,
                format, {0}, 0, opts, 0};
    envlog_sink sink = {z_begin, z_write, &zs};
    /* Format 2: the snapshot goes to the column encoder, whose image goes
     * to zstd once the snapshot is whole. */
    fmt2_sink f2 = {NULL, {0}};
    envlog_err e = format == 2 ? envlog_cols_enc_new(&f2.enc) : ENVLOG_OK;
    if (e)
        return e;
    envlog_sink to_cols = {f2_begin, f2_write, &f2};
    if (f2.enc)
        f2.in = envlog_cols_sink(f2.enc);
    envlog_build_opts bo = {.evidence = opts->evidence, .name = opts->name,
                            .prefixes = opts->prefixes, .n_prefixes = opts->n_prefixes,
                            .content = "bundle", .no_index = true, .no_digest = true,
                            .hold_encodings = true,
                            .anonymous = opts->anonymous,
                            .more = opts->more, .n_more = opts->n_more, .list_sources = true,
                            .on_damage = opts->on_damage, .ctx = opts->ctx,
                            .on_progress = opts->on_progress,
                            .sink = f2.enc ? &to_cols : &sink};
    envlog_build_result res;
    e = envlog_snapshot_build(env, &bo, &res);
    if (!e && f2.enc)
        e = envlog_cols_finish(f2.enc, &sink);
    envlog_cols_enc_free(f2.enc);
    if (!e)
        e = z_push(&zs, NULL, 0, ZSTD_e_end);
    ZSTD_freeCCtx(zs.cc);
    /* What is written is what its readers take: read back.  A format 2
     * bundle is decoded, which checks that it gives the snapshot laid out,
     * byte for byte, and described from what was laid out; a format 1 one
     * is walked record by record (its INDEX is empty: the walk reads and
     * checks every record, as the full check would). */
    if (!e)
        e = read_back(&zs.z, f2.enc ? &res : NULL, info);
    envlog_build_result_free(&res);
    /* A bundle of no tune and no kernel is a mistake (a mistyped prefix,
     * the wrong environment) to say, not a file to ship. */
    if (!e && !(*info)->tunes && !(*info)->kernels) {
        envlog_bundle_info_free(*info);
        *info = NULL;
        e = envlog__fail(ENVLOG_NOT_FOUND, "%s",
                         opts->n_prefixes ? "no tune or kernel entry lies under the namespace "
                                            "prefixes given: nothing to export"
                                          : "the environment holds no tune or kernel entry: "
                                            "nothing to export");
    }
    if (e) {
        envlog_buf_free(&zs.z);
        return e;
    }
    *z = zs.z.p;
    *zn = zs.z.len;
    return ENVLOG_OK;
}

static void export_done(envlog_err e, uint8_t *z, envlog_bundle_info *in,
                        envlog_bundle_info **info)
{
    envlog_free(z);
    if (!e && info)
        *info = in;
    else
        envlog_bundle_info_free(in);
}

envlog_err envlog_bundle_export(envlog_env *env, const envlog_bundle_opts *opts,
                                const char *path, envlog_bundle_info **info)
{
    const envlog_io *io = envlog_io_get();
    if (info)
        *info = NULL;
    if (!path)
        return envlog__fail(ENVLOG_INVALID_ARG, "a bundle export needs a path");
    uint8_t *z;
    size_t zn;
    envlog_bundle_info *in;
    envlog_err e = export_bytes(env, opts, &z, &zn, &in);
    /* Under a temporary name of its own (a killed export's leftover never
     * blocks the next, which removes it); made to leave the environment,
     * it follows the umask. */
    char tmp[4200];
    if (!e)
        e = bundle_tmp(path, tmp, sizeof tmp);
    if (!e) {
        e = envlog_write_new_file_mode(AT_FDCWD, tmp, z, zn, 0666);
        if (!e && io->renameat(AT_FDCWD, tmp, AT_FDCWD, path)) {
            e = envlog__fail_errno(errno, "renaming %s to %s", tmp, path);
            io->unlinkat(AT_FDCWD, tmp, 0);
        }
    }
    export_done(e, z, in, info);
    return e;
}

envlog_err envlog_bundle_export_to(envlog_env *env, const envlog_bundle_opts *opts,
                                   envlog_write_fn fn, void *ctx, envlog_bundle_info **info)
{
    if (info)
        *info = NULL;
    if (!fn)
        return envlog__fail(ENVLOG_INVALID_ARG, "a bundle export needs somewhere to write");
    uint8_t *z;
    size_t zn;
    envlog_bundle_info *in;
    envlog_err e = export_bytes(env, opts, &z, &zn, &in);
    if (!e)
        e = fn(ctx, (const char *)z, zn);
    export_done(e, z, in, info);
    return e;
}
