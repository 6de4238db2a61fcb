/*
 * cuda/loader.h - what loader.c lends to the rest of libringfeed-cuda:
 * the error detail and the current-device guard every public call runs
 * under.
 */
#ifndef RF_CUDA_LOADER_H
#define RF_CUDA_LOADER_H

#include <cuda_runtime_api.h>

#include "ringfeed/cuda.h"

/* Stores the detail of a failure in gpu and returns code. */
int rf__cuda_fail(rf_cuda_loader *gpu, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Stores "CALL: CUDA's message (its name)" plus the context given, and
 * returns RF_E_CUDA. */
int rf__cuda_call_failed(rf_cuda_loader *gpu, cudaError_t err, const char *call,
                         const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Makes gpu's device current, keeping the caller's in *previous for
 * rf__cuda_leave(). Returns 0 or RF_E_CUDA. */
int rf__cuda_enter(rf_cuda_loader *gpu, int *previous);
void rf__cuda_leave(const rf_cuda_loader *gpu, int previous);

#endif /* RF_CUDA_LOADER_H */
