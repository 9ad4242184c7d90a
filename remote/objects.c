/* SPDX-License-Identifier: MIT */
/*
 * objects.c - what a remote holds for a session, and the local side of it:
 * the session manifest (CBOR, envlog(5) REMOTES), a sealed session read for
 * pushing, and a downloaded session checked and put in place.
 *
 * A downloaded session is never trusted: its segments are written into a
 * staging directory (ENV/remotes/incoming/PID.RANDOM/ID/), read back by the
 * log's own reader (every fragment checksum, each HEADER against its name,
 * the chain, the SEAL), and only then renamed into sessions/, which no
 * reader sees half done.  What a killed pull leaves in incoming/ is removed
 * by the next one.
 */
#include "remote_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NS_MAX 1024

enum {
    MK_KIND = 1,
    MK_SCHEMA = 2,
    MK_SESSION = 3,
    MK_START = 4,
    MK_RECORDS = 5,
    MK_SEGMENTS = 6,
    MK_NAMESPACES = 7,
    MK_HOST = 8
};

void envlog_hash_hex(const envlog_hash128 *h, char out[33])
{
    envlog_id_format(h, out);
}

void envlog_rmanifest_free(envlog_rmanifest *m)
{
    for (size_t i = 0; i < m->n_ns; i++)
        envlog_free(m->ns[i]);
    envlog_free(m->ns);
    envlog_free(m->segs);
    memset(m, 0, sizeof *m);
}

envlog_err envlog_rmanifest_encode(const envlog_rmanifest *m, envlog_buf *b)
{
    envlog_err e = envlog_enc_map(b, 8);
    if (!e) e = envlog_enc_uint(b, MK_KIND);
    if (!e) e = envlog_enc_text(b, "session", 7);
    if (!e) e = envlog_enc_uint(b, MK_SCHEMA);
    if (!e) e = envlog_enc_uint(b, 1);
    if (!e) e = envlog_enc_uint(b, MK_SESSION);
    if (!e) e = envlog_enc_bytes(b, m->session.b, 16);
    if (!e) e = envlog_enc_uint(b, MK_START);
    if (!e) e = envlog_enc_uint(b, m->start_unix_ns);
    if (!e) e = envlog_enc_uint(b, MK_RECORDS);
    if (!e) e = envlog_enc_uint(b, m->records);
    if (!e) e = envlog_enc_uint(b, MK_SEGMENTS);
    if (!e) e = envlog_enc_array(b, m->n_segs);
    for (size_t i = 0; !e && i < m->n_segs; i++) {
        e = envlog_enc_array(b, 3);
        if (!e) e = envlog_enc_text(b, m->segs[i].name, strlen(m->segs[i].name));
        if (!e) e = envlog_enc_uint(b, m->segs[i].size);
        if (!e) e = envlog_enc_bytes(b, m->segs[i].hash.b, 16);
    }
    if (!e) e = envlog_enc_uint(b, MK_NAMESPACES);
    if (!e) e = envlog_enc_array(b, m->n_ns);
    for (size_t i = 0; !e && i < m->n_ns; i++)
        e = envlog_enc_text(b, m->ns[i], strlen(m->ns[i]));
    if (!e) e = envlog_enc_uint(b, MK_HOST);
    if (!e) e = envlog_enc_text(b, m->host, strlen(m->host));
    return e;
}

static envlog_err bad(const char *what)
{
    return envlog__fail(ENVLOG_BAD_DATA, "its manifest %s", what);
}

/* Reads a text of at most `max` bytes into a new string. */
static envlog_err take_text(const envlog_tok *t, size_t max, char **out)
{
    if (t->type != ENVLOG_TOK_TEXT || t->len > max || !envlog_utf8_valid((const char *)t->data,
                                                                          t->len))
        return bad("holds a name that is not short UTF-8 text");
    if (!(*out = envlog_malloc(t->len + 1)))
        return envlog__fail(ENVLOG_NOMEM, "reading a manifest");
    memcpy(*out, t->data, t->len);
    (*out)[t->len] = 0;
    return ENVLOG_OK;
}

