/* Fast CPU Conv2DTranspose: the Conv2D machinery (conv2d.c) run backwards. With g the Conv2D
 * whose input gradient the transposed convolution is (kernels/geom.h), K = KH*KW*C and P =
 * OH*OW input pixels per image:
 *   forward:  dcol (n P, K) = x (n P, O) w^T, then col2im adds dcol onto y (set to the bias)
 *   backward: col = im2col(dy); dw (K, O) += col^T x; dx (n P, O) += col w
 * in chunks of images whose rows fit the scratch (mw_conv2d_ws_min per image, as Conv2D). */
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/gemm.h"
#include "kernels/twins.h"

#include <string.h>

void mw_conv2d_tr_fwd_cpu(const mw_kctx *k, float *y, const float *x, const float *w,
                          const float *b, const mw_conv2d_geom *g, int N)
{
    const int K = g->KH * g->KW * g->C, P = g->OH * g->OW;
    const size_t out_img = (size_t)g->H * g->W * g->C, in_img = (size_t)P * g->O;
    const size_t pix = (size_t)N * g->H * g->W;
    if (b)
        for (size_t r = 0; r < pix; r++)
            memcpy(y + r * g->C, b, sizeof(float) * g->C);
    else
        memset(y, 0, pix * g->C * sizeof *y);
    const int step = mw_conv2d_chunk_cpu(k, g, N);
    for (int n0 = 0; n0 < N; n0 += step) {
        const int n = N - n0 < step ? N - n0 : step;
        mw_gemm_cpu(k, 'N', 'T', n * P, K, g->O, 1.0f, x + n0 * in_img, g->O, w, g->O, 0.0f, k->ws,
                    K);
        mw_conv2d_col2im_cpu(y + n0 * out_img, k->ws, g, n, MW_NT(k));
    }
}

void mw_conv2d_tr_bwd_cpu(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,
                          const float *x, const float *w, const mw_conv2d_geom *g, int N)
{
    const int K = g->KH * g->KW * g->C, P = g->OH * g->OW;
    const size_t out_img = (size_t)g->H * g->W * g->C, in_img = (size_t)P * g->O;
    if (db) {
        const size_t pix = (size_t)N * g->H * g->W;
        for (size_t r = 0; r < pix; r++)
            for (int c = 0; c < g->C; c++)
                db[c] += dy[r * g->C + c];
    }
    const int step = mw_conv2d_chunk_cpu(k, g, N);
    for (int n0 = 0; n0 < N; n0 += step) {
        const int n = N - n0 < step ? N - n0 : step;
        const float *xc = x + n0 * in_img;
        mw_conv2d_im2col_cpu(k->ws, dy + n0 * out_img, g, n, MW_NT(k));
        mw_gemm_cpu(k, 'T', 'N', K, g->O, n * P, 1.0f, k->ws, K, xc, g->O, 1.0f, dw, g->O);
        if (dx)
            mw_gemm_cpu(k, 'N', 'N', n * P, g->O, K, 1.0f, k->ws, K, w, g->O, 1.0f,
                        dx + n0 * in_img, g->O);
    }
}
