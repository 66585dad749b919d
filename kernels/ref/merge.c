/* Reference loops of the merges: Add (and a tensor's gradient from several consumers),
 * Multiply, Concatenate on the channel axis. */
#include "kernels/twins.h"

#include <string.h>

void mw_acc_ref(const mw_kctx *k, float *y, const float *x, size_t count)
{
    (void)k;
    for (size_t i = 0; i < count; i++)
        y[i] += x[i];
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
