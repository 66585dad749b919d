/* The fast CPU Softmax layer. */
#include "kernels/twins.h"

#include <math.h>

#include "kernels/cpu/cpu.h"

/* Softmax: blocks of rows spread over the threads (one block, as the logits of a batch: no
 * parallel region at all), each row the reference's loops (its double sum in the same
 * order): bitwise equal. */
#define SOFTMAX_ROWS 128

static void softmax_rows(float *y, const float *x, size_t r0, size_t r1, int C)
{
    for (size_t r = r0; r < r1; r++) {
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

static void softmax_bwd_rows(float *dx, const float *dy, const float *y, size_t r0, size_t r1,
                             int C)
{
    for (size_t r = r0; r < r1; r++) {
        const float *d = dy + r * C, *yr = y + r * C;
        float *o = dx + r * C;
        double s = 0.0;
        for (int c = 0; c < C; c++)
            s += (double)d[c] * yr[c];
        for (int c = 0; c < C; c++)
            o[c] += (float)(yr[c] * (d[c] - s));
    }
}

void mw_softmax_fwd_cpu(const mw_kctx *k, float *y, const float *x, size_t rows, int C)
{
    const size_t nb = (rows + SOFTMAX_ROWS - 1) / SOFTMAX_ROWS;
    if (nb <= 1) {
        softmax_rows(y, x, 0, rows, C);
        return;
    }
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t b = 0; b < nb; b++)
        softmax_rows(y, x, b * SOFTMAX_ROWS, b + 1 < nb ? (b + 1) * SOFTMAX_ROWS : rows, C);
}

void mw_softmax_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, const float *y, size_t rows,
                        int C)
{
    const size_t nb = (rows + SOFTMAX_ROWS - 1) / SOFTMAX_ROWS;
    if (nb <= 1) {
        softmax_bwd_rows(dx, dy, y, 0, rows, C);
        return;
    }
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t b = 0; b < nb; b++)
        softmax_bwd_rows(dx, dy, y, b * SOFTMAX_ROWS, b + 1 < nb ? (b + 1) * SOFTMAX_ROWS : rows,
                         C);
}
