/*
 * tools/bench-gpu.c - ringfeed-bench --gpu. Every batch goes through the
 * GPU consumer into a step on a stream of its own: the conversion to
 * float16 NCHW, then a kernel that keeps the stream busy for --step-us
 * (the model's stand-in). CUDA events time each upload and each step.
 * The reference, a plain cudaMemcpyAsync of a full batch's upload size
 * from cudaHostAlloc'd memory, runs side by side with the ring: every few
 * batches one such copy goes on a stream of its own, started halfway
 * through a step (when the ring's copy stream is normally idle: its upload
 * starts with the step), under the same load.
 * The ring's GB/s counts only full-size single-copy uploads after the
 * first (the first is cold, a short last batch may take two copies), and
 * copies of either kind that overlapped one of the other are left out of
 * both figures. Prints both figures and their ratio, the copy's share of
 * a step, the GPU's idle time between steps, how much of each upload was
 * hidden behind some step, and a timeline.
 */
#include "bench-gpu.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <ringfeed/cuda.h>

#include "cli.h"

#define PROGRAM "ringfeed-bench"

/* Plain copies timed for the reference, interleaved with the run; a few,
 * before the run, for the step's estimate. */
#define BASELINE_COPIES 50
#define ESTIMATE_COPIES 5
/* Batches with events of their own; later ones run untimed. */
#define MAX_TIMED_BATCHES 65536
#define TIMELINE_ROWS 8
#define TARGET_RATIO 0.90
/* An upload counts as fully hidden when at most this much of it (ms) ran
 * with no step: about the events' resolution. */
#define HIDDEN_SLACK_MS 0.001

/* In tools/bench-gpu-step.cu. */
cudaError_t bench_gpu_busy(uint64_t ns, cudaStream_t stream);

static const float imagenet_mean[] = {0.485f, 0.456f, 0.406f, 0.5f};
static const float imagenet_std[] = {0.229f, 0.224f, 0.225f, 0.25f};

/* One batch, in ms from the run's first event. */
struct batch_times {
    double upload_start, upload_end, step_start, step_end;
    size_t upload_bytes;
    uint32_t samples;
};

struct plain_copies {
    void *host, *device;
    size_t bytes;
    cudaStream_t stream;
    cudaEvent_t events[2 * BASELINE_COPIES];
    int created;
    size_t issued; /* timed copies queued */
};

struct gpu_run {
    rf_cuda_loader *gpu;
    cudaStream_t step;
    cudaEvent_t origin;
    cudaEvent_t halfway;      /* mid-step: the plain copy starts here */
    cudaEvent_t *step_events; /* start and end of each timed step */
    struct batch_times *times;
    uint64_t timed_capacity, batches, timed;
    void *converted; /* a full batch as float16 */
    uint64_t step_ns;
    uint64_t pixel_bytes;
    double elapsed_s;
    rf_stats stats;
    uint32_t full_samples;     /* a full batch's samples */
    uint64_t plain_every;      /* a plain copy every this many batches */
    struct plain_copies plain; /* interleaved with the run */
    double plain_start[BASELINE_COPIES], plain_end[BASELINE_COPIES];
};

static bool cuda_ok(cudaError_t err, const char *what)
{
    if (err != cudaSuccess)
        fprintf(stderr, PROGRAM ": --gpu: %s: %s\n", what,
                cudaGetErrorString(err));
    return err == cudaSuccess;
}

static double elapsed_ms(cudaEvent_t from, cudaEvent_t to)
{
    float ms = 0;
    return cuda_ok(cudaEventElapsedTime(&ms, from, to), "reading an event")
               ? ms
               : 0.0;
}

/* ---- the reference: plain copies from cudaHostAlloc'd memory ------------ */

static void plain_copies_free(struct plain_copies *p)
{
    for (int i = 0; i < p->created; i++)
        cudaEventDestroy(p->events[i]);
    if (p->stream)
        cudaStreamDestroy(p->stream);
    cudaFree(p->device);
    cudaFreeHost(p->host);
}

