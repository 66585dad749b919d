/* Reference loops of Softmax as a layer (over the last axis). */
#include "kernels/twins.h"

#include <math.h>

void mw_softmax_fwd_ref(const mw_kctx *k, float *y, const float *x, size_t rows, int C)
{
    (void)k;
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C, mx = xr[0];
        for (int c = 1; c < C; c++)
            mx = xr[c] > mx ? xr[c] : mx;
        double s = 0.0;
        for (int c = 0; c < C; c++)
            s += (yr[c] = expf(xr[c] - mx));
        for (int c = 0; c < C; c++)
            yr[c] = (float)(yr[c] / s);
    }
}

void mw_softmax_bwd_ref(const mw_kctx *k, float *dx, const float *dy, const float *y, size_t rows,
                        int C)
{
    (void)k;
    for (size_t r = 0; r < rows; r++) {
        const float *d = dy + r * C, *yr = y + r * C;
        double s = 0.0;
        for (int c = 0; c < C; c++)
            s += (double)d[c] * yr[c];
        for (int c = 0; c < C; c++)
            dx[r * C + c] += (float)(yr[c] * (d[c] - s));
    }
}
