/* The CUDA backend when the project is built without CUDA (-Dcuda=disabled,
 * or nvcc/cuBLAS/NCCL not found): the functions of kernels/cuda/cuda.h say
 * "no device" and fail cleanly, so the worker and the tests need no #ifdef and
 * fall back to the host. The CUDA kernel twins exist too, so anything naming
 * them still links; calling one only records an error (no context can exist). */
#include <stdio.h>
#include <string.h>

#include "kernels/activation.h"
#include "kernels/conv2d.h"
#include "kernels/cuda/cuda.h"
#include "kernels/dense.h"
#include "kernels/dropout.h"
#include "kernels/maxpool.h"
#include "kernels/optim.h"

#define NOT_BUILT "built without CUDA (-Dcuda=disabled or nvcc/NCCL not found)"

void mw_kernels_init_cuda(mw_kernels *t)
{
    (void)t; /* no device: the table stays as it is */
}

int mw_cuda_device_count(void)
{
    return 0;
}

mw_status mw_cuda_ctx_open(mw_kctx *k, int device)
{
    (void)device;
    memset(k, 0, sizeof *k);
    return mw_err(MW_EDEVICE, NOT_BUILT);
}

void mw_cuda_ctx_close(mw_kctx *k)
{
    if (k)
        memset(k, 0, sizeof *k);
}

mw_status mw_cuda_activate(const mw_kctx *k)
{
    (void)k;
    return mw_err(MW_EDEVICE, "mw_cuda_activate: " NOT_BUILT);
}

mw_status mw_cuda_ws_reserve(mw_kctx *k, size_t ws_count)
{
    (void)k, (void)ws_count;
    return mw_err(MW_EDEVICE, "mw_cuda_ws_reserve: " NOT_BUILT);
}

mw_status mw_cuda_sync(const mw_kctx *k)
{
    (void)k;
    return mw_err(MW_EDEVICE, "mw_cuda_sync: " NOT_BUILT);
}

mw_status mw_cuda_last_status(const mw_kctx *k)
{
    (void)k;
    return MW_EDEVICE;
}

mw_status mw_cuda_alloc(void **p, size_t nbytes)
{
    *p = NULL;
    return nbytes ? mw_err(MW_EDEVICE, "mw_cuda_alloc: " NOT_BUILT) : MW_OK;
}

void mw_cuda_free(void *p)
{
    (void)p;
}

mw_status mw_cuda_host_alloc(void **p, size_t nbytes)
{
    *p = NULL;
    return nbytes ? mw_err(MW_EDEVICE, "mw_cuda_host_alloc: " NOT_BUILT) : MW_OK;
}

void mw_cuda_host_free(void *p)
{
    (void)p;
}

mw_status mw_cuda_upload(void *dst_dev, const void *src_host, size_t nbytes, const mw_kctx *k)
{
    (void)dst_dev, (void)src_host, (void)nbytes, (void)k;
    return mw_err(MW_EDEVICE, "mw_cuda_upload: " NOT_BUILT);
}

mw_status mw_cuda_download(void *dst_host, const void *src_dev, size_t nbytes, const mw_kctx *k)
{
    (void)dst_host, (void)src_dev, (void)nbytes, (void)k;
    return mw_err(MW_EDEVICE, "mw_cuda_download: " NOT_BUILT);
}

mw_status mw_cuda_zero(void *dst_dev, size_t nbytes, const mw_kctx *k)
{
    (void)dst_dev, (void)nbytes, (void)k;
    return mw_err(MW_EDEVICE, "mw_cuda_zero: " NOT_BUILT);
}

const char *mw_cuda_version_string(void)
{
    return "CUDA: not built";
}

int mw_cuda_probe(char *reason, size_t reason_len)
{
    if (reason && reason_len)
        snprintf(reason, reason_len, "%s", NOT_BUILT);
    return -1;
}

void *mw_cuda_stream(const mw_kctx *k)
{
    (void)k;
    return NULL;
}

/* The kernel twins: unreachable without a context, but linkable. */
static void not_built(const char *op)
{
    mw_err(MW_EDEVICE, "%s: " NOT_BUILT, op);
}

