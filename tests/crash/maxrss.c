/* SPDX-License-Identifier: MIT */
/*
 * maxrss.c - runs a command and reports its peak memory.
 *
 *   maxrss LIMIT_KIB COMMAND [ARGS...]
 *
 * Runs COMMAND, then prints "maxrss N KiB" on standard error (its peak
 * resident set, from wait4's rusage) and exits with its exit status, or
 * with 99 when the peak passed LIMIT_KIB, or 98 when it died of a signal
 * (a crash is never an exit status a test could expect).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: maxrss LIMIT_KIB COMMAND [ARGS...]\n");
        return 2;
    }
    long limit = atol(argv[1]);
    pid_t pid = fork();
    if (pid < 0) {
        perror("maxrss: fork");
        return 2;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror("maxrss: exec");
        _exit(127);
    }
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid) {
        perror("maxrss: wait4");
        return 2;
    }
    fprintf(stderr, "maxrss %ld KiB\n", ru.ru_maxrss);
    if (WIFSIGNALED(st)) {
        fprintf(stderr, "maxrss: %s died of signal %d (%s)\n", argv[2], WTERMSIG(st),
                strsignal(WTERMSIG(st)));
        return 98;
    }
    if (ru.ru_maxrss > limit) {
        fprintf(stderr, "maxrss: %s used %ld KiB, over the bound of %ld KiB\n", argv[2],
                ru.ru_maxrss, limit);
        return 99;
    }
    return WEXITSTATUS(st);
}
