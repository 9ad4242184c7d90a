/* SPDX-License-Identifier: MIT */
/*
 * output.c - where a command's output file goes (envlog(1), OUTPUT FILES).
 *
 * "-" is standard output.  A path that names nothing gets a new file,
 * written under a temporary name beside it, synced and given its name
 * without replacing anything that appeared meanwhile.  A regular file is
 * replaced, the same way, only with --force.  A FIFO or a device is written
 * through, never replaced.  A symbolic link is refused unless --follow, and
 * then what it points to is treated by these same rules.  Sockets and
 * directories are refused.  New files follow the umask: they are made to
 * leave the environment.
 *
 * Input works the same way: "-" is standard input (cli_read_input).
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A temporary name of `path`'s own: PATH.tmp.PID.XXXXXX. */
static int tmp_for(const char *path, char *tmp, size_t size)
{
    int n = snprintf(tmp, size, "%s.tmp.%ld.XXXXXX", path, (long)getpid());
    if (n < 0 || (size_t)n >= size)
        return -1;
    return mkstemp(tmp);
}

/* Removes the temporary files of `path` that a killed run left: made by a
 * process that no longer runs here, a minute old or more. */
static void clean_stale(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    if (slash == path)
        snprintf(dir, sizeof dir, "/");
    DIR *d = opendir(dir);
    if (!d)
        return;
    size_t bl = strlen(base);
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *nm = de->d_name;
        if (strncmp(nm, base, bl) || strncmp(nm + bl, ".tmp.", 5))
            continue;
        char *end;
        long pid = strtol(nm + bl + 5, &end, 10);
        if (end == nm + bl + 5 || *end != '.' || strlen(end + 1) != 6 || pid <= 0)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        struct stat st;
        if (fstatat(dirfd(d), nm, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
            time(NULL) - st.st_mtime < 60)
            continue;
        unlinkat(dirfd(d), nm, 0);
    }
    closedir(d);
}

bool cli_is_stdio(const char *path)
{
    return !path || !strcmp(path, "-");
}

/* A new file under a temporary name beside `path`, 0666 less the umask. */
static int begin_file(const char *cmd, cli_out *o)
{
    clean_stale(o->path);
    int fd = tmp_for(o->path, o->tmp, sizeof o->tmp);
    if (fd >= 0) {
        mode_t m = umask(0);
        umask(m);
        if (fchmod(fd, 0666 & ~m)) {
            close(fd);
            unlink(o->tmp);
            fd = -1;
        }
    }
    if (fd < 0 || !(o->f = fdopen(fd, "w"))) {
        int err = errno;
        if (fd >= 0) {
            close(fd);
            unlink(o->tmp);
        }
        return cli_error(EXIT_USAGE, "%s: cannot create a file beside %s: %s", cmd, o->path,
                         strerror(err));
    }
    return EXIT_OK;
}

static const char *type_name(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISSOCK(m) ? "a socket" : S_ISLNK(m)
        ? "a symbolic link" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) || S_ISBLK(m)
        ? "a device" : "a regular file";
}

static int begin_at(const char *cmd, const char *path, const char *link, unsigned flags,
                    cli_out *o);

int cli_out_begin(const char *cmd, const char *path, unsigned flags, cli_out *o)
{
    return begin_at(cmd, path, NULL, flags, o);
}

/* `link`: the symbolic link the user named, that led to `path`. */
static int begin_at(const char *cmd, const char *path, const char *link, unsigned flags,
                    cli_out *o)
{
    memset(o, 0, sizeof *o);
    if (cli_is_stdio(path)) {
        o->how = CLI_OUT_STDOUT;
        o->f = stdout;
        return EXIT_OK;
    }
    snprintf(o->path, sizeof o->path, "%s", path);
    struct stat st;
    if (lstat(path, &st)) {
        if (errno != ENOENT)
            return cli_error(EXIT_USAGE, "%s: %s: %s", cmd, path, strerror(errno));
        o->how = CLI_OUT_NEW;
        return begin_file(cmd, o);
    }
    if (S_ISLNK(st.st_mode)) {
        if (!(flags & CLI_OUT_FOLLOW))
            return cli_error(EXIT_USAGE, "%s: %s is a symbolic link; refused (--follow writes "
                             "to what it points to)", cmd, path);
        char real[PATH_MAX];
        if (!realpath(path, real))
            return cli_error(EXIT_USAGE, "%s: %s is a symbolic link to nothing that can be "
                             "written (%s)", cmd, path, strerror(errno));
        return begin_at(cmd, real, path, flags & ~CLI_OUT_FOLLOW, o);
    }
    if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
        /* Written through: a FIFO's reader or a device takes the bytes. */
        int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 || !(o->f = fdopen(fd, "w"))) {
            int err = errno;
            if (fd >= 0)
                close(fd);
            return cli_error(EXIT_USAGE, "%s: cannot write to %s (%s): %s", cmd, path,
                             type_name(st.st_mode), strerror(err));
        }
        o->how = CLI_OUT_THROUGH;
        return EXIT_OK;
    }
    if (!S_ISREG(st.st_mode))
        return cli_error(EXIT_USAGE, "%s: %s%s is %s; envlog writes files, FIFOs and devices",
                         cmd, link ? link : path, link ? " points to what" : "",
                         type_name(st.st_mode));
    if (!(flags & CLI_OUT_FORCE))
        return cli_error(EXIT_USAGE, "%s: %s%s exists; --force replaces it", cmd,
                         link ? link : path, link ? " points to a file that" : "");
    o->how = CLI_OUT_REPLACE;
    return begin_file(cmd, o);
}

