/*
 * cuda-train.c - a CUDA training loop in C fed by ringfeed's GPU consumer.
 * Producer processes make the batches; each one goes from the shared ring
 * to the GPU in one DMA on ringfeed's copy stream, while this loop's
 * stream runs the step on the batch before it. Nothing here waits for the
 * GPU on the host until the run is over.
 *
 * The model is softmax regression over the normalised pixels (its two
 * kernels are in cuda-train-model.cu). The synthetic pixels carry a
 * pattern of their class under the noise, and 512 images of 3072 values
 * are linearly separable anyway: the loss of the last epoch must be under
 * half that of the first. That fails if the step or the upload is broken,
 * or if samples came back with other pixels or another label.
 *
 * Exit status: 0 the loss fell, 1 it did not or something failed, 77 no
 * CUDA device (skipped).
 *
 * Build against an installed ringfeed:
 *   nvcc -c cuda-train-model.cu
 *   cc cuda-train.c cuda-train-model.o $(pkg-config --cflags --libs
 * ringfeed-cuda)
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#include <ringfeed/cuda.h>

#include "cuda-train-model.h"

#define EPOCHS 20
#define SAMPLES 512
#define BATCH 64
#define SIZE 32
#define CHANNELS 3
#define CLASSES 10
#define PRODUCERS 2
#define DEPTH 3 /* device buffers: rf_cuda_open()'s default */
#define FEATURES ((size_t)SIZE * SIZE * CHANNELS)
#define LEARNING_RATE 0.01f
#define EXIT_SKIP 77

static const float mean[CHANNELS] = {0.5f, 0.5f, 0.5f};
static const float stdev[CHANNELS] = {0.25f, 0.25f, 0.25f};

/* Device memory of the model and of one converted batch. */
struct training {
    float *x, *weights, *bias, *scratch, *epoch_loss;
    cudaStream_t stream;
};

static int cuda_failed(cudaError_t err, const char *what)
{
    fprintf(stderr, "cuda-train: %s: %s\n", what, cudaGetErrorString(err));
    return -1;
}

static int training_create(struct training *t)
{
    const struct {
        float **where;
        size_t count;
    } arrays[] = {
        {&t->x, (size_t)BATCH * FEATURES},
        {&t->weights, (size_t)CLASSES * FEATURES},
        {&t->bias, CLASSES},
        {&t->scratch, (size_t)BATCH * CLASSES},
        {&t->epoch_loss, EPOCHS},
    };
    cudaError_t err =
        cudaStreamCreateWithFlags(&t->stream, cudaStreamNonBlocking);
    if (err != cudaSuccess)
        return cuda_failed(err, "creating the training stream");
    for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) {
        const size_t bytes = arrays[i].count * sizeof(float);
        err = cudaMalloc((void **)arrays[i].where, bytes);
        if (err == cudaSuccess) /* zero weights: the loss starts at ln 10 */
            err = cudaMemsetAsync(*arrays[i].where, 0, bytes, t->stream);
        if (err != cudaSuccess)
            return cuda_failed(err, "allocating the model");
    }
    return 0;
}

static void training_free(struct training *t)
{
    cudaFree(t->x);
    cudaFree(t->weights);
    cudaFree(t->bias);
    cudaFree(t->scratch);
    cudaFree(t->epoch_loss);
    if (t->stream)
        cudaStreamDestroy(t->stream);
}

/* One step, all of it queued on t->stream behind the batch's upload. */
static int train_step(rf_cuda_loader *gpu, const rf_cuda_batch *b,
                      struct training *t)
{
    cudaError_t err = cudaStreamWaitEvent(t->stream, b->ready, 0);
    if (err != cudaSuccess)
        return cuda_failed(err, "waiting for the batch's upload");
    const int rc = rf_cuda_convert(gpu, b, t->x, RF_CUDA_FLOAT32,
                                   RF_LAYOUT_NCHW, mean, stdev, t->stream);
    if (rc < 0) {
        fprintf(stderr, "cuda-train: %s\n", rf_cuda_error(gpu));
        return -1;
    }
    const struct model_step step = {
        .x = t->x,
        .labels = b->labels,
        .samples = b->samples,
        .features = (uint32_t)FEATURES,
        .classes = CLASSES,
        .weights = t->weights,
        .bias = t->bias,
        .scratch = t->scratch,
        .loss_sum = t->epoch_loss + b->epoch,
        .learning_rate = LEARNING_RATE,
    };
    err = model_train_step(&step, t->stream);
    return err == cudaSuccess ? 0 : cuda_failed(err, "launching the step");
}

