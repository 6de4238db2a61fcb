/*
 * softmax-train.c - a training loop fed by ringfeed: softmax regression
 * (a linear classifier trained by SGD) on the synthetic source, reading
 * each batch in place. Uses only the public header.
 *
 * Every 8th sample (by dataset index) is held out: never trained on, only
 * scored. The program prints the training loss and the held-out accuracy
 * of each epoch and exits 1 unless the model learned: the last epoch's
 * loss under half the first's and held-out accuracy of at least 50%
 * (chance is 1 in CLASSES). The synthetic pixels carry a pattern of their
 * class (rf_synthetic_fill()), so a working loop passes easily; labels
 * that do not match their images, or a broken update, fail.
 *
 * Build against an installed ringfeed:
 *   cc softmax-train.c $(pkg-config --cflags --libs ringfeed) -lm
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringfeed.h>

enum {
    EPOCHS = 5,
    CLASSES = 10,
    SIDE = 16, /* 16x16 RGB images: 768 features */
    CHANNELS = 3,
    FEATURES = SIDE * SIDE * CHANNELS,
    SAMPLES = 4096,
    BATCH = 64,
    HOLD_OUT_EVERY = 8
};

static const float LEARNING_RATE = 0.1f;

/* The model: one weight row and one bias per class. */
struct model {
    float w[CLASSES][FEATURES];
    float b[CLASSES];
};

/* Sums over one epoch. */
struct epoch_sums {
    double train_loss;
    uint64_t trained, held_out, held_out_right;
};

static int is_held_out(uint64_t index)
{
    return index % HOLD_OUT_EVERY == 0;
}

/* Pixels are converted to floats in [0, 1] as they are read: the batch
 * stays where the producer wrote it. */
static void to_features(const uint8_t *pixels, float *x)
{
    for (int j = 0; j < FEATURES; j++)
        x[j] = (float)pixels[j] * (1.0f / 255.0f);
}

/* p = softmax(W x + b); returns the predicted class. */
static int predict(const struct model *m, const float *x, float *p)
{
    float top = -INFINITY, sum = 0.0f;
    int best = 0;
    for (int c = 0; c < CLASSES; c++) {
        float z = m->b[c];
        for (int j = 0; j < FEATURES; j++)
            z += m->w[c][j] * x[j];
        p[c] = z;
        if (z > top) {
            top = z;
            best = c;
        }
    }
    for (int c = 0; c < CLASSES; c++) {
        p[c] = expf(p[c] - top); /* minus the largest: no overflow */
        sum += p[c];
    }
    for (int c = 0; c < CLASSES; c++)
        p[c] /= sum;
    return best;
}

/* Adds the gradient of one sample's cross-entropy loss to *g. */
static void add_gradient(struct model *g, const float *x, const float *p,
                         int64_t label)
{
    for (int c = 0; c < CLASSES; c++) {
        const float d = p[c] - (c == label ? 1.0f : 0.0f);
        for (int j = 0; j < FEATURES; j++)
            g->w[c][j] += d * x[j];
        g->b[c] += d;
    }
}

/* m -= scale * g */
static void apply_step(struct model *m, const struct model *g, float scale)
{
    for (int c = 0; c < CLASSES; c++) {
        for (int j = 0; j < FEATURES; j++)
            m->w[c][j] -= scale * g->w[c][j];
        m->b[c] -= scale * g->b[c];
    }
}

/* One SGD step on the batch's training samples; scores the held-out ones. */
static void train_step(struct model *m, struct model *grad, const rf_batch *b,
                       struct epoch_sums *sums)
{
    float x[FEATURES], p[CLASSES];
    uint32_t trained = 0;
    memset(grad, 0, sizeof(*grad));
    for (uint32_t i = 0; i < b->samples; i++) {
        const uint8_t *pixels = (const uint8_t *)b->data + i * b->sample_bytes;
        const int64_t label = b->labels[i];
        to_features(pixels, x);
        const int guess = predict(m, x, p);
        if (is_held_out(b->indices[i])) {
            sums->held_out++;
            sums->held_out_right += guess == label;
            continue;
        }
        sums->train_loss -= log(fmax(p[label], 1e-30));
        add_gradient(grad, x, p, label);
        trained++;
    }
    sums->trained += trained;
    if (trained > 0) /* a step along the batch's mean gradient */
        apply_step(m, grad, LEARNING_RATE / (float)trained);
}

