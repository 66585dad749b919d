/* The fast CPU merges (Add, Multiply, Concatenate): elementwise over k's threads, vectorized;
 * each output sees the reference's operations in its order, so bitwise equal for any thread
 * count. */
#include "kernels/twins.h"

#include <string.h>

#include "kernels/cpu/cpu.h"

void mw_concat_fwd_cpu(const mw_kctx *k, float *y, const float *x, size_t rows, int CX, int CY,
                       int off)
{
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t r = 0; r < rows; r++)
        memcpy(y + r * CY + off, x + r * CX, (size_t)CX * sizeof *x);
}

void mw_concat_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, size_t rows, int CX, int CY,
                       int off)
{
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t r = 0; r < rows; r++) {
        float *restrict o = dx + r * CX;
        const float *restrict d = dy + r * CY + off;
        for (int c = 0; c < CX; c++)
            o[c] += d[c];
    }
}

/* memset in blocks of 256 KB, the blocks split over k's threads. */
void mw_zero_cpu(const mw_kctx *k, void *p, size_t nbytes)
{
    const size_t block = (size_t)1 << 18;
    const long blocks = (long)((nbytes + block - 1) / block);
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (long i = 0; i < blocks; i++) {
        const size_t off = (size_t)i * block;
        memset((char *)p + off, 0, nbytes - off < block ? nbytes - off : block);
    }
}

void mw_acc_cpu(const mw_kctx *k, float *y, const float *x, size_t count)
{
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++)
        y[i] += x[i];
}

void mw_add2_cpu(const mw_kctx *k, float *y, const float *a, const float *b, size_t count)
{
    if (b) {
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
        for (size_t i = 0; i < count; i++)
            y[i] = (0.0f + a[i]) + b[i];
    } else {
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
        for (size_t i = 0; i < count; i++)
            y[i] = 0.0f + a[i];
    }
}

void mw_mul_fwd_cpu(const mw_kctx *k, float *y, const float *a, const float *b, size_t count)
{
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++)
        y[i] = a[i] * b[i];
}

/* da and db may be the same buffer (x * x): then each element gets d b, then d a, added in
 * the reference's order; no simd pragma, so the compiler checks the overlap itself. */
void mw_mul_bwd_cpu(const mw_kctx *k, float *da, float *db, const float *dy, const float *a,
                    const float *b, size_t count)
{
    if (da && db) {
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
        for (size_t i = 0; i < count; i++) {
            float d = dy[i];
            da[i] += d * b[i];
            db[i] += d * a[i];
        }
    } else if (da || db) {
        float *o = da ? da : db;
        const float *other = da ? b : a;
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
        for (size_t i = 0; i < count; i++)
            o[i] += dy[i] * other[i];
    }
}
