/* Reference Rescaling and adapted Normalization as layers (kernels/kernel_list.h): Keras 3's
 * float expressions, x * scale + offset (per channel or one pair) and
 * (x - mean) / max(sqrt(variance), epsilon). */
#include "kernels/twins.h"

#include <math.h>

void mw_rescale_fwd_ref(const mw_kctx *k, float *y, const float *x, size_t count,
                        const mw_rescale *r)
{
    (void)k;
    const size_t C = (size_t)r->C;
    for (size_t i = 0; i < count; i += C) /* count is a multiple of C */
        for (size_t c = 0; c < C; c++)
            y[i + c] = x[i + c] * r->scale[c] + r->offset[c];
}

void mw_rescale_bwd_ref(const mw_kctx *k, float *dx, const float *dy, size_t count,
                        const mw_rescale *r)
{
    (void)k;
    const size_t C = (size_t)r->C;
    for (size_t i = 0; i < count; i += C)
        for (size_t c = 0; c < C; c++)
            dx[i + c] += dy[i + c] * r->scale[c];
}

void mw_normalize_fwd_ref(const mw_kctx *k, float *y, const float *x, const float *mean,
                          const float *var, size_t rows, int C, float eps)
{
    (void)k;
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) {
            const size_t i = r * (size_t)C + (size_t)c;
            y[i] = (x[i] - mean[c]) / fmaxf(sqrtf(var[c]), eps);
        }
}

void mw_normalize_bwd_ref(const mw_kctx *k, float *dx, const float *dy, const float *var,
                          size_t rows, int C, float eps)
{
    (void)k;
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) {
            const size_t i = r * (size_t)C + (size_t)c;
            dx[i] += dy[i] / fmaxf(sqrtf(var[c]), eps);
        }
}
