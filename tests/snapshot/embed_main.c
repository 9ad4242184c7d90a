/* SPDX-License-Identifier: MIT */
/*
 * embed_main.c - a program with a bundle linked in (made by `envlog bundle
 * embed`), which imports it from memory into the environment argv[1].
 */
#include "envlog.h"

#include <stdio.h>

extern const unsigned char envlog_bundle[];
extern const size_t envlog_bundle_size;

int main(int argc, char **argv)
{
    envlog_env *env;
    envlog_import_report r;
    if (argc != 2 || envlog_env_open(argv[1], ENVLOG_OPEN_CREATE, &env) ||
        envlog_bundle_import_memory(env, envlog_bundle, envlog_bundle_size, &r)) {
        fprintf(stderr, "embed: %s\n", envlog_errmsg());
        return 2;
    }
    printf("embedded bundle: %llu taken, %llu skipped, %llu rejected\n",
           (unsigned long long)r.taken, (unsigned long long)r.skipped,
           (unsigned long long)r.rejected);
    envlog_env_close(env);
    return 0;
}
