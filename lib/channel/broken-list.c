/*
 * broken-list.c - reading the list of samples producers leave out (see
 * broken-list.h). The list is shared memory: every read is bounded by
 * the list's own size, whatever its count says.
 */
#include "config.h"

#include "channel/broken-list.h"

#include "channel/atomics.h"

bool rf__broken_contains(const struct rf__broken_list *shared, uint64_t sample)
{
    uint32_t n = rf__load_acquire32(&shared->count);
    if (n > RF__BROKEN_MAX)
        n = RF__BROKEN_MAX; /* garbage: read no further than the list */
    for (uint32_t i = 0; i < n; i++)
        if (rf__load_relaxed64(&shared->index[i]) == sample)
            return true;
    return false;
}
