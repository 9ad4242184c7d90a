/* SPDX-License-Identifier: MIT */
/*
 * kernel_key.c - the kernel key: the hash that names a binary exactly, from
 * the kernel's source, its options, the compiler's full version and the
 * arch.  The cache looks kernels up by it (kcache.c) and a compile stamps
 * it on the binary it makes (nvrtc.c).
 *
 * Each field is length-prefixed after a versioned tag, so no two field
 * lists hash the same bytes.
 */
#include "cuda_int.h"

#include <string.h>

#define KEY_TAG "envlog-cuda-kernel-key/1"

static uint8_t *put_field(uint8_t *p, const char *s)
{
    uint64_t n = strlen(s);
    for (int i = 0; i < 8; i++)
        *p++ = (uint8_t)(n >> (8 * i));
    memcpy(p, s, n);
    return p + n;
}

envlog_err envlog_cuda_kernel_key(const envlog_cuda_kernel_desc *d,
                                  const char *compiler_version, envlog_hash128 *key)
{
    if (!d || !d->source || !d->arch || !compiler_version || !key)
        return envlog__fail(ENVLOG_INVALID_ARG,
                            "a kernel key needs a source, an arch and a compiler version");
    const char *opt = d->options ? d->options : "";
    size_t total = sizeof KEY_TAG + 32;
    const char *parts[] = {d->source, opt, compiler_version, d->arch};
    for (int i = 0; i < 4; i++) {
        size_t n = strlen(parts[i]);
        if (n > SIZE_MAX / 2 - total)
            return envlog__fail(ENVLOG_TOO_BIG, "a kernel source too large to key");
        total += n;
    }
    uint8_t *buf = envlog_malloc(total);
    if (!buf)
        return envlog__fail(ENVLOG_NOMEM, "out of memory for a kernel key");
    memcpy(buf, KEY_TAG, sizeof KEY_TAG); /* with its NUL */
    uint8_t *p = buf + sizeof KEY_TAG;
    for (int i = 0; i < 4; i++)
        p = put_field(p, parts[i]);
    *key = envlog_hash128_bytes(buf, (size_t)(p - buf));
    envlog_free(buf);
    return ENVLOG_OK;
}