int cli_out_end(const char *cmd, cli_out *o, bool ok)
{
    if (o->how == CLI_OUT_STDOUT) {
        if (fflush(stdout) || ferror(stdout))
            return ok ? cli_error(EXIT_USAGE, "%s: writing standard output failed: %s", cmd,
                                  strerror(errno)) : EXIT_USAGE;
        return ok ? EXIT_OK : EXIT_USAGE;
    }
    int err = 0;
    if (fflush(o->f) || ferror(o->f))
        err = errno ? errno : EIO;
    else if (o->how != CLI_OUT_THROUGH && fsync(fileno(o->f)))
        err = errno;
    if (fclose(o->f) && !err)
        err = errno;
    o->f = NULL;
    if (o->how == CLI_OUT_THROUGH)
        return !ok ? EXIT_USAGE : err ? cli_error(EXIT_USAGE, "%s: writing %s failed: %s", cmd,
                                                  o->path, strerror(err)) : EXIT_OK;
    if (!ok || err) {
        unlink(o->tmp);
        return ok ? cli_error(EXIT_USAGE, "%s: writing %s failed: %s", cmd, o->path,
                              strerror(err)) : EXIT_USAGE;
    }
    /* A new file never replaces one that appeared meanwhile. */
    if (o->how == CLI_OUT_NEW ? link(o->tmp, o->path) : rename(o->tmp, o->path)) {
        err = errno;
        unlink(o->tmp);
        if (err == EEXIST)
            return cli_error(EXIT_USAGE, "%s: %s appeared while it was written; --force "
                             "replaces it", cmd, o->path);
        return cli_error(EXIT_USAGE, "%s: cannot name %s: %s", cmd, o->path, strerror(err));
    }
    if (o->how == CLI_OUT_NEW)
        unlink(o->tmp);
    return EXIT_OK;
}

envlog_err cli_out_write(void *ctx, const char *p, size_t n)
{
    cli_out *o = ctx;
    return cli_fwrite(o->f, p, n);
}

/* ------------------------------------------------------------------ input */

int cli_read_input(const char *cmd, const char *path, uint64_t max, void **data, size_t *n)
{
    *data = NULL;
    *n = 0;
    const char *name = cli_is_stdio(path) ? "standard input" : path;
    FILE *f = stdin;
    if (!cli_is_stdio(path)) {
        /* A named input is a regular file: a FIFO planted there would
         * hold the command forever (standard input is the way to pipe). */
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        if (fd < 0)
            return cli_error(EXIT_USAGE, "%s: cannot open %s: %s", cmd, name, strerror(errno));
        if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
            close(fd);
            return cli_error(EXIT_INPUT, "%s: %s is %s, not a file (use - and a pipe)", cmd,
                             name, type_name(st.st_mode));
        }
        if (!(f = fdopen(fd, "rb"))) {
            close(fd);
            return cli_error(EXIT_USAGE, "%s: cannot open %s: %s", cmd, name, strerror(errno));
        }
    }
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    int rc = buf ? EXIT_OK : cli_error(EXIT_USAGE, "%s: out of memory", cmd);
    while (!rc) {
        if (len == cap) {
            if (cap >= max) {
                rc = cli_error(EXIT_INPUT, "%s: %s is over %llu bytes", cmd, name,
                               (unsigned long long)max);
                break;
            }
            unsigned char *p = realloc(buf, cap * 2);
            if (!p) {
                rc = cli_error(EXIT_USAGE, "%s: out of memory reading %s", cmd, name);
                break;
            }
            buf = p;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f))
                rc = cli_error(EXIT_USAGE, "%s: reading %s failed: %s", cmd, name,
                               strerror(errno));
            break;
        }
    }
    if (f != stdin)
        fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    *data = buf;
    *n = len;
    return EXIT_OK;
}

bool cli_out_flag(const char *a, unsigned *flags)
{
    if (!strcmp(a, "--force") || !strcmp(a, "-f"))
        *flags |= CLI_OUT_FORCE;
    else if (!strcmp(a, "--follow"))
        *flags |= CLI_OUT_FOLLOW;
    else
        return false;
    return true;
}

int cli_bundle_in_open(const char *cmd, const char *arg, cli_bundle_in *b)
{
    memset(b, 0, sizeof *b);
    if (!cli_is_stdio(arg)) {
        b->path = b->name = arg;
        return EXIT_OK;
    }
    b->name = "standard input";
    return cli_read_input(cmd, arg, ENVLOG_BUNDLE_MAX_SIZE, &b->data, &b->n);
}

void cli_bundle_in_close(cli_bundle_in *b)
{
    free(b->data);
    b->data = NULL;
}

envlog_err cli_bundle_inspect(const cli_bundle_in *b, envlog_bundle_info **info)
{
    return b->path ? envlog_bundle_inspect(b->path, info)
                   : envlog_bundle_inspect_memory(b->data, b->n, info);
}
