/*
 * replay.c - a main() for a fuzz target outside libFuzzer: feeds every file
 * of a corpus folder to LLVMFuzzerTestOneInput(), in name order, so that
 * `make check` (and its sanitizer builds) runs the committed corpus, the
 * regression inputs included, through the library. The folder is an
 * argument that names a folder, else $srcdir/tests/fuzz/corpus/TARGET for
 * a program named replay-TARGET (automake's test harness sets srcdir).
 *
 * Each input is a case of its own (tests/harness.h), "TARGET/FILE", in a
 * child of its own: a crash or a sanitizer report names the input, and
 * the other inputs still run; `--list` lists them and other arguments
 * pick them by name. Exit 1 when the folder cannot be read or holds no
 * input.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "../harness.h"

/* The whole file in a malloc'd buffer of exactly its size (so that ASan
 * sees a read past the input); NULL when it cannot be read. */
static uint8_t *read_input(int dir_fd, const char *name, size_t *size)
{
    struct stat st;
    const int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    *size = (size_t)st.st_size;
    uint8_t *data = malloc(*size ? *size : 1);
    size_t done = 0;
    while (data && done < *size) {
        const ssize_t n = read(fd, data + done, *size - done);
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    close(fd);
    if (data && done == *size)
        return data;
    free(data);
    return NULL;
}

static int skip_hidden(const struct dirent *de)
{
    return de->d_name[0] != '.';
}

/* "pack" for .../replay-pack (or libtool's lt-replay-pack). */
static const char *target_of(const char *program)
{
    const char *slash = strrchr(program, '/');
    const char *name = slash ? slash + 1 : program;
    if (strncmp(name, "lt-", 3) == 0)
        name += 3;
    return strncmp(name, "replay-", 7) == 0 ? name + 7 : name;
}

/* The corpus folder, open for the cases' children. */
static int corpus_fd = -1;

/* A case: the input its name names, through the target. */
static void replay_input(void)
{
    const char *name = test_running_case->name;
    size_t size = 0;
    uint8_t *data = read_input(corpus_fd, name, &size);
    if (!data) {
        fprintf(stderr, "%s: cannot be read: %s\n", name, strerror(errno));
        exit(1);
    }
    LLVMFuzzerTestOneInput(data, size);
    free(data);
}

/* Takes the first argument that names a folder out of argv: the corpus.
 * Returns argc without it. */
static int take_folder(int argc, char **argv, char *folder, size_t len)
{
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        snprintf(folder, len, "%s", argv[i]);
        for (int k = i; k + 1 < argc; k++)
            argv[k] = argv[k + 1];
        return argc - 1;
    }
    return argc;
}

int main(int argc, char **argv)
{
    char folder[4096];
    const char *srcdir = getenv("srcdir");
    const char *target = target_of(argv[0]);
    snprintf(folder, sizeof(folder), "%s/tests/fuzz/corpus/%s",
             srcdir ? srcdir : ".", target);
    argc = take_folder(argc, argv, folder, sizeof(folder));
    struct dirent **names = NULL;
    corpus_fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const int n =
        corpus_fd < 0 ? -1 : scandir(folder, &names, skip_hidden, alphasort);
    if (n <= 0) {
        fprintf(stderr, "replay-%s: %s: %s\n", target, folder,
                n == 0 ? "no inputs in it" : strerror(errno));
        return 1;
    }
    struct test_case *cases = calloc((size_t)n, sizeof(*cases));
    if (!cases)
        return 1;
    for (int i = 0; i < n; i++)
        cases[i] = (struct test_case){.topic = target,
                                      .name = names[i]->d_name,
                                      .run = replay_input,
                                      .timeout_s = 60};
    const int status = test_main_cases(argc, argv, cases, (size_t)n);
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(cases);
    close(corpus_fd);
    return status;
}
