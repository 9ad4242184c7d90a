/* SPDX-License-Identifier: MIT */
/*
 * version.c - which envlog a program runs with (envlog(3), VERSION).
 */
#include "envlog.h"

unsigned envlog_version(void)
{
    return ENVLOG_VERSION_NUMBER;
}

const char *envlog_version_string(void)
{
    return ENVLOG_VERSION_STRING;
}