static bool plain_copies_setup(struct plain_copies *p, size_t bytes)
{
    if (!cuda_ok(cudaHostAlloc(&p->host, bytes, cudaHostAllocDefault),
                 "cudaHostAlloc") ||
        !cuda_ok(cudaMalloc(&p->device, bytes), "cudaMalloc") ||
        !cuda_ok(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking),
                 "cudaStreamCreateWithFlags"))
        return false;
    p->bytes = bytes;
    memset(p->host, 1, bytes); /* touched, as the ring's pages are */
    for (; p->created < 2 * BASELINE_COPIES; p->created++)
        if (!cuda_ok(cudaEventCreate(&p->events[p->created]),
                     "cudaEventCreate"))
            return false;
    return true;
}

/* Times `copies` copies of `bytes`, one after the other on one stream,
 * after one untimed warm-up; fills ms[] and returns false on failure. */
static bool time_plain_copies(size_t bytes, int copies, double *ms)
{
    struct plain_copies p = {0};
    bool ok = plain_copies_setup(&p, bytes) &&
              cuda_ok(cudaMemcpyAsync(p.device, p.host, bytes,
                                      cudaMemcpyHostToDevice, p.stream),
                      "cudaMemcpyAsync");
    for (size_t i = 0; ok && i < (size_t)copies; i++)
        ok = cuda_ok(cudaEventRecord(p.events[2 * i], p.stream),
                     "cudaEventRecord") &&
             cuda_ok(cudaMemcpyAsync(p.device, p.host, bytes,
                                     cudaMemcpyHostToDevice, p.stream),
                     "cudaMemcpyAsync") &&
             cuda_ok(cudaEventRecord(p.events[2 * i + 1], p.stream),
                     "cudaEventRecord");
    ok = ok && cuda_ok(cudaStreamSynchronize(p.stream), "the plain copies");
    for (size_t i = 0; ok && i < (size_t)copies; i++)
        ms[i] = elapsed_ms(p.events[2 * i], p.events[2 * i + 1]);
    plain_copies_free(&p);
    return ok;
}

/* ---- statistics ---------------------------------------------------------- */

static int compare_doubles(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values, size_t count)
{
    if (count == 0)
        return 0;
    qsort(values, count, sizeof(*values), compare_doubles);
    return count % 2 ? values[count / 2]
                     : (values[count / 2 - 1] + values[count / 2]) / 2;
}

static double gb_per_s(double bytes, double ms)
{
    return ms > 0 ? bytes / (ms * 1e6) : 0;
}

/* ---- the run ---------------------------------------------------------------
 */

static bool run_setup(struct gpu_run *r, const struct gpu_bench_options *o)
{
    r->timed_capacity =
        o->batches < MAX_TIMED_BATCHES ? o->batches : MAX_TIMED_BATCHES;
    r->full_samples = o->batch;
    r->plain_every = r->timed_capacity / (BASELINE_COPIES + 1);
    if (r->plain_every == 0)
        r->plain_every = 1;
    r->times = calloc(r->timed_capacity + 1, sizeof(*r->times));
    r->step_events = calloc(2 * r->timed_capacity + 2, sizeof(cudaEvent_t));
    if (!r->times || !r->step_events) {
        fprintf(stderr, PROGRAM ": --gpu: %s\n", strerror(ENOMEM));
        return false;
    }
    if (!cuda_ok(cudaStreamCreateWithFlags(&r->step, cudaStreamNonBlocking),
                 "creating the step's stream") ||
        !cuda_ok(cudaEventCreate(&r->origin), "cudaEventCreate") ||
        !cuda_ok(cudaEventCreateWithFlags(&r->halfway, cudaEventDisableTiming),
                 "cudaEventCreateWithFlags") ||
        !cuda_ok(cudaMalloc(&r->converted, o->batch_bytes * 2 + 2),
                 "allocating the converted batch"))
        return false;
    for (uint64_t i = 0; i < 2 * r->timed_capacity; i++)
        if (!cuda_ok(cudaEventCreate(&r->step_events[i]), "cudaEventCreate"))
            return false;
    return true;
}