/* The loop: rf_cuda_next() hands out batch n and has already started the
 * upload of n+1 on its own stream, so that copy overlaps this step. */
static int train(rf_cuda_loader *gpu, struct training *t)
{
    rf_cuda_batch b;
    int rc;
    while ((rc = rf_cuda_next(gpu, &b)) > 0) {
        if (train_step(gpu, &b, t) < 0)
            return -1;
        rc = rf_cuda_release(gpu, &b, t->stream); /* after the step */
        if (rc < 0)
            break;
    }
    if (rc < 0)
        fprintf(stderr, "cuda-train: %s: %s\n", rf_strerror(rc),
                rf_cuda_error(gpu));
    return rc;
}

/* Reads the summed losses back (the run's one wait on the host) and
 * prints the mean per epoch; returns 0 when the loss fell as it must. */
static int report(const struct training *t)
{
    float sums[EPOCHS];
    cudaError_t err = cudaMemcpyAsync(sums, t->epoch_loss, sizeof(sums),
                                      cudaMemcpyDeviceToHost, t->stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(t->stream);
    if (err != cudaSuccess)
        return cuda_failed(err, "reading the losses");
    for (int e = 0; e < EPOCHS; e++)
        printf("epoch %2d: mean loss %.4f\n", e, sums[e] / SAMPLES);
    const float first = sums[0] / SAMPLES, last = sums[EPOCHS - 1] / SAMPLES;
    if (!isfinite(first) || !isfinite(last) || !(last < 0.5f * first)) {
        fprintf(stderr,
                "cuda-train: the loss went from %.4f to %.4f; it must fall "
                "below half\n",
                first, last);
        return -1;
    }
    return 0;
}

static rf_loader *open_loader(void)
{
    const struct {
        rf_param param;
        int64_t value;
    } settings[] = {
        {RF_PARAM_BATCH_SIZE, BATCH},
        {RF_PARAM_SAMPLES, SAMPLES},
        {RF_PARAM_EPOCHS, EPOCHS},
        {RF_PARAM_HEIGHT, SIZE},
        {RF_PARAM_WIDTH, SIZE},
        {RF_PARAM_CHANNELS, CHANNELS},
        {RF_PARAM_CLASSES, CLASSES},
        {RF_PARAM_PRODUCERS, PRODUCERS},
        /* ringfeed/cuda.h: uploads in flight hold up to DEPTH slots, and
         * each producer needs two, or the uploads stop running ahead */
        {RF_PARAM_SLOTS, DEPTH + 2 * PRODUCERS},
    };
    rf_config *cfg = rf_config_create();
    if (!cfg)
        return NULL;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof(settings) / sizeof(*settings); i++)
        rc = rf_config_set(cfg, settings[i].param, settings[i].value);
    rf_loader *loader = NULL;
    char *why = NULL;
    if (rc == 0)
        rc = rf_loader_open(&loader, cfg, &why);
    if (rc < 0)
        fprintf(stderr, "cuda-train: %s: %s\n", rf_strerror(rc),
                why ? why : rf_config_error(cfg));
    free(why);
    rf_config_free(cfg);
    return loader;
}

int main(void)
{
    int devices = 0;
    const cudaError_t err = cudaGetDeviceCount(&devices);
    if (err != cudaSuccess || devices == 0) {
        printf("cuda-train: no CUDA device (%s): skipped\n",
               err != cudaSuccess ? cudaGetErrorString(err) : "none listed");
        return EXIT_SKIP;
    }
    rf_loader *loader = open_loader();
    if (!loader)
        return 1;
    rf_cuda_loader *gpu = NULL;
    char *why = NULL;
    const int rc = rf_cuda_open(&gpu, loader, 0, DEPTH, 0, &why);
    if (rc < 0) {
        fprintf(stderr, "cuda-train: %s: %s\n", rf_strerror(rc),
                why ? why : "");
        free(why);
        rf_loader_close(loader);
        return 1;
    }
    struct training t = {0};
    int status =
        training_create(&t) == 0 && train(gpu, &t) == 0 && report(&t) == 0 ? 0
                                                                           : 1;
    /* The stream must be done with the batches before they go. */
    if (t.stream && cudaStreamSynchronize(t.stream) != cudaSuccess)
        status = 1;
    rf_cuda_close(gpu);
    training_free(&t);
    return status;
}
