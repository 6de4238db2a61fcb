/*
 * resolve.c - the loader's configuration, resolved at open: producer and
 * slot counts, rank and world size from the launcher's environment, the
 * span of batch numbers the run covers, and the dataset (listed once,
 * its size and classes taken, the decoders checked against it, or the
 * listing of the loader rf_config_continue() carries on from). Writes
 * the loader's copy of the parameters; opens the dataset fds the
 * producers inherit.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/resources.h"
#include "consumer/carry.h"
#include "consumer/loader-internal.h"
#include "decode/decode.h"
#include "source/dataset.h"

/* One rank of several (world size > 1) without a local rank: its budget
 * is the whole mask, as if it ran alone on the node (cpu-budget.h). Its
 * producers are not pinned there: every rank of the node would pin its
 * own from the mask's first CPU, onto the same CPUs, while the others
 * stay idle (torch.multiprocessing.spawn's ranks, with num_workers= or
 * without). Said, with what to set, unless the local rank that was set
 * without its size has been said already; producers that were not to be
 * pinned anyway (RF_PARAM_PIN_PRODUCERS 0) are not said to be left
 * unpinned for this, only the budget is said. */
static void resolve_unranked(rf_loader *l, int64_t asked)
{
    const int64_t world = l->params[RF_PARAM_WORLD_SIZE];
    if (!l->budget.alone || world < 2)
        return;
    /* a local rank set but unusable: the line says why before this */
    char reason[64];
    rf__format(
        reason, sizeof(reason), "one of %lld ranks, %s", (long long)world,
        l->budget.ranks_unknown ? "no usable local rank" : "no local rank");
    const bool pinned = l->budget.pin;
    rf__budget_unpin(&l->budget, reason);
    if (l->budget.ranks_unknown || (!pinned && asked))
        return;
    char count[96] = "";
    if (!asked)
        rf__format(count, sizeof(count),
                   "this rank's CPU budget is all %d CPUs the process "
                   "may use, as if it ran alone on the node%s",
                   l->budget.producers, pinned ? ", and " : "");
    rf__loader_report(l,
                      "rank %lld of %lld has no local rank (no "
                      "LOCAL_RANK/LOCAL_WORLD_SIZE or other launcher's "
                      "pair; torch.multiprocessing.spawn sets none), so "
                      "%s%s: set RF_LOCAL_RANK and RF_LOCAL_WORLD_SIZE in "
                      "each rank so that the node's ranks share the CPUs "
                      "out",
                      (long long)l->params[RF_PARAM_RANK], (long long)world,
                      count,
                      pinned ? "its producers are not pinned, lest every "
                               "rank of the node pin its own to the same "
                               "CPUs"
                             : "");
}

/* The producer count: the CPU budget of this rank (cpu-budget.h) unless
 * RF_PARAM_PRODUCERS sets it, which wins, with a word when it exceeds
 * the budget (the ranks of a node then share CPUs). The budget is
 * unpinned first where it will be (RF_PARAM_PIN_PRODUCERS 0, a rank of
 * several without a local rank: the world size is resolved by then), so
 * that the word names the budget as it is. */
static int64_t resolve_producers(rf_loader *l)
{
    rf__budget_of_process(&l->budget);
    if (l->params[RF_PARAM_PIN_PRODUCERS] == 0)
        rf__budget_unpin(&l->budget, "RF_PARAM_PIN_PRODUCERS 0");
    resolve_unranked(l, l->params[RF_PARAM_PRODUCERS]);
    if (l->budget.ranks_unknown)
        rf__loader_report(l,
                          "%s, so this rank's CPU budget is all %d CPUs the "
                          "process may use, as if it ran alone on the node: "
                          "set "
                          "RF_LOCAL_RANK and RF_LOCAL_WORLD_SIZE so that "
                          "the node's ranks share them",
                          l->budget.ranks_unknown, l->budget.producers);
    const int64_t asked = l->params[RF_PARAM_PRODUCERS];
    if (asked == 0)
        return l->budget.producers;
    if (asked > l->budget.producers)
        rf__loader_report(l,
                          "%lld producers asked for (RF_PARAM_PRODUCERS), "
                          "more than this rank's CPU budget of %s; they will "
                          "share CPUs",
                          (long long)asked, l->budget.why);
    return asked;
}

