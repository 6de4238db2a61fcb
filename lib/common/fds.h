/*
 * fds.h - keeping the library's file descriptors off 0, 1 and 2.
 *
 * A process started with stdin, stdout or stderr closed (a daemon, a shell
 * command ending in 2>&-, some job runners) hands the next open(),
 * memfd_create() or eventfd() the lowest free number: 0, 1 or 2. Whoever
 * then writes to "stderr" (the caller, a library, a sanitizer, a child
 * that inherited it) writes into that file instead: into the control
 * segment, when it is a memfd. So every descriptor the library creates
 * goes through rf__fd_off_stdio(), and producers open /dev/null onto any
 * of the three they were started without (rf__stdio_fill()).
 */
#ifndef RF_FDS_H
#define RF_FDS_H

/* Returns fd itself when it is above 2 or negative (a failed call's -1,
 * errno kept). Otherwise moves it to the lowest free number above 2
 * (close-on-exec) and closes the original: returns the new number, or -1
 * with errno set (the original is closed then too). */
int rf__fd_off_stdio(int fd);

/* In a producer: opens /dev/null onto each of 0, 1 and 2 that is closed,
 * so that nothing the process opens later can land there, and so that
 * its own diagnostics go nowhere rather than into a file. Where /dev/null
 * cannot be opened (no /dev), rf__fd_off_stdio() still keeps the
 * library's descriptors off them. */
void rf__stdio_fill(void);

#endif /* RF_FDS_H */
