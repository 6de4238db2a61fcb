/*
 * cuda-train-model.cu - the two kernels of one SGD step of softmax
 * regression: one block per sample computes its logits, loss and the
 * gradient of its logits; then one thread per weight sums that weight's
 * gradient over the batch and applies it.
 */
#include <math.h>

#include "cuda-train-model.h"

namespace
{

constexpr unsigned kThreads = 256;
constexpr unsigned kWarps = kThreads / 32;

__device__ float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset /= 2)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

/* Softmax of one sample's logits; its loss goes to *loss_sum and
 * d(mean loss)/d(logit) to grad. Runs on one thread. */
__device__ void softmax_loss(const float *logits, int64_t label,
                             uint32_t classes, float inv_samples, float *grad,
                             float *loss_sum)
{
    float top = logits[0];
    for (uint32_t k = 1; k < classes; k++)
        top = fmaxf(top, logits[k]);
    float total = 0;
    for (uint32_t k = 0; k < classes; k++)
        total += expf(logits[k] - top);
    if (label < 0 || label >= classes) { /* shows up as a NaN loss */
        atomicAdd(loss_sum, nanf(""));
        return;
    }
    atomicAdd(loss_sum, logf(total) - (logits[label] - top));
    for (uint32_t k = 0; k < classes; k++) {
        const float p = expf(logits[k] - top) / total;
        grad[k] = (p - (k == label ? 1.0f : 0.0f)) * inv_samples;
    }
}

__global__ void __launch_bounds__(kThreads) forward(const model_step s)
{
    __shared__ float partial[MODEL_MAX_CLASSES][kWarps];
    __shared__ float logits[MODEL_MAX_CLASSES];
    const uint32_t n = blockIdx.x;
    const float *row = s.x + static_cast<size_t>(n) * s.features;
    float acc[MODEL_MAX_CLASSES] = {};
    for (uint32_t d = threadIdx.x; d < s.features; d += blockDim.x) {
        const float v = row[d];
#pragma unroll
        for (uint32_t k = 0; k < MODEL_MAX_CLASSES; k++)
            if (k < s.classes)
                acc[k] +=
                    v * s.weights[static_cast<size_t>(k) * s.features + d];
    }
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (uint32_t k = 0; k < MODEL_MAX_CLASSES; k++) {
        const float sum = warp_sum(acc[k]);
        if (lane == 0)
            partial[k][warp] = sum;
    }
    __syncthreads();
    if (threadIdx.x < s.classes) {
        float z = s.bias[threadIdx.x];
        for (unsigned w = 0; w < kWarps; w++)
            z += partial[threadIdx.x][w];
        logits[threadIdx.x] = z;
    }
    __syncthreads();
    if (threadIdx.x == 0)
        softmax_loss(logits, s.labels[n], s.classes, 1.0f / s.samples,
                     s.scratch + static_cast<size_t>(n) * s.classes,
                     s.loss_sum);
}

/* Weight j of class k (j == features: the bias) moves against the sum
 * over the batch of grad[n][k] * x[n][j]. Neighbouring threads read
 * neighbouring inputs. */
__global__ void __launch_bounds__(kThreads) update(const model_step s)
{
    const uint64_t per_class = s.features + 1;
    const uint64_t i =
        static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= per_class * s.classes)
        return;
    const uint32_t k = static_cast<uint32_t>(i / per_class);
    const uint32_t j = static_cast<uint32_t>(i % per_class);
    float g = 0;
    for (uint32_t n = 0; n < s.samples; n++) {
        const float input = j < s.features
                                ? s.x[static_cast<size_t>(n) * s.features + j]
                                : 1.0f;
        g += s.scratch[static_cast<size_t>(n) * s.classes + k] * input;
    }
    float *param = j < s.features
                       ? &s.weights[static_cast<size_t>(k) * s.features + j]
                       : &s.bias[k];
    *param -= s.learning_rate * g;
}

} // namespace

extern "C" cudaError_t model_train_step(const model_step *step,
                                        cudaStream_t stream)
{
    if (step->classes == 0 || step->classes > MODEL_MAX_CLASSES ||
        step->samples == 0)
        return cudaErrorInvalidValue;
    model_step s = *step;
    void *args[] = {&s};
    cudaError_t err =
        cudaLaunchKernel(reinterpret_cast<const void *>(&forward),
                         dim3(s.samples), dim3(kThreads), args, 0, stream);
    if (err != cudaSuccess)
        return err;
    const uint64_t weights =
        (static_cast<uint64_t>(s.features) + 1) * s.classes;
    const unsigned blocks =
        static_cast<unsigned>((weights + kThreads - 1) / kThreads);
    return cudaLaunchKernel(reinterpret_cast<const void *>(&update),
                            dim3(blocks), dim3(kThreads), args, 0, stream);
}
