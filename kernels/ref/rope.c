/* Reference RotaryEmbedding (kernels/kernel_list.h: rope_fwd, rope_bwd): every pair of every
 * group of every row in order, its angle's cosine and sine computed where it is used
 * (kernels/rope_rules.h). */
#include "kernels/twins.h"

#include "kernels/cast.h"

#define MW_ROPE_HD static inline
#define MW_ROPE_ROUND16(half, x) ((half) == 1 ? mw_bf16_round(x) : mw_f16_round(x))
#include "kernels/rope_rules.h"

/* out from in: the rotation (bwd 0) or its transpose added (bwd 1). */
static void rope(float *out, const float *in, int n, int T, int D, int width, int start, int denom,
                 float max_wavelength, float scale, int bwd, int half)
{
    const int h = width / 2;
    for (size_t r = 0; r < (size_t)n * T; r++)
        for (int g = 0; g < D; g += width)
            for (int j = 0; j < h; j++) {
                const float a =
                    rope_angle((int)(r % (size_t)T), j, start, denom, max_wavelength, scale);
                rope_pair(out, in, r * (size_t)D + (size_t)g + (size_t)j, (size_t)h, cosf(a),
                          sinf(a), bwd, half);
            }
}

void mw_rope_fwd_ref(const mw_kctx *k, float *y, const float *x, int n, int T, int D, int width,
                     int start, int denom, float max_wavelength, float scale, int half)
{
    (void)k;
    rope(y, x, n, T, D, width, start, denom, max_wavelength, scale, 0, half);
}

void mw_rope_bwd_ref(const mw_kctx *k, float *dx, const float *dy, int n, int T, int D, int width,
                     int start, int denom, float max_wavelength, float scale, int half)
{
    (void)k;
    rope(dx, dy, n, T, D, width, start, denom, max_wavelength, scale, 1, half);
}
