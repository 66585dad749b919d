/* Conv2D through cuDNN (built when cudnn.h and libcudnn are found: MW_HAVE_CUDNN), tried first by
 * conv2d.cu; the im2col + cuBLAS path stays the fallback. See dev.cuh for the contract.
 *
 * Layouts: x and y are NHWC, which cuDNN takes as is. Our kernel is (KH,KW,C,O) (Keras's
 * HWIO); cuDNN's NHWC filter is (O,KH,KW,C), so the forward and backward-data passes use a
 * transposed copy in the context's scratch, and backward-filter writes that layout into scratch
 * and adds it back transposed onto dw (the contract accumulates). TF's 'same' padding puts the
 * odd pixel after; cuDNN pads symmetrically, which computes the same outputs whenever its output
 * size equals ours (the extra row or column is never read), so that is the test, else fallback.
 *
 * Deterministic: the algorithm is the first of cuDNN's heuristic list (cudnnGet*Algorithm_v7,
 * no benchmarking, so the choice is the same every run) that is CUDNN_DETERMINISTIC, supported,
 * and whose workspace fits in the scratch after the transposed kernels. Math: CUDNN_FMA_MATH
 * (plain FP32) unless the context allows TF32 (--tf32), then CUDNN_TENSOR_OP_MATH.
 *
 * Any set-up failure (unsupported shape, too little scratch) returns false before anything is
 * enqueued, and the caller runs im2col; a failure of the convolution call itself is recorded on
 * the context like any kernel failure. */
#include <stdio.h>

#include "kernels/cuda/dev.cuh"

#ifdef MW_HAVE_CUDNN
#include <cudnn.h>

namespace
{

/* The descriptors of one call; destroyed by the destructor. */
struct descs {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t c = nullptr;
    bool ok = false;
    descs(const mw_conv2d_geom *g, int N, bool tf32)
    {
        if (cudnnCreateTensorDescriptor(&x) || cudnnCreateTensorDescriptor(&y) ||
            cudnnCreateFilterDescriptor(&w) || cudnnCreateConvolutionDescriptor(&c))
            return;
        if (cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, N, g->C, g->H,
                                       g->W) ||
            cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, N, g->O, g->OH,
                                       g->OW) ||
            cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, g->O, g->C, g->KH,
                                       g->KW) ||
            cudnnSetConvolution2dDescriptor(c, g->PT, g->PL, g->SH, g->SW, 1, 1,
                                            CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) ||
            cudnnSetConvolutionMathType(c, tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH))
            return;
        int n, o, oh, ow;
        if (cudnnGetConvolution2dForwardOutputDim(c, x, w, &n, &o, &oh, &ow) || n != N ||
            o != g->O || oh != g->OH || ow != g->OW)
            return; /* asymmetric 'same' padding cuDNN cannot express */
        ok = true;
    }
    ~descs()
    {
        if (c)
            cudnnDestroyConvolutionDescriptor(c);
        if (w)
            cudnnDestroyFilterDescriptor(w);
        if (y)
            cudnnDestroyTensorDescriptor(y);
        if (x)
            cudnnDestroyTensorDescriptor(x);
    }
};

/* An acceptable algorithm of a _v7 list: deterministic, supported, never converting to FP16,
 * tensor-core math only with tf32, and a workspace of at most room bytes. */
template <typename Perf> int pick(const Perf *p, int n, size_t room, bool tf32)
{
    for (int i = 0; i < n; i++)
        if (p[i].status == CUDNN_STATUS_SUCCESS && p[i].determinism == CUDNN_DETERMINISTIC &&
            p[i].memory <= room && p[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
            (tf32 || p[i].mathType != CUDNN_TENSOR_OP_MATH))
            return i;
    return -1;
}

/* The math a picked algorithm runs with: its own with tf32, else always plain FP32 FMA
 * (CUDNN_DEFAULT_MATH would allow TF32 on Ampere and later). */
static cudnnMathType_t math_of(cudnnMathType_t picked, bool tf32)
{
    return tf32 ? picked : CUDNN_FMA_MATH;
}

} // namespace

