/* Fast CPU depthwise Conv2D (the spec is kernels/ref/dwconv2d.c). Depthwise is memory-bound:
 * KH*KW multiply-adds per output value, so no im2col (it would copy every input KH*KW times
 * for no matrix product to feed). Each output row is built in place instead, one pixel's
 * channel vector at a time: in NHWC those are contiguous, so the inner loops vectorise over
 * channels. Threads: forward over output rows, backward's dx over input rows (a gather: the
 * output pixels that read an input row are found from it), dw and db over blocks of channels;
 * no two threads write the same value and nothing is reduced across threads, so the result
 * does not depend on the thread count. The forward sums in the reference's order. */
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/twins.h"

/* dw / db blocks are whole multiples of 16 input channels: a cache line of x per pixel when M
 * is 1. */
#define DW_BLOCK 16

/* The output columns [*lo, *hi) whose tap at column offset off (kw*DW - PL) lands inside the
 * input's W columns: iw = ow*S + off in [0, W). */
static void tap_range(int OW, int S, int off, int W, int *lo, int *hi)
{
    *lo = off >= 0 ? 0 : (-off + S - 1) / S;
    int h = W - 1 - off >= 0 ? (W - 1 - off) / S + 1 : 0;
    *hi = h < OW ? h : OW;
}

/* The input row (example n) that the taps kh of output row oh read; NULL: it is padding. */
static inline const float *tap_row(const float *x, const mw_conv2d_geom *g, int n, int oh, int kh)
{
    const int ih = oh * g->SH + kh * g->DH - g->PT;
    return ih < 0 || ih >= g->H ? NULL : x + ((size_t)n * g->H + ih) * g->W * g->C;
}

/* y[c*M + m] += x[c] * w[c*M + m] for one pixel's C input channels. */
static inline void tap_fwd(float *restrict y, const float *restrict x, const float *restrict w,
                           int C, int M)
{
    if (M == 1) {
        for (int c = 0; c < C; c++)
            y[c] += x[c] * w[c];
        return;
    }
    for (int c = 0; c < C; c++)
        for (int m = 0; m < M; m++)
            y[c * M + m] += x[c] * w[c * M + m];
}

/* dx[c] += w[c*M + m] * dy[c*M + m] for each m. */
static inline void tap_dx(float *restrict dx, const float *restrict dy, const float *restrict w,
                          int C, int M)
{
    if (M == 1) {
        for (int c = 0; c < C; c++)
            dx[c] += w[c] * dy[c];
        return;
    }
    for (int c = 0; c < C; c++)
        for (int m = 0; m < M; m++)
            dx[c] += w[c * M + m] * dy[c * M + m];
}

/* Output row r (example r / OH, row r % OH). */
MW_WIDE_CLONES static void fwd_row(float *y, const float *x, const float *w, const float *b,
                                   const mw_conv2d_geom *g, long r)
{
    const int M = g->O / g->C, O = g->O;
    const int n = (int)(r / g->OH), oh = (int)(r % g->OH);
    float *yr = y + (size_t)r * g->OW * O;
    for (int ow = 0; ow < g->OW; ow++) {
        if (b)
            memcpy(yr + (size_t)ow * O, b, sizeof(float) * O);
        else
            memset(yr + (size_t)ow * O, 0, sizeof(float) * O);
    }
    for (int kh = 0; kh < g->KH; kh++) {
        const float *xr = tap_row(x, g, n, oh, kh);
        if (!xr)
            continue;
        for (int kw = 0; kw < g->KW; kw++) {
            const int off = kw * g->DW - g->PL;
            const float *wp = w + ((size_t)kh * g->KW + kw) * O;
            int lo, hi;
            tap_range(g->OW, g->SW, off, g->W, &lo, &hi);
            for (int ow = lo; ow < hi; ow++)
                tap_fwd(yr + (size_t)ow * O, xr + (size_t)(ow * g->SW + off) * g->C, wp, g->C, M);
        }
    }
}

void mw_dwconv2d_fwd_cpu(const mw_kctx *k, float *y, const float *x, const float *w, const float *b,
                         const mw_conv2d_geom *g, int N)
{
    const long rows = (long)N * g->OH;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (long r = 0; r < rows; r++)
        fwd_row(y, x, w, b, g, r);
}