static void run_free(struct gpu_run *r)
{
    if (r->step)
        cudaStreamSynchronize(r->step); /* done with every batch */
    if (r->plain.stream)
        cudaStreamSynchronize(r->plain.stream);
    plain_copies_free(&r->plain);
    rf_cuda_close(r->gpu);
    for (uint64_t i = 0; r->step_events && i < 2 * r->timed_capacity; i++)
        if (r->step_events[i])
            cudaEventDestroy(r->step_events[i]);
    if (r->origin)
        cudaEventDestroy(r->origin);
    if (r->halfway)
        cudaEventDestroy(r->halfway);
    if (r->step)
        cudaStreamDestroy(r->step);
    cudaFree(r->converted);
    free(r->step_events);
    free(r->times);
}

/* The step's stand-in length: three uploads of a full batch, unless
 * --step-us says otherwise. The ring's upload of batch n+depth-1 starts
 * with step n (it waits for the release of step n-1) and takes the first
 * third; the plain copy starts halfway and has the middle third alone. */
static bool choose_step(struct gpu_run *r, const struct gpu_bench_options *o)
{
    if (o->step_us >= 0) {
        r->step_ns = (uint64_t)o->step_us * 1000;
        return true;
    }
    double ms[ESTIMATE_COPIES];
    if (!time_plain_copies(o->batch_bytes + 8 * (size_t)o->batch,
                           ESTIMATE_COPIES, ms))
        return false;
    r->step_ns = (uint64_t)(3 * median(ms, ESTIMATE_COPIES) * 1e6);
    return true;
}

/* The upload's times can be read once it is complete; the step's upload
 * n+1 is already queued, so waiting for upload n stalls nothing. */
static bool record_upload(struct gpu_run *r, const rf_cuda_batch *b)
{
    struct batch_times *t = &r->times[r->timed];
    if (!cuda_ok(cudaEventSynchronize(b->ready), "waiting for an upload"))
        return false;
    t->upload_start = elapsed_ms(r->origin, b->upload_started);
    t->upload_end = elapsed_ms(r->origin, b->ready);
    t->upload_bytes = b->upload_bytes;
    t->samples = b->samples;
    return true;
}

/* A plain copy of a full batch's upload size, on its own stream, started
 * halfway through step n (the ring's upload that started with the step
 * is normally done by then), every plain_every batches of the timed ones.
 * Batch 0 sets the copies up and warms them with one untimed copy. */
static bool plain_copy_beside(struct gpu_run *r, const rf_cuda_batch *b,
                              cudaEvent_t step_started)
{
    struct plain_copies *p = &r->plain;
    if (b->samples != r->full_samples || p->issued >= BASELINE_COPIES ||
        (r->batches > 0 && (r->batches % r->plain_every != 0 || !p->host ||
                            b->upload_bytes != p->bytes)))
        return true;
    if (!p->host && !plain_copies_setup(p, b->upload_bytes))
        return false;
    cudaEvent_t *events = &p->events[2 * p->issued];
    const bool warm_up = r->batches == 0;
    if (!cuda_ok(cudaStreamWaitEvent(p->stream, step_started, 0),
                 "cudaStreamWaitEvent") ||
        (!warm_up &&
         !cuda_ok(cudaEventRecord(events[0], p->stream), "cudaEventRecord")) ||
        !cuda_ok(cudaMemcpyAsync(p->device, p->host, p->bytes,
                                 cudaMemcpyHostToDevice, p->stream),
                 "cudaMemcpyAsync") ||
        (!warm_up &&
         !cuda_ok(cudaEventRecord(events[1], p->stream), "cudaEventRecord")))
        return false;
    p->issued += !warm_up;
    return true;
}

