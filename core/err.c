/* SPDX-License-Identifier: MIT */
/*
 * err.c - error codes and the per-thread detail of the last failure.
 *
 * Codes are part of the API and never change once released; the detail is a
 * thread-local string so a handle shared by threads never mixes two causes.
 */
#include "core_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char errmsg_buf[512];

const char *envlog_strerror(envlog_err err)
{
    switch (err) {
    case ENVLOG_OK: return "success";
    case ENVLOG_END: return "no more records";
    case ENVLOG_TRUNCATED: return "torn tail: the log ends in a partial record";
    case ENVLOG_CORRUPT: return "damaged data";
    case ENVLOG_INVALID_ARG: return "invalid argument";
    case ENVLOG_NOMEM: return "out of memory";
    case ENVLOG_IO: return "I/O error";
    case ENVLOG_NOSPACE: return "no space left on device";
    case ENVLOG_FORMAT: return "not an envlog environment or unknown format";
    case ENVLOG_BAD_DATA: return "malformed data";
    case ENVLOG_NOT_FOUND: return "not found";
    case ENVLOG_BUSY: return "locked by another writer";
    case ENVLOG_TOO_BIG: return "over a size limit";
    case ENVLOG_UNAVAILABLE: return "component unavailable";
    case ENVLOG_PERMISSION: return "permission denied";
    case ENVLOG_WRONG_STATE: return "call does not fit the handle's state";
    case ENVLOG_STOPPED: return "stopped by a callback";
    }
    return "unknown error";
}

const char *envlog_errmsg(void)
{
    return errmsg_buf[0] ? errmsg_buf : "no error detail";
}

/* Formats into a copy first: callers often pass envlog_errmsg() itself
 * ("snapshot/current: %s"), and vsnprintf must not write over what it
 * reads. */
static void set_msg(const char *fmt, va_list ap, int errnum)
    __attribute__((format(printf, 1, 0)));
static void set_msg(const char *fmt, va_list ap, int errnum)
{
    char tmp[sizeof errmsg_buf];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    if (n < 0)
        tmp[0] = 0;
    else if (errnum && (size_t)n < sizeof tmp)
        snprintf(tmp + n, sizeof tmp - (size_t)n, ": %s", strerror(errnum));
    memcpy(errmsg_buf, tmp, sizeof tmp);
}

envlog_err envlog__fail(envlog_err err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_msg(fmt, ap, 0);
    va_end(ap);
    return err;
}

envlog_err envlog__errno_code(int errnum)
{
    switch (errnum) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG: return ENVLOG_NOSPACE;
    case ENOMEM: return ENVLOG_NOMEM;
    case ENOENT:
    case ENOTDIR: return ENVLOG_NOT_FOUND;
    case EACCES:
    case EPERM:
    case ELOOP: return ENVLOG_PERMISSION;
    case EWOULDBLOCK: return ENVLOG_BUSY;
    default: return ENVLOG_IO;
    }
}

envlog_err envlog__fail_errno(int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_msg(fmt, ap, errnum);
    va_end(ap);
    return envlog__errno_code(errnum);
}