/* dx of one input row (n, ih): every output row oh and tap kh that reads it, added into dxr,
 * or into zeros (set_dx: the row is zeroed here, where it stays cached for the adds). */
MW_WIDE_CLONES static void dx_row(float *dxr, const float *dy, const float *w,
                                  const mw_conv2d_geom *g, int n, int ih, int set_dx)
{
    const int M = g->O / g->C, O = g->O;
    if (set_dx)
        memset(dxr, 0, sizeof(float) * g->W * g->C);
    for (int kh = 0; kh < g->KH; kh++) {
        const int t = ih + g->PT - kh * g->DH; /* = oh * SH */
        if (t < 0 || t % g->SH || t / g->SH >= g->OH)
            continue;
        const float *dyr = dy + ((size_t)n * g->OH + t / g->SH) * g->OW * O;
        for (int kw = 0; kw < g->KW; kw++) {
            const int off = kw * g->DW - g->PL;
            const float *wp = w + ((size_t)kh * g->KW + kw) * O;
            int lo, hi;
            tap_range(g->OW, g->SW, off, g->W, &lo, &hi);
            for (int ow = lo; ow < hi; ow++)
                tap_dx(dxr + (size_t)(ow * g->SW + off) * g->C, dyr + (size_t)ow * O, wp, g->C, M);
        }
    }
}

/* dw and db of input channels [c0, c1) (outputs [c0*M, c1*M)), summed over every pixel in
 * the reference's order (n, oh, ow). */
MW_WIDE_CLONES static void dw_block(float *dw, float *db, const float *dy, const float *x,
                                    const mw_conv2d_geom *g, int N, int c0, int c1)
{
    const int M = g->O / g->C, O = g->O, o0 = c0 * M, no = (c1 - c0) * M;
    for (int n = 0; n < N; n++)
        for (int oh = 0; oh < g->OH; oh++) {
            const float *dyr = dy + ((size_t)n * g->OH + oh) * g->OW * O;
            if (db)
                for (int ow = 0; ow < g->OW; ow++)
                    for (int o = o0; o < o0 + no; o++)
                        db[o] += dyr[(size_t)ow * O + o];
            for (int kh = 0; kh < g->KH; kh++) {
                const float *xr = tap_row(x, g, n, oh, kh);
                if (!xr)
                    continue;
                for (int kw = 0; kw < g->KW; kw++) {
                    const int off = kw * g->DW - g->PL;
                    float *dwp = dw + ((size_t)kh * g->KW + kw) * O + o0;
                    int lo, hi;
                    tap_range(g->OW, g->SW, off, g->W, &lo, &hi);
                    for (int ow = lo; ow < hi; ow++)
                        tap_fwd(dwp, xr + (size_t)(ow * g->SW + off) * g->C + c0,
                                dyr + (size_t)ow * O + o0, c1 - c0, M);
                }
            }
        }
}

void mw_dwconv2d_bwd_cpu(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,
                         const float *x, const float *w, const mw_conv2d_geom *g, int N, int set_dx)
{
    /* One block of whole cache lines of channels per thread: each block streams all of x and
     * dy once, so blocks of one line each read them C / 16 times (MobileNetV2 at 96x96 spent
     * a tenth of its step there). A value's sum runs over the pixels in the same order
     * whatever the blocks, so the results are the same bits for any split. */
    const int lines = (g->C + DW_BLOCK - 1) / DW_BLOCK, nt = MW_NT(k);
    const int nb = lines < nt ? lines : nt, per = (lines + nb - 1) / nb * DW_BLOCK;
#pragma omp parallel for num_threads(nb) schedule(static)
    for (int i = 0; i < nb; i++) {
        const int c0 = i * per, c1 = c0 + per < g->C ? c0 + per : g->C;
        if (c0 < c1)
            dw_block(dw, db, dy, x, g, N, c0, c1);
    }
    if (!dx)
        return;
    const long rows = (long)N * g->H;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (long r = 0; r < rows; r++)
        dx_row(dx + (size_t)r * g->W * g->C, dy, w, g, (int)(r / g->H), (int)(r % g->H), set_dx);
}
