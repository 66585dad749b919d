/* Reference loops of the merges: Add (and a tensor's gradient from several consumers),
 * Multiply, Concatenate on the channel axis; Add and Multiply of broadcast shapes. */
#include "kernels/twins.h"

#include <string.h>

void mw_acc_ref(const mw_kctx *k, float *y, const float *x, size_t count)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        y[i] += x[i];
}

void mw_add2_ref(const mw_kctx *k, float *y, const float *a, const float *b, size_t count)
{
    (void)k;
    for (size_t i = 0; i < count; i++) {
        float s = 0.0f;
        s += a[i];
        y[i] = b ? s + b[i] : s;
    }
}

void mw_mul_fwd_ref(const mw_kctx *k, float *y, const float *a, const float *b, size_t count)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        y[i] = a[i] * b[i];
}

void mw_mul_bwd_ref(const mw_kctx *k, float *da, float *db, const float *dy, const float *a,
                    const float *b, size_t count)
{
    (void)k;
    for (size_t i = 0; i < count; i++) {
        float d = dy[i];
        if (da)
            da[i] += d * b[i];
        if (db)
            db[i] += d * a[i];
    }
}

void mw_concat_fwd_ref(const mw_kctx *k, float *y, const float *x, size_t rows, int CX, int CY,
                       int off)
{
    (void)k;
    for (size_t r = 0; r < rows; r++)
        memcpy(y + r * CY + off, x + r * CX, (size_t)CX * sizeof *x);
}

void mw_concat_bwd_ref(const mw_kctx *k, float *dx, const float *dy, size_t rows, int CX, int CY,
                       int off)
{
    (void)k;
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < CX; c++)
            dx[r * CX + c] += dy[r * CY + off + c];
}

/* Runs BODY for every element i of y in order, ia and ib a's and b's indices. */
#define BCAST_LOOP(g, BODY)                                                                        \
    do {                                                                                           \
        size_t i = 0;                                                                              \
        for (int n = 0; n < (g)->d[0]; n++)                                                        \
            for (int h = 0; h < (g)->d[1]; h++)                                                    \
                for (int w = 0; w < (g)->d[2]; w++)                                                \
                    for (int c = 0; c < (g)->d[3]; c++, i++) {                                     \
                        const size_t ia =                                                          \
                            n * (g)->sa[0] + h * (g)->sa[1] + w * (g)->sa[2] + c * (g)->sa[3];     \
                        const size_t ib =                                                          \
                            n * (g)->sb[0] + h * (g)->sb[1] + w * (g)->sb[2] + c * (g)->sb[3];     \
                        BODY;                                                                      \
                    }                                                                              \
    } while (0)

void mw_bcast_fwd_ref(const mw_kctx *k, float *y, const float *a, const float *b,
                      const mw_bcast_geom *bg, int mul, float scale)
{
    (void)k;
    BCAST_LOOP(bg, {
        const float v = b ? b[ib] : 1.0f;
        y[i] = mul ? a[ia] * v * scale : a[ia] + v * scale;
    });
}

void mw_bcast_bwd_ref(const mw_kctx *k, float *da, float *db, const float *dy, const float *a,
                      const float *b, const mw_bcast_geom *bg, int mul, float scale)
{
    (void)k;
    BCAST_LOOP(bg, {
        const float v = b ? b[ib] : 1.0f;
        if (da)
            da[ia] += mul ? dy[i] * v * scale : dy[i];
        if (db)
            db[ib] += mul ? dy[i] * a[ia] * scale : dy[i] * scale;
    });
}
