/* Opening and closing a CUDA kernel context (context.cu): above the runtime and cuDNN, which it
 * sets up and releases; the context itself is described in runtime.h. */
#ifndef MW_KERNELS_CUDA_CONTEXT_H
#define MW_KERNELS_CUDA_CONTEXT_H

#include "common/status.h"
#include "kernels/cuda/runtime.h"
#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Make k a CUDA context on device (0-based): a non-blocking stream, a cuBLAS
 * handle on it, MW_CUDA_WS_DEFAULT floats of device scratch in k->ws, and
 * k->nthreads = 1. Every field of k is overwritten. MW_EDEVICE with a message
 * naming the cause (built without CUDA, no device, bad index, a failed CUDA
 * call); on failure k is left closed (mw_cuda_ctx_close is still safe). */
mw_status mw_cuda_ctx_open(mw_kctx *k, int device);
/* Wait for the stream, release everything and zero k. Safe on a zeroed,
 * half-opened or already closed context. */
void mw_cuda_ctx_close(mw_kctx *k);

#ifdef __cplusplus
}
#endif

#endif