/* dst (O,KH,KW,C) = src (KH,KW,C,O) transposed (to_krsc), or dst (KH,KW,C,O) += src
 * (O,KH,KW,C) transposed back. */
static __global__ void transpose_kernel(float *dst, const float *src, size_t rsc, int O,
                                        bool to_krsc)
{
    const size_t count = rsc * (size_t)O;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < count;
         e += (size_t)gridDim.x * blockDim.x) {
        size_t o = e / rsc, j = e % rsc; /* e indexes (O, rsc) */
        if (to_krsc)
            dst[e] = src[j * O + o];
        else
            dst[j * O + o] += src[e];
    }
}

static size_t up16(size_t floats)
{
    return (floats + 15) / 16 * 16; /* 64-byte alignment */
}

bool mw_cudnn_conv_fwd(mw_cuda_dev *d, const mw_kctx *k, float *y, const float *x, const float *w,
                       const float *b, const mw_conv2d_geom *g, int N)
{
    if (!d->dnn)
        return false;
    descs D(g, N, d->tf32);
    if (!D.ok)
        return false;
    const size_t rsc = (size_t)g->KH * g->KW * g->C, wt = up16(rsc * g->O);
    if (k->ws_count < wt)
        return false;
    const size_t room = (k->ws_count - wt) * sizeof(float);
    cudnnHandle_t h = (cudnnHandle_t)d->dnn;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    if (cudnnGetConvolutionForwardAlgorithm_v7(h, D.x, D.w, D.c, D.y,
                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf))
        return false;
    int i = pick(perf, n, room, d->tf32);
    if (i < 0 || cudnnSetConvolutionMathType(D.c, math_of(perf[i].mathType, d->tf32)))
        return false;
    float *w_t = k->ws, *work = k->ws + wt;
    transpose_kernel<<<mw_cuda_grid(rsc * g->O), MW_CUDA_BLOCK, 0, d->stream>>>(w_t, w, rsc, g->O,
                                                                                true);
    if (!mw_cuda_note(d, mw_cuda_launched_("transpose_kernel", __FILE__, __LINE__)))
        return true;
    float alpha = 1.0f, beta = 0.0f;
    if (b) {
        if (!mw_cuda_note(d, mw_cuda_bias_fill(d, y, b, (size_t)N * g->OH * g->OW, g->O)))
            return true;
        beta = 1.0f;
    }
    cudnnStatus_t s = cudnnConvolutionForward(h, &alpha, D.x, x, D.w, w_t, D.c, perf[i].algo, work,
                                              perf[i].memory, &beta, D.y, y);
    if (s != CUDNN_STATUS_SUCCESS)
        mw_cuda_note(d, mw_err(MW_EDEVICE, "mw_conv2d_fwd_cuda: cudnnConvolutionForward: %s",
                               cudnnGetErrorString(s)));
    return true;
}

