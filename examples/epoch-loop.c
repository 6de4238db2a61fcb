/*
 * epoch-loop.c - the shape of a training loop fed by ringfeed, using only
 * the public header. The "training step" here is a stand-in (the mean
 * pixel value of each batch); put a model in its place.
 *
 *   epoch-loop                 synthetic images
 *   epoch-loop DATASET         a folder of class folders or a packed file
 *
 * Build against an installed ringfeed:
 *   cc epoch-loop.c $(pkg-config --cflags --libs ringfeed)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <ringfeed.h>

#define EPOCHS 2

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Stands in for forward + backward + optimiser step. */
static double train_step(const rf_batch *b)
{
    const uint8_t *pixels = b->data;
    uint64_t sum = 0;
    for (size_t i = 0; i < b->bytes; i++)
        sum += pixels[i];
    return b->bytes ? (double)sum / (double)b->bytes : 0.0;
}

static rf_config *make_config(const char *dataset)
{
    rf_config *cfg = rf_config_create();
    if (!cfg)
        return NULL;
    int rc = rf_config_set(cfg, RF_PARAM_BATCH_SIZE, 32);
    if (rc == 0)
        rc = rf_config_set(cfg, RF_PARAM_EPOCHS, EPOCHS);
    if (rc == 0)
        rc = rf_config_set(cfg, RF_PARAM_LAYOUT, RF_LAYOUT_NCHW);
    if (rc == 0 && dataset)
        rc = rf_config_set_path(cfg, dataset);
    if (rc == 0 && dataset)
        rc = rf_config_set(cfg, RF_PARAM_ON_ERROR, RF_ON_ERROR_SKIP);
    if (rc == 0 && !dataset)
        rc = rf_config_set(cfg, RF_PARAM_SAMPLES, 2000);
    if (rc < 0) {
        fprintf(stderr, "epoch-loop: %s\n", rf_config_error(cfg));
        rf_config_free(cfg);
        return NULL;
    }
    return cfg;
}

/* Runs every epoch; returns 0 at the end of the last, or the error. */
static int run(rf_loader *loader)
{
    rf_batch b;
    int rc;
    uint64_t epoch = 0, samples = 0;
    double mean = 0.0, started = now_s();
    while ((rc = rf_loader_next(loader, &b)) != 0) {
        if (rc == -EINTR)
            continue; /* a signal interrupted the wait: ask again */
        if (rc < 0)
            return rc; /* the loader can only be closed now */
        if (b.epoch != epoch) {
            printf("epoch %" PRIu64 ": %" PRIu64 " samples in %.2f s\n", epoch,
                   samples, now_s() - started);
            epoch = b.epoch;
            samples = 0;
            started = now_s();
        }
        mean = train_step(&b);
        samples += b.samples;
        rc = rf_loader_release(loader, &b); /* the slot goes back to fill */
        if (rc < 0)
            return rc;
    }
    printf("epoch %" PRIu64 ": %" PRIu64 " samples in %.2f s "
           "(last batch mean pixel %.1f)\n",
           epoch, samples, now_s() - started, mean);
    return 0;
}

int main(int argc, char **argv)
{
    rf_config *cfg = make_config(argc > 1 ? argv[1] : NULL);
    if (!cfg)
        return 1;
    rf_loader *loader = NULL;
    char *why = NULL;
    int rc = rf_loader_open(&loader, cfg, &why);
    rf_config_free(cfg);
    if (rc < 0) {
        fprintf(stderr, "epoch-loop: %s: %s\n", rf_strerror(rc),
                why ? why : "");
        free(why);
        return 1;
    }
    rc = run(loader);
    if (rc < 0)
        fprintf(stderr, "epoch-loop: %s: %s\n", rf_strerror(rc),
                rf_loader_error(loader));
    const uint64_t failed = rf_loader_sample_errors(loader, NULL, 0);
    if (failed)
        printf("%" PRIu64 " samples were skipped\n", failed);
    rf_loader_close(loader);
    return rc < 0 ? 1 : 0;
}
