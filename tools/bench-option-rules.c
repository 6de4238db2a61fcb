/*
 * tools/bench-option-rules.c - ringfeed-bench's options that cannot go
 * together: once every flag is parsed (bench-options.c), an option that
 * would change nothing for the others given is refused, naming the flag,
 * so that a run never measures something other than what was asked. The
 * one rule that changes an option: a pack of raw pixels, given no
 * transform option, is run with transform none.
 *
 * Reads which flags were given (bench_options.given) and their values,
 * and opens a --source file only to see whether it is such a pack;
 * prints nothing but the refusal, and exits with EXIT_USAGE.
 */
#include "bench-option-table.h"

#include <inttypes.h>
#include <stdbool.h>
#include <sys/stat.h>

/* A flag on the command line, even one given its default value. */
static bool given(const struct bench_options *o, enum option_id id)
{
    return (o->given & option_bit(id)) != 0;
}

/* The first of `ids` (count of them) that was given, or 0 for none. */
static enum option_id first_given(const struct bench_options *o,
                                  const enum option_id *ids, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (given(o, ids[i]))
            return ids[i];
    return 0;
}

/* --gpu is only compiled in with CUDA (bench-gpu.c); without it the flag
 * is still parsed, so that the refusal can say how to get it. A function
 * of its own: the checks after it would read "o->gpu is always false"
 * to cppcheck in a build without CUDA. */
static void check_gpu_built(const struct bench_options *o)
{
#ifndef RF_BENCH_GPU
    if (o->gpu)
        cli_die_usage(PROGRAM, "--gpu: this ringfeed-bench was built without "
                               "CUDA; configure --with-cuda");
#else
    (void)o;
#endif
}

/* Options that would change nothing where they do not apply, and the
 * refusal's words: "--NAME " BEFORE ARG AFTER (ARG, a value of the run's,
 * may be ""). */
struct stray_rule {
    const enum option_id *ids;
    size_t count;
    const char *before, *arg, *after;
};

#define STRAY_RULE(ids, before, arg, after)                                    \
    ((struct stray_rule){(ids), COUNT_OF(ids), (before), (arg), (after)})

/* Refuses the first option of `rule` given, unless they apply: a run
 * never measures something other than what was asked. */
static void refuse_stray(const struct bench_options *o, bool applies,
                         struct stray_rule rule)
{
    const enum option_id id =
        applies ? 0 : first_given(o, rule.ids, rule.count);
    if (id)
        cli_die_usage(PROGRAM, "--%s %s%s%s", bench_option_name(id),
                      rule.before, rule.arg, rule.after);
}

/* --gpu has its own report and no verification; its own options would
 * change nothing without it. */
static void check_gpu_options(const struct bench_options *o)
{
    static const enum option_id gpu_only[] = {OPT_DEVICE, OPT_DEPTH,
                                              OPT_STEP_US};
    if (o->gpu && (o->verify || o->json))
        cli_die_usage(PROGRAM, "--gpu goes with neither --verify nor --json");
    refuse_stray(o, o->gpu,
                 STRAY_RULE(gpu_only,
                            "applies to --gpu only, and would change nothing "
                            "without it: add --gpu, or drop it",
                            "", ""));
}

/* Options that would change nothing for the source given. */
static void check_source_options(const struct bench_options *o)
{
    static const enum option_id decoding[] = {
        OPT_TRANSFORM,  OPT_ON_ERROR,          OPT_FULL_SCALE,
        OPT_MAX_ERRORS, OPT_MAX_ERROR_PPM,     OPT_MAX_PIXELS,
        OPT_MAX_SCANS,  OPT_MAX_DECODE_MEMORY, OPT_JPEG_WARNINGS,
        OPT_RESIZE,     OPT_MIN_SCALE_PPM,     OPT_NO_FLIP};
    static const enum option_id skip_limits[] = {OPT_MAX_ERRORS,
                                                 OPT_MAX_ERROR_PPM};
    static const enum option_id own_count[] = {OPT_SAMPLES, OPT_CLASSES};
    char source[32];
    bench_choice_name(RF_PARAM_SOURCE, o->source, source, sizeof(source));
    refuse_stray(
        o, o->source == RF_SOURCE_PATH || o->source == RF_SOURCE_SYNTHETIC_JPEG,
        STRAY_RULE(decoding,
                   "applies to a PATH or synthetic-jpeg, and would "
                   "change nothing for --source ",
                   source, ": drop it"));
    refuse_stray(o, o->on_error == RF_ON_ERROR_SKIP,
                 STRAY_RULE(skip_limits,
                            "limits --on-error skip, and would change "
                            "nothing without it: add --on-error skip, or "
                            "drop it",
                            "", ""));
    refuse_stray(o, o->source != RF_SOURCE_PATH,
                 STRAY_RULE(own_count, "would change nothing: the dataset at ",
                            o->path, " has its own; drop it"));
}

