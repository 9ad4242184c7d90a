/* SPDX-License-Identifier: MIT */
/*
 * remotecfg.c - remotes in the environment's config (envlog(5), CONFIG and
 * REMOTES): lines `remote.NAME.KEY = VALUE` beside the upkeep settings,
 * read with the config's own line reader, checked whole, and written back
 * with every other line kept.
 *
 * A URL is redis://[user[:password]@]host[:port][/db].  A password in it
 * stays in ENV/config (mode 0600) and nowhere else: every text this module
 * makes shows it as "****"; password_env names a variable to take it from
 * instead, so it need not be in a file at all.
 */
#include "remote_int.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const setting_names[] = {"url",       "password_env", "prefix",
                                            "namespace", "auto_pull",    "auto_push",
                                            "timeout",   "push_snapshot"};
#define N_SETTINGS (sizeof setting_names / sizeof setting_names[0])

static bool name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 32)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
            return false;
    return true;
}

/* Parses `url` into c's host, port, db, user and password. */
static envlog_err url_parse(const char *url, envlog_remote_cfg *c, const char *where)
{
    static const char scheme[] = "redis://";
    if (strncmp(url, scheme, sizeof scheme - 1)) {
        if (!strncmp(url, "rediss://", 9))
            return envlog__fail(ENVLOG_INVALID_ARG, "%srediss:// (TLS) is not supported: "
                                "envlog speaks plain RESP (Debian 12's hiredis 0.14 has no "
                                "TLS); run a local TLS tunnel (stunnel4: client = yes, "
                                "accept = 127.0.0.1:PORT, "
                                "connect = HOST:PORT) and name its plain end, "
                                "redis://127.0.0.1:PORT (envlog(5), REMOTES)",
                                where);
        return envlog__fail(ENVLOG_INVALID_ARG, "%sa remote URL begins with redis://", where);
    }
    if (strlen(url) >= sizeof c->url)
        return envlog__fail(ENVLOG_INVALID_ARG, "%sthe URL is too long", where);
    const char *p = url + sizeof scheme - 1;
    const char *at = strrchr(p, '@');
    c->user[0] = c->password[0] = 0;
    c->has_password = false;
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        size_t ul = (size_t)((colon ? colon : at) - p);
        if (ul >= sizeof c->user)
            return envlog__fail(ENVLOG_INVALID_ARG, "%sthe user name is too long", where);
        memcpy(c->user, p, ul);
        c->user[ul] = 0;
        if (colon) {
            size_t pl = (size_t)(at - colon - 1);
            if (pl >= sizeof c->password)
                return envlog__fail(ENVLOG_INVALID_ARG, "%sthe password is too long", where);
            memcpy(c->password, colon + 1, pl);
            c->password[pl] = 0;
            c->has_password = true;
        }
        p = at + 1;
    }
    const char *slash = strchr(p, '/');
    size_t hl = slash ? (size_t)(slash - p) : strlen(p);
    const char *colon = memchr(p, ':', hl);
    size_t hostl = colon ? (size_t)(colon - p) : hl;
    if (hostl == 0 || hostl >= sizeof c->host)
        return envlog__fail(ENVLOG_INVALID_ARG, "%sthe URL names no host", where);
    memcpy(c->host, p, hostl);
    c->host[hostl] = 0;
    c->port = 6379;
    if (colon) {
        char *end;
        errno = 0;
        long port = strtol(colon + 1, &end, 10);
        if (end != p + hl || end == colon + 1 || errno || port < 1 || port > 65535)
            return envlog__fail(ENVLOG_INVALID_ARG, "%sthe port is not a number from 1 to "
                                "65535", where);
        c->port = (int)port;
    }
    c->db = 0;
    if (slash && slash[1]) {
        char *end;
        errno = 0;
        long db = strtol(slash + 1, &end, 10);
        if (*end || errno || db < 0 || db > 1000000 || !isdigit((unsigned char)slash[1]))
            return envlog__fail(ENVLOG_INVALID_ARG, "%sthe database (after /) is not a "
                                "number", where);
        c->db = (int)db;
    }
    snprintf(c->url, sizeof c->url, "%s", url);
    return ENVLOG_OK;
}