static envlog_err decode_segments(envlog_pull *p, const envlog_tok *t, envlog_rmanifest *m)
{
    if (t->type != ENVLOG_TOK_ARRAY || t->u == 0 || t->u > ENVLOG_REMOTE_SEGMENTS_MAX)
        return bad("lists no segments, or too many");
    if (!(m->segs = envlog_calloc(t->u, sizeof *m->segs)))
        return envlog__fail(ENVLOG_NOMEM, "reading a manifest");
    m->n_segs = t->u;
    uint64_t total = 0;
    for (size_t i = 0; i < m->n_segs; i++) {
        envlog_tok a, name, size, hash;
        envlog_err e;
        if ((e = envlog_pull_next(p, &a)) || a.type != ENVLOG_TOK_ARRAY || a.u != 3 ||
            (e = envlog_pull_next(p, &name)) || name.type != ENVLOG_TOK_TEXT ||
            name.len != 29 || (e = envlog_pull_next(p, &size)) ||
            size.type != ENVLOG_TOK_UINT || (e = envlog_pull_next(p, &hash)) ||
            hash.type != ENVLOG_TOK_BYTES || hash.len != 16)
            return bad("has a segment that is not [name, size, hash]");
        memcpy(m->segs[i].name, name.data, 29);
        m->segs[i].name[29] = 0;
        char canon[40];
        unsigned seg;
        unsigned long long first;
        if (sscanf(m->segs[i].name, "%8u-%16llu.log", &seg, &first) != 2 || seg != i)
            return bad("names a segment out of order or not as a segment is named");
        envlog_seg_name_format(canon, (uint32_t)seg, first);
        if (strcmp(canon, m->segs[i].name))
            return bad("names a segment not as a segment is named");
        if (size.u == 0 || size.u > ENVLOG_REMOTE_OBJECT_MAX)
            return bad("gives a segment a size beyond the limit");
        total += size.u;
        if (total > ENVLOG_REMOTE_SESSION_MAX)
            return bad("gives the session more bytes than the limit");
        m->segs[i].size = size.u;
        memcpy(m->segs[i].hash.b, hash.data, 16);
    }
    return ENVLOG_OK;
}

