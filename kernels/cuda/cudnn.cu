/* Conv2D through cuDNN (built when cudnn.h and libcudnn are found: MW_HAVE_CUDNN), tried first by
 * conv2d.cu; the im2col + cuBLAS path stays the fallback. See cudnn.cuh for the contract.
 *
 * Layouts: x and y are NHWC, which cuDNN takes as is. Our kernel is (KH,KW,C,O) (Keras's
 * HWIO); cuDNN's NHWC filter is (O,KH,KW,C), so the forward and backward-data passes use a
 * transposed copy in the context's scratch, and backward-filter writes that layout into scratch
 * and adds it back transposed onto dw (the contract accumulates). TF's 'same' padding puts the
 * odd pixel after; cuDNN pads symmetrically, which computes the same outputs whenever its output
 * size equals ours (the extra row or column is never read), so that is the test, else fallback.
 *
 * The choices are made once per shape and kept (dnn_plan.h: the cache per context, and what
 * happens when one fails): the descriptors, and per pass the candidates of cuDNN's heuristic
 * list (cudnnGet*Algorithm_v7, no benchmarking, so the choice is the same every run) that are
 * CUDNN_DETERMINISTIC, supported, and whose workspace fits in the scratch after the transposed
 * kernels. A call that cuDNN refuses moves its pass to the next candidate and then to im2col,
 * so a refusal never fails the context. The backward pass runs backward-data first (into dx)
 * and backward-filter second: when the filter pass has no candidate left, im2col computes dw
 * alone (conv2d.cu), and nothing is added twice. Math: CUDNN_FMA_MATH (plain FP32) unless the
 * context allows TF32 (--tf32), then CUDNN_TENSOR_OP_MATH.
 *
 * MW_FAULT=cudnn:first (a refused algorithm ahead of every pass's candidates), cudnn:filter
 * (every backward-filter candidate refused) and cudnn:all (every candidate refused), read when
 * a plan is made, are the test_cuda checks of those fallbacks on a real device. */
#include <new>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cudnn.cuh"
#include "kernels/cuda/cudnn.h"
#include "kernels/cuda/dnn_plan.h"
#include "kernels/cuda/gemm.cuh"
#include "kernels/cuda/runtime.cuh"

#ifdef MW_HAVE_CUDNN
#include <cudnn.h>