void envlog_remote_url_masked(const envlog_remote_cfg *c, char *out, size_t size)
{
    char db[16] = "";
    if (c->db)
        snprintf(db, sizeof db, "/%d", c->db);
    snprintf(out, size, "redis://%s%s%s%s:%d%s", c->user, c->has_password ? ":****" : "",
             c->user[0] || c->has_password ? "@" : "", c->host, c->port, db);
}

static envlog_err bool_of(const char *v, bool *out, const char *where, const char *key)
{
    if (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "yes"))
        *out = true;
    else if (!strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "no"))
        *out = false;
    else
        return envlog__fail(ENVLOG_INVALID_ARG, "%s%s takes on or off, not '%s'", where, key, v);
    return ENVLOG_OK;
}

/* Sets setting `key` of `c` from `value`. */
static envlog_err cfg_set(envlog_remote_cfg *c, const char *key, const char *value,
                          const char *where)
{
    if (!strcmp(key, "url"))
        return url_parse(value, c, where);
    if (!strcmp(key, "password_env")) {
        size_t n = strlen(value);
        if (n >= sizeof c->password_env || strspn(value, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                  "abcdefghijklmnopqrstuvwxyz0123456789_") != n)
            return envlog__fail(ENVLOG_INVALID_ARG, "%spassword_env names an environment "
                                "variable (letters, digits, _), not '%s'", where, value);
        memcpy(c->password_env, value, n + 1);
        return ENVLOG_OK;
    }
    if (!strcmp(key, "prefix")) {
        size_t n = strlen(value);
        if (n == 0 || n >= sizeof c->prefix || strpbrk(value, " \t\r\n"))
            return envlog__fail(ENVLOG_INVALID_ARG, "%sprefix is 1 to 64 characters without "
                                "blanks", where);
        memcpy(c->prefix, value, n + 1);
        return ENVLOG_OK;
    }
    if (!strcmp(key, "namespace")) {
        if (strlen(value) >= sizeof c->ns)
            return envlog__fail(ENVLOG_INVALID_ARG, "%snamespace is too long", where);
        char copy[256];
        snprintf(copy, sizeof copy, "%s", value);
        for (char *t = strtok(copy, ","); t; t = strtok(NULL, ",")) {
            const char *why = envlog_ns_prefix_problem(t);
            if (why)
                return envlog__fail(ENVLOG_INVALID_ARG, "%snamespace '%s': %s", where, t, why);
        }
        snprintf(c->ns, sizeof c->ns, "%s", value);
        return ENVLOG_OK;
    }
    if (!strcmp(key, "auto_pull"))
        return bool_of(value, &c->auto_pull, where, key);
    if (!strcmp(key, "auto_push"))
        return bool_of(value, &c->auto_push, where, key);
    if (!strcmp(key, "push_snapshot"))
        return bool_of(value, &c->push_snapshot, where, key);
    if (!strcmp(key, "timeout")) {
        uint64_t ns;
        if (envlog_parse_age(value, &ns) || ns == 0 || ns > 3600000000000ull)
            return envlog__fail(ENVLOG_INVALID_ARG, "%stimeout takes an age from 1s to 1h "
                                "(such as 2s), not '%s'", where, value);
        c->timeout_ns = ns;
        return ENVLOG_OK;
    }
    return envlog__fail(ENVLOG_INVALID_ARG, "%sunknown remote setting '%s' (url, password_env, "
                        "prefix, namespace, auto_pull, auto_push, timeout, push_snapshot)", where, key);
}

static void cfg_init(envlog_remote_cfg *c, const char *name, size_t n)
{
    memset(c, 0, sizeof *c);
    memcpy(c->name, name, n);
    c->name[n] = 0;
    snprintf(c->prefix, sizeof c->prefix, "envlog");
    c->timeout_ns = ENVLOG_REMOTE_DEFAULT_TIMEOUT_NS;
}

