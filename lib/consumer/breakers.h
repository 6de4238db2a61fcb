/*
 * breakers.h - samples that crash or hang the producers that decode them.
 *
 * The consumer charges each producer that crashed (a signal other than
 * SIGKILL, a non-zero exit) or timed out to the sample it was decoding,
 * or to its batch when the sample is not known. Counts are kept per
 * sample and per batch for the whole run, never "in a row": two bad
 * samples in flight at once would otherwise reset each other's count and
 * keep the run replacing producers until RF_PARAM_MAX_RESPAWNS.
 *
 * A sample that reaches RF__BREAKER_DEATHS is condemned. With the skip
 * policy the consumer lists it in the control segment (struct
 * rf__broken_list, channel/broken-list.h), and whichever producer fills its
 * batch next leaves it out as a failed sample; with the fail policy the run
 * ends naming it.
 */
#ifndef RF_BREAKERS_H
#define RF_BREAKERS_H

#include <stdint.h>

#include "channel/broken-list.h"

/* RF__BREAKER_DEATHS (channel/broken-list.h, which producers read too)
 * condemns a sample, or ends the run for a batch whose deaths no sample
 * can be blamed for. */

/* Records the consumer keeps; when all are taken, the one with the
 * fewest deaths makes room. */
#define RF__BREAKERS_MAX 64

enum rf__breaker_kind { RF__BREAKER_SAMPLE = 1, RF__BREAKER_BATCH = 2 };

struct rf__breaker {
    uint64_t key;    /* dataset index, or batch sequence number */
    uint32_t kind;   /* enum rf__breaker_kind; 0: unused */
    uint32_t deaths; /* producers it crashed or hung */
};

/* The consumer's record. Zeroed memory is an empty one. */
struct rf__breakers {
    struct rf__breaker rec[RF__BREAKERS_MAX];
    uint64_t condemned[RF__BROKEN_MAX];
    uint32_t condemned_count;
};

/* Charges one death: to `sample` when it is known (not UINT64_MAX), else
 * to `batch`. Returns the record charged, with its new count. */
const struct rf__breaker *rf__breakers_charge(struct rf__breakers *b,
                                              uint64_t batch, uint64_t sample);

/* The samples other than `except` charged with at least one death, most
 * deaths first: stores at most `max` records in out, returns how many. */
uint32_t rf__breakers_others(const struct rf__breakers *b, uint64_t except,
                             const struct rf__breaker **out, uint32_t max);

/* Condemns `sample` and writes the whole list to `shared`. Returns 0, or
 * -ENOSPC when RF__BROKEN_MAX samples are condemned already. */
int rf__breakers_condemn(struct rf__breakers *b, uint64_t sample,
                         struct rf__broken_list *shared);

/* Copies from's samples into `to` (an empty record): their deaths and the
 * condemned list, so that a run started again leaves out what it left
 * out; not the batches' records, whose deaths were that run's. */
void rf__breakers_carry(struct rf__breakers *to,
                        const struct rf__breakers *from);

/* Writes the consumer's list over whatever `shared` holds now. */
void rf__breakers_publish(const struct rf__breakers *b,
                          struct rf__broken_list *shared);

#endif /* RF_BREAKERS_H */