namespace
{

/* The descriptors of one shape; destroyed by the destructor. */
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
            cudnnSetConvolution2dDescriptor(c, g->PT, g->PL, g->SH, g->SW, g->DH, g->DW,
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

void free_descs(void *p)
{
    delete (descs *)p;
}

/* The acceptable algorithms of a _v7 list, in its order: deterministic, supported, never
 * converting to FP16, tensor-core math only with tf32, a workspace of at most room bytes. */
template <typename Perf> void accept(mw_dnn_plan *p, int pass, const Perf *perf, int n, bool tf32)
{
    for (int i = 0; i < n && p->ncand[pass] < MW_DNN_MAX_CANDS; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC &&
            perf[i].memory <= p->room &&
            perf[i].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
            (tf32 || perf[i].mathType != CUDNN_TENSOR_OP_MATH)) {
            mw_dnn_cand *c = &p->cand[pass][p->ncand[pass]++];
            c->algo = (int)perf[i].algo;
            c->math = (int)perf[i].mathType;
            c->nbytes = perf[i].memory;
        }
    if (p->ncand[pass] == 0)
        snprintf(p->why[pass], sizeof p->why[pass],
                 "none of cuDNN's %d algorithms is deterministic and fits %zu KiB of scratch", n,
                 p->room / 1024);
}

/* A query that failed: the whole plan is im2col's, with cuDNN's reason (a sub-library that does
 * not load, CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED, shows here). */
void refused(mw_dnn_plan *p, const char *call, cudnnStatus_t s)
{
    char why[160];
    snprintf(why, sizeof why, "%s: %s", call, cudnnGetErrorString(s));
    mw_dnn_plan_refuse(p, why);
}

/* MW_FAULT=cudnn:first|filter|all (see the file comment). */
void inject(mw_dnn_plan *p)
{
    const char *f = getenv("MW_FAULT");
    if (!f || strncmp(f, "cudnn:", 6) != 0)
        return;
    const char *what = f + 6;
    for (int pass = 0; pass < MW_DNN_PASSES; pass++) {
        const bool all =
            !strcmp(what, "all") || (!strcmp(what, "filter") && pass == MW_DNN_BWD_FILTER);
        if (all) {
            for (int i = 0; i < p->ncand[pass]; i++)
                p->cand[pass][i].algo = -1 - i; /* no such algorithm: CUDNN_STATUS_BAD_PARAM */
        } else if (!strcmp(what, "first") && p->ncand[pass] > 0) {
            const int n = p->ncand[pass] < MW_DNN_MAX_CANDS ? p->ncand[pass] : MW_DNN_MAX_CANDS - 1;
            memmove(&p->cand[pass][1], &p->cand[pass][0], (size_t)n * sizeof(mw_dnn_cand));
            p->cand[pass][0].algo = -1;
            p->ncand[pass] = n + 1;
        }
    }
}

const char *algo_name(int pass, int algo)
{
    static const char *const fwd[] = {
        "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
        "WINOGRAD",      "WINOGRAD_NONFUSED"};
    static const char *const data[] = {"ALGO_0",     "ALGO_1",   "FFT",
                                       "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
    static const char *const filter[] = {
        "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
    /* each list names cuDNN's algorithm enum in order: one name per value */
    static_assert(sizeof fwd / sizeof *fwd == CUDNN_CONVOLUTION_FWD_ALGO_COUNT, "fwd names");
    static_assert(sizeof data / sizeof *data == CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                  "backward-data names");
    static_assert(sizeof filter / sizeof *filter == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                  "backward-filter names");
    const char *const *names = pass == MW_DNN_FWD ? fwd : pass == MW_DNN_BWD_DATA ? data : filter;
    const int n = pass == MW_DNN_FWD        ? (int)CUDNN_CONVOLUTION_FWD_ALGO_COUNT
                  : pass == MW_DNN_BWD_DATA ? (int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT
                                            : (int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
    return algo >= 0 && algo < n ? names[algo] : "refused by MW_FAULT";
}

/* The plan of this call's shape: found, or made now (descriptors and the three lists). NULL
 * when out of host memory (then im2col runs, and nothing is cached). */
mw_dnn_plan *plan_of(mw_cuda_dev *d, const mw_conv2d_geom *g, int N, size_t room, bool tf32)
{
    mw_dnn_cache *c = (mw_dnn_cache *)d->dnn_cache;
    if (!c) {
        if (!(c = (mw_dnn_cache *)calloc(1, sizeof *c)))
            return nullptr;
        c->algo_name = algo_name;
        d->dnn_cache = c;
    }
    int fresh = 0;
    mw_dnn_plan *p = mw_dnn_cache_get(c, g, N, tf32, room, &fresh);
    if (!p || !fresh)
        return p;
    descs *D = new (std::nothrow) descs(g, N, tf32);
    p->descs = D;
    cudnnHandle_t h = (cudnnHandle_t)d->dnn;
    cudnnConvolutionFwdAlgoPerf_t pf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t pw[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int n = 0;
    cudnnStatus_t s;
    if (!D || !D->ok)
        mw_dnn_plan_refuse(p, D ? "cuDNN cannot express this padding" : "out of host memory");
    else if ((s = cudnnGetConvolutionForwardAlgorithm_v7(h, D->x, D->w, D->c, D->y,
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, pf)))
        refused(p, "cudnnGetConvolutionForwardAlgorithm_v7", s);
    else {
        accept(p, MW_DNN_FWD, pf, n, tf32);
        if ((s = cudnnGetConvolutionBackwardDataAlgorithm_v7(
                 h, D->w, D->y, D->c, D->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, pd)))
            refused(p, "cudnnGetConvolutionBackwardDataAlgorithm_v7", s);
        else {
            accept(p, MW_DNN_BWD_DATA, pd, n, tf32);
            if ((s = cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                     h, D->x, D->y, D->c, D->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, pw)))
                refused(p, "cudnnGetConvolutionBackwardFilterAlgorithm_v7", s);
            else
                accept(p, MW_DNN_BWD_FILTER, pw, n, tf32);
        }
    }
    inject(p);
    mw_dnn_plan_made(c, p, d->device);
    return p;
}

/* The math a candidate runs with: its own with tf32, else always plain FP32 FMA
 * (CUDNN_DEFAULT_MATH would allow TF32 on Ampere and later). */
cudnnMathType_t math_of(const mw_dnn_cand *k, bool tf32)
{
    return tf32 ? (cudnnMathType_t)k->math : CUDNN_FMA_MATH;
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

/* The plan of a call, or NULL (no cuDNN, scratch too small, out of memory: im2col). The
 * scratch keeps 2 wt floats for the transposed kernels (the backward pass needs both; the
 * forward, one), so the forward and backward of a shape share one plan and one round of
 * queries. Tensor-core math with --tf32, and for a mixed_bfloat16 or mixed_float16 layer
 * (k->bf16, k->f16): its operands are bfloat16 or float16 values, exact in TF32's 10 mantissa
 * bits and 8 exponent bits, so TF32 tensor cores give their products exactly, summed in
 * float32. */
static mw_dnn_plan *plan_for(mw_cuda_dev *d, const mw_kctx *k, const mw_conv2d_geom *g, int N,
                             size_t wt)
{
    if (!d->dnn || k->ws_count < 2 * wt || g->G != 1) /* grouped: the im2col path */
        return nullptr;
    return plan_of(d, g, N, (k->ws_count - 2 * wt) * sizeof(float), d->tf32 || k->bf16 || k->f16);
}

/* Run pass of p with its candidates in turn until cuDNN takes one: run(candidate) returns
 * cuDNN's status. True when one ran; false when none is left (nothing of this pass was done). */
template <typename Run> static bool run_pass(mw_cuda_dev *d, mw_dnn_plan *p, int pass, Run run)
{
    const descs *D = (const descs *)p->descs;
    for (const mw_dnn_cand *c = mw_dnn_plan_current(p, pass); c;) {
        cudnnStatus_t s = cudnnSetConvolutionMathType(D->c, math_of(c, p->tf32 != 0));
        if (s == CUDNN_STATUS_SUCCESS)
            s = run(c);
        if (s == CUDNN_STATUS_SUCCESS)
            return true;
        c = mw_dnn_plan_failed(p, pass, cudnnGetErrorString(s), d->device);
    }
    return false;
}

bool mw_cudnn_conv_fwd(mw_cuda_dev *d, const mw_kctx *k, float *y, const float *x, const float *w,
                       const float *b, const mw_conv2d_geom *g, int N)
{
    const size_t rsc = (size_t)g->KH * g->KW * g->C, wt = up16(rsc * g->O);
    mw_dnn_plan *p = plan_for(d, k, g, N, wt);
    if (!p || !mw_dnn_plan_current(p, MW_DNN_FWD))
        return false;
    const descs *D = (const descs *)p->descs;
    cudnnHandle_t h = (cudnnHandle_t)d->dnn;
    float *w_t = k->ws, *work = k->ws + 2 * wt; /* the plan's room is after 2 wt */
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
    /* a refused call writes nothing: im2col after it starts from the bias again */
    return run_pass(d, p, MW_DNN_FWD, [&](const mw_dnn_cand *c) {
        return cudnnConvolutionForward(h, &alpha, D->x, x, D->w, w_t, D->c,
                                       (cudnnConvolutionFwdAlgo_t)c->algo, work, c->nbytes, &beta,
                                       D->y, y);
    });
}

mw_cudnn_bwd_result mw_cudnn_conv_bwd(mw_cuda_dev *d, const mw_kctx *k, float *dx, float *dw,
                                      const float *dy, const float *x, const float *w,
                                      const mw_conv2d_geom *g, int N)
{
    const size_t rsc = (size_t)g->KH * g->KW * g->C, wt = up16(rsc * g->O);
    mw_dnn_plan *p = plan_for(d, k, g, N, wt);
    if (!p || (dx && !mw_dnn_plan_current(p, MW_DNN_BWD_DATA)))
        return MW_CUDNN_IM2COL;
    const descs *D = (const descs *)p->descs;
    cudnnHandle_t h = (cudnnHandle_t)d->dnn;
    float *w_t = k->ws, *dw_t = k->ws + wt, *work = k->ws + 2 * wt;
    const float one = 1.0f, zero = 0.0f;
    const unsigned grid = mw_cuda_grid(rsc * g->O);
    if (dx) { /* dx += the data gradient, through the transposed kernel */
        transpose_kernel<<<grid, MW_CUDA_BLOCK, 0, d->stream>>>(w_t, w, rsc, g->O, true);
        if (!mw_cuda_note(d, mw_cuda_launched_("transpose_kernel", __FILE__, __LINE__)))
            return MW_CUDNN_DONE;
        if (!run_pass(d, p, MW_DNN_BWD_DATA, [&](const mw_dnn_cand *c) {
                return cudnnConvolutionBackwardData(h, &one, D->w, w_t, D->y, dy, D->c,
                                                    (cudnnConvolutionBwdDataAlgo_t)c->algo, work,
                                                    c->nbytes, &one, D->x, dx);
            }))
            return MW_CUDNN_IM2COL; /* nothing was added yet */
    }
    /* dw_t (O,KH,KW,C) = the filter gradient, then added onto dw transposed */
    if (!run_pass(d, p, MW_DNN_BWD_FILTER, [&](const mw_dnn_cand *c) {
            return cudnnConvolutionBackwardFilter(h, &one, D->x, x, D->y, dy, D->c,
                                                  (cudnnConvolutionBwdFilterAlgo_t)c->algo, work,
                                                  c->nbytes, &zero, D->w, dw_t);
        }))
        return dx ? MW_CUDNN_IM2COL_DW : MW_CUDNN_IM2COL;
    transpose_kernel<<<grid, MW_CUDA_BLOCK, 0, d->stream>>>(dw, dw_t, rsc, g->O, false);
    mw_cuda_note(d, mw_cuda_launched_("transpose_kernel", __FILE__, __LINE__));
    return MW_CUDNN_DONE;
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
    if (d->dnn_cache) {
        mw_dnn_cache_free((mw_dnn_cache *)d->dnn_cache, free_descs);
        free(d->dnn_cache);
        d->dnn_cache = nullptr;
    }
    if (d->dnn)
        cudnnDestroy((cudnnHandle_t)d->dnn);
    d->dnn = nullptr;
}

extern "C" long mw_cuda_conv_plans(const mw_kctx *k)
{
    const mw_cuda_dev *d = k && k->dev ? (const mw_cuda_dev *)k->dev : nullptr;
    return d && d->dnn_cache ? ((const mw_dnn_cache *)d->dnn_cache)->made : 0;
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

mw_cudnn_bwd_result mw_cudnn_conv_bwd(mw_cuda_dev *, const mw_kctx *, float *, float *,
                                      const float *, const float *, const float *,
                                      const mw_conv2d_geom *, int)
{
    return MW_CUDNN_IM2COL;
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

extern "C" long mw_cuda_conv_plans(const mw_kctx *)
{
    return 0;
}

extern "C" const char *mw_cuda_conv_backend(void)
{
    return "im2col convolutions (built without cuDNN)";
}

#endif