/* Splits "remote.NAME.KEY" into its name and key. */
static envlog_err split_key(const char *key, const char **name, size_t *n, const char **setting,
                            const char *where)
{
    const char *p = key + sizeof ENVLOG_CONFIG_REMOTE - 1;
    const char *dot = strrchr(p, '.');
    if (!dot || !name_ok(p, (size_t)(dot - p)))
        return envlog__fail(ENVLOG_BAD_DATA, "%s'%s' is not remote.NAME.SETTING (a NAME of 1 "
                            "to 32 of A-Z a-z 0-9 _ -)", where, key);
    *name = p;
    *n = (size_t)(dot - p);
    *setting = dot + 1;
    return ENVLOG_OK;
}

envlog_err envlog_remote_line_check(const char *key, const char *value, const char *where)
{
    const char *name, *setting;
    size_t n;
    envlog_err e = split_key(key, &name, &n, &setting, where);
    if (e)
        return e;
    envlog_remote_cfg c;
    cfg_init(&c, name, n);
    if ((e = cfg_set(&c, setting, value, where)))
        return envlog__fail(ENVLOG_BAD_DATA, "%s", envlog_errmsg());
    memset(&c, 0, sizeof c);
    return ENVLOG_OK;
}

typedef struct read_ctx {
    envlog_remotes *r;
    bool seen[64][N_SETTINGS];
} read_ctx;

static envlog_err read_line(void *ctx, const char *key, const char *value, const char *where)
{
    read_ctx *rc = ctx;
    envlog_remotes *r = rc->r;
    if (strncmp(key, ENVLOG_CONFIG_REMOTE, sizeof ENVLOG_CONFIG_REMOTE - 1))
        return ENVLOG_OK;
    const char *name, *setting;
    size_t n;
    envlog_err e = split_key(key, &name, &n, &setting, where);
    if (e)
        return e;
    size_t i = 0;
    while (i < r->n && (strlen(r->v[i].name) != n || memcmp(r->v[i].name, name, n)))
        i++;
    if (i == r->n) {
        if (r->n == 64)
            return envlog__fail(ENVLOG_BAD_DATA, "%smore than 64 remotes", where);
        envlog_remote_cfg *v = envlog_realloc(r->v, (r->n + 1) * sizeof *v);
        if (!v)
            return envlog__fail(ENVLOG_NOMEM, "reading the remotes");
        r->v = v;
        cfg_init(&r->v[r->n++], name, n);
    }
    for (size_t k = 0; k < N_SETTINGS; k++)
        if (!strcmp(setting, setting_names[k])) {
            if (rc->seen[i][k])
                return envlog__fail(ENVLOG_BAD_DATA, "%s%s is given twice", where, key);
            rc->seen[i][k] = true;
        }
    if ((e = cfg_set(&r->v[i], setting, value, where)))
        return envlog__fail(ENVLOG_BAD_DATA, "%s", envlog_errmsg());
    return ENVLOG_OK;
}

envlog_err envlog_remotes_read(envlog_env *env, envlog_remotes *out)
{
    memset(out, 0, sizeof *out);
    envlog_buf b = {0};
    envlog_err e = envlog_read_file(env->dirfd, "config", 65536, &b);
    if (e == ENVLOG_NOT_FOUND) {
        envlog_buf_free(&b);
        return ENVLOG_OK;
    }
    read_ctx *rc = NULL;
    if (!e && !(rc = envlog_calloc(1, sizeof *rc)))
        e = envlog__fail(ENVLOG_NOMEM, "reading the remotes");
    if (!e) {
        rc->r = out;
        e = envlog_config_lines((const char *)b.p, b.len, read_line, rc);
    }
    for (size_t i = 0; !e && i < out->n; i++)
        if (!out->v[i].url[0])
            e = envlog__fail(ENVLOG_BAD_DATA, "config: remote %s has no url", out->v[i].name);
    if (e && e != ENVLOG_NOMEM && e != ENVLOG_BAD_DATA)
        e = envlog__fail(e, "%s/%s", env->path, envlog_errmsg());
    envlog_free(rc);
    envlog_buf_free(&b);
    if (e)
        envlog_remotes_free(out);
    return e;
}

