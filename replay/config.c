/* SPDX-License-Identifier: MIT */
/*
 * config.c - the environment's settings file, ENV/config (envlog(5),
 * CONFIG): when the environment compacts itself, how much history its
 * snapshot keeps, and how large it may grow.
 *
 * The file is lines of `key = value`, `#` comments and blank lines.  It is
 * read whole and applied whole: an unknown key, a value of the wrong kind or
 * out of range, a key given twice, is an error naming the key and line, and
 * then none of the file applies (the defaults do not either: whoever reads
 * it says so).  It is written by `envlog config` under a temporary name and
 * renamed into place.
 */
#include "replay_int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_MAX 65536

void envlog_config_defaults(envlog_config *c)
{
    memset(c, 0, sizeof *c);
    c->auto_compact = true;
    c->compact_sessions = ENVLOG_DEFAULT_COMPACT_SESSIONS;
    c->compact_bytes = ENVLOG_DEFAULT_COMPACT_BYTES;
    c->evidence = ENVLOG_EVIDENCE_WINNERS;
    c->history_sessions = ENVLOG_DEFAULT_HISTORY_SESSIONS;
    c->history_age_ns = 0;
    c->max_size = 0;
}

typedef enum ktype { K_BOOL, K_COUNT, K_SIZE, K_AGE, K_EVIDENCE } ktype;

static const struct key {
    const char *name;
    ktype type;
    size_t off;
    uint64_t min;
    const char *what;
} keys[] = {
    {"auto_compact", K_BOOL, offsetof(envlog_config, auto_compact), 0,
     "compact by itself past the two thresholds below (on, off)"},
    {"compact_sessions", K_COUNT, offsetof(envlog_config, compact_sessions), 1,
     "when this many sessions are not in the snapshot yet"},
    {"compact_bytes", K_SIZE, offsetof(envlog_config, compact_bytes), 32768,
     "or when their segments take this many bytes"},
    {"evidence", K_EVIDENCE, offsetof(envlog_config, evidence), 0,
     "the history a compaction keeps: none, winners, all"},
    {"history_sessions", K_COUNT, offsetof(envlog_config, history_sessions), 0,
     "history of the newest this many sessions only (0: all)"},
    {"history_age", K_AGE, offsetof(envlog_config, history_age_ns), 0,
     "history younger than this only (0: any age)"},
    {"max_size", K_SIZE, offsetof(envlog_config, max_size), 0,
     "evict, least recently set first, past this size (0: no bound)"},
};
#define N_KEYS (sizeof keys / sizeof keys[0])

static const char *const evidence_names[] = {"none", "winners", "all"};

envlog_err envlog_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*s))
        return ENVLOG_INVALID_ARG;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return ENVLOG_INVALID_ARG;
    static const struct { const char *suffix; int shift; } units[] = {
        {"", 0}, {"B", 0}, {"K", 10}, {"KB", 10}, {"KiB", 10}, {"M", 20}, {"MB", 20},
        {"MiB", 20}, {"G", 30}, {"GB", 30}, {"GiB", 30}, {"T", 40}, {"TB", 40}, {"TiB", 40},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].suffix)) {
            if (units[i].shift && v > (UINT64_MAX >> units[i].shift))
                return ENVLOG_INVALID_ARG;
            *out = (uint64_t)v << units[i].shift;
            return ENVLOG_OK;
        }
    return ENVLOG_INVALID_ARG;
}

envlog_err envlog_parse_age(const char *s, uint64_t *ns)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)*s))
        return ENVLOG_INVALID_ARG;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return ENVLOG_INVALID_ARG;
    static const struct { const char *suffix; uint64_t ns; } units[] = {
        {"", 1000000000ull}, {"s", 1000000000ull}, {"m", 60000000000ull},
        {"h", 3600000000000ull}, {"d", 86400000000000ull}, {"w", 604800000000000ull},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(end, units[i].suffix)) {
            if (v > UINT64_MAX / units[i].ns)
                return ENVLOG_INVALID_ARG;
            *ns = (uint64_t)v * units[i].ns;
            return ENVLOG_OK;
        }
    return ENVLOG_INVALID_ARG;
}

/* Sets `key` to `value` in `c`: ENVLOG_BAD_DATA naming what is wrong, after
 * `where` (a line of the file and ": ", or nothing). */
