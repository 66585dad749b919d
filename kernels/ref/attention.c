/* MultiHeadAttention's core, the reference (kernels/kernel_list.h: attn_fwd, attn_bwd): every row
 * and column by kernels/attention_rules.h, in order: per example, dv's columns (per key head),
 * the scores' gradients and dq's rows (per query head), then dk's columns. */
#include "kernels/twins.h"

#include "common/rng.h"
#include "kernels/cast.h"

#define MW_ATT_HD static inline
#define MW_ATT_HASH mw_rng_hash
#define MW_ATT_ROUND16(half, x) ((half) == 1 ? mw_bf16_round(x) : mw_f16_round(x))
#include "kernels/attention_rules.h"

void mw_attn_fwd_ref(const mw_kctx *k, float *o, float *p, const float *q, const float *kk,
                     const float *v, const mw_attn_geom *g, int n)
{
    (void)k;
    for (int i = 0; i < n; i++)
        for (int h = 0; h < g->H; h++)
            for (int t = 0; t < g->T; t++)
                att_row_fwd(o, p, q, kk, v, g, i, h, t);
}

void mw_attn_bwd_ref(const mw_kctx *k, float *dq, float *dk, float *dv, float *p, const float *dout,
                     const float *q, const float *kk, const float *v, const mw_attn_geom *g, int n)
{
    (void)k;
    const int kvh = att_kvh(g);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < kvh; j++) /* a key head's columns read its group's rows of p */
            for (int u = 0; u < g->S; u++)
                att_col_dv(dv, p, dout, g, i, j, u);
        for (int h = 0; h < g->H; h++) {
            for (int t = 0; t < g->T; t++)
                att_row_ds(p, dout, q, kk, v, g, i, h, t);
            for (int t = 0; t < g->T; t++)
                att_row_dq(dq, p, kk, g, i, h, t);
        }
        for (int j = 0; j < kvh; j++)
            for (int u = 0; u < g->S; u++)
                att_col_dk(dk, p, q, g, i, j, u);
    }
}
