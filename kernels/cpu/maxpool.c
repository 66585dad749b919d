/* Fast CPU MaxPooling2D: parallel over images, the channel loop innermost so
 * NHWC rows vectorize. Same tie rule as the reference (first in window order,
 * strict > to replace). */
#include "kernels/cpu/cpu.h"
#include "kernels/twins.h"

#include <float.h>

/* One window position for all C channels; restrict and unconditional loads
 * let the compiler turn the compare-and-keep into vector blends. */
static void window_first(float *restrict yo, int32_t *restrict ao, const float *restrict xr,
                         int32_t base, int C)
{
    for (int c = 0; c < C; c++) {
        yo[c] = xr[c];
        ao[c] = base + c;
    }
}

static void window_next(float *restrict yo, int32_t *restrict ao, const float *restrict xr,
                        int32_t base, int C)
{
    for (int c = 0; c < C; c++) {
        float v = xr[c], cur = yo[c];
        int32_t keep = -(int32_t)(v > cur); /* all ones where v wins */
        yo[c] = v > cur ? v : cur;
        ao[c] = (ao[c] & ~keep) | ((base + c) & keep);
    }
}

/* The common case, 2x2 windows with stride 2 and no padding: two input rows
 * per output row, all four candidates compared in window order. */
static void pool2x2(float *restrict y, int32_t *restrict am, const float *restrict x,
                    const mw_pool_geom *g)
{
    const int C = g->C, W = g->W;
    for (int oh = 0; oh < g->OH; oh++)
        for (int ow = 0; ow < g->OW; ow++) {
            const int32_t o00 = ((2 * oh) * W + 2 * ow) * C, o01 = o00 + C;
            const int32_t o10 = o00 + W * C, o11 = o10 + C;
            float *yo = y + ((size_t)oh * g->OW + ow) * C;
            int32_t *ao = am + ((size_t)oh * g->OW + ow) * C;
            for (int c = 0; c < C; c++) {
                float best = x[o00 + c];
                int32_t arg = o00 + c;
                float v = x[o01 + c];
                int32_t m = -(int32_t)(v > best);
                best = v > best ? v : best;
                arg = (arg & ~m) | ((o01 + c) & m);
                v = x[o10 + c];
                m = -(int32_t)(v > best);
                best = v > best ? v : best;
                arg = (arg & ~m) | ((o10 + c) & m);
                v = x[o11 + c];
                m = -(int32_t)(v > best);
                best = v > best ? v : best;
                arg = (arg & ~m) | ((o11 + c) & m);
                yo[c] = best;
                ao[c] = arg;
            }
        }
}

void mw_maxpool_fwd_cpu(const mw_kctx *k, float *y, int32_t *argmax, const float *x,
                        const mw_pool_geom *g, int N)
{
    /* every window inside the image: 'valid', or 'same' with even sizes */
    if (g->PH == 2 && g->PW == 2 && g->SH == 2 && g->SW == 2 && g->PT == 0 && g->PL == 0 &&
        2 * g->OH <= g->H && 2 * g->OW <= g->W) {
        const size_t in_img = (size_t)g->H * g->W * g->C;
        const size_t out_img = (size_t)g->OH * g->OW * g->C;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
        for (int n = 0; n < N; n++)
            pool2x2(y + n * out_img, argmax + n * out_img, x + n * in_img, g);
        return;
    }
    const size_t in_img = (size_t)g->H * g->W * g->C, out_img = (size_t)g->OH * g->OW * g->C;
    const int C = g->C;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (int n = 0; n < N; n++) {
        const float *xi = x + (size_t)n * in_img;
        for (int oh = 0; oh < g->OH; oh++)
            for (int ow = 0; ow < g->OW; ow++) {
                float *yo = y + n * out_img + ((size_t)oh * g->OW + ow) * C;
                int32_t *ao = argmax + n * out_img + ((size_t)oh * g->OW + ow) * C;
                int first = 1;
                for (int ph = 0; ph < g->PH; ph++) {
                    int ih = oh * g->SH + ph - g->PT;
                    if (ih < 0 || ih >= g->H)
                        continue;
                    for (int pw = 0; pw < g->PW; pw++) {
                        int iw = ow * g->SW + pw - g->PL;
                        if (iw < 0 || iw >= g->W)
                            continue;
                        int32_t base = (int32_t)(((size_t)ih * g->W + iw) * C);
                        if (first) {
                            window_first(yo, ao, xi + base, base, C);
                            first = 0;
                        } else {
                            window_next(yo, ao, xi + base, base, C);
                        }
                    }
                }
            }
    }
}

void mw_maxpool_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, const int32_t *argmax,
                        const mw_pool_geom *g, int N)
{
    const size_t in_img = (size_t)g->H * g->W * g->C, out_img = (size_t)g->OH * g->OW * g->C;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (int n = 0; n < N; n++) {
        float *dxi = dx + (size_t)n * in_img;
        const float *dyi = dy + (size_t)n * out_img;
        const int32_t *ai = argmax + (size_t)n * out_img;
        for (size_t i = 0; i < out_img; i++)
            dxi[ai[i]] += dyi[i];
    }
}