static envlog_err set_key(envlog_config *c, const char *key, const char *value,
                          const char *where, bool *seen)
{
    for (size_t i = 0; i < N_KEYS; i++) {
        const struct key *k = &keys[i];
        if (strcmp(k->name, key))
            continue;
        if (seen) {
            if (seen[i])
                return envlog__fail(ENVLOG_BAD_DATA, "%s%s is given twice", where, key);
            seen[i] = true;
        }
        void *field = (char *)c + k->off;
        uint64_t v = 0;
        envlog_err e = ENVLOG_OK;
        switch (k->type) {
        case K_BOOL:
            if (!strcmp(value, "on") || !strcmp(value, "true") || !strcmp(value, "yes"))
                *(bool *)field = true;
            else if (!strcmp(value, "off") || !strcmp(value, "false") || !strcmp(value, "no"))
                *(bool *)field = false;
            else
                return envlog__fail(ENVLOG_BAD_DATA, "%s%s takes on or off, not '%s'",
                                    where, key, value);
            return ENVLOG_OK;
        case K_EVIDENCE:
            for (int x = 0; x < 3; x++)
                if (!strcmp(value, evidence_names[x])) {
                    *(int *)field = x;
                    return ENVLOG_OK;
                }
            return envlog__fail(ENVLOG_BAD_DATA,
                                "%s%s takes none, winners or all, not '%s'", where, key,
                                value);
        case K_COUNT: {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(value, &end, 10);
            if (!isdigit((unsigned char)*value) || *end || errno)
                e = ENVLOG_BAD_DATA;
            v = n;
            break;
        }
        case K_SIZE: e = envlog_parse_size(value, &v); break;
        case K_AGE: e = envlog_parse_age(value, &v); break;
        }
        if (e)
            return envlog__fail(ENVLOG_BAD_DATA, "%s%s takes %s, not '%s'", where, key,
                                k->type == K_COUNT  ? "a whole number"
                                : k->type == K_SIZE ? "a size (such as 64MiB)"
                                                    : "an age (such as 30d)",
                                value);
        if (v < k->min)
            return envlog__fail(ENVLOG_BAD_DATA, "%s%s is at least %" PRIu64 ", not '%s'",
                                where, key, k->min, value);
        *(uint64_t *)field = v;
        return ENVLOG_OK;
    }
    /* The closest name, to help a typo. */
    const char *best = NULL;
    size_t best_common = 0;
    for (size_t i = 0; i < N_KEYS; i++) {
        size_t n = 0;
        while (key[n] && keys[i].name[n] == key[n])
            n++;
        if (n > best_common) {
            best_common = n;
            best = keys[i].name;
        }
    }
    return envlog__fail(ENVLOG_BAD_DATA, "%sunknown setting '%s'%s%s%s", where, key,
                        best && best_common >= 3 ? " (did you mean " : "",
                        best && best_common >= 3 ? best : "",
                        best && best_common >= 3 ? "?)" : "");
}

envlog_err envlog_config_set(envlog_config *c, const char *key, const char *value)
{
    envlog_config tmp = *c;
    envlog_err e = set_key(&tmp, key, value, "", NULL);
    if (!e)
        *c = tmp;
    return e;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = 0;
    return s;
}

envlog_err (*envlog_config_remote_check)(const char *key, const char *value,
                                         const char *where);

envlog_err envlog_config_lines(const char *text, size_t n, envlog_config_line_fn fn,
                               void *ctx)
{
    if (n > CONFIG_MAX)
        return envlog__fail(ENVLOG_TOO_BIG, "config: over %d bytes", CONFIG_MAX);
    if (memchr(text, 0, n) || !envlog_utf8_valid(text, n))
        return envlog__fail(ENVLOG_BAD_DATA, "config: not UTF-8 text");
    char *copy = envlog_malloc(n + 1);
    if (!copy)
        return envlog__fail(ENVLOG_NOMEM, "reading the config");
    memcpy(copy, text, n);
    copy[n] = 0;
    envlog_err e = ENVLOG_OK;
    int line = 0;
    for (char *p = copy, *nl; !e && p && *p; p = nl) {
        nl = strchr(p, '\n');
        if (nl)
            *nl++ = 0;
        line++;
        char *hash = strchr(p, '#');
        if (hash)
            *hash = 0;
        char *s = trim(p);
        if (!*s)
            continue;
        char where[32];
        snprintf(where, sizeof where, "config line %d: ", line);
        char *eq = strchr(s, '=');
        if (!eq) {
            e = envlog__fail(ENVLOG_BAD_DATA, "%snot 'key = value': %.60s", where, s);
            break;
        }
        *eq = 0;
        e = fn(ctx, trim(s), trim(eq + 1), where);
    }
    envlog_free(copy);
    return e;
}

typedef struct parse_ctx {
    envlog_config c;
    bool seen[N_KEYS];
} parse_ctx;

static envlog_err parse_line(void *ctx, const char *key, const char *value, const char *where)
{
    parse_ctx *pc = ctx;
    /* The remotes' lines (remote/): checked by that module where it is
     * there, kept as they are by every write. */
    if (!strncmp(key, ENVLOG_CONFIG_REMOTE, sizeof ENVLOG_CONFIG_REMOTE - 1))
        return envlog_config_remote_check ? envlog_config_remote_check(key, value, where)
                                          : ENVLOG_OK;
    return set_key(&pc->c, key, value, where, pc->seen);
}

envlog_err envlog_config_parse(const char *text, size_t n, envlog_config *out)
{
    parse_ctx pc = {.seen = {false}};
    envlog_config_defaults(&pc.c);
    envlog_err e = envlog_config_lines(text, n, parse_line, &pc);
    if (!e)
        *out = pc.c;
    return e;
}

