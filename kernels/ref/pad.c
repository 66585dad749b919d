/* Reference loops of ZeroPadding2D: the spec the tests trust. */
#include "kernels/twins.h"

#include <string.h>

void mw_pad2d_fwd_ref(const mw_kctx *k, float *y, const float *x, int H, int W, int C, int PT,
                      int PB, int PL, int PR, int N)
{
    (void)k;
    const int OH = PT + H + PB, OW = PL + W + PR;
    memset(y, 0, (size_t)N * OH * OW * C * sizeof *y);
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            memcpy(y + (((size_t)n * OH + h + PT) * OW + PL) * C, x + (((size_t)n * H + h) * W) * C,
                   (size_t)W * C * sizeof *x);
}

void mw_pad2d_bwd_ref(const mw_kctx *k, float *dx, const float *dy, int H, int W, int C, int PT,
                      int PB, int PL, int PR, int N)
{
    (void)k;
    const int OH = PT + H + PB, OW = PL + W + PR;
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            const float *d = dy + (((size_t)n * OH + h + PT) * OW + PL) * C;
            float *o = dx + (((size_t)n * H + h) * W) * C;
            for (size_t i = 0; i < (size_t)W * C; i++)
                o[i] += d[i];
        }
}