envlog_err envlog_rmanifest_decode(const uint8_t *data, size_t n, envlog_rmanifest *m)
{
    memset(m, 0, sizeof *m);
    envlog_pull p = {data, n, 0};
    envlog_tok t;
    envlog_err e = envlog_pull_next(&p, &t);
    if (e || t.type != ENVLOG_TOK_MAP || t.u > 64)
        return bad("is not a CBOR map");
    uint64_t seen = 0;
    for (uint64_t k = 0; !e && k < t.u; k++) {
        envlog_tok key, v;
        if ((e = envlog_pull_next(&p, &key)) || key.type != ENVLOG_TOK_UINT || key.u >= 64 ||
            (seen >> key.u & 1)) {
            e = bad("has a key that is not a small integer, or one twice");
            break;
        }
        seen |= 1ull << key.u;
        if ((e = envlog_pull_next(&p, &v)))
            break;
        switch (key.u) {
        case MK_KIND:
            if (v.type != ENVLOG_TOK_TEXT || v.len != 7 || memcmp(v.data, "session", 7))
                e = bad("is not a session's");
            break;
        case MK_SCHEMA:
            if (v.type != ENVLOG_TOK_UINT || v.u != 1)
                e = bad("has a schema this envlog does not read");
            break;
        case MK_SESSION:
            if (v.type != ENVLOG_TOK_BYTES || v.len != 16)
                e = bad("names no session id");
            else
                memcpy(m->session.b, v.data, 16);
            break;
        case MK_START:
        case MK_RECORDS:
            if (v.type != ENVLOG_TOK_UINT)
                e = bad("holds a count that is not a number");
            else if (key.u == MK_START)
                m->start_unix_ns = v.u;
            else
                m->records = v.u;
            break;
        case MK_SEGMENTS: e = decode_segments(&p, &v, m); break;
        case MK_NAMESPACES:
            if (v.type != ENVLOG_TOK_ARRAY || v.u > NS_MAX) {
                e = bad("lists namespaces that are not an array of at most 1024");
                break;
            }
            if (v.u && !(m->ns = envlog_calloc(v.u, sizeof *m->ns))) {
                e = envlog__fail(ENVLOG_NOMEM, "reading a manifest");
                break;
            }
            for (uint64_t i = 0; !e && i < v.u; i++) {
                envlog_tok s;
                if ((e = envlog_pull_next(&p, &s)) || (e = take_text(&s, 4096, &m->ns[i])))
                    e = e == ENVLOG_NOMEM ? e : bad("lists a namespace that is not text");
                else
                    m->n_ns++;
            }
            break;
        case MK_HOST:
            if (v.type != ENVLOG_TOK_TEXT || v.len >= sizeof m->host)
                e = bad("names a host that is not short text");
            else {
                memcpy(m->host, v.data, v.len);
                m->host[v.len] = 0;
            }
            break;
        default: e = envlog_pull_skip_after(&p, &v); break;
        }
    }
    if (!e && p.pos != n)
        e = bad("has bytes after its map");
    uint64_t need = 1u << MK_KIND | 1u << MK_SCHEMA | 1u << MK_SESSION | 1u << MK_SEGMENTS;
    if (!e && (seen & need) != need)
        e = bad("lacks its kind, schema, session or segments");
    if (e && e != ENVLOG_NOMEM && e != ENVLOG_BAD_DATA)
        e = bad("is not well-formed CBOR");
    if (e)
        envlog_rmanifest_free(m);
    return e;
}

bool envlog_rmanifest_matches(const envlog_rmanifest *m, const char *const *prefixes, size_t n)
{
    if (!n)
        return true;
    for (size_t i = 0; i < m->n_ns; i++)
        for (size_t k = 0; k < n; k++)
            if (envlog_ns_under(m->ns[i], prefixes[k]) || envlog_ns_under(prefixes[k], m->ns[i]))
                return true;
    return false;
}

/* --------------------------------------------------- a session to push */

static envlog_err add_ns(envlog_rmanifest *m, const char *ns)
{
    if (!ns || !*ns)
        return ENVLOG_OK;
    for (size_t i = 0; i < m->n_ns; i++)
        if (!strcmp(m->ns[i], ns))
            return ENVLOG_OK;
    if (m->n_ns == NS_MAX || strlen(ns) > 4096)
        return envlog__fail(ENVLOG_TOO_BIG, "more than %d namespaces in one session", NS_MAX);
    char **v = envlog_realloc(m->ns, (m->n_ns + 1) * sizeof *v);
    if (!v || !(v[m->n_ns] = envlog_strdup(ns))) {
        if (v)
            m->ns = v;
        return envlog__fail(ENVLOG_NOMEM, "reading a session");
    }
    m->ns = v;
    m->n_ns++;
    return ENVLOG_OK;
}

void envlog_local_session_free(envlog_local_session *s)
{
    for (size_t i = 0; s->data && i < s->m.n_segs; i++)
        envlog_buf_free(&s->data[i]);
    envlog_free(s->data);
    envlog_rmanifest_free(&s->m);
    memset(s, 0, sizeof *s);
}

/* Reads the session whole through the log's reader: it must be sealed and
 * undamaged; notes its namespaces, records, start and host. */
