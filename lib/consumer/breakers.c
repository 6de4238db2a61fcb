/*
 * breakers.c - counts the producers each sample (or batch) crashed or
 * hung, and the list of condemned samples producers leave out (see
 * breakers.h; the list's layout and its reader are
 * channel/broken-list.h's). Owns nothing but the records it is handed.
 */
#include "config.h"

#include "consumer/breakers.h"

#include <errno.h>
#include <stddef.h>

#include "channel/atomics.h"

static struct rf__breaker *find_or_make(struct rf__breakers *b, uint32_t kind,
                                        uint64_t key)
{
    struct rf__breaker *fewest = &b->rec[0];
    for (size_t i = 0; i < RF__BREAKERS_MAX; i++) {
        struct rf__breaker *r = &b->rec[i];
        if (r->kind == kind && r->key == key)
            return r;
        if (r->deaths < fewest->deaths)
            fewest = r; /* unused records have 0: taken first */
    }
    *fewest = (struct rf__breaker){.key = key, .kind = kind};
    return fewest;
}

const struct rf__breaker *rf__breakers_charge(struct rf__breakers *b,
                                              uint64_t batch, uint64_t sample)
{
    struct rf__breaker *r = sample != UINT64_MAX
                                ? find_or_make(b, RF__BREAKER_SAMPLE, sample)
                                : find_or_make(b, RF__BREAKER_BATCH, batch);
    r->deaths++;
    return r;
}

uint32_t rf__breakers_others(const struct rf__breakers *b, uint64_t except,
                             const struct rf__breaker **out, uint32_t max)
{
    uint32_t n = 0;
    for (size_t i = 0; i < RF__BREAKERS_MAX; i++) {
        const struct rf__breaker *r = &b->rec[i];
        if (r->kind != RF__BREAKER_SAMPLE || r->deaths == 0 || r->key == except)
            continue;
        /* Insertion by deaths, keeping the `max` with the most. */
        uint32_t k = n < max ? n++ : max;
        while (k > 0 && out[k - 1]->deaths < r->deaths) {
            if (k < max)
                out[k] = out[k - 1];
            k--;
        }
        if (k < max)
            out[k] = r;
    }
    return n;
}

void rf__breakers_carry(struct rf__breakers *to,
                        const struct rf__breakers *from)
{
    for (size_t i = 0; i < RF__BREAKERS_MAX; i++)
        if (from->rec[i].kind == RF__BREAKER_SAMPLE)
            to->rec[i] = from->rec[i];
    for (uint32_t i = 0; i < from->condemned_count; i++)
        to->condemned[i] = from->condemned[i];
    to->condemned_count = from->condemned_count;
}

void rf__breakers_publish(const struct rf__breakers *b,
                          struct rf__broken_list *shared)
{
    for (uint32_t i = 0; i < b->condemned_count; i++)
        rf__store_relaxed64(&shared->index[i], b->condemned[i]);
    /* The entries before the count that makes them visible. */
    rf__store_release32(&shared->count, b->condemned_count);
}

int rf__breakers_condemn(struct rf__breakers *b, uint64_t sample,
                         struct rf__broken_list *shared)
{
    if (b->condemned_count == RF__BROKEN_MAX)
        return -ENOSPC;
    b->condemned[b->condemned_count++] = sample;
    rf__breakers_publish(b, shared);
    return 0;
}