void mw_conv2d_fwd_cuda(const mw_kctx *k, float *y, const float *x, const float *w,
                        const float *b, const mw_conv2d_geom *g, int N)
{
    (void)k, (void)y, (void)x, (void)w, (void)b, (void)g, (void)N;
    not_built(__func__);
}

void mw_conv2d_bwd_cuda(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,
                        const float *x, const float *w, const mw_conv2d_geom *g, int N)
{
    (void)k, (void)dx, (void)dw, (void)db, (void)dy, (void)x, (void)w, (void)g, (void)N;
    not_built(__func__);
}

void mw_maxpool_fwd_cuda(const mw_kctx *k, float *y, int32_t *argmax, const float *x,
                         const mw_pool_geom *g, int N)
{
    (void)k, (void)y, (void)argmax, (void)x, (void)g, (void)N;
    not_built(__func__);
}

void mw_maxpool_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, const int32_t *argmax,
                         const mw_pool_geom *g, int N)
{
    (void)k, (void)dx, (void)dy, (void)argmax, (void)g, (void)N;
    not_built(__func__);
}

void mw_dense_fwd_cuda(const mw_kctx *k, float *y, const float *x, const float *w,
                       const float *b, int N, int I, int O)
{
    (void)k, (void)y, (void)x, (void)w, (void)b, (void)N, (void)I, (void)O;
    not_built(__func__);
}

void mw_dense_bwd_cuda(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,
                       const float *x, const float *w, int N, int I, int O)
{
    (void)k, (void)dx, (void)dw, (void)db, (void)dy, (void)x, (void)w, (void)N, (void)I,
        (void)O;
    not_built(__func__);
}

void mw_relu_fwd_cuda(const mw_kctx *k, float *y, const float *x, size_t count)
{
    (void)k, (void)y, (void)x, (void)count;
    not_built(__func__);
}

void mw_relu_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, const float *y,
                      size_t count)
{
    (void)k, (void)dx, (void)dy, (void)y, (void)count;
    not_built(__func__);
}

void mw_xent_fwd_cuda(const mw_kctx *k, float *loss, float *prob, const float *logits,
                      const int32_t *labels, int N, int K)
{
    (void)k, (void)loss, (void)prob, (void)logits, (void)labels, (void)N, (void)K;
    not_built(__func__);
}

void mw_xent_bwd_cuda(const mw_kctx *k, float *dlogits, const float *prob,
                      const int32_t *labels, float scale, int N, int K)
{
    (void)k, (void)dlogits, (void)prob, (void)labels, (void)scale, (void)N, (void)K;
    not_built(__func__);
}

void mw_adam_cuda(const mw_kctx *k, float *p, float *m, float *v, const float *g, size_t count,
                  float lr_t, float b1, float b2, float eps)
{
    (void)k, (void)p, (void)m, (void)v, (void)g, (void)count, (void)lr_t, (void)b1, (void)b2,
        (void)eps;
    not_built(__func__);
}

void mw_sgd_cuda(const mw_kctx *k, float *p, float *vel, const float *g, size_t count,
                 float lr, float mu)
{
    (void)k, (void)p, (void)vel, (void)g, (void)count, (void)lr, (void)mu;
    not_built(__func__);
}

void mw_regularize_cuda(const mw_kctx *k, float *g, double *acc, const float *w, size_t count,
                        double l1, double l2, float scale)
{
    (void)k, (void)g, (void)acc, (void)w, (void)count, (void)l1, (void)l2, (void)scale;
    not_built(__func__);
}

void mw_dropout_fwd_cuda(const mw_kctx *k, float *y, float *mask, const float *x,
                         const uint32_t *ids, uint64_t seed, uint64_t stream, float rate, int N,
                         size_t D)
{
    (void)k, (void)y, (void)mask, (void)x, (void)ids, (void)seed, (void)stream, (void)rate,
        (void)N, (void)D;
    not_built(__func__);
}

void mw_dropout_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, const float *mask,
                         size_t count)
{
    (void)k, (void)dx, (void)dy, (void)mask, (void)count;
    not_built(__func__);
}