static bool run_step(struct gpu_run *r, const rf_cuda_batch *b)
{
    const bool timed = r->timed < r->timed_capacity;
    cudaEvent_t *events = &r->step_events[2 * r->timed];
    if (!cuda_ok(cudaStreamWaitEvent(r->step, b->ready, 0),
                 "cudaStreamWaitEvent") ||
        (timed &&
         !cuda_ok(cudaEventRecord(events[0], r->step), "cudaEventRecord")))
        return false;
    const int rc =
        rf_cuda_convert(r->gpu, b, r->converted, RF_CUDA_FLOAT16,
                        RF_LAYOUT_NCHW, imagenet_mean, imagenet_std, r->step);
    if (rc < 0) {
        fprintf(stderr, PROGRAM ": --gpu: %s\n", rf_cuda_error(r->gpu));
        return false;
    }
    const uint64_t first_half = r->step_ns / 2;
    if ((first_half &&
         !cuda_ok(bench_gpu_busy(first_half, r->step), "the step kernel")) ||
        (timed &&
         !cuda_ok(cudaEventRecord(r->halfway, r->step), "cudaEventRecord")) ||
        (timed && !plain_copy_beside(r, b, r->halfway)) ||
        (r->step_ns - first_half &&
         !cuda_ok(bench_gpu_busy(r->step_ns - first_half, r->step),
                  "the step kernel")) ||
        (timed &&
         !cuda_ok(cudaEventRecord(events[1], r->step), "cudaEventRecord")) ||
        (timed && !record_upload(r, b)))
        return false;
    r->timed += timed;
    r->batches++;
    r->pixel_bytes += b->bytes;
    return true;
}

static int next_batch(rf_cuda_loader *gpu, rf_cuda_batch *b)
{
    int rc;
    do
        rc = rf_cuda_next(gpu, b);
    while (rc == -EINTR);
    return rc;
}

static bool run_batches(struct gpu_run *r)
{
    const double started = cli_now_s();
    rf_cuda_batch b;
    int rc = cuda_ok(cudaEventRecord(r->origin, r->step), "cudaEventRecord")
                 ? 0
                 : -1;
    while (rc == 0 && (rc = next_batch(r->gpu, &b)) > 0) {
        if (!run_step(r, &b))
            return false;
        rc = rf_cuda_release(r->gpu, &b, r->step);
    }
    if (rc < 0) {
        fprintf(stderr, PROGRAM ": --gpu: %s: %s\n", rf_strerror(rc),
                rf_cuda_error(r->gpu));
        return false;
    }
    if (!cuda_ok(cudaStreamSynchronize(r->step), "the steps") ||
        (r->plain.stream &&
         !cuda_ok(cudaStreamSynchronize(r->plain.stream), "the plain copies")))
        return false;
    r->elapsed_s = cli_now_s() - started;
    rf_loader_stats(rf_cuda_host_loader(r->gpu), &r->stats);
    for (uint64_t i = 0; i < r->timed; i++) {
        r->times[i].step_start = elapsed_ms(r->origin, r->step_events[2 * i]);
        r->times[i].step_end = elapsed_ms(r->origin, r->step_events[2 * i + 1]);
    }
    for (size_t i = 0; i < r->plain.issued; i++) {
        r->plain_start[i] = elapsed_ms(r->origin, r->plain.events[2 * i]);
        r->plain_end[i] = elapsed_ms(r->origin, r->plain.events[2 * i + 1]);
    }
    return true;
}

/* ---- the figures ----------------------------------------------------------
 */

struct figures {
    double upload_gbps, upload_median_gbps; /* every timed upload */
    double ring_gbps, ring_median_gbps;     /* beside the plain copies */
    uint64_t ring_uploads, ring_left_out;
    double plain_gbps, plain_median_gbps;
    size_t plain_copies, plain_left_out;
    size_t full_bytes; /* a full batch's single-copy upload */
    double mean_upload_ms, mean_step_ms;
    double idle_ms, busy_span_ms;
    uint64_t fully_hidden, partly_hidden;
    double upload_ms, hidden_ms;
};

