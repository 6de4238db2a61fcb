/*
 * tools/bench-verify.h - ringfeed-bench --verify: checks every batch a
 * loader hands out (its order, shape, labels, sample indices and pixels)
 * against what the source makes, and counts what is missing, duplicated
 * or corrupt.
 */
#ifndef RINGFEED_TOOLS_BENCH_VERIFY_H
#define RINGFEED_TOOLS_BENCH_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include <ringfeed.h>

#include "bench-options.h"

struct verifier;

/* What a run's verification found, in samples. */
struct verify_counts {
    uint64_t verified, missing, duplicated, corrupt;
};

/* A verifier for the run o describes; NULL after saying why. Made before
 * the loader opens, so that its set-up is not timed. When the dataset
 * (--source PATH) does not open it says nothing: it returns NULL with
 * *unopened set to its message (malloc'd, the caller's to free), for the
 * loader's open to say why in the words it uses without --verify (it is
 * --source that is wrong), and *unopened to be said if the loader opens
 * it after all. Otherwise *unopened is NULL. */
struct verifier *verifier_create(const struct bench_options *o,
                                 char **unopened);

/* After the loader opens: a run sharded over ranks (RANK and WORLD_SIZE
 * set by a launcher) hands this rank its share of each epoch alone, so
 * that share is what the counts expect. */
void verifier_bind(struct verifier *v, const rf_loader *loader);

/* NULL is fine. */
void verifier_free(struct verifier *v);

/* Checks one batch, describing the first failures on stderr. Returns 0,
 * or -ENOMEM when an epoch's record cannot be allocated. */
int verify_batch(struct verifier *v, const rf_batch *b);

/* After the last batch: epochs left open, or never begun, lack samples. */
void verifier_finish(struct verifier *v);

/* Prints the verdict: the counts on stdout when counts is true (--json
 * has them in its object, and its stdout is that object alone), batches
 * out of order or malformed on stderr. Returns how many problems were
 * found. */
uint64_t verifier_report(const struct verifier *v, bool counts);

void verifier_counts(const struct verifier *v, struct verify_counts *out);

#endif
