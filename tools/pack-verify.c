/*
 * tools/pack-verify.c - ringfeed-pack --verify: every sample of a pack
 * (or folder) decoded whole by the workers, within the decode limits
 * given (--max-pixels, --jpeg-warnings, ...), the bad ones listed on
 * stdout with the library's reason in the tool's flags, and a last line
 * that says what was found.
 */
#include <ringfeed.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "pack-progress.h"
#include "pack-samples.h"
#include "ringfeed-pack.h"
#include "work-pool.h"

struct verifier {
    rf_dataset *ds;
    struct sample_worker work;
    struct bad_samples bad;
    struct progress progress;
};

/* Each sample's verdict, in sample order (TASK_VERIFY decodes JPEG
 * samples whole, so that damage anywhere in the file is seen; zstd
 * samples as they are). */
static void take_verdict(void *ctx, uint64_t i, const struct pool_result *r)
{
    struct verifier *v = ctx;
    if (r->status < 0) {
        char reason[2048];
        report_bad(&v->bad, &v->progress,
                   pack_user_terms(r->reason, r->name, reason, sizeof(reason)));
    }
    progress_show(&v->progress, i + 1);
}

static void clear_verifying_progress(void *ctx)
{
    progress_clear(&((struct verifier *)ctx)->progress);
}

/* The last line of --verify: what was checked and what was found. An
 * empty pack fails too: a loader can read nothing from it. */
static bool print_verify_result(const struct verifier *v, const char *path,
                                double seconds)
{
    const uint64_t samples = rf_dataset_size(v->ds);
    if (samples == 0) {
        cli_print_line(stdout,
                       "%s: no samples: a loader can read nothing from it; "
                       "pack it again from a source that has samples",
                       path);
        return false;
    }
    const uint32_t classes = rf_dataset_classes(v->ds);
    if (v->bad.count > MAX_BAD_LISTED)
        printf("(only the first %d bad samples are listed)\n", MAX_BAD_LISTED);
    cli_print_line(stdout,
                   "%s: %" PRIu64 " sample%s in %u class%s checked in %.1f s: "
                   "%s%" PRIu64 " bad",
                   path, samples, samples == 1 ? "" : "s", classes,
                   classes == 1 ? "" : "es", seconds,
                   v->bad.count ? "" : "all good, ", v->bad.count);
    return v->bad.count == 0;
}

int pack_verify(const struct pack_options *o)
{
    struct verifier v = {.ds = open_dataset(o->verify)};
    v.work = plan_work(o, o->verify, v.ds);
    v.work.task = TASK_VERIFY;
    v.bad = (struct bad_samples){stdout, "bad: ", 0};
    const uint64_t samples = rf_dataset_size(v.ds);
    const double start = cli_now_s();
    progress_start(&v.progress, o->progress, "verifying", samples);
    run_task(&v.work, "the check was not finished", &v, take_verdict,
             clear_verifying_progress);
    progress_clear(&v.progress);
    const bool good = print_verify_result(&v, o->verify, cli_now_s() - start);
    rf_dataset_close(v.ds);
    return good ? 0 : EXIT_FAILED;
}