bool mw_cudnn_conv_bwd(mw_cuda_dev *d, const mw_kctx *k, float *dx, float *dw, const float *dy,
                       const float *x, const float *w, const mw_conv2d_geom *g, int N)
{
    if (!d->dnn)
        return false;
    descs D(g, N, d->tf32);
    if (!D.ok)
        return false;
    const size_t rsc = (size_t)g->KH * g->KW * g->C, wt = up16(rsc * g->O);
    if (k->ws_count < 2 * wt)
        return false;
    const size_t room = (k->ws_count - 2 * wt) * sizeof(float);
    cudnnHandle_t h = (cudnnHandle_t)d->dnn;
    cudnnConvolutionBwdFilterAlgoPerf_t pf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int nf = 0, nd = 0, jf = -1, jd = -1;
    if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            h, D.x, D.y, D.c, D.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &nf, pf) ||
        (jf = pick(pf, nf, room, d->tf32)) < 0)
        return false;
    if (dx && (cudnnGetConvolutionBackwardDataAlgorithm_v7(
                   h, D.w, D.y, D.c, D.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &nd, pd) ||
               (jd = pick(pd, nd, room, d->tf32)) < 0))
        return false;
    float *w_t = k->ws, *dw_t = k->ws + wt, *work = k->ws + 2 * wt;
    const float one = 1.0f, zero = 0.0f;
    const unsigned grid = mw_cuda_grid(rsc * g->O);
    /* dw_t (O,KH,KW,C) = the filter gradient, then added onto dw transposed */
    cudnnStatus_t s = cudnnSetConvolutionMathType(D.c, math_of(pf[jf].mathType, d->tf32));
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnConvolutionBackwardFilter(h, &one, D.x, x, D.y, dy, D.c, pf[jf].algo, work,
                                           pf[jf].memory, &zero, D.w, dw_t);
    if (s != CUDNN_STATUS_SUCCESS) {
        mw_cuda_note(d, mw_err(MW_EDEVICE, "mw_conv2d_bwd_cuda: cudnnConvolutionBackwardFilter: %s",
                               cudnnGetErrorString(s)));
        return true;
    }
    transpose_kernel<<<grid, MW_CUDA_BLOCK, 0, d->stream>>>(dw, dw_t, rsc, g->O, false);
    if (!mw_cuda_note(d, mw_cuda_launched_("transpose_kernel", __FILE__, __LINE__)) || !dx)
        return true;
    /* dx += the data gradient, through the transposed kernel */
    transpose_kernel<<<grid, MW_CUDA_BLOCK, 0, d->stream>>>(w_t, w, rsc, g->O, true);
    if (!mw_cuda_note(d, mw_cuda_launched_("transpose_kernel", __FILE__, __LINE__)))
        return true;
    s = cudnnSetConvolutionMathType(D.c, math_of(pd[jd].mathType, d->tf32));
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnConvolutionBackwardData(h, &one, D.w, w_t, D.y, dy, D.c, pd[jd].algo, work,
                                         pd[jd].memory, &one, D.x, dx);
    if (s != CUDNN_STATUS_SUCCESS)
        mw_cuda_note(d, mw_err(MW_EDEVICE, "mw_conv2d_bwd_cuda: cudnnConvolutionBackwardData: %s",
                               cudnnGetErrorString(s)));
    return true;
}

mw_status mw_cudnn_open(mw_cuda_dev *d)
{
    cudnnHandle_t h = nullptr;
    cudnnStatus_t s = cudnnCreate(&h);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetStream(h, d->stream);
    if (s != CUDNN_STATUS_SUCCESS) {
        if (h)
            cudnnDestroy(h);
        return mw_err(MW_EDEVICE, "CUDA device %d: cuDNN: %s", d->device, cudnnGetErrorString(s));
    }
    d->dnn = h;
    return MW_OK;
}

void mw_cudnn_close(mw_cuda_dev *d)
{
    if (d->dnn)
        cudnnDestroy((cudnnHandle_t)d->dnn);
    d->dnn = nullptr;
}

extern "C" const char *mw_cuda_conv_backend(void)
{
    static char buf[64];
    size_t v = cudnnGetVersion();
    snprintf(buf, sizeof buf, "cuDNN %zu.%zu.%zu convolutions", v / 10000, v % 10000 / 100,
             v % 100);
    return buf;
}

#else /* no cuDNN: im2col only */

bool mw_cudnn_conv_fwd(mw_cuda_dev *, const mw_kctx *, float *, const float *, const float *,
                       const float *, const mw_conv2d_geom *, int)
{
    return false;
}

bool mw_cudnn_conv_bwd(mw_cuda_dev *, const mw_kctx *, float *, float *, const float *,
                       const float *, const float *, const mw_conv2d_geom *, int)
{
    return false;
}

mw_status mw_cudnn_open(mw_cuda_dev *d)
{
    d->dnn = nullptr;
    return MW_OK;
}

void mw_cudnn_close(mw_cuda_dev *d)
{
    d->dnn = nullptr;
}

extern "C" const char *mw_cuda_conv_backend(void)
{
    return "im2col convolutions (built without cuDNN)";
}

#endif
