/* SPDX-License-Identifier: MIT */
/*
 * progress.c - how far a long command is, on a terminal only (envlog(1),
 * ENVIRONMENT): nothing when standard error is a pipe or a file, nothing
 * for a command done within ENVLOG_PROGRESS_AFTER_MS, and the line cleared
 * when the work ends, so what the command prints after stands alone.
 */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static struct {
    int on;             /* -1: not decided yet */
    uint64_t start_ms;  /* the command began */
    uint64_t after_ms;  /* nothing before start + after */
    uint64_t last_ms;   /* the line was last drawn */
    bool drawn;
    char label[64];
    char step[32];      /* the step last drawn: a new one is drawn at once */
} P = {.on = -1};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void cli_progress_start(void)
{
    P.start_ms = now_ms();
}

void cli_progress_label(const char *label)
{
    snprintf(P.label, sizeof P.label, "%s", label);
}

static bool wanted(bool new_step)
{
    if (P.on < 0) {
        const char *v = getenv("ENVLOG_PROGRESS_AFTER_MS");
        P.after_ms = 1000;
        P.on = isatty(2);
        if (v && !strcmp(v, "off"))
            P.on = 0;
        else if (v && *v) {
            char *end;
            unsigned long long ms = strtoull(v, &end, 10);
            if (!*end)
                P.after_ms = ms;
        }
        if (!P.start_ms)
            P.start_ms = now_ms();
    }
    if (!P.on)
        return false;
    uint64_t t = now_ms();
    if (t - P.start_ms < P.after_ms)
        return false;
    /* Ten lines a second are plenty. */
    if (P.drawn && !new_step && t - P.last_ms < 100)
        return false;
    P.last_ms = t;
    return true;
}

static int columns(void)
{
    struct winsize ws;
    return ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20 ? ws.ws_col : 80;
}

static void draw(const char *step, uint64_t done, uint64_t total, const char *unit)
{
    bool new_step = strcmp(step ? step : "", P.step) != 0;
    if (!wanted(new_step))
        return;
    snprintf(P.step, sizeof P.step, "%s", step ? step : "");
    int pct = total ? (int)(done >= total ? 100 : done * 100 / total) : 0;
    char tail[64];
    if (!strcmp(unit, "MB"))
        snprintf(tail, sizeof tail, "%3d%%  %.1f of %.1f MB", pct, done / 1e6, total / 1e6);
    else
        snprintf(tail, sizeof tail, "%3d%%  %" PRIu64 " of %" PRIu64 " %s", pct, done, total,
                 unit);
    char head[96];
    snprintf(head, sizeof head, "%s%s%s", P.label[0] ? P.label : "envlog", step ? ": " : "",
             step ? step : "");
    int width = columns() - (int)strlen(head) - (int)strlen(tail) - 5;
    if (width > 30)
        width = 30;
    if (width < 0)
        width = 0;
    int filled = width * pct / 100;
    fprintf(stderr, "\r\033[K%s [%.*s%*s] %s", head, filled,
            "##############################", width - filled, "", tail);
    fflush(stderr);
    P.drawn = true;
}

void cli_progress(void *ctx, uint64_t done, uint64_t total)
{
    (void)ctx;
    draw(NULL, done, total, "MB");
}

void cli_progress_step(void *ctx, const char *step, uint64_t done, uint64_t total)
{
    (void)ctx;
    draw(step, done, total, "MB");
}

void cli_progress_count(uint64_t done, uint64_t total, const char *unit)
{
    draw(NULL, done, total, unit);
}

void cli_progress_count_step(void *ctx, const char *step, uint64_t done, uint64_t total)
{
    (void)ctx;
    draw(step, done, total, "entries");
}

void cli_progress_done(void)
{
    if (P.drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    P.drawn = false;
}
