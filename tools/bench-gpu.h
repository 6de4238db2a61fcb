/*
 * tools/bench-gpu.h - ringfeed-bench --gpu: the GPU consumer measured
 * against a plain cudaMemcpyAsync from cudaHostAlloc'd memory, with a
 * timeline of uploads against steps. Built only with CUDA.
 */
#ifndef RINGFEED_TOOLS_BENCH_GPU_H
#define RINGFEED_TOOLS_BENCH_GPU_H

#include <stdint.h>

#include <ringfeed.h>

struct gpu_bench_options {
    int device;         /* CUDA device */
    uint32_t depth;     /* device buffers; 0: the library's default */
    int64_t step_us;    /* the stand-in step's length; -1: 3 uploads */
    uint64_t batches;   /* batches the run will hand out */
    size_t batch_bytes; /* pixels of a full batch */
    uint32_t batch;     /* samples in a full batch */
};

/* Takes *loader over (it is closed, and *loader set to NULL, whatever
 * happens), runs every batch through the GPU and prints the figures.
 * Returns the exit status. */
int bench_gpu(rf_loader **loader, const struct gpu_bench_options *o);

#endif
