/* The convolutions through cuDNN (cudnn.cu), for conv2d.cu, and the handle that context.cu
 * opens and closes. */
#ifndef MW_KERNELS_CUDA_CUDNN_CUH
#define MW_KERNELS_CUDA_CUDNN_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>

extern "C" {
#include "common/status.h"
#include "kernels/kernels.h"
}
#include "kernels/cuda/runtime.cuh"

/* Conv2D through cuDNN (cudnn.cu): the forward is true when the op was taken (enqueued, or
 * its failure recorded on d), false when cuDNN is absent, cannot take this shape within k's
 * scratch, or refused every candidate: then the caller runs im2col. Same contract as the
 * kernels. */
bool mw_cudnn_conv_fwd(mw_cuda_dev *d, const mw_kctx *k, float *y, const float *x, const float *w,
                       const float *b, const mw_conv2d_geom *g, int N);
/* The backward pass: done by cuDNN; im2col's entirely (nothing was enqueued but scratch
 * work); or im2col's for dw alone (cuDNN added dx, its filter pass had no candidate left). */
typedef enum { MW_CUDNN_DONE, MW_CUDNN_IM2COL, MW_CUDNN_IM2COL_DW } mw_cudnn_bwd_result;
mw_cudnn_bwd_result mw_cudnn_conv_bwd(mw_cuda_dev *d, const mw_kctx *k, float *dx, float *dw,
                                      const float *dy, const float *x, const float *w,
                                      const mw_conv2d_geom *g, int N);
/* d's cuDNN handle on its stream (d->dnn; none without cuDNN), and its release. */
mw_status mw_cudnn_open(mw_cuda_dev *d);
void mw_cudnn_close(mw_cuda_dev *d);

#endif
