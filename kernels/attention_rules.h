/* MultiHeadAttention's arithmetic (kernels.h: mw_attn_geom), written once for the reference
 * (kernels/ref/attention.c), its CUDA twin (kernels/cuda/attention.cu) and the fast CPU twin's
 * softmax: one row (example i, head h, query position t) or one column (key position u) at a
 * time, every sum in order. The backward: dv first (from p), then each row's scores' gradient
 * ds = p (dp - sum p dp), dp = dout . v times the dropout multiplier, written over p (with a
 * soft cap c, times 1 - tanh(s / c)^2, s recomputed as the forward's), then
 * dq = scale ds kk and dk = ds (q scale). Grouped-query attention (kv_heads < H): query head h
 * reads key and value head h / (H / kv_heads), whose gradients (a column's) sum over its group's
 * heads, then over t. Under a mixed policy (half) the probabilities are rounded where they
 * multiply v or dout, and dp before its dropout multiplier; with half_scores the scores and the
 * soft cap's steps too (att_score_fin), and the scores' gradient (att_ds_raw). Private to
 * kernels/: each includer
 * defines MW_ATT_HD (static inline, or __device__ static inline), MW_ATT_HASH (mw_rng_hash, or
 * its device copy) and MW_ATT_ROUND16(half, x) (kernels/cast.h's rounding of x to bfloat16,
 * half 1, or float16, half 2, or its device copy). */
#ifndef MW_KERNELS_ATTENTION_RULES_H
#define MW_KERNELS_ATTENTION_RULES_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* The value Keras' Softmax(mask) puts in place of a masked score (_large_negative_number,
 * float32). */
#define MW_ATT_MASKED (-1e9f)

/* The key and value heads (mw_attn_kvh), and the query heads of each (its group). */
MW_ATT_HD int att_kvh(const mw_attn_geom *g)
{
    return g->kv_heads > 0 ? g->kv_heads : g->H;
}
MW_ATT_HD int att_group(const mw_attn_geom *g)
{
    return g->H / att_kvh(g);
}

/* Row (i, h, t) of p (n, H, T, S); q's and o's rows of (i, position, query head h); kk's and
 * v's of (i, position, key head j). */
MW_ATT_HD size_t att_prow(const mw_attn_geom *g, int i, int h, int t)
{
    return (((size_t)i * g->H + h) * g->T + t) * g->S;
}
MW_ATT_HD size_t att_qrow(const mw_attn_geom *g, int i, int h, int t, int w)
{
    return (((size_t)i * g->T + t) * g->H + h) * w;
}
MW_ATT_HD size_t att_krow(const mw_attn_geom *g, int i, int j, int u, int w)
{
    return (((size_t)i * g->S + u) * att_kvh(g) + j) * w;
}
/* The row of kk or v that query head h reads at key position u. */
MW_ATT_HD size_t att_hrow(const mw_attn_geom *g, int i, int h, int u, int w)
{
    return att_krow(g, i, h / att_group(g), u, w);
}

/* 1 when (t, u) of example i is masked. */
MW_ATT_HD int att_masked(const mw_attn_geom *g, int i, int t, int u)
{
    return (g->causal && u > t) || (g->window > 0 && (t - u >= g->window || u - t >= g->window)) ||
           (g->qids && g->qids[(size_t)i * g->T + t] == 0.0f) ||
           (g->vids && g->vids[(size_t)i * g->S + u] == 0.0f);
}

/* tanh(s / c) of a raw score s under the soft cap c (Keras divides, then tanh). */
MW_ATT_HD float att_cap_tanh(const mw_attn_geom *g, float s)
{
    return tanhf(s / g->soft_cap);
}

/* x as the 16-bit tensor holds it under a mixed policy (g->half), else x. */
MW_ATT_HD float att_p16(const mw_attn_geom *g, float x)
{
    return g->half ? MW_ATT_ROUND16(g->half, x) : x;
}

/* The score the softmax reads, from the raw product s = (q scale) . kk: s itself, or
 * c tanh(s / c) under a soft cap; with half_scores each step rounded to 16 bits (s, s / c16,
 * its tanh, the product by c16; c16 the cap rounded), as KerasHub's einsum attention. */
MW_ATT_HD float att_score_fin(const mw_attn_geom *g, float s)
{
    if (!g->half_scores)
        return g->soft_cap > 0.0f ? att_cap_tanh(g, s) * g->soft_cap : s;
    s = att_p16(g, s);
    if (!(g->soft_cap > 0.0f))
        return s;
    const float c = att_p16(g, g->soft_cap);
    return att_p16(g, att_p16(g, tanhf(att_p16(g, s / c))) * c);
}

/* The raw score of row (i, h, t) at key u: (q scale) . kk, summed in order. */
MW_ATT_HD float att_raw(const float *q, const float *kk, const mw_attn_geom *g, int i, int h, int t,
                        int u)
{
    const float *qr = q + att_qrow(g, i, h, t, g->dk), *kr = kk + att_hrow(g, i, h, u, g->dk);
    float s = 0.0f;
    for (int d = 0; d < g->dk; d++)
        s += (qr[d] * g->scale) * kr[d];
    return s;
}

