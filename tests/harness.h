/*
 * harness.h - test programs as lists of named cases.
 *
 * A test program declares each case where its body is, by the function
 * that runs it, a topic and a name, with a time limit where the default
 * (TEST_DEFAULT_TIMEOUT_S) is not enough:
 *
 *     TEST_CASE(test_killed_is_replaced, "death", "killed producer is
 * replaced")
 *     {
 *         ...
 *     }
 *
 *     TEST_CASE_LIMIT(test_bad_handle, "garbage", "bad handle is an error", 30)
 *     {
 *         ...
 *     }
 *
 *     int main(int argc, char **argv)
 *     {
 *         return TEST_MAIN(argc, argv);
 *     }
 *
 * Cases run topic by topic, topics in the order their first case stands
 * in the file, cases in file order within a topic. A program whose cases
 * are made at run time (one per input file, say) hands its own table to
 * test_main_cases().
 *
 * `prog --list` prints "topic/name" of every case; `prog` runs them all;
 * `prog WORD...` runs the cases whose "topic/name" contains any WORD.
 * Each case runs in a child process of its own, forked from a parent with
 * one thread, in a process group of its own: a failed CHECK (exit 1), a
 * crash or a hang (killed, with its group, after its time limit) is
 * reported by the case's name, and every other case still runs. A case
 * skips (exit TEST_SKIP, 77) when something it needs is missing, saying
 * what; only that case is skipped. One line per case, then
 *
 *     # PROGRAM: N passed, N failed, N skipped
 *
 * which tools/quickstart adds up. The program exits 1 when a case failed,
 * 77 when every case skipped, else 0 (automake's meanings).
 *
 * RF_TEST_CASE_TIMEOUT_SCALE multiplies every case's time limit: a slow
 * machine or a sanitizer build may raise it (tools/quickstart sets 3 for
 * the sanitizer run).
 *
 * RF_TEST_IN_PROCESS=1 runs one case, named exactly ("topic/name"), in the
 * program's own process, for a tool that watches one process:
 * `RF_TEST_IN_PROCESS=1 compute-sanitizer prog "upload/timing events"`
 * (on 2026-11-27 test-cuda's cases hung in their forked children under
 * compute-sanitizer, with other sanitizer runs beside it; the cause was
 * not established). Its failed CHECK or skip ends the program with that
 * exit status; the time limit is the tool's caller's to set. A case that
 * forks (or starts producers) still does.
 */
#ifndef RF_TEST_HARNESS_H
#define RF_TEST_HARNESS_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

struct test_case {
    const char *topic; /* "start", "death", "fork", "garbage", ... */
    const char *name;  /* what it shows, in a few words */
    void (*run)(void);
    unsigned timeout_s; /* 0: TEST_DEFAULT_TIMEOUT_S */
    unsigned line;      /* where TEST_CASE stands; 0 in a run-time table */
};

#define TEST_DEFAULT_TIMEOUT_S 120

/* The cases TEST_CASE declared, in the order their constructors ran. A test
 * program is one translation unit, so one registry per program. */
#define TEST_MAX_CASES 256
static const struct test_case *test_registry_[TEST_MAX_CASES];
static size_t test_registered_;

static inline void test_register_(const struct test_case *c)
{
    if (test_registered_ == TEST_MAX_CASES) {
        fprintf(stderr, "harness: more than %d cases; raise TEST_MAX_CASES\n",
                TEST_MAX_CASES);
        abort();
    }
    test_registry_[test_registered_++] = c;
}

/* Declares case FN of TOPIC, called NAME, killed after LIMIT_S seconds (0:
 * TEST_DEFAULT_TIMEOUT_S); the function's body follows. A constructor
 * registers it before main(), so a case cannot be declared and left out
 * of the program. */
#define TEST_CASE_LIMIT(fn, topic, name, limit_s)                              \
    static void fn(void);                                                      \
    __attribute__((constructor)) static void fn##_register_(void)              \
    {                                                                          \
        static const struct test_case self = {(topic), (name), fn, (limit_s),  \
                                              __LINE__};                       \
        test_register_(&self);                                                 \
    }                                                                          \
    static void fn(void)

#define TEST_CASE(fn, topic, name) TEST_CASE_LIMIT(fn, topic, name, 0)

/* In a case's child, the case it runs: a case made at run time (one per
 * input file, say) finds its input through it. */
