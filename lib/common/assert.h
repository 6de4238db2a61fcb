/*
 * assert.h - the library's internal preconditions: what a caller inside
 * the library must guarantee (a ring size that is a power of two, a slot
 * in range, a slot in the state a transition expects). Checked in
 * sanitizer builds and with `configure --enable-asserts`; compiled out
 * otherwise, so that release builds run at full speed. Never for what
 * another process or the user can cause: shared memory, files and
 * parameters are validated with errors, not asserted.
 */
#ifndef RF_COMMON_ASSERT_H
#define RF_COMMON_ASSERT_H

#include <stdio.h>
#include <stdlib.h>

#ifdef RF_ASSERTS
#define RF_ASSERT(cond)                                                        \
    ((cond) ? (void)0                                                          \
            : (fprintf(stderr, "ringfeed: %s:%d: %s: assertion '%s' failed\n", \
                       __FILE__, __LINE__, __func__, #cond),                   \
               abort()))
#else
/* sizeof: the expression is still compiled (and its names checked), but
 * never evaluated. */
#define RF_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#endif /* RF_COMMON_ASSERT_H */