envlog_err envlog_config_read(envlog_env *env, envlog_config *out)
{
    envlog_config_defaults(out);
    envlog_buf b = {0};
    envlog_err e = envlog_read_file(env->dirfd, "config", CONFIG_MAX, &b);
    if (e == ENVLOG_NOT_FOUND)
        return ENVLOG_OK;
    if (!e)
        e = envlog_config_parse((const char *)b.p, b.len, out);
    else
        e = envlog__fail(e == ENVLOG_TOO_BIG ? ENVLOG_BAD_DATA : e, "%s/%s", env->path,
                         envlog_errmsg());
    envlog_buf_free(&b);
    return e;
}

static envlog_err config_format(const envlog_config *c, envlog_buf *out)
{
    char line[256];
    out->len = 0;
    static const char head[] = "# envlog environment settings: see envlog(5), CONFIG\n";
    envlog_err e = envlog_buf_append(out, head, sizeof head - 1);
    for (size_t i = 0; !e && i < N_KEYS; i++) {
        const struct key *k = &keys[i];
        const void *field = (const char *)c + k->off;
        char v[64];
        switch (k->type) {
        case K_BOOL: snprintf(v, sizeof v, "%s", *(const bool *)field ? "on" : "off"); break;
        case K_EVIDENCE: snprintf(v, sizeof v, "%s", evidence_names[*(const int *)field]); break;
        case K_COUNT: snprintf(v, sizeof v, "%" PRIu64, *(const uint64_t *)field); break;
        case K_SIZE: {
            uint64_t x = *(const uint64_t *)field;
            static const char *const u[] = {"", "KiB", "MiB", "GiB", "TiB"};
            int s = 0;
            while (s < 4 && x && !(x & 1023)) {
                x >>= 10;
                s++;
            }
            snprintf(v, sizeof v, "%" PRIu64 "%s", x, u[s]);
            break;
        }
        case K_AGE: {
            uint64_t x = *(const uint64_t *)field / 1000000000ull;
            const char *u = "s";
            if (x && !(x % 86400)) {
                x /= 86400;
                u = "d";
            } else if (x && !(x % 3600)) {
                x /= 3600;
                u = "h";
            }
            snprintf(v, sizeof v, "%" PRIu64 "%s", x, x ? u : "");
            break;
        }
        }
        int n = snprintf(line, sizeof line, "%-17s= %-10s # %s\n", k->name, v, k->what);
        e = envlog_buf_append(out, line, (size_t)n);
    }
    return e;
}

envlog_err envlog_config_text(const envlog_config *c, envlog_write_fn fn, void *ctx)
{
    envlog_buf b = {0};
    envlog_err e = config_format(c, &b);
    if (!e)
        e = fn(ctx, (const char *)b.p, b.len);
    envlog_buf_free(&b);
    return e;
}

static envlog_err keep_remote_line(void *ctx, const char *key, const char *value,
                                   const char *where)
{
    (void)where;
    if (strncmp(key, ENVLOG_CONFIG_REMOTE, sizeof ENVLOG_CONFIG_REMOTE - 1))
        return ENVLOG_OK;
    envlog_buf *b = ctx;
    envlog_err e = envlog_buf_append(b, key, strlen(key));
    if (!e)
        e = envlog_buf_append(b, " = ", 3);
    if (!e)
        e = envlog_buf_append(b, value, strlen(value));
    return e ? e : envlog_buf_append(b, "\n", 1);
}

envlog_err envlog_config_write(envlog_env *env, const envlog_config *c)
{
    /* The remotes' lines stay as they are. */
    envlog_buf old = {0}, lines = {0};
    envlog_err e = envlog_read_file(env->dirfd, "config", CONFIG_MAX, &old);
    if (e == ENVLOG_NOT_FOUND)
        e = ENVLOG_OK;
    else if (!e)
        e = envlog_config_lines((const char *)old.p, old.len, keep_remote_line, &lines);
    if (!e)
        e = envlog_config_write_x(env, c, (const char *)lines.p, lines.len);
    envlog_buf_free(&old);
    envlog_buf_free(&lines);
    return e;
}

envlog_err envlog_config_write_x(envlog_env *env, const envlog_config *c, const char *extra,
                                 size_t n_extra)
{
    if (env->readonly)
        return envlog__fail(ENVLOG_WRONG_STATE, "%s is open read-only", env->path);
    envlog_buf b = {0};
    char tmp[96];
    envlog_err e = config_format(c, &b);
    if (!e && n_extra)
        e = envlog_buf_append(&b, extra, n_extra);
    if (!e && b.len > CONFIG_MAX)
        e = envlog__fail(ENVLOG_TOO_BIG, "config: over %d bytes", CONFIG_MAX);
    if (!e)
        e = envlog_tmp_name(tmp, sizeof tmp, "config");
    if (!e)
        e = envlog_write_new_file(env->dirfd, tmp, b.p, b.len);
    if (!e && envlog_io_get()->renameat(env->dirfd, tmp, env->dirfd, "config")) {
        e = envlog__fail_errno(errno, "renaming %s to config", tmp);
        envlog_io_get()->unlinkat(env->dirfd, tmp, 0);
    }
    if (!e)
        e = envlog_dir_sync(env->dirfd, "config");
    envlog_buf_free(&b);
    return e;
}
