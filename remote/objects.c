/* SPDX-License-Identifier: MIT */
/*
 * objects.c - what a remote holds for a session: the session manifest
 * (CBOR, envlog(5) REMOTES), and a local sealed session read for pushing.
 * A downloaded session is checked and put in place by install.c.
 */
#include "remote_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