/* The score of row (i, h, t) at key u (att_score_fin of the raw one). */
MW_ATT_HD float att_score(const float *q, const float *kk, const mw_attn_geom *g, int i, int h,
                          int t, int u)
{
    return att_score_fin(g, att_raw(q, kk, g, i, h, t, u));
}

/* The derivative of the capped score by the raw one, 1 - tanh(s / c)^2, from the capped score
 * sc = c tanh(s / c); 1 without a cap. */
MW_ATT_HD float att_cap_grad(const mw_attn_geom *g, float sc)
{
    if (!(g->soft_cap > 0.0f))
        return 1.0f;
    const float y = sc / g->soft_cap;
    return 1.0f - y * y;
}

/* The gradient by the raw score s of a score whose gradient is ds (the softmax's backward):
 * ds itself, or ds att_cap_grad(c tanh(s / c)) under a soft cap; with half_scores ds rounded to
 * 16 bits (the float32 softmax's input was a 16-bit tensor), then under a soft cap the
 * transposes of JAX's gradients of the forward's steps, each product and sum rounded: by
 * the product b c16, gb = ds c16; by tanh's b = tanh(a), (g + g b)(1 - b) transposed:
 * w = gb (1 - b), then w + w b; by the division a = s / c16, that over c16. */
MW_ATT_HD float att_ds_raw(const mw_attn_geom *g, float ds, float s)
{
    if (!g->half_scores)
        return g->soft_cap > 0.0f ? ds * att_cap_grad(g, att_cap_tanh(g, s) * g->soft_cap) : ds;
    ds = att_p16(g, ds);
    if (!(g->soft_cap > 0.0f))
        return ds;
    const float c = att_p16(g, g->soft_cap);
    const float b = att_p16(g, tanhf(att_p16(g, att_p16(g, s) / c)));
    const float w = att_p16(g, att_p16(g, ds * c) * att_p16(g, 1.0f - b));
    return att_p16(g, att_p16(g, w + att_p16(g, w * b)) / c);
}

/* The dropout multiplier of p[i, h, t, u]: 1 without dropout. */
MW_ATT_HD float att_drop(const mw_attn_geom *g, int i, int h, int t, int u)
{
    if (!(g->rate > 0.0f))
        return 1.0f;
    const uint64_t id = g->ids ? g->ids[i] : (uint32_t)i;
    const uint64_t e = ((uint64_t)h * g->T + t) * g->S + u;
    const uint32_t x =
        (uint32_t)(MW_ATT_HASH(g->seed, g->stream, id * ((uint64_t)g->H * g->T * g->S) + e) >> 40);
    const uint32_t thr = (uint32_t)ceil((double)g->rate * 16777216.0); /* mw_dropout_threshold */
    return x >= thr ? 1.0f / (1.0f - g->rate) : 0.0f;
}

/* Below this, expf is 0 in float32 (its smallest subnormal is e^-103.28): a masked score
 * (-1e9 beside an unmasked one) takes the shortcut, not expf's slow underflow path. */
#define MW_ATT_EXP_ZERO (-110.0f)

/* Softmax in place over a row of S scores: exp(x - max) / sum, as jax.nn.softmax. */
MW_ATT_HD void att_softmax(float *pr, int S)
{
    float mx = pr[0];
    for (int u = 1; u < S; u++)
        mx = pr[u] > mx ? pr[u] : mx;
    float sum = 0.0f;
    for (int u = 0; u < S; u++) {
        const float z = pr[u] - mx;
        pr[u] = z < MW_ATT_EXP_ZERO ? 0.0f : expf(z);
        sum += pr[u];
    }
    for (int u = 0; u < S; u++)
        pr[u] = pr[u] / sum;
}

/* 1 when row (i, t) is masked everywhere (a padded query step's, or one that sees only padded
 * keys). */
MW_ATT_HD int att_row_empty(const mw_attn_geom *g, int i, int t)
{
    for (int u = 0; u < g->S; u++)
        if (!att_masked(g, i, t, u))
            return 0;
    return 1;
}

/* A row masked everywhere: 1 / S over every key with empty_uniform, else 0. */
MW_ATT_HD float att_empty_p(const mw_attn_geom *g)
{
    return g->empty_uniform ? 1.0f / (float)g->S : 0.0f;
}

/* Forward of row (i, h, t): p's row, and o's. A masked score is -1e9, so its probability is 0
 * beside an unmasked one (its exp underflows); a row masked everywhere is att_empty_p. */
