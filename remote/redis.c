/* SPDX-License-Identifier: MIT */
/*
 * redis.c - the hiredis glue: the library loaded with dlopen at run time
 * (libhiredis.so.MAJOR.MINOR of the headers it was built with, or
 * $ENVLOG_HIREDIS), connections with a timeout, authentication, pipelined
 * commands, and replies read with a bound on their size, so a hostile
 * server cannot make this process take more memory than the caller allows.
 *
 * Without the hiredis headers at build time this file only says so: the
 * library and the command build with libcbor, libxxhash and libzstd alone
 * and every local feature works.  Passwords go to the server only; no
 * message here ever holds one.
 */
#include "remote_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#if defined(__has_include)
#if __has_include(<hiredis/hiredis.h>)
#define HAVE_HIREDIS 1
#endif
#endif

#ifndef HAVE_HIREDIS

envlog_err envlog_redis_load(void)
{
    return envlog__fail(ENVLOG_UNAVAILABLE, "remotes are unavailable: this envlog was "
                        "built without the hiredis headers (libhiredis-dev)");
}
envlog_err envlog_rconn_open(const envlog_remote_cfg *c, uint64_t timeout_ns,
                             envlog_rconn **out)
{
    (void)c;
    (void)timeout_ns;
    *out = NULL;
    return envlog_redis_load();
}
void envlog_rconn_close(envlog_rconn *c) { (void)c; }
envlog_err envlog_rconn_append(envlog_rconn *c, int argc, const char **argv,
                               const size_t *lens)
{
    (void)c, (void)argc, (void)argv, (void)lens;
    return envlog_redis_load();
}
envlog_err envlog_rconn_reply(envlog_rconn *c, size_t max, envlog_rreply **out)
{
    (void)c, (void)max;
    *out = NULL;
    return envlog_redis_load();
}
void envlog_rreply_free(envlog_rreply *r) { (void)r; }
const char *envlog_rconn_label(const envlog_rconn *c) { (void)c; return "remote"; }
const envlog_remote_cfg *envlog_rconn_cfg(const envlog_rconn *c) { (void)c; return NULL; }

#else

#include <hiredis/hiredis.h>

static struct {
    void *lib;
    __typeof__(redisConnectWithTimeout) *connect;
    __typeof__(redisSetTimeout) *set_timeout;
    __typeof__(redisFree) *free_ctx;
    __typeof__(redisAppendCommandArgv) *append;
    __typeof__(redisBufferWrite) *buf_write;
    __typeof__(redisBufferRead) *buf_read;
    __typeof__(redisGetReplyFromReader) *from_reader;
    __typeof__(freeReplyObject) *free_reply;
    char why[300];
} hr;
static pthread_once_t hr_once = PTHREAD_ONCE_INIT;

#define STR2(x) #x
#define STR(x) STR2(x)
#if HIREDIS_MAJOR == 0
#define ENVLOG_HIREDIS_LIB "libhiredis.so." STR(HIREDIS_MAJOR) "." STR(HIREDIS_MINOR)
#else
#define ENVLOG_HIREDIS_LIB "libhiredis.so." STR(HIREDIS_MAJOR) "." STR(HIREDIS_MINOR) "." STR(HIREDIS_PATCH)
#endif

