/* SPDX-License-Identifier: MIT */
/*
 * clocks.c - the two clocks a stamp is made of: the monotonic clock that
 * times offsets within a session, and Unix time that lays sessions on one
 * axis.
 */
#include "core_int.h"

#include <time.h>

uint64_t envlog_clock_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t envlog_clock_unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
