/* Fast CPU Dense: three sgemm calls (forward, dW, dX) and a bias row sum. */
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
