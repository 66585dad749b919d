/* CUDA twins of the merges, Add, Multiply and Concatenate (the spec is kernels/ref/merge.c):
 * grid-stride loops, one thread per output element. Products that the reference rounds twice
 * (y += a * b) use __fmul_rn / __fadd_rn, so nvcc's contraction into one fma cannot make them
 * differ from the host. */
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}

static __global__ void acc_kernel(float *y, const float *x, size_t count)
{
    MW_GRID_STRIDE(i, count)
    y[i] += x[i];
}

static __global__ void mul_fwd_kernel(float *y, const float *a, const float *b, size_t count)
{
    MW_GRID_STRIDE(i, count)
    y[i] = a[i] * b[i];
}

static __global__ void mul_bwd_kernel(float *da, float *db, const float *dy, const float *a,
                                      const float *b, size_t count)
{
    MW_GRID_STRIDE(i, count)
    {
        const float d = dy[i];
        if (da)
            da[i] = __fadd_rn(da[i], __fmul_rn(d, b[i]));
        if (db)
            db[i] = __fadd_rn(db[i], __fmul_rn(d, a[i]));
    }
}

static __global__ void concat_fwd_kernel(float *y, const float *x, size_t count, int CX, int CY,
                                         int off)
{
    MW_GRID_STRIDE(i, count)
    y[(i / CX) * CY + off + i % CX] = x[i];
}

static __global__ void concat_bwd_kernel(float *dx, const float *dy, size_t count, int CX, int CY,
                                         int off)
{
    MW_GRID_STRIDE(i, count)
    dx[i] += dy[(i / CX) * CY + off + i % CX];
}

extern "C" void mw_acc_cuda(const mw_kctx *k, float *y, const float *x, size_t count)
{
    MW_EW_LAUNCH("mw_acc_cuda", acc_kernel, count, y, x, count);
}

extern "C" void mw_mul_fwd_cuda(const mw_kctx *k, float *y, const float *a, const float *b,
                                size_t count)
{
    MW_EW_LAUNCH("mw_mul_fwd_cuda", mul_fwd_kernel, count, y, a, b, count);
}

extern "C" void mw_mul_bwd_cuda(const mw_kctx *k, float *da, float *db, const float *dy,
                                const float *a, const float *b, size_t count)
{
    MW_EW_LAUNCH("mw_mul_bwd_cuda", mul_bwd_kernel, count, da, db, dy, a, b, count);
}

extern "C" void mw_concat_fwd_cuda(const mw_kctx *k, float *y, const float *x, size_t rows, int CX,
                                   int CY, int off)
{
    const size_t count = CX > 0 ? rows * (size_t)CX : 0;
    MW_EW_LAUNCH("mw_concat_fwd_cuda", concat_fwd_kernel, count, y, x, count, CX, CY, off);
}

extern "C" void mw_concat_bwd_cuda(const mw_kctx *k, float *dx, const float *dy, size_t rows,
                                   int CX, int CY, int off)
{
    const size_t count = CX > 0 ? rows * (size_t)CX : 0;
    MW_EW_LAUNCH("mw_concat_bwd_cuda", concat_bwd_kernel, count, dx, dy, count, CX, CY, off);
}
