/* SPDX-License-Identifier: MIT */
/*
 * hostinfo.c - the CPU's fingerprint, the device component of CPU tunes.
 *
 * A blocking variant that wins on one CPU can lose on another, so CPU tunes
 * are namespaced by the CPU model and the number of online CPUs.  The model
 * is read from /proc/cpuinfo through the I/O table, like every file envlog
 * reads; without it, uname's machine name stands in.
 */
#include "cuda_int.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

uint64_t envlog_cuda__now_ns(void)
{
    return envlog_clock_mono_ns();
}

/* The value of the first "model name" (x86) or "Model"/"Hardware" (arm)
 * line of /proc/cpuinfo. */
static bool cpu_model(char *out, size_t size)
{
    const envlog_io *io = envlog_io_get();
    int fd = io->open("/proc/cpuinfo", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return false;
    char buf[16384];
    ssize_t n = io->pread(fd, buf, sizeof buf - 1, 0);
    io->close(fd);
    if (n <= 0)
        return false;
    buf[n] = 0;
    static const char *const keys[] = {"model name", "Model", "Hardware", "cpu model"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        for (char *line = buf; line && *line;) {
            char *nl = strchr(line, '\n');
            size_t klen = strlen(keys[k]);
            if (!strncmp(line, keys[k], klen) && (line[klen] == ' ' || line[klen] == '\t' ||
                                                   line[klen] == ':')) {
                char *colon = strchr(line, ':');
                if (colon && (!nl || colon < nl)) {
                    char *v = colon + 1;
                    while (*v == ' ' || *v == '\t')
                        v++;
                    size_t len = nl ? (size_t)(nl - v) : strlen(v);
                    while (len && (v[len - 1] == ' ' || v[len - 1] == '\r'))
                        len--;
                    if (len) {
                        if (len >= size)
                            len = size - 1;
                        memcpy(out, v, len);
                        out[len] = 0;
                        return true;
                    }
                }
            }
            line = nl ? nl + 1 : NULL;
        }
    }
    return false;
}

envlog_err envlog_cuda_cpu_fingerprint(char *out, size_t size)
{
    char model[128];
    if (!cpu_model(model, sizeof model)) {
        struct utsname u;
        snprintf(model, sizeof model, "%s", uname(&u) == 0 ? u.machine : "unknown");
    }
    /* Runs of separators collapse, so "Intel(R) Core(TM)" stays readable. */
    char clean[128], squeezed[128];
    envlog_cuda__sanitize(model, clean, sizeof clean);
    size_t j = 0;
    for (size_t i = 0; clean[i]; i++)
        if (clean[i] != '-' || (j && squeezed[j - 1] != '-'))
            squeezed[j++] = clean[i];
    while (j && squeezed[j - 1] == '-')
        j--;
    squeezed[j] = 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int n = snprintf(out, size, "cpu-%s-%ldc", squeezed, ncpu > 0 ? ncpu : 1);
    if (n < 0 || (size_t)n >= size)
        return envlog__fail(ENVLOG_TOO_BIG, "the CPU fingerprint does not fit in %zu bytes",
                            size);
    return ENVLOG_OK;
}