MW_ATT_HD void att_row_fwd(float *o, float *p, const float *q, const float *kk, const float *v,
                           const mw_attn_geom *g, int i, int h, int t)
{
    float *pr = p + att_prow(g, i, h, t);
    int any = 0;
    for (int u = 0; u < g->S; u++) {
        const int m = att_masked(g, i, t, u);
        pr[u] = m ? MW_ATT_MASKED : att_score(q, kk, g, i, h, t, u);
        any |= !m;
    }
    if (any)
        att_softmax(pr, g->S);
    else
        for (int u = 0; u < g->S; u++)
            pr[u] = att_empty_p(g);
    float *orow = o + att_qrow(g, i, h, t, g->dv);
    for (int d = 0; d < g->dv; d++) {
        float a = 0.0f;
        for (int u = 0; u < g->S; u++)
            a += att_p16(g, pr[u]) * att_drop(g, i, h, t, u) * v[att_hrow(g, i, h, u, g->dv) + d];
        orow[d] = a;
    }
}

/* dv's row (i, u, j) += sum over the query heads h of key head j's group and over t of
 * p[h, t, u] drop dout[t, h] (one query head per group: the sum over t alone). */
MW_ATT_HD void att_col_dv(float *dv, const float *p, const float *dout, const mw_attn_geom *g,
                          int i, int j, int u)
{
    float *r = dv + att_krow(g, i, j, u, g->dv);
    const int h0 = j * att_group(g), h1 = h0 + att_group(g);
    for (int d = 0; d < g->dv; d++) {
        float a = 0.0f;
        for (int h = h0; h < h1; h++)
            for (int t = 0; t < g->T; t++)
                a += att_p16(g, p[att_prow(g, i, h, t) + u]) * att_drop(g, i, h, t, u) *
                     dout[att_qrow(g, i, h, t, g->dv) + d];
        r[d] += a;
    }
}

/* dp[u] of row (i, h, t): dout . v[u] (a 16-bit tensor's gradient under a mixed policy),
 * times the dropout multiplier. */
MW_ATT_HD float att_dp(const float *dout, const float *v, const mw_attn_geom *g, int i, int h,
                       int t, int u)
{
    const float *dr = dout + att_qrow(g, i, h, t, g->dv), *vr = v + att_hrow(g, i, h, u, g->dv);
    float a = 0.0f;
    for (int d = 0; d < g->dv; d++)
        a += dr[d] * vr[d];
    return att_p16(g, a) * att_drop(g, i, h, t, u);
}

/* Row (i, h, t) of p becomes the scores' gradient p (dp - sum p dp), then the raw scores'
 * (att_ds_raw: under a soft cap of the recomputed score; 0 where p is); 0 for a row masked
 * everywhere
 * (its probabilities do not depend on the scores). */
MW_ATT_HD void att_row_ds(float *p, const float *dout, const float *q, const float *kk,
                          const float *v, const mw_attn_geom *g, int i, int h, int t)
{
    float *pr = p + att_prow(g, i, h, t);
    if (att_row_empty(g, i, t)) {
        for (int u = 0; u < g->S; u++)
            pr[u] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (int u = 0; u < g->S; u++)
        sum += pr[u] * att_dp(dout, v, g, i, h, t, u);
    for (int u = 0; u < g->S; u++)
        pr[u] = pr[u] * (att_dp(dout, v, g, i, h, t, u) - sum);
    if (g->soft_cap > 0.0f)
        for (int u = 0; u < g->S; u++)
            pr[u] = att_ds_raw(g, pr[u], att_raw(q, kk, g, i, h, t, u));
    else if (g->half_scores)
        for (int u = 0; u < g->S; u++)
            pr[u] = att_ds_raw(g, pr[u], 0.0f);
}

/* dq's row (i, t, h) += scale sum over u of ds[t, u] kk[u]. */
MW_ATT_HD void att_row_dq(float *dq, const float *ds, const float *kk, const mw_attn_geom *g, int i,
                          int h, int t)
{
    const float *sr = ds + att_prow(g, i, h, t);
    float *r = dq + att_qrow(g, i, h, t, g->dk);
    for (int d = 0; d < g->dk; d++) {
        float a = 0.0f;
        for (int u = 0; u < g->S; u++)
            a += sr[u] * kk[att_hrow(g, i, h, u, g->dk) + d];
        r[d] += a * g->scale;
    }
}

/* dk's row (i, u, j) += sum over the query heads h of key head j's group and over t of
 * ds[h, t, u] (q[t, h] scale). */
MW_ATT_HD void att_col_dk(float *dk, const float *ds, const float *q, const mw_attn_geom *g, int i,
                          int j, int u)
{
    float *r = dk + att_krow(g, i, j, u, g->dk);
    const int h0 = j * att_group(g), h1 = h0 + att_group(g);
    for (int d = 0; d < g->dk; d++) {
        float a = 0.0f;
        for (int h = h0; h < h1; h++)
            for (int t = 0; t < g->T; t++)
                a += ds[att_prow(g, i, h, t) + u] * (q[att_qrow(g, i, h, t, g->dk) + d] * g->scale);
        r[d] += a;
    }
}

#endif
