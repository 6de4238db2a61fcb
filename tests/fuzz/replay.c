/*
 * replay.c - a main() for a fuzz target outside libFuzzer: feeds every file
 * of a corpus folder to LLVMFuzzerTestOneInput(), in name order, so that
 * `make check` (and its sanitizer builds) runs the committed corpus, the
 * regression inputs included, through the library. The folder is the
 * first argument, else $srcdir/tests/fuzz/corpus/TARGET for a program
 * named replay-TARGET (automake's test harness sets srcdir). Exit 0, or 1
 * when the folder cannot be read or holds no input; a bug in the library
 * is a crash or a sanitizer report.
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

int main(int argc, char **argv)
{
    char folder[4096];
    const char *srcdir = getenv("srcdir");
    const char *target = target_of(argv[0]);
    if (argc > 1)
        snprintf(folder, sizeof(folder), "%s", argv[1]);
    else
        snprintf(folder, sizeof(folder), "%s/tests/fuzz/corpus/%s",
                 srcdir ? srcdir : ".", target);
    struct dirent **names = NULL;
    const int dir_fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const int n =
        dir_fd < 0 ? -1 : scandir(folder, &names, skip_hidden, alphasort);
    if (n <= 0) {
        fprintf(stderr, "replay-%s: %s: %s\n", target, folder,
                n == 0 ? "no inputs in it" : strerror(errno));
        return 1;
    }
    int replayed = 0;
    for (int i = 0; i < n; i++) {
        size_t size = 0;
        uint8_t *data = read_input(dir_fd, names[i]->d_name, &size);
        if (data) {
            LLVMFuzzerTestOneInput(data, size);
            replayed++;
        }
        free(data);
        free(names[i]);
    }
    free(names);
    close(dir_fd);
    printf("replay-%s: %d inputs of %s ran without a fault\n", target, replayed,
           folder);
    return replayed > 0 ? 0 : 1;
}