void envlog_remotes_free(envlog_remotes *r)
{
    if (r->v)
        memset(r->v, 0, r->n * sizeof *r->v);
    envlog_free(r->v);
    r->v = NULL;
    r->n = 0;
}

static envlog_err put_line(envlog_buf *b, const char *name, const char *key, const char *value)
{
    char line[900];
    int n = snprintf(line, sizeof line, "remote.%s.%s = %s\n", name, key, value);
    return envlog_buf_append(b, line, (size_t)n);
}

envlog_err envlog_remotes_write(envlog_env *env, const envlog_remotes *r)
{
    envlog_config c;
    envlog_err e = envlog_config_read(env, &c);
    if (e)
        return e;
    envlog_buf b = {0};
    for (size_t i = 0; !e && i < r->n; i++) {
        const envlog_remote_cfg *x = &r->v[i];
        char t[32];
        snprintf(t, sizeof t, "%" PRIu64 "s", x->timeout_ns / 1000000000u);
        e = put_line(&b, x->name, "url", x->url);
        if (!e && x->password_env[0])
            e = put_line(&b, x->name, "password_env", x->password_env);
        if (!e && strcmp(x->prefix, "envlog"))
            e = put_line(&b, x->name, "prefix", x->prefix);
        if (!e && x->ns[0])
            e = put_line(&b, x->name, "namespace", x->ns);
        if (!e && x->auto_pull)
            e = put_line(&b, x->name, "auto_pull", "on");
        if (!e && x->auto_push)
            e = put_line(&b, x->name, "auto_push", "on");
        if (!e && x->timeout_ns != ENVLOG_REMOTE_DEFAULT_TIMEOUT_NS)
            e = put_line(&b, x->name, "timeout", t);
        if (!e && x->push_snapshot)
            e = put_line(&b, x->name, "push_snapshot", "on");
    }
    if (!e)
        e = envlog_config_write_x(env, &c, (const char *)b.p, b.len);
    if (b.p)
        memset(b.p, 0, b.len);
    envlog_buf_free(&b);
    return e;
}

envlog_err envlog_remote_pick(envlog_remotes *r, const char *name, envlog_remote_cfg **out)
{
    *out = NULL;
    if (!name && r->n == 1) {
        *out = &r->v[0];
        return ENVLOG_OK;
    }
    const char *want = name ? name : "origin";
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->v[i].name, want)) {
            *out = &r->v[i];
            return ENVLOG_OK;
        }
    if (!r->n)
        return envlog__fail(ENVLOG_NOT_FOUND, "no remote: add one with envlog remote add NAME "
                            "redis://host:port");
    char names[400] = "";
    for (size_t i = 0; i < r->n; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                 r->v[i].name);
    return envlog__fail(ENVLOG_NOT_FOUND, "no remote %s%s (there are: %s)", want,
                        name ? "" : " and more than one remote: name one", names);
}

size_t envlog_remote_ns_list(envlog_remote_cfg *c, const char **out, size_t max)
{
    size_t n = 0;
    char *save = NULL;
    for (char *t = strtok_r(c->ns, ",", &save); t && n < max; t = strtok_r(NULL, ",", &save))
        out[n++] = t;
    return n;
}

/* ----------------------------------------------------------- the API */