static void hr_load(void)
{
    const char *name = getenv("ENVLOG_HIREDIS");
    if (!name || !*name)
        name = ENVLOG_HIREDIS_LIB;
    hr.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!hr.lib) {
        const char *d = dlerror();
        snprintf(hr.why, sizeof hr.why, "remotes are unavailable: cannot load %s (%s); "
                 "install libhiredis0.14 (Debian) or name the library in ENVLOG_HIREDIS",
                 name, d ? d : "not found");
        return;
    }
    static const char *const names[] = {
        "redisConnectWithTimeout", "redisSetTimeout", "redisFree", "redisAppendCommandArgv",
        "redisBufferWrite", "redisBufferRead", "redisGetReplyFromReader", "freeReplyObject"};
    void **slots[] = {(void **)&hr.connect, (void **)&hr.set_timeout, (void **)&hr.free_ctx,
                      (void **)&hr.append, (void **)&hr.buf_write, (void **)&hr.buf_read,
                      (void **)&hr.from_reader, (void **)&hr.free_reply};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        *slots[i] = dlsym(hr.lib, names[i]);
        if (!*slots[i]) {
            snprintf(hr.why, sizeof hr.why, "remotes are unavailable: %s has no %s (not "
                     "hiredis %d.%d)", name, names[i], HIREDIS_MAJOR, HIREDIS_MINOR);
            dlclose(hr.lib);
            hr.lib = NULL;
            return;
        }
    }
}

envlog_err envlog_redis_load(void)
{
    pthread_once(&hr_once, hr_load);
    return hr.lib ? ENVLOG_OK : envlog__fail(ENVLOG_UNAVAILABLE, "%s", hr.why);
}

struct envlog_rconn {
    redisContext *ctx;
    envlog_remote_cfg cfg;
    char label[700];
    bool broken;   /* a reply was refused or the link failed: no more calls */
};

const char *envlog_rconn_label(const envlog_rconn *c)
{
    return c ? c->label : "remote";
}

const envlog_remote_cfg *envlog_rconn_cfg(const envlog_rconn *c)
{
    return &c->cfg;
}

static struct timeval tv_of(uint64_t ns)
{
    struct timeval tv = {(time_t)(ns / 1000000000u), (suseconds_t)(ns % 1000000000u / 1000u)};
    if (!tv.tv_sec && !tv.tv_usec)
        tv.tv_usec = 1000;
    return tv;
}

static envlog_err link_fail(envlog_rconn *c, const char *doing)
{
    c->broken = true;
    const char *what = c->ctx->errstr[0] ? c->ctx->errstr : "connection lost";
    if (c->ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK))
        what = "timed out";
    return envlog__fail(ENVLOG_IO, "%s: %s: %s", c->label, doing, what);
}

envlog_err envlog_rconn_open(const envlog_remote_cfg *cfg, uint64_t timeout_ns,
                             envlog_rconn **out)
{
    *out = NULL;
    envlog_err e = envlog_redis_load();
    if (e)
        return e;
    envlog_rconn *c = envlog_calloc(1, sizeof *c);
    if (!c)
        return envlog__fail(ENVLOG_NOMEM, "connecting to a remote");
    c->cfg = *cfg;
    char url[600];
    envlog_remote_url_masked(cfg, url, sizeof url);
    snprintf(c->label, sizeof c->label, "remote %s (%s)", cfg->name, url);
    if (!cfg->has_password && cfg->password_env[0]) {
        const char *pw = getenv(cfg->password_env);
        if (!pw) {
            e = envlog__fail(ENVLOG_PERMISSION, "%s: its password comes from $%s, which is "
                             "not set", c->label, cfg->password_env);
            envlog_free(c);
            return e;
        }
        snprintf(c->cfg.password, sizeof c->cfg.password, "%s", pw);
        c->cfg.has_password = true;
    }
    c->ctx = hr.connect(cfg->host, cfg->port, tv_of(timeout_ns));
    if (!c->ctx) {
        envlog_free(c);
        return envlog__fail(ENVLOG_NOMEM, "connecting to a remote");
    }
    if (c->ctx->err) {
        e = envlog__fail(ENVLOG_IO, "%s: cannot connect: %s", c->label,
                         c->ctx->err == REDIS_ERR_IO && errno == EINPROGRESS ? "timed out"
                                                                             : c->ctx->errstr);
        envlog_rconn_close(c);
        return e;
    }
    hr.set_timeout(c->ctx, tv_of(timeout_ns));
    envlog_rreply *r = NULL;
    if (c->cfg.has_password) {
        const char *argv[3] = {"AUTH", c->cfg.user, c->cfg.password};
        int argc = 3;
        if (!c->cfg.user[0]) {
            argv[1] = c->cfg.password;
            argc = 2;
        }
        e = envlog_rconn_call(c, 4096, &r, argc, argv, NULL);
        if (!e && r->type == ENVLOG_R_ERROR)
            e = envlog__fail(ENVLOG_PERMISSION, "%s: authentication refused: %.*s", c->label,
                             (int)(r->len > 160 ? 160 : r->len), r->str);
        envlog_rreply_free(r);
        r = NULL;
    }
    if (!e && c->cfg.db) {
        char db[24];
        snprintf(db, sizeof db, "%d", c->cfg.db);
        const char *argv[2] = {"SELECT", db};
        e = envlog_rconn_call(c, 4096, &r, 2, argv, NULL);
        if (!e && r->type == ENVLOG_R_ERROR)
            e = envlog_rreply_fail(c, r, "selecting its database");
        envlog_rreply_free(r);
        r = NULL;
    }
    if (!e) {
        const char *argv[1] = {"PING"};
        e = envlog_rconn_call(c, 4096, &r, 1, argv, NULL);
        if (!e && r->type == ENVLOG_R_ERROR)
            e = envlog_rreply_fail(c, r, "answering PING");
        envlog_rreply_free(r);
    }
    /* The password is not kept past the handshake. */
    memset(c->cfg.password, 0, sizeof c->cfg.password);
    if (e) {
        envlog_rconn_close(c);
        return e;
    }
    *out = c;
    return ENVLOG_OK;
}

