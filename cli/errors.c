/* SPDX-License-Identifier: MIT */
/*
 * errors.c - how the command says what went wrong: "envlog: error: ..." on
 * standard error, and the exit status a library error gets (envlog(1),
 * EXIT STATUS), with the detail of a failed write of the output.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

int cli_error(int code, const char *fmt, ...)
{
    va_list ap;
    fputs("envlog: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

/* The errno of the last write through cli_fwrite() that failed: a renderer
 * returns its writer's ENVLOG_IO as it is, with no detail of its own, so
 * cli_fail() says this rather than an older failure's detail. */
static int write_errno;

int cli_fail(envlog_err e, const char *what)
{
    return cli_fail_said(e, what, envlog_errmsg());
}

int cli_fail_said(envlog_err e, const char *what, const char *said)
{
    int err = write_errno;
    write_errno = 0;
    if (e == ENVLOG_IO && err)
        return cli_error(EXIT_USAGE, "%s: writing the output failed: %s", what,
                         strerror(err));
    int code = EXIT_USAGE;
    switch (e) {
    case ENVLOG_FORMAT:
    case ENVLOG_BAD_DATA:
    case ENVLOG_TOO_BIG: code = EXIT_INPUT; break;
    case ENVLOG_CORRUPT:
    case ENVLOG_TRUNCATED: code = EXIT_DAMAGE; break;
    default: break;
    }
    return cli_error(code, "%s: %s (%s)", what, said, envlog_strerror(e));
}

envlog_err cli_fwrite(void *ctx, const char *text, size_t len)
{
    if (fwrite(text, 1, len, ctx) == len)
        return ENVLOG_OK;
    write_errno = errno ? errno : EIO;
    return ENVLOG_IO;
}