static envlog_err edit(envlog_env *env, const char *name, const char *key, const char *value,
                       int op)
{
    if (!env || !name)
        return envlog__fail(ENVLOG_INVALID_ARG, "no environment or remote name");
    if (!name_ok(name, strlen(name)))
        return envlog__fail(ENVLOG_INVALID_ARG, "'%s' is not a remote name (1 to 32 of A-Z "
                            "a-z 0-9 _ -)", name);
    envlog_remotes r;
    envlog_err e = envlog_remotes_read(env, &r);
    if (e)
        return e;
    size_t i = 0;
    while (i < r.n && strcmp(r.v[i].name, name))
        i++;
    if (op == 0 && i < r.n)
        e = envlog__fail(ENVLOG_INVALID_ARG, "remote %s is there already (envlog remote "
                         "remove %s first)", name, name);
    else if (op != 0 && i == r.n)
        e = envlog__fail(ENVLOG_NOT_FOUND, "no remote %s", name);
    if (!e && op == 0) {
        envlog_remote_cfg *v = envlog_realloc(r.v, (r.n + 1) * sizeof *v);
        if (!v)
            e = envlog__fail(ENVLOG_NOMEM, "adding a remote");
        else {
            r.v = v;
            cfg_init(&r.v[r.n++], name, strlen(name));
        }
    }
    if (!e && op == 2) {
        memmove(&r.v[i], &r.v[i + 1], (r.n - i - 1) * sizeof *r.v);
        r.n--;
    } else if (!e) {
        e = cfg_set(&r.v[i], key, value, "");
    }
    if (!e)
        e = envlog_remotes_write(env, &r);
    envlog_remotes_free(&r);
    return e;
}

envlog_err envlog_remote_add(envlog_env *env, const char *name, const char *url,
                             const char *password_env)
{
    if (!url)
        return envlog__fail(ENVLOG_INVALID_ARG, "no URL");
    envlog_remote_cfg probe;
    cfg_init(&probe, "x", 1);
    envlog_err e = url_parse(url, &probe, "");
    if (!e && password_env)
        e = cfg_set(&probe, "password_env", password_env, "");
    memset(&probe, 0, sizeof probe);
    if (!e)
        e = edit(env, name, "url", url, 0);
    if (!e && password_env)
        e = edit(env, name, "password_env", password_env, 1);
    return e;
}

envlog_err envlog_remote_set(envlog_env *env, const char *name, const char *key,
                             const char *value)
{
    if (!key || !value)
        return envlog__fail(ENVLOG_INVALID_ARG, "no setting or value");
    return edit(env, name, key, value, 1);
}

envlog_err envlog_remote_remove(envlog_env *env, const char *name)
{
    return edit(env, name, NULL, NULL, 2);
}

envlog_err envlog_remote_list(envlog_env *env, envlog_remote_info **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    envlog_remotes r;
    envlog_err e = envlog_remotes_read(env, &r);
    if (e)
        return e;
    if (r.n && !(*out = envlog_calloc(r.n, sizeof **out))) {
        envlog_remotes_free(&r);
        return envlog__fail(ENVLOG_NOMEM, "listing remotes");
    }
    for (size_t i = 0; i < r.n; i++) {
        envlog_remote_info *o = &(*out)[i];
        const envlog_remote_cfg *c = &r.v[i];
        snprintf(o->name, sizeof o->name, "%s", c->name);
        envlog_remote_url_masked(c, o->url, sizeof o->url);
        snprintf(o->prefix, sizeof o->prefix, "%s", c->prefix);
        snprintf(o->password_env, sizeof o->password_env, "%s", c->password_env);
        snprintf(o->ns, sizeof o->ns, "%s", c->ns);
        o->auto_pull = c->auto_pull;
        o->auto_push = c->auto_push;
        o->push_snapshot = c->push_snapshot;
        o->timeout_ns = c->timeout_ns;
        char push[96], pull[96];
        envlog_remote_status_get(env, c->name, "push", push, sizeof push);
        envlog_remote_status_get(env, c->name, "pull", pull, sizeof pull);
        snprintf(o->last_auto, sizeof o->last_auto, "%s%s%s", push, push[0] && pull[0] ? "; " : "",
                 pull);
    }
    *n = r.n;
    envlog_remotes_free(&r);
    return ENVLOG_OK;
}

void envlog_remote_list_free(envlog_remote_info *v)
{
    envlog_free(v);
}
