/* What the CUDA convolutions run on (cudnn.cu), for logs and tests; plain C. The cuDNN calls
 * themselves are cudnn.cuh. */
#ifndef MW_KERNELS_CUDA_CUDNN_H
#define MW_KERNELS_CUDA_CUDNN_H

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "cuDNN 9.19.0 convolutions" or "im2col convolutions (built without cuDNN)": what conv2d
 * runs on (cuDNN falls back to im2col per call for shapes it cannot take). Static storage. */
const char *mw_cuda_conv_backend(void);
/* The convolution plans made on k so far: rounds of cuDNN heuristic queries, one per shape
 * (kernels/cuda/dnn_plan.h); 0 without cuDNN. */
long mw_cuda_conv_plans(const mw_kctx *k);

#ifdef __cplusplus
}
#endif

#endif
