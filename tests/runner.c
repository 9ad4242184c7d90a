/* SPDX-License-Identifier: MIT */
/*
 * runner.c - the one test runner: every suite, forked per test (CK_FORK
 * unless the environment says otherwise), in a temporary root that is
 * removed at the end however the tests went.
 *
 * `runner [SUITE...]` runs the named suites only, `runner -SUITE...`
 * every suite but those; CK_RUN_SUITE and CK_RUN_CASE work as Check
 * documents them.
 */
#include "suites.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    Suite *(*make)(void);
} suites[] = {
    {"core", suite_core},
    {"log", suite_log},
    {"session", suite_session},
    {"replay", suite_replay},
    {"snapshot", suite_snapshot},
    {"upkeep", suite_upkeep},
    {"cuda", suite_cuda},
    {"reliability", suite_reliability},
};
#define N_SUITES (sizeof suites / sizeof suites[0])

/* The index of the suite called `name`; N_SUITES when none is. */
static size_t suite_of(const char *name)
{
    size_t i = 0;
    while (i < N_SUITES && strcmp(name, suites[i].name))
        i++;
    return i;
}

int main(int argc, char **argv)
{
    const char *tmp = getenv("TMPDIR");
    char *root = NULL;
    if (asprintf(&root, "%s/envlog-tests-XXXXXX", tmp && *tmp ? tmp : "/tmp") < 0 ||
        !mkdtemp(root)) {
        perror("envlog tests: making a temporary directory");
        return 2;
    }
    setenv("ENVLOG_TEST_ROOT", root, 1);
    /* No test may fall back on the user's own environment. */
    unsetenv("ENVLOG_DIR");
    setenv("XDG_CACHE_HOME", root, 1);

    SRunner *sr = NULL;
    bool except = argc > 1 && argv[1][0] == '-';
    for (int k = 1; k < argc; k++)
        if ((argv[k][0] == '-') != except || suite_of(argv[k] + except) == N_SUITES) {
            fprintf(stderr, "envlog tests: %s: name the suites to run, or (each after a "
                            "'-') those not to run, not both\n", argv[k]);
            tu_rmrf(root);
            return 2;
        }
    for (size_t i = 0; i < N_SUITES; i++) {
        bool named = false;
        for (int k = 1; k < argc; k++)
            named |= suite_of(argv[k] + except) == i;
        if (argc > 1 && named == except)
            continue;
        if (!sr)
            sr = srunner_create(suites[i].make());
        else
            srunner_add_suite(sr, suites[i].make());
    }
    if (!sr) {
        fprintf(stderr, "envlog tests: no suite named so\n");
        tu_rmrf(root);
        return 2;
    }
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    tu_rmrf(root);
    free(root);
    return failed ? 1 : 0;
}