void envlog_rconn_close(envlog_rconn *c)
{
    if (!c)
        return;
    if (c->ctx)
        hr.free_ctx(c->ctx);
    memset(&c->cfg, 0, sizeof c->cfg);
    envlog_free(c);
}

envlog_err envlog_rconn_append(envlog_rconn *c, int argc, const char **argv,
                               const size_t *lens)
{
    if (c->broken)
        return envlog__fail(ENVLOG_IO, "%s: the connection was given up", c->label);
    size_t l[16];
    if (!lens) {
        if (argc > 16)
            return envlog__fail(ENVLOG_INVALID_ARG, "too many arguments");
        for (int i = 0; i < argc; i++)
            l[i] = strlen(argv[i]);
        lens = l;
    }
    if (hr.append(c->ctx, argc, argv, lens) != REDIS_OK)
        return link_fail(c, "queueing a command");
    return ENVLOG_OK;
}

static envlog_err convert(redisReply *in, envlog_rreply *out, int depth)
{
    memset(out, 0, sizeof *out);
    switch (in->type) {
    case REDIS_REPLY_STRING: out->type = ENVLOG_R_STRING; break;
    case REDIS_REPLY_STATUS: out->type = ENVLOG_R_STATUS; break;
    case REDIS_REPLY_ERROR: out->type = ENVLOG_R_ERROR; break;
    case REDIS_REPLY_INTEGER: out->type = ENVLOG_R_INTEGER; break;
    case REDIS_REPLY_NIL: out->type = ENVLOG_R_NIL; break;
    case REDIS_REPLY_ARRAY: out->type = ENVLOG_R_ARRAY; break;
    default: return envlog__fail(ENVLOG_BAD_DATA, "a reply of unknown type %d", in->type);
    }
    out->integer = in->integer;
    out->str = in->str;
    out->len = in->str ? in->len : 0;
    if (in->type != REDIS_REPLY_ARRAY || !in->elements)
        return ENVLOG_OK;
    if (depth > 2)
        return envlog__fail(ENVLOG_BAD_DATA, "a reply nested deeper than envlog asks");
    if (!(out->el = envlog_calloc(in->elements, sizeof *out->el)))
        return envlog__fail(ENVLOG_NOMEM, "reading a reply");
    out->n = in->elements;
    for (size_t i = 0; i < in->elements; i++) {
        envlog_err e = convert(in->element[i], &out->el[i], depth + 1);
        if (e)
            return e;
    }
    return ENVLOG_OK;
}

