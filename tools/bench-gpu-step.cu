/*
 * tools/bench-gpu-step.cu - the stand-in for a model's step in
 * ringfeed-bench --gpu: a kernel that keeps its stream busy for a given
 * time, measured on the GPU's own clock.
 */
#include <stdint.h>

#include <cuda_runtime_api.h>

namespace
{

__device__ uint64_t global_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void busy(uint64_t ns)
{
    const uint64_t start = global_ns();
    while (global_ns() - start < ns) {
    }
}

} // namespace

extern "C" cudaError_t bench_gpu_busy(uint64_t ns, cudaStream_t stream)
{
    uint64_t arg = ns;
    void *args[] = {&arg};
    return cudaLaunchKernel(reinterpret_cast<const void *>(&busy), dim3(1),
                            dim3(32), args, 0, stream);
}