static rf_config *make_config(void)
{
    rf_config *cfg = rf_config_create();
    if (!cfg)
        return NULL;
    const struct {
        rf_param param;
        int64_t value;
    } settings[] = {
        {RF_PARAM_SOURCE, RF_SOURCE_SYNTHETIC},
        {RF_PARAM_SAMPLES, SAMPLES},
        {RF_PARAM_CLASSES, CLASSES},
        {RF_PARAM_HEIGHT, SIDE},
        {RF_PARAM_WIDTH, SIDE},
        {RF_PARAM_CHANNELS, CHANNELS},
        {RF_PARAM_BATCH_SIZE, BATCH},
        {RF_PARAM_EPOCHS, EPOCHS},
        {RF_PARAM_SEED, 1},
    };
    for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++) {
        if (rf_config_set(cfg, settings[i].param, settings[i].value) < 0) {
            fprintf(stderr, "softmax-train: %s\n", rf_config_error(cfg));
            rf_config_free(cfg);
            return NULL;
        }
    }
    return cfg;
}

static void print_epoch(uint64_t epoch, const struct epoch_sums *s)
{
    printf("epoch %" PRIu64 ": loss %.4f, held-out accuracy %.1f%% (%" PRIu64
           " samples)\n",
           epoch, s->trained ? s->train_loss / (double)s->trained : 0.0,
           s->held_out ? 100.0 * (double)s->held_out_right / (double)s->held_out
                       : 0.0,
           s->held_out);
}

/* Trains until the loader has no more batches. Returns 0 or the error. */
static int train(rf_loader *loader, struct model *m, struct model *grad,
                 struct epoch_sums *sums)
{
    rf_batch b;
    int rc;
    uint64_t epoch = 0;
    while ((rc = rf_loader_next(loader, &b)) != 0) {
        if (rc == -EINTR)
            continue; /* a signal interrupted the wait: ask again */
        if (rc < 0)
            return rc;
        if (b.sample_bytes != FEATURES || b.epoch >= EPOCHS) {
            fprintf(stderr,
                    "softmax-train: a batch of %zu-byte samples in "
                    "epoch %" PRIu64 " was not asked for\n",
                    b.sample_bytes, b.epoch);
            return -EINVAL;
        }
        if (b.epoch != epoch) /* the first batch of the next epoch */
            print_epoch(epoch, &sums[epoch]);
        epoch = b.epoch;
        train_step(m, grad, &b, &sums[epoch]);
        rc = rf_loader_release(loader, &b); /* the slot goes back to fill */
        if (rc < 0)
            return rc;
    }
    print_epoch(epoch, &sums[epoch]);
    return 0;
}

/* The verdict: did the model learn? */
static int learned(const struct epoch_sums *sums)
{
    const struct epoch_sums *first = &sums[0], *last = &sums[EPOCHS - 1];
    if (!first->trained || !last->trained || !last->held_out)
        return 0;
    const double first_loss = first->train_loss / (double)first->trained;
    const double last_loss = last->train_loss / (double)last->trained;
    const double accuracy =
        (double)last->held_out_right / (double)last->held_out;
    return last_loss < 0.5 * first_loss && accuracy >= 0.5;
}

int main(void)
{
    struct model *m = calloc(2, sizeof(*m)); /* the model and a gradient */
    struct epoch_sums sums[EPOCHS] = {{0}};
    rf_config *cfg = make_config();
    if (!m || !cfg) {
        free(m);
        rf_config_free(cfg);
        return 1;
    }
    rf_loader *loader = NULL;
    char *why = NULL;
    int rc = rf_loader_open(&loader, cfg, &why);
    rf_config_free(cfg); /* the loader keeps its own copy */
    if (rc < 0) {
        fprintf(stderr, "softmax-train: %s: %s\n", rf_strerror(rc),
                why ? why : "");
        free(why);
        free(m);
        return 1;
    }
    rc = train(loader, &m[0], &m[1], sums);
    if (rc < 0)
        fprintf(stderr, "softmax-train: %s: %s\n", rf_strerror(rc),
                rf_loader_error(loader));
    rf_loader_close(loader);
    const int ok = rc == 0 && learned(sums);
    printf("%s\n", ok ? "learned" : "did NOT learn");
    free(m);
    return ok ? 0 : 1;
}
