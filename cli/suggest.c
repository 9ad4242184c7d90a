/* SPDX-License-Identifier: MIT */
/*
 * suggest.c - "did you mean": the closest known word to a mistyped command
 * or option, as git and cargo suggest one.  A command's options are the
 * ones its --help text names, so the suggestions never drift from it.
 */
#include "cli.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Edit distance with transpositions (optimal string alignment), bounded:
 * anything past `max` is max + 1. */
static size_t distance(const char *a, const char *b, size_t max)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 64 || m > 64)
        return max + 1;
    if ((n > m ? n - m : m - n) > max)
        return max + 1;
    size_t d[65][65];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m] > max ? max + 1 : d[n][m];
}

/* How far a suggestion may be: a third of the word, at least 1, at most 3. */
static size_t reach(const char *word)
{
    size_t n = strlen(word) / 3;
    return n < 1 ? 1 : n > 3 ? 3 : n;
}

const char *cli_closest(const char *word, const char *const *known, size_t n)
{
    const char *best = NULL;
    size_t max = reach(word), bd = max + 1;
    for (size_t i = 0; i < n; i++) {
        size_t d = distance(word, known[i], max);
        if (d < bd) {
            bd = d;
            best = known[i];
        }
    }
    /* A unique word that begins with what was typed is meant too. */
    if (!best && strlen(word) >= 3) {
        for (size_t i = 0; i < n; i++)
            if (!strncmp(known[i], word, strlen(word))) {
                if (best)
                    return NULL;
                best = known[i];
            }
    }
    return best;
}

/* The options a --help text names: "--word" and "-x" tokens. */
static size_t options_of(const char *usage, char (*out)[32], size_t cap)
{
    size_t n = 0;
    for (const char *p = usage; *p && n < cap; p++) {
        if (*p != '-' || (p > usage && (isalnum((unsigned char)p[-1]) || p[-1] == '-')))
            continue;
        const char *q = p + 1 + (p[1] == '-');
        if (!isalpha((unsigned char)*q))
            continue;
        const char *e = q;
        while (isalnum((unsigned char)*e) || *e == '-')
            e++;
        size_t len = (size_t)(e - p);
        if (len >= 32 || (p[1] != '-' && len != 2))
            continue;
        bool seen = false;
        for (size_t i = 0; i < n && !seen; i++)
            seen = strlen(out[i]) == len && !strncmp(out[i], p, len);
        if (!seen) {
            memcpy(out[n], p, len);
            out[n++][len] = 0;
        }
        p = e - 1;
    }
    return n;
}

int cli_bad_arg(const cli *c, const char *what, const char *arg)
{
    if (arg[0] != '-' || !arg[1])
        return cli_error(EXIT_USAGE, "%s: unexpected argument '%s'", what, arg);
    /* -C is envlog's own, before the command; the usage names it there. */
    if (!strncmp(arg, "-C", 2))
        return cli_error(EXIT_USAGE, "%s: -C goes before the command: envlog -C DIR %s ...", what,
                         c->cmd ? c->cmd->name : "COMMAND");
    char opts[64][32];
    const char *names[64];
    size_t n = c->cmd ? options_of(c->cmd->usage, opts, 64) : 0, k = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(opts[i], "-C"))
            names[k++] = opts[i];
    n = k;
    /* "--name=value": the name is what was mistyped. */
    char word[64];
    snprintf(word, sizeof word, "%.*s", (int)strcspn(arg, "="), arg);
    const char *s = cli_closest(word, names, n);
    if (s)
        return cli_error(EXIT_USAGE, "%s: unknown option '%s'; did you mean '%s'?", what, arg, s);
    return cli_error(EXIT_USAGE, "%s: unknown option '%s' (see envlog %s --help)", what, arg,
                     c->cmd ? c->cmd->name : "");
}
