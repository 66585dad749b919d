/* Reference RotaryEmbedding (kernels/kernel_list.h: rope_fwd, rope_bwd): every pair of every
 * group of every row in order, its angle's cosine and sine computed where it is used
 * (kernels/rope_rules.h). */
#include "kernels/twins.h"

#define MW_ROPE_HD static inline
#include "kernels/rope_rules.h"

void mw_rope_fwd_ref(const mw_kctx *k, float *y, const float *x, int n, int T, int D, int width,
                     int start, int denom, float max_wavelength, float scale)
{
    (void)k;
    const int h = width / 2;
    for (size_t r = 0; r < (size_t)n * T; r++)
        for (int g = 0; g < D; g += width)
            for (int j = 0; j < h; j++) {
                const float a =
                    rope_angle((int)(r % (size_t)T), j, start, denom, max_wavelength, scale);
                const size_t i = r * (size_t)D + (size_t)g + (size_t)j;
                rope_pair_fwd(&y[i], &y[i + h], x[i], x[i + h], cosf(a), sinf(a));
            }
}

void mw_rope_bwd_ref(const mw_kctx *k, float *dx, const float *dy, int n, int T, int D, int width,
                     int start, int denom, float max_wavelength, float scale)
{
    (void)k;
    const int h = width / 2;
    for (size_t r = 0; r < (size_t)n * T; r++)
        for (int g = 0; g < D; g += width)
            for (int j = 0; j < h; j++) {
                const float a =
                    rope_angle((int)(r % (size_t)T), j, start, denom, max_wavelength, scale);
                const size_t i = r * (size_t)D + (size_t)g + (size_t)j;
                rope_pair_bwd(&dx[i], &dx[i + h], dy[i], dy[i + h], cosf(a), sinf(a));
            }
}