static envlog_err read_records(envlog_env *env, const envlog_id128 *id, envlog_rmanifest *m,
                               const char **why)
{
    envlog_reader *r;
    envlog_err e = envlog_reader_open(env, id, &r);
    if (e)
        return e;
    const envlog_record *rec;
    bool damaged = false;
    while ((e = envlog_reader_next(r, &rec)) != ENVLOG_END) {
        if (e == ENVLOG_CORRUPT || e == ENVLOG_TRUNCATED) {
            damaged = true;
            continue;
        }
        if (e)
            break;
        m->records++;
        const char *ns = NULL;
        switch (rec->kind) {
        case ENVLOG_KIND_SESSION:
            m->start_unix_ns = rec->u.session.start_unix_ns;
            snprintf(m->host, sizeof m->host, "%s", rec->u.session.host ? rec->u.session.host : "");
            break;
        case ENVLOG_KIND_TUNE: ns = rec->u.tune.ns; break;
        case ENVLOG_KIND_COMPILE: ns = rec->u.compile.ns; break;
        case ENVLOG_KIND_FORGET: ns = rec->u.forget.under ? rec->u.forget.under : rec->u.forget.ns; break;
        default: break;
        }
        if ((e = add_ns(m, ns)))
            break;
    }
    envlog_session_state st = envlog_reader_state(r);
    envlog_reader_close(r);
    if (e == ENVLOG_END)
        e = ENVLOG_OK;
    if (!e && (damaged || st != ENVLOG_STATE_SEALED)) {
        *why = damaged ? "damaged (see envlog verify)" : st == ENVLOG_STATE_LIVE ? "live"
               : st == ENVLOG_STATE_TORN ? "torn" : "not sealed";
        e = ENVLOG_WRONG_STATE;
    }
    return e;
}

envlog_err envlog_local_session_read(envlog_env *env, const envlog_id128 *id,
                                     envlog_local_session *out, const char **why)
{
    memset(out, 0, sizeof *out);
    *why = NULL;
    out->m.session = *id;
    envlog_err e = read_records(env, id, &out->m, why);
    char hex[33];
    envlog_id_format(id, hex);
    int fd = -1;
    envlog_seg_name *segs = NULL;
    size_t n = 0;
    if (!e)
        e = envlog_open_dir(env->sessions_fd, hex, &fd);
    if (!e)
        e = envlog_list_segments(fd, &segs, &n);
    if (!e && (n == 0 || n > ENVLOG_REMOTE_SEGMENTS_MAX)) {
        *why = "has no segments, or too many to push";
        e = ENVLOG_WRONG_STATE;
    }
    if (!e && !(out->data = envlog_calloc(n, sizeof *out->data)))
        e = envlog__fail(ENVLOG_NOMEM, "reading a session");
    if (!e && !(out->m.segs = envlog_calloc(n, sizeof *out->m.segs)))
        e = envlog__fail(ENVLOG_NOMEM, "reading a session");
    if (!e)
        out->m.n_segs = n;
    for (size_t i = 0; !e && i < n; i++) {
        e = envlog_read_file(fd, segs[i].name, ENVLOG_REMOTE_OBJECT_MAX, &out->data[i]);
        if (e == ENVLOG_TOO_BIG) {
            *why = "has a segment over 512 MiB, more than a remote object holds";
            e = ENVLOG_WRONG_STATE;
        }
        if (!e) {
            memcpy(out->m.segs[i].name, segs[i].name, sizeof out->m.segs[i].name);
            out->m.segs[i].size = out->data[i].len;
            out->m.segs[i].hash = envlog_hash128_bytes(out->data[i].p, out->data[i].len);
        }
    }
    envlog_free(segs);
    if (fd >= 0)
        close(fd);
    if (e)
        envlog_local_session_free(out);
    return e;
}

/* ---------------------------------------------- a session downloaded */

typedef struct tree_ctx {
    int fd;
    int depth;
} tree_ctx;

static void remove_tree(int parent, const char *name, int depth);