static const struct test_case *test_running_case;

/* Skips the running case, saying why. */
#define TEST_SKIP_BECAUSE(...)                                                 \
    do {                                                                       \
        printf("  skipped: ");                                                 \
        printf(__VA_ARGS__);                                                   \
        printf("\n");                                                          \
        fflush(NULL);                                                          \
        exit(TEST_SKIP);                                                       \
    } while (0)

static inline double test_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "topic/name", as --list prints it and arguments name it. */
static inline void test_case_full_name(const struct test_case *c, char *out,
                                       size_t len)
{
    snprintf(out, len, "%s/%s", c->topic, c->name);
}

static inline bool test_case_selected(const struct test_case *c, int argc,
                                      char **argv)
{
    if (argc <= 1)
        return true;
    char full[256];
    test_case_full_name(c, full, sizeof(full));
    for (int i = 1; i < argc; i++)
        if (strstr(full, argv[i]))
            return true;
    return false;
}

/* RF_TEST_CASE_TIMEOUT_SCALE, or 1: how much slower than usual this
 * build or machine runs (a sanitizer build: 3). Cases whose own
 * deadlines must leave room for honest work scale them by it. */
static inline double test_time_scale(void)
{
    const char *scale = getenv("RF_TEST_CASE_TIMEOUT_SCALE");
    const double k = scale && *scale ? strtod(scale, NULL) : 1.0;
    return k > 0 ? k : 1.0;
}

static inline unsigned test_case_limit(const struct test_case *c)
{
    const unsigned own = c->timeout_s ? c->timeout_s : TEST_DEFAULT_TIMEOUT_S;
    return (unsigned)(own * test_time_scale() + 0.5);
}

/* Waits for the case's child until its limit; kills its group then.
 * Returns the wait status, and whether it timed out. */
static inline int test_wait_case(pid_t pid, unsigned limit_s, bool *timed_out)
{
    const double deadline = test_seconds() + limit_s;
    int status = 0;
    *timed_out = false;
    for (;;) {
        const pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR)
            return -1;
        if (!*timed_out && test_seconds() > deadline) {
            *timed_out = true;
            kill(-pid, SIGKILL); /* its producers too */
            kill(pid, SIGKILL);
        }
        const struct timespec ts = {0, 5L * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    /* Whatever the case left in its group (producers it did not close). */
    kill(-pid, SIGKILL);
    return status;
}

/* Runs one case in a child; returns 0 pass, 1 fail, 2 skip. */
static inline int test_run_case(const struct test_case *c)
{
    const unsigned limit = test_case_limit(c);
    const double start = test_seconds();
    fflush(NULL);
    const pid_t pid = fork();
    if (pid < 0) {
        printf("FAIL: %s/%s (fork: %s)\n", c->topic, c->name, strerror(errno));
        return 1;
    }
    if (pid == 0) {
        setpgid(0, 0);
        test_running_case = c;
        c->run();
        fflush(NULL);
        _exit(0);
    }
    setpgid(pid, pid); /* either side may get there first */
    bool timed_out;
    const int status = test_wait_case(pid, limit, &timed_out);
    const double took = test_seconds() - start;
    if (timed_out) {
        printf("FAIL: %s/%s (hung: killed after %u s)\n", c->topic, c->name,
               limit);
        return 1;
    }
    if (status < 0 || WIFSIGNALED(status)) {
        printf("FAIL: %s/%s (killed by signal %d, %s)\n", c->topic, c->name,
               status < 0 ? 0 : WTERMSIG(status),
               status < 0 ? "no status" : strsignal(WTERMSIG(status)));
        return 1;
    }
    const int code = WEXITSTATUS(status);
    const char *word = code == 0 ? "PASS" : code == TEST_SKIP ? "SKIP" : "FAIL";
    printf("%s: %s/%s (%.1f s)\n", word, c->topic, c->name, took);
    return code == 0 ? 0 : code == TEST_SKIP ? 2 : 1;
}

/* RF_TEST_IN_PROCESS: the case named exactly by the one argument, run in
 * this process between setup and teardown (see the top of this file). */
static inline int test_run_in_process_(int argc, char **argv,
                                       const struct test_case *cases, size_t n,
                                       void (*setup)(void),
                                       void (*teardown)(void))
{
    const struct test_case *c = NULL;
    for (size_t i = 0; argc == 2 && i < n; i++) {
        char full[256];
        test_case_full_name(&cases[i], full, sizeof(full));
        if (strcmp(full, argv[1]) == 0)
            c = &cases[i];
    }
    if (!c) {
        printf("RF_TEST_IN_PROCESS=1 runs one case: give its whole "
               "\"topic/name\" as the one argument (--list prints them)\n");
        return 2;
    }
    const double start = test_seconds();
    if (setup)
        setup();
    test_running_case = c;
    c->run();
    if (teardown)
        teardown();
    printf("PASS: %s/%s (%.1f s)\n", c->topic, c->name, test_seconds() - start);
    return 0;
}

static inline bool test_in_process_(void)
{
    const char *v = getenv("RF_TEST_IN_PROCESS");
    return v && strcmp(v, "1") == 0;
}

/* Runs the selected cases between setup and teardown (either may be NULL):
 * see TEST_MAIN_WITH. */
static inline int test_main_with_(int argc, char **argv,
                                  const struct test_case *cases, size_t n,
                                  void (*setup)(void), void (*teardown)(void))
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *prog =
        strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < n; i++)
            printf("%s/%s\n", cases[i].topic, cases[i].name);
        return 0;
    }
    if (test_in_process_())
        return test_run_in_process_(argc, argv, cases, n, setup, teardown);
    unsigned counts[3] = {0, 0, 0}; /* passed, failed, skipped */
    bool set_up = false;
    for (size_t i = 0; i < n; i++) {
        if (!test_case_selected(&cases[i], argc, argv))
            continue;
        if (!set_up && setup)
            setup();
        set_up = true;
        counts[test_run_case(&cases[i])]++;
    }
    if (set_up && teardown)
        teardown();
    printf("# %s: %u passed, %u failed, %u skipped\n", prog, counts[0],
           counts[1], counts[2]);
    if (counts[0] + counts[1] + counts[2] == 0) {
        printf("no case matches\n");
        return 1;
    }
    if (counts[1])
        return 1;
    return counts[0] == 0 ? TEST_SKIP : 0;
}

