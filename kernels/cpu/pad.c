/* The fast CPU ZeroPadding2D: rows copied over k's threads; bitwise the reference's. */
#include "kernels/twins.h"

#include <string.h>

#include "kernels/cpu/cpu.h"

void mw_pad2d_fwd_cpu(const mw_kctx *k, float *y, const float *x, int H, int W, int C, int PT,
                      int PB, int PL, int PR, int N)
{
    const int OH = PT + H + PB, OW = PL + W + PR;
    const size_t orow = (size_t)OW * C;
    /* every output row once: all zeros, or zeros, the input row, zeros */
#pragma omp parallel for collapse(2) num_threads(MW_NT(k)) schedule(static)
    for (int n = 0; n < N; n++)
        for (int oh = 0; oh < OH; oh++) {
            float *yr = y + ((size_t)n * OH + oh) * orow;
            const int h = oh - PT;
            if (h < 0 || h >= H) {
                memset(yr, 0, orow * sizeof *yr);
                continue;
            }
            memset(yr, 0, (size_t)PL * C * sizeof *yr);
            memcpy(yr + (size_t)PL * C, x + ((size_t)n * H + h) * W * C, (size_t)W * C * sizeof *x);
            memset(yr + (size_t)(PL + W) * C, 0, (size_t)PR * C * sizeof *yr);
        }
}

void mw_pad2d_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, int H, int W, int C, int PT,
                      int PB, int PL, int PR, int N)
{
    const int OH = PT + H + PB, OW = PL + W + PR;
    const size_t wc = (size_t)W * C;
#pragma omp parallel for collapse(2) num_threads(MW_NT(k)) schedule(static)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            const float *restrict d = dy + (((size_t)n * OH + h + PT) * OW + PL) * C;
            float *restrict o = dx + ((size_t)n * H + h) * wc;
            for (size_t i = 0; i < wc; i++)
                o[i] += d[i];
        }
}