static envlog_err remove_in_tree(void *ctx, const char *name)
{
    tree_ctx *t = ctx;
    struct stat st;
    if (t->depth > 0 && !envlog_io_get()->fstatat(t->fd, name, &st) && S_ISDIR(st.st_mode))
        remove_tree(t->fd, name, t->depth - 1);
    else
        envlog_io_get()->unlinkat(t->fd, name, 0);
    return ENVLOG_OK;
}

/* Removes directory `name` under `parent` with what lies in it, two levels
 * deep (incoming/PID.RANDOM/ID/segments); best effort, the next pull
 * tries again. */
static void remove_tree(int parent, const char *name, int depth)
{
    const envlog_io *io = envlog_io_get();
    int fd;
    if (envlog_open_dir(parent, name, &fd)) {
        io->unlinkat(parent, name, 0);
        return;
    }
    tree_ctx t = {fd, depth};
    (void)envlog_dir_each(fd, name, remove_in_tree, &t);
    io->close(fd);
    io->unlinkat(parent, name, AT_REMOVEDIR);
}

/* Opens ENV/remotes/incoming, made if missing. */
static envlog_err incoming_open(envlog_env *env, int *fd)
{
    const envlog_io *io = envlog_io_get();
    if (io->mkdirat(env->dirfd, "remotes", 0700) && errno != EEXIST)
        return envlog__fail_errno(errno, "creating %s/remotes", env->path);
    int rfd;
    envlog_err e = envlog_open_dir(env->dirfd, "remotes", &rfd);
    if (e)
        return e;
    if (io->mkdirat(rfd, "incoming", 0700) && errno != EEXIST) {
        e = envlog__fail_errno(errno, "creating %s/remotes/incoming", env->path);
        close(rfd);
        return e;
    }
    e = envlog_open_dir(rfd, "incoming", fd);
    close(rfd);
    return e;
}

/* Staging directories whose pull is gone, at most 32 a time. */
typedef struct gone {
    char names[32][48];
    size_t n;
} gone;

static envlog_err note_gone(void *ctx, const char *name)
{
    gone *g = ctx;
    char *end;
    long pid = strtol(name, &end, 10);
    if (pid <= 0 || *end != '.' || strlen(name) >= sizeof g->names[0])
        return ENVLOG_OK;
    if (kill((pid_t)pid, 0) && errno == ESRCH)
        memcpy(g->names[g->n++], name, strlen(name) + 1); /* fits: checked */
    return g->n < 32 ? ENVLOG_OK : ENVLOG_END;
}

/* Removes what pulls that are gone left in incoming/. */
static void incoming_clean(int infd)
{
    gone g;
    g.n = 0;
    (void)envlog_dir_each(infd, "remotes/incoming", note_gone, &g);
    for (size_t i = 0; i < g.n; i++)
        remove_tree(infd, g.names[i], 1);
}

/* The log's reader over a staging directory: an environment handle whose
 * sessions/ is that directory, nothing else. */