static void free_tree(envlog_rreply *r)
{
    for (size_t i = 0; i < r->n; i++)
        free_tree(&r->el[i]);
    envlog_free(r->el);
}

void envlog_rreply_free(envlog_rreply *r)
{
    if (!r)
        return;
    free_tree(r);
    if (r->raw_)
        hr.free_reply(r->raw_);
    envlog_free(r);
}

envlog_err envlog_rconn_reply(envlog_rconn *c, size_t max, envlog_rreply **out)
{
    *out = NULL;
    if (c->broken)
        return envlog__fail(ENVLOG_IO, "%s: the connection was given up", c->label);
    int done = 0;
    while (!done)
        if (hr.buf_write(c->ctx, &done) != REDIS_OK)
            return link_fail(c, "sending");
    void *raw = NULL;
    for (;;) {
        if (hr.from_reader(c->ctx, &raw) != REDIS_OK)
            return link_fail(c, "reading a reply");
        if (raw)
            break;
        /* What the reader holds unparsed is the reply so far: past the
         * bound, the server is not sending what was asked for. */
        redisReader *rd = c->ctx->reader;
        if (rd->len - rd->pos > max + 65536) {
            c->broken = true;
            return envlog__fail(ENVLOG_TOO_BIG, "%s: a reply over %zu bytes, more than "
                                "envlog asked for; refused", c->label, max);
        }
        if (hr.buf_read(c->ctx) != REDIS_OK)
            return link_fail(c, "reading a reply");
    }
    envlog_rreply *r = envlog_calloc(1, sizeof *r);
    if (!r) {
        hr.free_reply(raw);
        return envlog__fail(ENVLOG_NOMEM, "reading a reply");
    }
    envlog_err e = convert(raw, r, 0);
    r->raw_ = raw;
    if (e) {
        c->broken = true;
        envlog_rreply_free(r);
        return envlog__fail(e, "%s: %s", c->label, envlog_errmsg());
    }
    *out = r;
    return ENVLOG_OK;
}

#endif /* HAVE_HIREDIS */

envlog_err envlog_rconn_call(envlog_rconn *c, size_t max, envlog_rreply **out, int argc,
                             const char **argv, const size_t *lens)
{
    *out = NULL;
    envlog_err e = envlog_rconn_append(c, argc, argv, lens);
    return e ? e : envlog_rconn_reply(c, max, out);
}

envlog_err envlog_rreply_fail(const envlog_rconn *c, const envlog_rreply *r, const char *what)
{
    int n = (int)(r->len > 200 ? 200 : r->len);
    const char *s = r->str ? r->str : "";
    if (!strncmp(s, "OOM", 3))
        return envlog__fail(ENVLOG_NOSPACE, "%s is full (maxmemory) %s: %.*s",
                            envlog_rconn_label(c), what, n, s);
    if (!strncmp(s, "NOAUTH", 6) || !strncmp(s, "NOPERM", 6) || !strncmp(s, "WRONGPASS", 9))
        return envlog__fail(ENVLOG_PERMISSION, "%s refused %s: %.*s", envlog_rconn_label(c),
                            what, n, s);
    if (!strncmp(s, "WRONGTYPE", 9))
        return envlog__fail(ENVLOG_BAD_DATA, "%s holds a key of another type %s (not "
                            "envlog's?): %.*s", envlog_rconn_label(c), what, n, s);
    return envlog__fail(ENVLOG_IO, "%s failed %s: %.*s", envlog_rconn_label(c), what, n, s);
}

envlog_err envlog_remote_available(void)
{
    return envlog_redis_load();
}
