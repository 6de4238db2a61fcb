/*
 * fds.c - keeps the library's file descriptors off 0, 1 and 2 (see
 * fds.h for why). Owns nothing.
 */
#include "config.h"

#include "common/fds.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int rf__fd_off_stdio(int fd)
{
    if (fd < 0 || fd > 2)
        return fd;
    const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    const int err = errno;
    close(fd);
    errno = err;
    return moved;
}

void rf__stdio_fill(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
            continue;
        /* The lowest free number: this one, as the lower ones are open. */
        const int null = open("/dev/null", O_RDWR);
        if (null >= 0 && null != fd) {
            (void)dup2(null, fd);
            close(null);
        }
    }
}