static envlog_err read_staged(int stagefd, const envlog_rmanifest *m)
{
    envlog_env fake;
    char path[] = "remotes/incoming";
    memset(&fake, 0, sizeof fake);
    fake.path = path;
    fake.dirfd = -1;
    fake.sessions_fd = stagefd;
    fake.readonly = true;
    envlog_reader *r;
    envlog_err e = envlog_reader_open(&fake, &m->session, &r);
    if (e)
        return envlog__fail(ENVLOG_BAD_DATA, "it does not open as a session: %s",
                            envlog_errmsg());
    const envlog_record *rec;
    uint64_t records = 0;
    bool first_ok = false;
    while ((e = envlog_reader_next(r, &rec)) == ENVLOG_OK) {
        if (records == 0)
            first_ok = rec->kind == ENVLOG_KIND_SESSION &&
                       !memcmp(rec->u.session.id.b, m->session.b, 16);
        records++;
    }
    envlog_session_state st = envlog_reader_state(r);
    if (e == ENVLOG_CORRUPT || e == ENVLOG_TRUNCATED) {
        const envlog_damage *d = envlog_reader_damage(r);
        e = envlog__fail(ENVLOG_BAD_DATA, "it does not read as a whole session: segment %u at "
                         "offset %llu: %s", (unsigned)d->segment, (unsigned long long)d->offset,
                         d->reason);
    } else if (e == ENVLOG_END && st != ENVLOG_STATE_SEALED) {
        e = envlog__fail(ENVLOG_BAD_DATA, "it is %s, not a sealed session",
                         envlog_session_state_name(st));
    } else if (e == ENVLOG_END && (!first_ok || records != m->records)) {
        e = envlog__fail(ENVLOG_BAD_DATA, "its records are not the ones its manifest names "
                         "(%llu read, %llu listed)", (unsigned long long)records,
                         (unsigned long long)m->records);
    } else if (e == ENVLOG_END) {
        e = ENVLOG_OK;
    }
    envlog_reader_close(r);
    return e;
}

envlog_err envlog_session_install(envlog_env *env, const envlog_rmanifest *m, envlog_buf *data)
{
    const envlog_io *io = envlog_io_get();
    int infd;
    envlog_err e = incoming_open(env, &infd);
    if (e)
        return e;
    incoming_clean(infd);
    char stage[48], hex[33];
    envlog_id128 rnd;
    if ((e = envlog_id_new(&rnd))) {
        close(infd);
        return e;
    }
    snprintf(stage, sizeof stage, "%ld.%02x%02x%02x%02x%02x%02x", (long)getpid(), rnd.b[10],
             rnd.b[11], rnd.b[12], rnd.b[13], rnd.b[14], rnd.b[15]);
    envlog_id_format(&m->session, hex);
    int stagefd = -1, sfd = -1;
    if (io->mkdirat(infd, stage, 0700)) {
        e = envlog__fail_errno(errno, "creating %s/remotes/incoming/%s", env->path, stage);
        close(infd);
        return e;
    }
    if ((e = envlog_open_dir(infd, stage, &stagefd)))
        goto out;
    if (io->mkdirat(stagefd, hex, 0700)) {
        e = envlog__fail_errno(errno, "creating a staging directory");
        goto out;
    }
    if ((e = envlog_open_dir(stagefd, hex, &sfd)))
        goto out;
    for (size_t i = 0; !e && i < m->n_segs; i++)
        e = envlog_write_new_file(sfd, m->segs[i].name, data[i].p, data[i].len);
    if (e)
        goto out;
    if ((e = read_staged(stagefd, m)))
        goto out;
    if ((e = envlog_dir_sync(sfd, "a downloaded session")) || (e = envlog_env_mark_format(env)))
        goto out;
    if (io->renameat(stagefd, hex, env->sessions_fd, hex)) {
        e = errno == EEXIST || errno == ENOTEMPTY
                ? envlog__fail(ENVLOG_NOT_FOUND, "session %s is there already", hex)
                : envlog__fail_errno(errno, "putting session %s in place", hex);
        goto out;
    }
    e = envlog_dir_sync(env->sessions_fd, "sessions");
out:
    if (sfd >= 0)
        close(sfd);
    if (stagefd >= 0)
        close(stagefd);
    remove_tree(infd, stage, 1);
    close(infd);
    return e;
}

bool envlog_session_known(envlog_env *env, envlog_snap *snap, envlog_snap *prev,
                          const envlog_id128 *id)
{
    char hex[33];
    envlog_id_format(id, hex);
    struct stat st;
    if (env->sessions_fd >= 0 && !envlog_io_get()->fstatat(env->sessions_fd, hex, &st))
        return true;
    uint64_t wm;
    return (snap && envlog_snap_watermark(snap, id, &wm)) ||
           (prev && envlog_snap_watermark(prev, id, &wm));
}