static double overlap_ms(double a_start, double a_end, double b_start,
                         double b_end)
{
    const double start = a_start > b_start ? a_start : b_start;
    const double end = a_end < b_end ? a_end : b_end;
    return end > start ? end - start : 0;
}

/* How much of upload k ran while some step ran. The steps share one
 * stream, so their intervals are disjoint and in order, and so are the
 * uploads (the loader's copy stream): *first, the first step that may
 * still reach upload k, only moves forward. */
static double hidden_ms(const struct gpu_run *r, uint64_t k, uint64_t *first)
{
    const struct batch_times *t = r->times, *u = &t[k];
    while (*first < r->timed && t[*first].step_end <= u->upload_start)
        (*first)++;
    double hidden = 0;
    for (uint64_t n = *first; n < r->timed && t[n].step_start < u->upload_end;
         n++)
        hidden += overlap_ms(u->upload_start, u->upload_end, t[n].step_start,
                             t[n].step_end);
    return hidden;
}

static bool overlaps_a_plain_copy(const struct gpu_run *r, double start,
                                  double end)
{
    for (size_t i = 0; i < r->plain.issued; i++)
        if (overlap_ms(start, end, r->plain_start[i], r->plain_end[i]) > 0)
            return true;
    return false;
}

static bool overlaps_an_upload(const struct gpu_run *r, double start,
                               double end)
{
    for (uint64_t i = 0; i < r->timed; i++)
        if (overlap_ms(start, end, r->times[i].upload_start,
                       r->times[i].upload_end) > 0)
            return true;
    return false;
}

static void full_upload_size(const struct gpu_run *r, struct figures *f)
{
    for (uint64_t i = 0; i < r->timed; i++)
        if (r->times[i].samples == r->full_samples &&
            r->times[i].upload_bytes > f->full_bytes)
            f->full_bytes = r->times[i].upload_bytes;
}

static bool upload_figures(const struct gpu_run *r, struct figures *f)
{
    double bytes = 0, ms = 0, steps = 0;
    double *rates = calloc(r->timed + 1, sizeof(*rates));
    if (!rates)
        return false;
    for (uint64_t i = 0; i < r->timed; i++) {
        const struct batch_times *t = &r->times[i];
        const double copy = t->upload_end - t->upload_start;
        bytes += (double)t->upload_bytes;
        ms += copy;
        steps += t->step_end - t->step_start;
        rates[i] = gb_per_s((double)t->upload_bytes, copy);
    }
    f->upload_gbps = gb_per_s(bytes, ms);
    f->upload_median_gbps = median(rates, r->timed);
    f->mean_upload_ms = ms / (double)r->timed;
    f->mean_step_ms = steps / (double)r->timed;
    free(rates);
    return true;
}

/* The ring's side of the comparison: full-size single-copy uploads after
 * the cold first one, leaving out those a plain copy overlapped. */
static bool ring_figures(const struct gpu_run *r, struct figures *f)
{
    double bytes = 0, ms = 0;
    double *rates = calloc(r->timed + 1, sizeof(*rates));
    if (!rates)
        return false;
    for (uint64_t i = 1; i < r->timed; i++) {
        const struct batch_times *t = &r->times[i];
        if (t->samples != r->full_samples || t->upload_bytes != f->full_bytes)
            continue;
        if (overlaps_a_plain_copy(r, t->upload_start, t->upload_end)) {
            f->ring_left_out++;
            continue;
        }
        const double copy = t->upload_end - t->upload_start;
        bytes += (double)t->upload_bytes;
        ms += copy;
        rates[f->ring_uploads++] = gb_per_s((double)t->upload_bytes, copy);
    }
    f->ring_gbps = gb_per_s(bytes, ms);
    f->ring_median_gbps = median(rates, f->ring_uploads);
    free(rates);
    return true;
}

