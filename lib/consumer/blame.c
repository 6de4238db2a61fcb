/*
 * blame.c - charging a producer's crash or time-out to the sample it was
 * decoding (else to its batch), through the breakers' counts, and the
 * error that ends the run when a condemned sample cannot be left out.
 * Trusts nothing the dead producer's state record says until the
 * loader's own record confirms it.
 */
#include "config.h"

#include <string.h>

#include "common/assert.h"
#include "consumer/loader-internal.h"
#include "source/dataset.h"

/* Whether producer p owes batch seq: the batch its state record names
 * is shared memory, checked before a death is charged to it. */
static bool owes_batch(const rf_loader *l, uint32_t p, uint64_t seq)
{
    for (uint32_t s = 0; s < l->slots; s++)
        if (l->slot_info[s].where == SLOT_AT_PRODUCER &&
            l->slot_info[s].producer == p && l->slot_info[s].seq == seq)
            return true;
    return false;
}

/* Whether `sample` is one of the samples of batch seq (as above). */
static bool sample_in_batch(const rf_loader *l, uint64_t seq, uint64_t sample)
{
    const uint64_t epoch = seq / l->order.batches_per_epoch;
    const uint64_t number = seq % l->order.batches_per_epoch;
    const uint64_t first = number * l->order.batch_size;
    const uint32_t count = rf__order_batch_samples(&l->order, number);
    for (uint32_t i = 0; i < count; i++)
        if (rf__order_sample(&l->order, epoch, first + i) == sample)
            return true;
    return false;
}

void rf__loader_describe_sample(const rf_loader *l, uint64_t index, char *out,
                                size_t len)
{
    if (l->described)
        rf__dataset_describe(l->described, index, out, len);
    else
        rf__format(out, len, "sample %llu", (unsigned long long)index);
}

/* The other samples that broke producers, for the message that ends the
 * run: "; sample 9 (b.jpg) broke 2 producers, ...", or "". */
static void describe_other_breakers(const rf_loader *l, uint64_t except,
                                    char *out, size_t len)
{
    const struct rf__breaker *others[4];
    const uint32_t n = rf__breakers_others(&l->breakers, except, others, 4);
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t i = 0; i < n && i < 4 && used + 1 < len; i++) {
        char who[RF__SAMPLE_NAME_MAX];
        rf__loader_describe_sample(l, others[i]->key, who, sizeof(who));
        rf__format(out + used, len - used, "%s%s broke %u producer%s",
                   i == 0 ? "; also " : ", ", who, others[i]->deaths,
                   others[i]->deaths == 1 ? "" : "s");
        used += strlen(out + used);
    }
    if (n > 4 && used + 1 < len)
        rf__format(out + used, len - used, ", and %u more samples", n - 4);
}

/* The error that ends the run for a condemned sample (fail policy, or a
 * skip list already full). */
static int sample_breaks_run(rf_loader *l, const char *what, uint64_t sample)
{
    char who[RF__SAMPLE_NAME_MAX], others[RF__DETAIL / 2];
    rf__loader_describe_sample(l, sample, who, sizeof(who));
    describe_other_breakers(l, sample, others, sizeof(others));
    return set_error(
        l, RF_E_PRODUCER_DIED,
        "%s; %s has now broken %d producers, so it crashes or hangs the "
        "decoder: remove that file from the dataset, or %s%s",
        what, who, RF__BREAKER_DEATHS,
        l->skip_errors ? "check the decoder: more samples than the skip "
                         "policy can leave out this way broke it"
                       : "set RF_PARAM_ON_ERROR to RF_ON_ERROR_SKIP to leave "
                         "such samples out",
        others);
}

bool rf__loader_current_sample(const rf_loader *l, uint32_t p, uint64_t *sample)
{
    RF_ASSERT(p < l->producers);
    const struct rf__producer_state *st = rf__segment_producer(&l->seg, p);
    const uint64_t seq = rf__load_relaxed64(&st->current_seq);
    if (seq == UINT64_MAX || !owes_batch(l, p, seq))
        return false;
    *sample = rf__load_relaxed64(&st->current_sample);
    return sample_in_batch(l, seq, *sample);
}

/* Producer p crashed or timed out filling batch seq: the death is
 * charged to the sample it was on (else to the batch). A sample charged
 * RF__BREAKER_DEATHS times is left out under the skip policy and ends the
 * run under fail; so does a batch, whose sample is not known. Returns 0
 * to go on with a replacement, or the error. */
int rf__loader_charge_death(rf_loader *l, uint32_t p, uint64_t seq,
                            const char *what)
{
    RF_ASSERT(p < l->producers);
    if (seq == UINT64_MAX || !owes_batch(l, p, seq))
        return 0;
    const struct rf__producer_state *st = rf__segment_producer(&l->seg, p);
    uint64_t sample = rf__load_relaxed64(&st->current_sample);
    if (!sample_in_batch(l, seq, sample))
        sample = UINT64_MAX;
    const struct rf__breaker *r =
        rf__breakers_charge(&l->breakers, seq, sample);
    if (r->deaths < RF__BREAKER_DEATHS)
        return 0;
    if (r->kind == RF__BREAKER_BATCH)
        return set_error(l, RF_E_PRODUCER_DIED,
                         "%s; batch %llu has now broken %d producers between "
                         "its samples: look for what crashes them (a "
                         "sanitizer's report or a core dump)",
                         what, (unsigned long long)seq, RF__BREAKER_DEATHS);
    if (l->skip_errors &&
        rf__breakers_condemn(&l->breakers, sample,
                             rf__segment_broken(&l->seg)) == 0)
        return 0; /* the producer that fills it again leaves it out */
    return sample_breaks_run(l, what, sample);
}
