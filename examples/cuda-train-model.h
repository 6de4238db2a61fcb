/*
 * cuda-train-model.h - the model of examples/cuda-train.c: softmax
 * regression (one linear layer and cross-entropy), trained by plain SGD
 * with two kernels per step (cuda-train-model.cu). Small on purpose: the
 * example is about feeding a GPU, not about the model.
 */
#ifndef CUDA_TRAIN_MODEL_H
#define CUDA_TRAIN_MODEL_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The kernels keep one accumulator per class in registers. */
#define MODEL_MAX_CLASSES 16

struct model_step {
    const float *x;        /* device: samples x features inputs */
    const int64_t *labels; /* device: samples labels in [0, classes) */
    uint32_t samples, features, classes;
    float *weights;  /* device: classes x features, updated */
    float *bias;     /* device: classes, updated */
    float *scratch;  /* device: samples x classes floats */
    float *loss_sum; /* device: the step's summed loss is added */
    float learning_rate;
};

/* Queues one SGD step on stream: forward pass, the loss of every sample
 * added to *loss_sum, gradients, update. Returns the launch status. */
cudaError_t model_train_step(const struct model_step *step,
                             cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