/* The reference's side: the plain copies that no upload overlapped. */
static void plain_figures(const struct gpu_run *r, struct figures *f)
{
    double ms[BASELINE_COPIES], total = 0;
    for (size_t i = 0; i < r->plain.issued; i++) {
        if (overlaps_an_upload(r, r->plain_start[i], r->plain_end[i])) {
            f->plain_left_out++;
            continue;
        }
        ms[f->plain_copies] = r->plain_end[i] - r->plain_start[i];
        total += ms[f->plain_copies++];
    }
    f->plain_gbps =
        gb_per_s((double)r->plain.bytes * (double)f->plain_copies, total);
    f->plain_median_gbps =
        gb_per_s((double)r->plain.bytes, median(ms, f->plain_copies));
}

static void pipeline_figures(const struct gpu_run *r, struct figures *f)
{
    const struct batch_times *t = r->times;
    for (uint64_t n = 0; n + 1 < r->timed; n++) {
        const double gap = t[n + 1].step_start - t[n].step_end;
        f->idle_ms += gap > 0 ? gap : 0;
    }
    uint64_t first = 0;
    for (uint64_t k = 0; k < r->timed; k++) {
        const double copy = t[k].upload_end - t[k].upload_start;
        const double hidden = hidden_ms(r, k, &first);
        f->upload_ms += copy;
        f->hidden_ms += hidden;
        if (hidden > 0 && hidden >= copy - HIDDEN_SLACK_MS)
            f->fully_hidden++;
        else if (hidden > 0)
            f->partly_hidden++;
    }
    if (r->timed > 1)
        f->busy_span_ms = t[r->timed - 1].step_end - t[0].step_start;
}

static void print_device(int device, uint32_t depth)
{
    struct cudaDeviceProp prop;
    const bool named = cudaGetDeviceProperties(&prop, device) == cudaSuccess;
    printf("GPU %d: %s, %" PRIu32 " device buffers\n", device,
           named ? prop.name : "(unnamed)",
           depth ? depth : RF_CUDA_DEFAULT_DEPTH);
}

static void print_timeline(const struct gpu_run *r)
{
    printf("timeline, ms from the first event (hidden: the share of upload n "
           "that ran during some step):\n"
           "  batch n   step n: start      end     upload n: start      "
           "end    hidden\n");
    uint64_t first = 0;
    for (uint64_t n = 0; n < TIMELINE_ROWS && n < r->timed; n++) {
        const struct batch_times *t = &r->times[n];
        const double copy = t->upload_end - t->upload_start;
        const double hidden = hidden_ms(r, n, &first);
        printf("  %7" PRIu64 "   %12.3f %8.3f   %15.3f %8.3f   %6.0f%%\n", n,
               t->step_start, t->step_end, t->upload_start, t->upload_end,
               copy > 0 ? 100 * hidden / copy : 0);
    }
}

static void print_comparison(const struct gpu_run *r, const struct figures *f)
{
    const double ratio = f->plain_gbps > 0 ? f->ring_gbps / f->plain_gbps : 0;
    printf("  upload         %.2f GB/s while copying (median %.2f), every "
           "timed upload\n",
           f->upload_gbps, f->upload_median_gbps);
    printf("  ring upload    %.2f GB/s (median %.2f): %" PRIu64 " full-size "
           "single-copy uploads of %zu bytes after the first; %" PRIu64
           " left out, a plain copy overlapped them\n",
           f->ring_gbps, f->ring_median_gbps, f->ring_uploads, f->full_bytes,
           f->ring_left_out);
    printf("  plain copy     %.2f GB/s (median %.2f): %zu cudaMemcpyAsync of "
           "%zu bytes from cudaHostAlloc'd memory, one every %" PRIu64
           " batches with a step; %zu left out, an upload overlapped them\n",
           f->plain_gbps, f->plain_median_gbps, f->plain_copies, r->plain.bytes,
           r->plain_every, f->plain_left_out);
    if (f->ring_uploads == 0 || f->plain_copies == 0)
        printf("  ratio          none: too few copies to compare (run more "
               "batches, or a longer --step-us)\n");
    else
        printf("  ratio          %.3f (target >= %.2f): %s\n", ratio,
               TARGET_RATIO, ratio >= TARGET_RATIO ? "met" : "NOT met");
}

