/* RotaryEmbedding, the fast CPU twin (kernels/kernel_list.h: rope_fwd, rope_bwd): the steps
 * spread over k's threads, each pair's cosine and sine computed once per step and applied to
 * every example and every group (the reference computes them per element: T x width / 2
 * transcendentals here against n x T x D / 2). The same float expressions
 * (kernels/rope_rules.h), so the results are bitwise the reference's. */
#include "kernels/twins.h"

#include "kernels/cpu/cpu.h"

#include "kernels/cast.h"

#define MW_ROPE_HD static inline
#define MW_ROPE_ROUND16(half, x) ((half) == 1 ? mw_bf16_round(x) : mw_f16_round(x))
#include "kernels/rope_rules.h"

/* out from in: the rotation (bwd 0) or its transpose added (bwd 1). A step's pairs go CS at a
 * time: their cosines and sines into a table, then every example's and group's row of the step
 * along its features (contiguous: the compiler vectorizes the pairs). */
static void rope(const mw_kctx *k, float *out, const float *in, int n, int T, int D, int width,
                 int start, int denom, float max_wavelength, float scale, int bwd, int half)
{
    enum { CS = 64 };
    const int h = width / 2;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (int t = 0; t < T; t++)
        for (int j0 = 0; j0 < h; j0 += CS) {
            const int w = h - j0 < CS ? h - j0 : CS;
            float c[CS], sn[CS];
            for (int j = 0; j < w; j++) {
                const float a = rope_angle(t, j0 + j, start, denom, max_wavelength, scale);
                c[j] = cosf(a), sn[j] = sinf(a);
            }
            for (int i = 0; i < n; i++)
                for (int g = 0; g < D; g += width) {
                    const size_t e = ((size_t)i * T + (size_t)t) * D + (size_t)g + (size_t)j0;
                    for (int j = 0; j < w; j++)
                        rope_pair(out, in, e + (size_t)j, (size_t)h, c[j], sn[j], bwd, half);
                }
        }
}

void mw_rope_fwd_cpu(const mw_kctx *k, float *y, const float *x, int n, int T, int D, int width,
                     int start, int denom, float max_wavelength, float scale, int half)
{
    rope(k, y, x, n, T, D, width, start, denom, max_wavelength, scale, 0, half);
}

void mw_rope_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, int n, int T, int D, int width,
                     int start, int denom, float max_wavelength, float scale, int half)
{
    rope(k, dx, dy, n, T, D, width, start, denom, max_wavelength, scale, 1, half);
}