/* A transform's own options would change nothing under another one; the
 * respawn limits nothing when a dead producer ends the run. */
static void check_policy_options(const struct bench_options *o)
{
    static const enum option_id eval_only[] = {OPT_RESIZE};
    static const enum option_id train_only[] = {OPT_MIN_SCALE_PPM, OPT_NO_FLIP};
    static const enum option_id respawn_limits[] = {OPT_MAX_RESPAWNS,
                                                    OPT_RESPAWN_WINDOW_S};
    char name[32];
    bench_choice_name(RF_PARAM_TRANSFORM, o->transform, name, sizeof(name));
    refuse_stray(o, o->transform == RF_TRANSFORM_EVAL,
                 STRAY_RULE(eval_only,
                            "applies to --transform eval, and would change "
                            "nothing for --transform ",
                            name, ": add --transform eval, or drop it"));
    refuse_stray(o, o->transform == RF_TRANSFORM_TRAIN,
                 STRAY_RULE(train_only,
                            "applies to --transform train, and would change "
                            "nothing for --transform ",
                            name, ": drop it"));
    refuse_stray(o, o->on_producer_death == RF_ON_DEATH_RESPAWN,
                 STRAY_RULE(respawn_limits,
                            "limits --on-producer-death respawn, and would "
                            "change nothing with fail: drop it",
                            "", ""));
}

/* A pack whose samples are all raw pixels (zstd frames: --raw of
 * ringfeed-pack) holds them decoded, resized and cropped when it was
 * packed; the decoder only decompresses them, so --transform,
 * --full-scale or a transform's own options would change nothing, and the run
 * would measure something other than what was asked. Without them the run takes
 * transform none, which is what such a pack gets (the loader would otherwise
 * say at open that its default transform does not apply). Only a regular file
 * can be such a pack: a folder is not opened here (listing a million files
 * twice would double the start); a path that does not open is left to
 * rf_loader_open(), whose message says why. */
static void check_raw_pack_options(struct bench_options *o)
{
    struct stat st;
    rf_dataset *ds = NULL;
    rf_dataset_info info;
    if (o->source != RF_SOURCE_PATH || stat(o->path, &st) != 0 ||
        !S_ISREG(st.st_mode) || rf_dataset_open(&ds, o->path, NULL) < 0)
        return;
    const int rc = rf_dataset_get_info(ds, &info);
    rf_dataset_close(ds);
    if (rc < 0 || info.samples == 0 || info.zstd_samples != info.samples)
        return;
    static const enum option_id decoding[] = {OPT_TRANSFORM, OPT_FULL_SCALE,
                                              OPT_RESIZE, OPT_MIN_SCALE_PPM,
                                              OPT_NO_FLIP};
    const enum option_id id = first_given(o, decoding, COUNT_OF(decoding));
    if (!id) {
        o->transform = RF_TRANSFORM_NONE;
        return;
    }
    cli_die_usage(PROGRAM,
                  "--%s would change nothing: every sample of %s is raw "
                  "pixels (%ux%ux%u), decoded, resized and cropped when it "
                  "was packed; drop it, or pack the JPEG folder without --raw",
                  bench_option_name(id), o->path, info.height, info.width,
                  info.channels);
}

/* Each check exits at the first option it refuses, so their order
 * decides which refusal a user sees. The raw pack's comes before the
 * policies', so that a transform's option on such a pack is refused for
 * what is wrong (its pixels were transformed when packed), not for the
 * transform named. */
/* --rank and --world-size given together must name a rank of that world:
 * bad usage (exit 2), as --help says, not a failed run. A rank or world
 * size from the environment (RANK, WORLD_SIZE) is the library's to check. */
static void check_rank_options(const struct bench_options *o)
{
    if (o->rank >= 0 && o->world_size > 0 && o->rank >= o->world_size)
        cli_die_usage(PROGRAM,
                      "--rank %" PRId64 " is not below --world-size %" PRId64
                      ": ranks count from 0; use --rank 0..%" PRId64,
                      o->rank, o->world_size, o->world_size - 1);
}

void bench_check_option_rules(struct bench_options *o)
{
    check_rank_options(o);
    check_gpu_built(o);
    check_gpu_options(o);
    check_source_options(o);
    check_raw_pack_options(o);
    check_policy_options(o);
}