static void print_figures(const struct gpu_run *r, const struct figures *f,
                          const struct gpu_bench_options *o)
{
    print_device(o->device, o->depth);
    printf("%" PRIu64 " batches in %.3f s: %.0f samples/s, %.2f GB/s of "
           "pixels delivered\n",
           r->batches, r->elapsed_s,
           cli_per_second((double)r->stats.samples, r->elapsed_s),
           cli_per_second((double)r->pixel_bytes / 1e9, r->elapsed_s));
    print_comparison(r, f);
    printf("  step           %.3f ms mean: float16 NCHW conversion + %.3f ms "
           "busy kernel\n",
           f->mean_step_ms, (double)r->step_ns / 1e6);
    printf("  copy's share   %.1f%% of a step (%.3f ms upload)\n",
           f->mean_step_ms > 0 ? 100 * f->mean_upload_ms / f->mean_step_ms : 0,
           f->mean_upload_ms);
    printf("  GPU idle       %.3f ms between steps in all, %.4f ms a batch, "
           "%.2f%% of the steps' span\n",
           f->idle_ms, r->timed > 1 ? f->idle_ms / (double)(r->timed - 1) : 0,
           f->busy_span_ms > 0 ? 100 * f->idle_ms / f->busy_span_ms : 0);
    printf("  hidden         of %" PRIu64 " uploads, %" PRIu64 " ran wholly "
           "and %" PRIu64 " partly during some step; %.1f%% of the upload "
           "time was hidden\n",
           r->timed, f->fully_hidden, f->partly_hidden,
           f->upload_ms > 0 ? 100 * f->hidden_ms / f->upload_ms : 0);
    printf("  consumer       waited for producers %.1f%% of the time\n",
           r->elapsed_s > 0
               ? 100 * (double)r->stats.wait_ns * 1e-9 / r->elapsed_s
               : 0);
    print_timeline(r);
}

static bool open_gpu(struct gpu_run *r, rf_loader **loader,
                     const struct gpu_bench_options *o)
{
    char *why = NULL;
    const int rc = rf_cuda_open(&r->gpu, *loader, o->device, o->depth,
                                RF_CUDA_TIMING, &why);
    if (rc < 0) {
        fprintf(stderr, PROGRAM ": --gpu: %s: %s\n", rf_strerror(rc),
                why ? why : "");
        rf_loader_close(*loader);
    }
    *loader = NULL; /* closed, or the GPU consumer's now */
    free(why);
    return rc == 0;
}

int bench_gpu(rf_loader **loader, const struct gpu_bench_options *o)
{
    struct gpu_run r = {0};
    struct figures f = {0};
    /* The step's stream and events go where the GPU consumer works. */
    bool ok = open_gpu(&r, loader, o) &&
              cuda_ok(cudaSetDevice(o->device), "choosing the device") &&
              run_setup(&r, o) && choose_step(&r, o) && run_batches(&r);
    if (ok && r.timed == 0) {
        fprintf(stderr, PROGRAM ": --gpu: no batch was timed\n");
        ok = false;
    }
    if (ok) {
        full_upload_size(&r, &f);
        plain_figures(&r, &f);
        pipeline_figures(&r, &f);
    }
    ok = ok && upload_figures(&r, &f) && ring_figures(&r, &f);
    if (ok)
        print_figures(&r, &f, o);
    run_free(&r);
    return ok ? EXIT_SUCCESS : CLI_EXIT_FAILED;
}
