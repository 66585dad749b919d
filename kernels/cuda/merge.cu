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

static __global__ void add2_kernel(float *y, const float *a, const float *b, size_t count)
{
    MW_GRID_STRIDE(i, count)
    {
        const float s = __fadd_rn(0.0f, a[i]);
        y[i] = b ? __fadd_rn(s, b[i]) : s;
    }
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

extern "C" void mw_add2_cuda(const mw_kctx *k, float *y, const float *a, const float *b,
                             size_t count)
{
    MW_EW_LAUNCH("mw_add2_cuda", add2_kernel, count, y, a, b, count);
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

/* The broadcasting merges: one thread per element of y forward; backward one thread per
 * element of an operand's gradient, each operand in its own launch. */
static __device__ size_t bcast_index(const mw_bcast_geom g, size_t i, const size_t *s)
{
    size_t r = 0;
    for (int ax = 3; ax >= 0; ax--) {
        r += (i % (size_t)g.d[ax]) * s[ax];
        i /= (size_t)g.d[ax];
    }
    return r;
}

static __global__ void bcast_fwd_kernel(float *y, const float *a, const float *b,
                                        const mw_bcast_geom g, int mul, float scale, size_t count)
{
    MW_GRID_STRIDE(i, count)
    {
        const float u = a[bcast_index(g, i, g.sa)], v = b ? b[bcast_index(g, i, g.sb)] : 1.0f;
        y[i] = mul ? __fmul_rn(__fmul_rn(u, v), scale) : __fadd_rn(u, __fmul_rn(v, scale));
    }
}

/* d (operand mine's gradient) += the sum over the elements of y that read its element j: its
 * own coordinates fixed, every coordinate of the axes it is broadcast on, in y's order; the
 * factor is the other operand o (a's for b, b's for a; NULL: ones) when mul. */
static __global__ void bcast_bwd_kernel(float *d, const float *dy, const float *o,
                                        const mw_bcast_geom g, int mine, int mul, float scale,
                                        size_t count)
{
    MW_GRID_STRIDE(j, count)
    {
        const size_t *s = mine == 1 ? g.sa : g.sb, *so = mine == 1 ? g.sb : g.sa;
        int lo[4], hi[4];
        size_t r = j;
        for (int ax = 3; ax >= 0; ax--) {
            const int e = s[ax] ? g.d[ax] : 1;
            lo[ax] = s[ax] ? (int)(r % (size_t)e) : 0;
            hi[ax] = s[ax] ? lo[ax] + 1 : g.d[ax];
            r /= (size_t)e;
        }
        float acc = d[j];
        for (int n = lo[0]; n < hi[0]; n++)
            for (int h = lo[1]; h < hi[1]; h++)
                for (int w = lo[2]; w < hi[2]; w++)
                    for (int c = lo[3]; c < hi[3]; c++) {
                        const size_t i = (((size_t)n * g.d[1] + h) * g.d[2] + w) * g.d[3] + c;
                        const float f =
                            mul && o ? o[n * so[0] + h * so[1] + w * so[2] + c * so[3]] : 1.0f;
                        float v = dy[i];
                        if (mul)
                            v = __fmul_rn(__fmul_rn(v, f), scale);
                        else if (mine == 2)
                            v = __fmul_rn(v, scale);
                        acc = __fadd_rn(acc, v);
                    }
        d[j] = acc;
    }
}

extern "C" void mw_bcast_fwd_cuda(const mw_kctx *k, float *y, const float *a, const float *b,
                                  const mw_bcast_geom *bg, int mul, float scale)
{
    const size_t count = mw_bcast_count(bg, 0);
    MW_EW_LAUNCH("mw_bcast_fwd_cuda", bcast_fwd_kernel, count, y, a, b, *bg, mul, scale, count);
}

extern "C" void mw_bcast_bwd_cuda(const mw_kctx *k, float *da, float *db, const float *dy,
                                  const float *a, const float *b, const mw_bcast_geom *bg, int mul,
                                  float scale)
{
    if (da) {
        const size_t count = mw_bcast_count(bg, 1);
        MW_EW_LAUNCH("mw_bcast_bwd_cuda", bcast_bwd_kernel, count, da, dy, b, *bg, 1, mul, scale,
                     count);
    }
    if (db) {
        const size_t count = mw_bcast_count(bg, 2);
        MW_EW_LAUNCH("mw_bcast_bwd_cuda", bcast_bwd_kernel, count, db, dy, a, *bg, 2, mul, scale,
                     count);
    }
}
