/* SPDX-License-Identifier: MIT */
/*
 * ledger.c - what the remote module keeps in the environment, under
 * ENV/remotes/ (envlog(5) REMOTES):
 *  - the ledger NAME.sent, the sessions a remote is known to hold, so a
 *    compaction can keep a sealed session automatic push has not delivered;
 *  - asked, the sessions whose auto_push option asked for a push whatever
 *    the config says, held back from compaction in the same way;
 *  - NAME.push and NAME.pull, the outcome of the last automatic push and
 *    pull, so a failure is said once and `envlog remote list` can tell it.
 *
 * It sits below everything else of the module: push and pull note here what
 * a remote holds, automatic sharing and the remote list read it back, and
 * nothing here calls up into them.
 */
#include "remote_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ENV/remotes/asked: the sessions whose auto_push option asked for a push
 * to every remote of the config. */
#define ASKED "asked"

static int id_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 16);
}

bool envlog_id_in(const envlog_id128 *sorted, size_t n, const envlog_id128 *id)
{
    return n && bsearch(id, sorted, n, sizeof *sorted, id_cmp);
}

envlog_err envlog_remotes_dir(envlog_env *env, bool make, int *fd)
{
    if (make && envlog_io_get()->mkdirat(env->dirfd, "remotes", 0700) && errno != EEXIST)
        return envlog__fail_errno(errno, "creating %s/remotes", env->path);
    return envlog_open_dir(env->dirfd, "remotes", fd);
}

/* Reads ENV/remotes/FILE, one session id a line, sorted into *ids. */
static envlog_err ids_read(envlog_env *env, const char *file, envlog_id128 **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    int fd;
    envlog_err e = envlog_remotes_dir(env, false, &fd);
    if (e)
        return e == ENVLOG_NOT_FOUND ? ENVLOG_OK : e;
    envlog_buf b = {0};
    e = envlog_read_file(fd, file, (uint64_t)1 << 30, &b);
    close(fd);
    if (e) {
        envlog_buf_free(&b);
        return e == ENVLOG_NOT_FOUND ? ENVLOG_OK : e;
    }
    size_t cap = b.len / 33 + 1;
    if (!(*ids = envlog_calloc(cap, sizeof **ids))) {
        envlog_buf_free(&b);
        return envlog__fail(ENVLOG_NOMEM, "reading %s/remotes/%s", env->path, file);
    }
    /* A line cut short by a crash is not an id: skipped. */
    for (size_t i = 0; i + 33 <= b.len; i += 33) {
        char hex[33];
        memcpy(hex, b.p + i, 32);
        hex[32] = 0;
        if (b.p[i + 32] == '\n' && !envlog_id_parse(hex, &(*ids)[*n]))
            (*n)++;
    }
    envlog_buf_free(&b);
    if (*n)
        qsort(*ids, *n, sizeof **ids, id_cmp);
    return ENVLOG_OK;
}

/* Appends `id` as a line of ENV/remotes/FILE. */
static void ids_append(envlog_env *env, const char *file, const envlog_id128 *id)
{
    int dfd, fd;
    if (envlog_remotes_dir(env, true, &dfd))
        return;
    char line[34];
    envlog_id_format(id, line);
    line[32] = '\n';
    if (!envlog_open_regular(dfd, file, O_WRONLY | O_APPEND | O_CREAT, 0600, &fd, NULL)) {
        /* One write of a whole line: appends from many processes do not
         * mix.  These lists only hold compaction back: a lost line of the
         * ledger costs a session kept one compaction longer, one of the
         * asked list a session that compaction may fold before its push
         * (then only a snapshot carries it to the remote), never data. */
        if (write(fd, line, 33) != 33)
            (void)ftruncate(fd, lseek(fd, 0, SEEK_END) / 33 * 33);
        close(fd);
    }
    close(dfd);
}

envlog_err envlog_ledger_read(envlog_env *env, const char *name, envlog_id128 **ids, size_t *n)
{
    char file[64];
    snprintf(file, sizeof file, "%s.sent", name);
    return ids_read(env, file, ids, n);
}

void envlog_ledger_note(envlog_env *env, const char *name, const envlog_id128 *known,
                        size_t n_known, const envlog_id128 *id)
{
    if (envlog_id_in(known, n_known, id))
        return;
    char file[64];
    snprintf(file, sizeof file, "%s.sent", name);
    ids_append(env, file, id);
}

envlog_err envlog_asked_read(envlog_env *env, envlog_id128 **ids, size_t *n)
{
    return ids_read(env, ASKED, ids, n);
}

void envlog_asked_note(envlog_env *env, const envlog_id128 *id)
{
    ids_append(env, ASKED, id);
}

void envlog_remote_status_get(envlog_env *env, const char *name, const char *kind, char *out,
                              size_t size)
{
    out[0] = 0;
    int fd;
    if (envlog_remotes_dir(env, false, &fd))
        return;
    char file[64];
    snprintf(file, sizeof file, "%s.%s", name, kind);
    envlog_buf b = {0};
    if (!envlog_read_file(fd, file, 4096, &b) && b.len) {
        size_t n = b.len < size ? b.len : size - 1;
        memcpy(out, b.p, n);
        out[n] = 0;
        char *nl = strchr(out, '\n');
        if (nl)
            *nl = 0;
    }
    envlog_buf_free(&b);
    close(fd);
}

bool envlog_remote_status_set(envlog_env *env, const char *name, const char *kind,
                              const char *text)
{
    char old[400];
    envlog_remote_status_get(env, name, kind, old, sizeof old);
    /* The time is not part of what is compared: "T: text". */
    const char *o = strchr(old, ' ');
    bool changed = !o || strcmp(o + 1, text);
    /* The same failure, already said: it stays said. */
    char kept[420];
    size_t tl = strlen(text);
    if (o && !strncmp(o + 1, text, tl) && !strcmp(o + 1 + tl, " (said)")) {
        snprintf(kept, sizeof kept, "%s (said)", text);
        text = kept;
        changed = false;
    }
    int fd;
    if (envlog_remotes_dir(env, true, &fd))
        return changed;
    char file[64], tmp[96], line[512], t[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%SZ", &tm);
    int n = snprintf(line, sizeof line, "%s %s\n", t, text);
    snprintf(file, sizeof file, "%s.%s", name, kind);
    if (!envlog_tmp_name(tmp, sizeof tmp, file) &&
        !envlog_write_new_file(fd, tmp, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1)) &&
        envlog_io_get()->renameat(fd, tmp, fd, file))
        envlog_io_get()->unlinkat(fd, tmp, 0);
    close(fd);
    return changed;
}