/* Where TOPIC first stands among the registered cases. */
static inline unsigned test_topic_line_(const char *topic)
{
    unsigned first = ~0u;
    for (size_t i = 0; i < test_registered_; i++)
        if (strcmp(test_registry_[i]->topic, topic) == 0 &&
            test_registry_[i]->line < first)
            first = test_registry_[i]->line;
    return first;
}

static inline bool test_runs_before_(const struct test_case *a,
                                     const struct test_case *b)
{
    const unsigned ta = test_topic_line_(a->topic);
    const unsigned tb = test_topic_line_(b->topic);
    return ta != tb ? ta < tb : a->line < b->line;
}

/* Runs the registered cases topic by topic (see the top of this file). */
static inline int test_main_registered_(int argc, char **argv,
                                        void (*setup)(void),
                                        void (*teardown)(void))
{
    static struct test_case ordered[TEST_MAX_CASES];
    for (size_t i = 0; i < test_registered_; i++) {
        size_t at = i; /* insertion sort: a few dozen cases */
        while (at > 0 &&
               test_runs_before_(test_registry_[i], &ordered[at - 1])) {
            ordered[at] = ordered[at - 1];
            at--;
        }
        ordered[at] = *test_registry_[i];
    }
    return test_main_with_(argc, argv, ordered, test_registered_, setup,
                           teardown);
}

#define TEST_MAIN(argc, argv) test_main_registered_((argc), (argv), NULL, NULL)

/* test_main for a table made at run time, of n cases. */
static inline int test_main_cases(int argc, char **argv,
                                  const struct test_case *cases, size_t n)
{
    return test_main_with_(argc, argv, cases, n, NULL, NULL);
}

/* TEST_MAIN for cases that share what is costly or must outlive them (a
 * scratch folder, fixtures built in memory): setup() runs in the parent
 * before the first selected case, so that every case's child inherits it,
 * and teardown() after the last, whatever the cases did (a failed case
 * cannot clean up after itself). Neither runs for --list or when no case
 * matches. setup() must leave the parent with one thread and no loader
 * open: fork-mode cases are forked from it. */
#define TEST_MAIN_WITH(argc, argv, setup, teardown)                            \
    test_main_registered_((argc), (argv), (setup), (teardown))

#endif /* RF_TEST_HARNESS_H */
