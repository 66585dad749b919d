/* Reference loops of Conv2DTranspose and UpSampling2D, the layers that make images larger (a
 * segmentation model's decoder): the spec the fast twins and the tests trust. */
#include "kernels/ref/conv2d.h"
#include "kernels/twins.h"
#include "kernels/upsample_rules.h"

#include <string.h>

/* Conv2DTranspose: each input pixel p (g's output side) adds x times the kernel's tap t into the
 * output pixel px it reaches (the Conv2D backward's dx loop, over mw_conv2d_tap_input's window). */
void mw_conv2d_tr_fwd_ref(const mw_kctx *k, float *y, const float *x, const float *w,
                          const float *b, const mw_conv2d_geom *g, int N)
{
    (void)k;
    const size_t pix = (size_t)N * g->H * g->W, P = (size_t)N * g->OH * g->OW;
    for (size_t p = 0; p < pix; p++)
        for (int c = 0; c < g->C; c++)
            y[p * g->C + c] = b ? b[c] : 0.0f;
    for (size_t p = 0; p < P; p++) {
        const float *xp = x + p * g->O;
        for (int t = 0; t < g->KH * g->KW; t++) {
            size_t px;
            if (!mw_conv2d_tap_input(g, p, t, &px))
                continue;
            float *yp = y + px * g->C;
            const float *wp = w + (size_t)t * g->C * g->O;
            for (int c = 0; c < g->C; c++)
                for (int o = 0; o < g->O; o++)
                    yp[c] += wp[(size_t)c * g->O + o] * xp[o];
        }
    }
}

void mw_conv2d_tr_bwd_ref(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,
                          const float *x, const float *w, const mw_conv2d_geom *g, int N)
{
    (void)k;
    const size_t pix = (size_t)N * g->H * g->W, P = (size_t)N * g->OH * g->OW;
    for (size_t p = 0; db && p < pix; p++)
        for (int c = 0; c < g->C; c++)
            db[c] += dy[p * g->C + c];
    for (size_t p = 0; p < P; p++) {
        const size_t xo = p * g->O;
        for (int t = 0; t < g->KH * g->KW; t++) {
            size_t px;
            if (!mw_conv2d_tap_input(g, p, t, &px))
                continue;
            const float *dyp = dy + px * g->C;
            const size_t wo = (size_t)t * g->C * g->O;
            for (int c = 0; c < g->C; c++)
                for (int o = 0; o < g->O; o++) {
                    dw[wo + (size_t)c * g->O + o] += dyp[c] * x[xo + o];
                    if (dx)
                        dx[xo + o] += dyp[c] * w[wo + (size_t)c * g->O + o];
                }
        }
    }
}

/* The four source pixels of output pixel p = (n*OH + oh)*OW + ow, as pixels (n*H + h)*W + w of
 * the input, and their weights, in (row, column) order (nearest: all four the first, whose weight
 * is then 1). */
static void taps(size_t p, int H, int W, int SH, int SW, int bilinear, size_t off[4], float wt[4])
{
    const int OH = H * SH, OW = W * SW;
    const int ow = (int)(p % (size_t)OW), oh = (int)(p / (size_t)OW % (size_t)OH);
    const size_t img = p / ((size_t)OH * OW) * H * W; /* image n's first pixel */
    int h0, h1, w0, w1;
    float fh, fw;
    mw_upsample_src(oh, H, SH, bilinear, &h0, &h1, &fh);
    mw_upsample_src(ow, W, SW, bilinear, &w0, &w1, &fw);
    off[0] = img + (size_t)h0 * W + w0, off[1] = img + (size_t)h0 * W + w1;
    off[2] = img + (size_t)h1 * W + w0, off[3] = img + (size_t)h1 * W + w1;
    wt[0] = (1.0f - fh) * (1.0f - fw), wt[1] = (1.0f - fh) * fw;
    wt[2] = fh * (1.0f - fw), wt[3] = fh * fw;
}

void mw_upsample_fwd_ref(const mw_kctx *k, float *y, const float *x, int H, int W, int C, int SH,
                         int SW, int bilinear, int N)
{
    (void)k;
    const size_t P = (size_t)N * H * SH * W * SW;
    for (size_t p = 0; p < P; p++) {
        size_t off[4];
        float wt[4];
        taps(p, H, W, SH, SW, bilinear, off, wt);
        float *yp = y + p * C;
        if (!bilinear) {
            memcpy(yp, x + off[0] * C, (size_t)C * sizeof *yp);
            continue;
        }
        for (int c = 0; c < C; c++)
            yp[c] = wt[0] * x[off[0] * C + c] + wt[1] * x[off[1] * C + c] +
                    wt[2] * x[off[2] * C + c] + wt[3] * x[off[3] * C + c];
    }
}

void mw_upsample_bwd_ref(const mw_kctx *k, float *dx, const float *dy, int H, int W, int C, int SH,
                         int SW, int bilinear, int N)
{
    (void)k;
    const size_t P = (size_t)N * H * SH * W * SW;
    for (size_t p = 0; p < P; p++) {
        size_t off[4];
        float wt[4];
        taps(p, H, W, SH, SW, bilinear, off, wt);
        const float *dyp = dy + p * C;
        for (int t = 0; t < (bilinear ? 4 : 1); t++)
            for (int c = 0; c < C; c++)
                dx[off[t] * C + c] += wt[t] * dyp[c];
    }
}
