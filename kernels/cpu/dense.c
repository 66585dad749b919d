/* Fast CPU Dense: three sgemm calls (forward, dW, dX) and a bias row sum; the tied (transposed)
 * Dense is the same sgemm calls with the other transposes. */
#include "kernels/cpu/gemm.h"
#include "kernels/twins.h"

#include <string.h>

void mw_dense_fwd_cpu(const mw_kctx *k, float *y, const float *x, const float *w, const float *b,
                      int N, int I, int O)
{
    float beta = 0.0f;
    if (b) {
        for (int n = 0; n < N; n++)
            memcpy(y + (size_t)n * O, b, sizeof(float) * O);
        beta = 1.0f;
    }
    mw_gemm_cpu(k, 'N', 'N', N, O, I, 1.0f, x, I, w, O, beta, y, O);
}

/* The two fast twins one after the other: the unfused layers' values, bit for bit. */
void mw_dense_act_fwd_cpu(const mw_kctx *k, float *y, float *z, const float *x, const float *w,
                          const float *b, int N, int I, int O, mw_act_kind kind, float alpha)
{
    mw_dense_fwd_cpu(k, z, x, w, b, N, I, O);
    if (kind == MW_ACTK_RELU)
        mw_relux_fwd_cpu(k, y, z, (size_t)N * O, alpha, 0.0f, 0.0f);
    else
        mw_act_fwd_cpu(k, y, z, (size_t)N * O, kind, alpha);
}

void mw_dense_bwd_cpu(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,
                      const float *x, const float *w, int N, int I, int O)
{
    if (db)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < O; o++)
                db[o] += dy[(size_t)n * O + o];
    mw_gemm_cpu(k, 'T', 'N', I, O, N, 1.0f, x, I, dy, O, 1.0f, dw, O);
    if (dx)
        mw_gemm_cpu(k, 'N', 'T', N, I, O, 1.0f, dy, O, w, O, 1.0f, dx, I);
}

void mw_dense_t_fwd_cpu(const mw_kctx *k, float *y, const float *x, const float *w, int N, int I,
                        int O)
{
    mw_gemm_cpu(k, 'N', 'T', N, O, I, 1.0f, x, I, w, I, 0.0f, y, O);
}

void mw_dense_t_bwd_cpu(const mw_kctx *k, float *dx, float *dw, const float *dy, const float *x,
                        const float *w, int N, int I, int O)
{
    mw_gemm_cpu(k, 'T', 'N', O, I, N, 1.0f, dy, O, x, I, 1.0f, dw, I);
    if (dx)
        mw_gemm_cpu(k, 'N', 'N', N, I, O, 1.0f, dy, O, w, I, 1.0f, dx, I);
}
