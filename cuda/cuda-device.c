/*
 * cuda-device.c - how every call of libringfeed-cuda reaches CUDA: the
 * fork check, the caller's current device (or context) kept and given
 * back, and the detail of a failure, kept in the consumer for
 * rf_cuda_error(). See cuda-loader.h.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cuda-loader.h"

static void set_detail(rf_cuda_loader *gpu, const char *fmt, va_list ap)
{
    vsnprintf(gpu->error, sizeof(gpu->error), fmt, ap);
}

int rf__cuda_fail(rf_cuda_loader *gpu, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_detail(gpu, fmt, ap);
    va_end(ap);
    return code;
}

int rf__cuda_call_failed(rf_cuda_loader *gpu, cudaError_t err, const char *call,
                         const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_detail(gpu, fmt, ap);
    va_end(ap);
    const size_t used = strlen(gpu->error);
    snprintf(gpu->error + used, sizeof(gpu->error) - used,
             ": %s failed: %s (%s)", call, cudaGetErrorString(err),
             cudaGetErrorName(err));
    /* The detail is kept here: clear the runtime's last error, so that a
     * caller checking cudaGetLastError() after its own kernels does not
     * take ours for its own (a sticky context error stays regardless). */
    (void)cudaGetLastError();
    gpu->fatal = RF_E_CUDA;
    return RF_E_CUDA;
}

int rf__cuda_enter(rf_cuda_loader *gpu, int *previous)
{
    /* Every call that reaches CUDA comes through here; a child of fork()
     * cannot use its parent's CUDA context. */
    if (getpid() != gpu->owner)
        return rf__cuda_fail(gpu, RF_E_FORK_UNSAFE,
                             "this GPU consumer belongs to process %d, and "
                             "this is process %d, a child of fork(), where "
                             "CUDA cannot be used: open one in the child, "
                             "after exec (rf_cuda_close() frees the child's "
                             "copy)",
                             (int)gpu->owner, (int)getpid());
    cudaError_t err = cudaGetDevice(previous);
    if (err != cudaSuccess)
        return rf__cuda_call_failed(gpu, err, "cudaGetDevice",
                                    "finding the caller's current device");
    if (*previous == gpu->device)
        return 0;
    if (gpu->get_ctx && gpu->set_ctx &&
        gpu->get_ctx(&gpu->caller_ctx) == CUDA_SUCCESS)
        *previous = -1; /* restore gpu->caller_ctx */
    err = cudaSetDevice(gpu->device);
    if (err != cudaSuccess)
        return rf__cuda_call_failed(gpu, err, "cudaSetDevice",
                                    "making device %d current", gpu->device);
    return 0;
}

void rf__cuda_leave(const rf_cuda_loader *gpu, int previous)
{
    /* It was current a moment ago, so this cannot fail in a way that the
     * caller could do anything about. */
    if (previous == -1)
        (void)gpu->set_ctx(gpu->caller_ctx);
    else if (previous != gpu->device)
        (void)cudaSetDevice(previous);
}

void rf__cuda_find_ctx_calls(rf_cuda_loader *gpu)
{
#if CUDART_VERSION >= 12050
    void *get = NULL, *set = NULL;
    enum cudaDriverEntryPointQueryResult got =
        cudaDriverEntryPointSymbolNotFound;
    enum cudaDriverEntryPointQueryResult put =
        cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &get, 12000,
                                         cudaEnableDefault,
                                         &got) != cudaSuccess ||
        cudaGetDriverEntryPointByVersion("cuCtxSetCurrent", &set, 12000,
                                         cudaEnableDefault,
                                         &put) != cudaSuccess ||
        got != cudaDriverEntryPointSuccess ||
        put != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        return;
    }
    gpu->get_ctx = (rf__cuda_ctx_get_fn)get;
    gpu->set_ctx = (rf__cuda_ctx_set_fn)set;
#else
    (void)gpu;
#endif
}
