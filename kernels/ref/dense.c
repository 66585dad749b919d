/* Reference Dense: y = x W + b, and y = x W^T of a tied (O,I) table, with plain loops; Dense
 * with its activation, the two kernels one after the other. */
#include "kernels/twins.h"

void mw_dense_fwd_ref(const mw_kctx *k, float *y, const float *x, const float *w, const float *b,
                      int N, int I, int O)
{
    (void)k;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            float s = b ? b[o] : 0.0f;
            for (int i = 0; i < I; i++)
                s += x[(size_t)n * I + i] * w[(size_t)i * O + o];
            y[(size_t)n * O + o] = s;
        }
}

void mw_dense_act_fwd_ref(const mw_kctx *k, float *y, float *z, const float *x, const float *w,
                          const float *b, int N, int I, int O, mw_act_kind kind, float alpha)
{
    mw_dense_fwd_ref(k, z, x, w, b, N, I, O);
    if (kind == MW_ACTK_RELU)
        mw_relux_fwd_ref(k, y, z, (size_t)N * O, alpha, 0.0f, 0.0f);
    else
        mw_act_fwd_ref(k, y, z, (size_t)N * O, kind, alpha);
}

void mw_dense_bwd_ref(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,
                      const float *x, const float *w, int N, int I, int O)
{
    (void)k;
    for (int n = 0; n < N; n++) {
        const float *dyn = dy + (size_t)n * O;
        if (db)
            for (int o = 0; o < O; o++)
                db[o] += dyn[o];
        for (int i = 0; i < I; i++) {
            float xi = x[(size_t)n * I + i], s = 0.0f;
            for (int o = 0; o < O; o++) {
                dw[(size_t)i * O + o] += xi * dyn[o];
                s += w[(size_t)i * O + o] * dyn[o];
            }
            if (dx)
                dx[(size_t)n * I + i] += s;
        }
    }
}

void mw_dense_t_fwd_ref(const mw_kctx *k, float *y, const float *x, const float *w, int N, int I,
                        int O)
{
    (void)k;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            float s = 0.0f;
            for (int i = 0; i < I; i++)
                s += x[(size_t)n * I + i] * w[(size_t)o * I + i];
            y[(size_t)n * O + o] = s;
        }
}

void mw_dense_t_bwd_ref(const mw_kctx *k, float *dx, float *dw, const float *dy, const float *x,
                        const float *w, int N, int I, int O)
{
    (void)k;
    for (int n = 0; n < N; n++) {
        const float *dyn = dy + (size_t)n * O, *xn = x + (size_t)n * I;
        for (int o = 0; o < O; o++)
            for (int i = 0; i < I; i++)
                dw[(size_t)o * I + i] += dyn[o] * xn[i];
        for (int i = 0; dx && i < I; i++) {
            float s = 0.0f;
            for (int o = 0; o < O; o++)
                s += dyn[o] * w[(size_t)o * I + i];
            dx[(size_t)n * I + i] += s;
        }
    }
}