static int resolve_counts(rf_loader *l)
{
    const int64_t producers = resolve_producers(l);
    int64_t slots = l->params[RF_PARAM_SLOTS];
    if (slots == 0)
        slots = producers * 3 < 4 ? 4 : producers * 3;
    if (slots > RF__MAX_SLOTS)
        return set_error(l, -EINVAL,
                         "slots = %lld is more than %u; set RF_PARAM_SLOTS",
                         (long long)slots, RF__MAX_SLOTS);
    l->producers = (uint32_t)producers;
    l->slots = (uint32_t)slots;
    l->params[RF_PARAM_PRODUCERS] = producers;
    l->params[RF_PARAM_SLOTS] = slots;
    return 0;
}

static bool env_is_set(const char *name)
{
    const char *text = getenv(name);
    return text && *text;
}

/* Environment variable `name` as a plain decimal in [min, INT32_MAX]
 * into *out, or `fallback` when it is unset or empty. Anything else
 * ("1x", "-1", " 1", 0 for a size) is an error: a rank that silently
 * became 0 would train on another rank's shard. */
static int env_number(rf_loader *l, const char *name, int64_t min,
                      int64_t fallback, int64_t *out)
{
    const char *text = getenv(name);
    if (!text || !*text) {
        *out = fallback;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(text, &end, 10);
    /* strtoll also takes leading blanks and signs */
    if (*text < '0' || *text > '9' || errno || *end || v < min || v > INT32_MAX)
        return set_error(l, -EINVAL,
                         "%s='%s' is not a number in %lld..%d; fix it, or "
                         "set RF_PARAM_RANK and RF_PARAM_WORLD_SIZE",
                         name, text, (long long)min, INT32_MAX);
    *out = v;
    return 0;
}

/* Rank and world size not set by the caller come from one launcher's
 * pair: torchrun's when it set either, else Open MPI's, else a single
 * process. Half a pair is an error when both come from it. */
static int resolve_rank(rf_loader *l)
{
    int64_t *p = l->params;
    const bool torch = env_is_set("RANK") || env_is_set("WORLD_SIZE");
    const char *rank = torch ? "RANK" : "OMPI_COMM_WORLD_RANK";
    const char *size = torch ? "WORLD_SIZE" : "OMPI_COMM_WORLD_SIZE";
    const bool has_rank = env_is_set(rank);
    if (p[RF_PARAM_RANK] < 0 && p[RF_PARAM_WORLD_SIZE] == 0 &&
        has_rank != env_is_set(size))
        return set_error(l, -EINVAL,
                         "%s is set but %s is not; set both, or set "
                         "RF_PARAM_RANK and RF_PARAM_WORLD_SIZE",
                         has_rank ? rank : size, has_rank ? size : rank);
    int rc = 0;
    if (p[RF_PARAM_RANK] < 0)
        rc = env_number(l, rank, 0, 0, &p[RF_PARAM_RANK]);
    if (rc == 0 && p[RF_PARAM_WORLD_SIZE] == 0)
        rc = env_number(l, size, 1, 1, &p[RF_PARAM_WORLD_SIZE]);
    return rc;
}

/* The run covers sequence numbers [first_batch, total_batches). */
static int resolve_span(rf_loader *l)
{
    const int64_t *p = l->params;
    const uint64_t per_epoch = l->order.batches_per_epoch;
    const uint64_t epochs = (uint64_t)p[RF_PARAM_EPOCHS];
    const uint64_t start_epoch = (uint64_t)p[RF_PARAM_START_EPOCH];
    const uint64_t start_batch = (uint64_t)p[RF_PARAM_START_BATCH];
    if (start_batch >= per_epoch || (epochs && start_epoch >= epochs))
        return set_error(
            l, -EINVAL,
            "cannot resume at batch %llu of epoch %llu: an epoch "
            "has %llu batches and the run %llu epochs; set "
            "RF_PARAM_START_BATCH and RF_PARAM_START_EPOCH inside them (the "
            "checkpoint's batch size and dataset must be this run's)",
            (unsigned long long)start_batch, (unsigned long long)start_epoch,
            (unsigned long long)per_epoch, (unsigned long long)epochs);
    /* Sequence numbers travel in 40 bits of a handle: a run has at most
     * 2^40 - 1 batches, and one without an end that many. */
    if (epochs && per_epoch > RF__SEQ_MASK / epochs)
        return set_error(l, -EINVAL,
                         "%llu epochs of %llu batches is more than a run can "
                         "count (2^40 - 1 batches); lower RF_PARAM_EPOCHS or "
                         "raise RF_PARAM_BATCH_SIZE",
                         (unsigned long long)epochs,
                         (unsigned long long)per_epoch);
    if (start_epoch > (RF__SEQ_MASK - 1 - start_batch) / per_epoch)
        return set_error(
            l, -EINVAL,
            "cannot resume at batch %llu of epoch %llu: past the end of a "
            "run, which counts 2^40 - 1 batches (at most %llu whole epochs "
            "of %llu batches); lower RF_PARAM_START_EPOCH or raise "
            "RF_PARAM_BATCH_SIZE",
            (unsigned long long)start_batch, (unsigned long long)start_epoch,
            (unsigned long long)(RF__SEQ_MASK / per_epoch),
            (unsigned long long)per_epoch);
    l->total_batches = epochs == 0 ? RF__SEQ_MASK : epochs * per_epoch;
    l->first_batch = start_epoch * per_epoch + start_batch;
    return 0;
}

/* Checks now what the producers would otherwise find out one sample at a
 * time: that the decoders accept this shape for this dataset, or for the
 * synthetic JPEG source (the checks are rf__decoder_new()'s, which
 * rf_dataset_decode() makes too). */
static int check_decoder(rf_loader *l, const rf_dataset *ds)
{
    struct rf__decoder *d = NULL;
    const int rc =
        rf__decoder_new(&d, l->params, ds, l->error, sizeof(l->error));
    rf__decoder_free(d);
    return rc;
}

/* A pack's zstd samples (ringfeed-pack --raw) are decompressed straight
 * into the slot: the transform's crop, resize and flip never touch them.
 * With a transform other than none, that would go unseen (two epochs the
 * same bytes), so it is said once, at open. */
static void report_raw_samples(rf_loader *l, const rf_dataset_info *info)
{
    if (l->params[RF_PARAM_TRANSFORM] == RF_TRANSFORM_NONE ||
        info->zstd_samples == 0)
        return;
    char how_many[64];
    if (info->zstd_samples == info->samples)
        rf__format(how_many, sizeof(how_many), "all %llu samples",
                   (unsigned long long)info->samples);
    else
        rf__format(how_many, sizeof(how_many), "%llu of the %llu samples",
                   (unsigned long long)info->zstd_samples,
                   (unsigned long long)info->samples);
    /* the path cut at 1 KiB, so that the advice still fits a message */
    rf__loader_report(l,
                      "%s of '%.1024s' are raw pixels (zstd): they are "
                      "delivered as stored, with no crop, resize or flip, "
                      "whatever RF_PARAM_TRANSFORM and RF_PARAM_FLIP say; "
                      "set RF_PARAM_TRANSFORM to RF_TRANSFORM_NONE to say "
                      "so and silence this message",
                      how_many, l->path);
}

/* The dataset's detail without its leading "PATH: ", which the message
 * that quotes it names already: "cannot open dataset 'x.pack': its
 * header's ...", not "... 'x.pack': x.pack: its header's ...". A detail
 * about a file below the path keeps that file's whole name. */
static const char *reason_past_path(const char *why, const char *path)
{
    const size_t n = strlen(path);
    return strncmp(why, path, n) == 0 && strncmp(why + n, ": ", 2) == 0
               ? why + n + 2
               : why;
}

/* What the user of an index cache the folder could not take can do,
 * for the reason `unkept` (-errno). */
static const char *unkept_advice(int unkept)
{
    switch (unkept) {
    case -EROFS:
        return "remount it read-write and open it once to write the cache "
               "(opens on the read-only mount then use it while the "
               "folder is unchanged)";
    case -ENOSPC:
    case -EDQUOT:
        return "free some space on its file system and open it once to "
               "write the cache";
    case -EACCES:
    case -EPERM:
        return "open it once as a user who may write in the folder, to "
               "write the cache";
    default:
        return "open it once where the folder can be written, to write "
               "the cache";
    }
}

/* The index cache the folder could not take (rf__dataset_open_cached()'s
 * *unkept): said once per open, since every open lists the folder again
 * and the user who asked for the cache would not learn why. Not silenced
 * by RF_PARAM_QUIET, like the other words at open. */
static void report_unkept_cache(rf_loader *l, int unkept)
{
    if (unkept == 0)
        return;
    /* the path cut at 1 KiB, so that the advice still fits a message */
    rf__loader_report(l,
                      "the index cache (RF_PARAM_INDEX_CACHE) of "
                      "'%.1024s' is not kept: cannot write .ringfeed-index "
                      "in it: %s, so every open lists the folder again; "
                      "%s, or set RF_PARAM_INDEX_CACHE to 0 to stop trying",
                      l->path, strerror(-unkept), unkept_advice(unkept));
}

/* The dataset as listed: the listing cfg carries from another loader,
 * the index cache's, or the path listed now; the reason is said, and so
 * is an index cache the folder could not take. */
static int open_listed(rf_loader *l, const rf_config *cfg, rf_dataset **ds)
{
    char *why = NULL;
    int rc, unkept = 0;
    if (cfg->carried)
        rc = rf__carried_open_dataset(cfg, ds, &why);
    else if (l->params[RF_PARAM_INDEX_CACHE])
        rc = rf__dataset_open_cached(ds, l->path, &why, &unkept);
    else
        rc = rf_dataset_open(ds, l->path, &why);
    if (rc < 0)
        (void)set_error(l, rc, "cannot open dataset '%s': %s", l->path,
                        why ? reason_past_path(why, l->path) : rf_strerror(rc));
    else
        report_unkept_cache(l, unkept);
    free(why);
    return rc;
}

/* RF_SOURCE_PATH: lists the dataset once (the producers map the listing),
 * or takes the one cfg carries (carry.c); takes its size and classes, checks
 * the decoders against it, and says when the transform does not apply to its
 * samples. */
static int open_dataset(rf_loader *l, const rf_config *cfg)
{
    if (l->path[0] == '\0')
        return set_error(l, -EINVAL,
                         "RF_PARAM_SOURCE is RF_SOURCE_PATH but no path was "
                         "set; give the dataset with rf_config_set_path()");
    rf_dataset *ds = NULL;
    int rc = open_listed(l, cfg, &ds);
    if (rc < 0)
        return rc;
    l->params[RF_PARAM_SAMPLES] = (int64_t)rf_dataset_size(ds);
    l->params[RF_PARAM_CLASSES] = rf_dataset_classes(ds);
    rf_dataset_info info;
    (void)rf_dataset_get_info(ds, &info); /* ds is not NULL */
    l->listing_digest = info.listing_digest;
    rc = l->params[RF_PARAM_SAMPLES] == 0
             ? set_error(l, -ENOENT,
                         "dataset '%s' has no samples; pass a folder of "
                         "class folders holding .jpg files, or a packed "
                         "file written from one",
                         l->path)
             : check_decoder(l, ds);
    if (rc == 0) {
        report_raw_samples(l, &info);
        rc = rf__dataset_index_fd(ds, &l->fds.listing);
    }
    if (rc == 0) {
        l->fds.data = rf__dataset_data_fd(ds);
        if (l->fds.data < 0)
            rc = set_error(l, l->fds.data,
                           "cannot keep dataset '%s' open for producers: %s",
                           l->path, strerror(-l->fds.data));
    }
    rf_dataset_close(ds);
    return rc;
}

static int open_source(rf_loader *l, const rf_config *cfg)
{
    switch (l->params[RF_PARAM_SOURCE]) {
    case RF_SOURCE_PATH:
        return open_dataset(l, cfg);
    case RF_SOURCE_SYNTHETIC_JPEG:
        return check_decoder(l, NULL);
    default:
        return 0;
    }
}

int rf__loader_resolve(rf_loader *l, const rf_config *cfg)
{
    memcpy(l->params, cfg->params, sizeof(l->params));
    memcpy(l->path, cfg->path, sizeof(l->path));
    l->message_fn = cfg->message_fn;
    l->message_user = cfg->message_user;
    rf__loader_note_stderr(l);
    int rc = open_source(l, cfg);
    if (rc == 0)
        rc = resolve_rank(l); /* the world size, for the budget's pinning */
    if (rc == 0)
        rc = resolve_counts(l);
    if (rc < 0)
        return rc;
    const int64_t *p = l->params;
    l->batch_size = (uint32_t)p[RF_PARAM_BATCH_SIZE];
    l->sample_bytes = (uint64_t)p[RF_PARAM_HEIGHT] *
                      (uint64_t)p[RF_PARAM_WIDTH] *
                      (uint64_t)p[RF_PARAM_CHANNELS];
    l->spin_ns = (uint64_t)p[RF_PARAM_SPIN_NS];
    l->ordered = p[RF_PARAM_ORDERED] != 0;
    rc = rf__order_init(&l->order, p, l->error, sizeof(l->error));
    if (rc < 0)
        return rc;
    l->skip_errors = p[RF_PARAM_ON_ERROR] == RF_ON_ERROR_SKIP;
    l->respawn = p[RF_PARAM_ON_PRODUCER_DEATH] == RF_ON_DEATH_RESPAWN;
    l->quiet = p[RF_PARAM_QUIET] != 0;
    l->max_respawns = (uint64_t)p[RF_PARAM_MAX_RESPAWNS];
    l->window_ns = (uint64_t)p[RF_PARAM_RESPAWN_WINDOW_S] * 1000000000u;
    l->window_start_ns = rf__now_ns();
    l->timeout_ns = (uint64_t)p[RF_PARAM_BATCH_TIMEOUT_MS] * 1000000u;
    l->stall_ns = (uint64_t)p[RF_PARAM_STALL_WARNING_MS] * 1000000u;
    const uint64_t batched = l->order.batches_per_epoch * l->order.batch_size;
    rf__failures_init(&l->failures, p, l->order.per_rank,
                      batched < l->order.per_rank ? batched
                                                  : l->order.per_rank);
    rc = rf__carried_apply(l, cfg); /* the run goes on, where it does */
    if (rc < 0)
        return rc;
    return resolve_span(l);
}

void rf__loader_keep_described(rf_loader *l, uint64_t fds_needed)
{
    uint64_t limit = 0;
    const int free_fds = rf__fds_free(&limit);
    char ignored[RF__DETAIL];
    if (l->params[RF_PARAM_SOURCE] != RF_SOURCE_PATH ||
        (uint64_t)free_fds < fds_needed + 2 ||
        rf__dataset_open_indexed(&l->described, l->path, l->fds.data,
                                 l->fds.listing, ignored, sizeof(ignored)) < 0)
        l->described = NULL;
}
