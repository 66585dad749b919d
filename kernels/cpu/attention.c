/* MultiHeadAttention's core, the fast CPU twin (kernels/kernel_list.h: attn_fwd, attn_bwd): for
 * each example and head, the scores Q K^T, the products P V and the backward's four products are
 * sgemm calls on strided views of the projections (a head's rows are H dk apart), the masked
 * softmax and the scores' gradient the reference's rules (kernels/attention_rules.h), both
 * vectorized loops (kernels/cpu/vexp.h: an exp within 2 ulp of expf's, a product by the sum's
 * reciprocal; the gradient's row sum in lanes: within float32 rounding of the reference's row;
 * compiled for the machine's widest vectors, MW_WIDE_CLONES).
 * Under the causal mask a head's rows go in blocks that multiply only the keys they can see
 * (half the products of a full T x S), and a row's softmax runs over its visible keys only (the
 * others are written 0). Examples x heads are spread over k's threads, each taking the next
 * head when done (a head's results do not depend on the thread: a core shared with other work
 * leaves no thread idle at the end), each with one T x S matrix of k's scratch
 * (MW_ATTN_WS_SLOTS of them at most); without room for one, the reference runs. The backward
 * spreads examples x key heads: a grouped-query key head's dk and dv sum its query heads' terms,
 * one head after another. */
#include "kernels/cpu/gemm.h"
#include "kernels/twins.h"

#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "common/rng.h"
#include "kernels/cast.h"
#include "kernels/cpu/cpu.h"

#define MW_ATT_HD static inline
#define MW_ATT_HASH mw_rng_hash
#define MW_ATT_ROUND16(half, x) ((half) == 1 ? mw_bf16_round(x) : mw_f16_round(x))
#include "kernels/attention_rules.h"

/* The softmax's loops vectorize only where GCC may evaluate a comparison's select without
 * regard to floating-point traps (nothing here enables them). */
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#include "kernels/cpu/vexp.h" /* inside: its functions inline only into code of its options */

/* Row (i, t) of a head's scores: the masks added as the reference adds them, then the
 * softmax over the keys the row can see ([0, t] under the causal mask, within the window); the
 * keys outside them are masked, their exp 0 beside any open score, so they are written 0
 * without their exp (the sum gains only zeros). 1 when the row is masked everywhere
 * (att_empty_p). */
MW_WIDE_CLONES static int softmax_row(float *pr, const mw_attn_geom *g, int i, int t)
{
    const int S = g->S, W = g->window;
    const int qm = g->qids && g->qids[(size_t)i * g->T + t] == 0.0f;
    const float *vids = g->vids ? g->vids + (size_t)i * S : NULL;
    int lim = qm ? -1 : g->causal ? t : S - 1; /* the last step no rule but vids masks */
    int lo = 0;                                /* the first */
    if (W > 0) {
        lo = t - W + 1 > 0 ? t - W + 1 : 0;
        lim = lim < t + W - 1 ? lim : t + W - 1;
    }
    int open = lim >= lo ? lim - lo + 1 : 0; /* the unmasked scores */
    if (vids) {
        open = 0;
#pragma omp simd reduction(+ : open)
        for (int u = lo; u <= lim; u++) {
            const int m = vids[u] == 0.0f;
            pr[u] = m ? MW_ATT_MASKED : pr[u];
            open += !m;
        }
    }
    if (open == 0) { /* masked everywhere: as the reference */
        for (int u = 0; u < S; u++)
            pr[u] = att_empty_p(g);
        return 1;
    }
    const int c = lim + 1;
    float mx = pr[lo], sum = 0.0f;
#pragma omp simd reduction(max : mx)
    for (int u = lo + 1; u < c; u++)
        mx = pr[u] > mx ? pr[u] : mx;
#pragma omp simd reduction(+ : sum)
    for (int u = lo; u < c; u++) {
        pr[u] = mw_exp_neg(pr[u] - mx);
        sum += pr[u];
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int u = lo; u < c; u++)
        pr[u] *= inv;
    if (lo > 0)
        memset(pr, 0, (size_t)lo * sizeof *pr);
    if (c < S)
        memset(pr + c, 0, (size_t)(S - c) * sizeof *pr);
    return 0;
}

/* Row t of a head's backward without dropout: pr (the probabilities, 0 past c) becomes the
 * scores' gradient pr (dp - sum pr dp), dp = wr. */
MW_WIDE_CLONES static void ds_row(float *restrict pr, const float *restrict wr, int c)
{
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int u = 0; u < c; u++)
        sum += pr[u] * wr[u];
#pragma omp simd
    for (int u = 0; u < c; u++)
        pr[u] = pr[u] * (wr[u] - sum);
}

#pragma GCC pop_options

/* Rows [0, m) of the raw scores (columns [0, cols), rows S apart) become those the softmax
 * reads (att_score_fin: the reference's expression, under a soft cap or half_scores). */
static void fin_rows(float *s, int m, int cols, const mw_attn_geom *g)
{
    for (int t = 0; t < m; t++)
        for (int u = 0; u < cols; u++) {
            float *x = s + (size_t)t * g->S + u;
            *x = att_score_fin(g, *x);
        }
}

/* 1 when the raw scores need att_score_fin (a soft cap, or 16-bit scores). */
static int fin_needed(const mw_attn_geom *g)
{
    return g->soft_cap > 0.0f || g->half_scores;
}

/* Threads with a T x S matrix each. */
static int slots(const mw_kctx *k, const mw_attn_geom *g)
{
    const size_t ts = (size_t)g->T * g->S;
    size_t s = k->ws && ts ? k->ws_count / ts : 0;
    s = s < (size_t)MW_NT(k) ? s : (size_t)MW_NT(k);
    return (int)(s < MW_ATTN_WS_SLOTS ? s : MW_ATTN_WS_SLOTS);
}

/* Rows of a causal head go in blocks of this many: block [t0, t1) reads keys [0, t1) only, the
 * rest of its rows being masked (p 0), so the products skip the upper triangle. */
#define ATT_BLOCK 32

/* The keys rows [t0, t1) can see: all S, or [0, min(S, t1)) under the causal mask. */
static int cols_of(const mw_attn_geom *g, int t1)
{
    return g->causal && t1 < g->S ? t1 : g->S;
}

/* 1 when one of rows [t0, t1) of example i is masked everywhere and reads every key
 * (empty_uniform): its block then multiplies all S columns. */
static int block_empty(const mw_attn_geom *g, int i, int t0, int t1)
{
    for (int t = t0; g->empty_uniform && t < t1; t++)
        if (att_row_empty(g, i, t))
            return 1;
    return 0;
}

/* w = p (16-bit under a mixed policy) times the dropout multipliers on rows [t0, t1), columns
 * [0, c), for head (i, h): the probabilities that multiply v. */
static void dropped(float *w, const float *p, const mw_attn_geom *g, int i, int h, int t0, int t1,
                    int c)
{
    for (int t = t0; t < t1; t++)
        for (int u = 0; u < c; u++)
            w[(size_t)t * g->S + u] = att_p16(g, p[(size_t)t * g->S + u]) * att_drop(g, i, h, t, u);
}

void mw_attn_fwd_cpu(const mw_kctx *k, float *o, float *p, const float *q, const float *kk,
                     const float *v, const mw_attn_geom *g, int n)
{
    const int nt = slots(k, g);
    if (nt < 1) {
        mw_attn_fwd_ref(k, o, p, q, kk, v, g, n);
        return;
    }
    const int T = g->T, S = g->S, H = g->H, dk = g->dk, dv = g->dv, KH = att_kvh(g);
    const int blk = g->causal ? ATT_BLOCK : T;
    const long pairs = (long)n * H;
#pragma omp parallel for num_threads(nt) schedule(dynamic)
    for (long ih = 0; ih < pairs; ih++) {
        const int i = (int)(ih / H), h = (int)(ih % H);
        float *w = k->ws + (size_t)omp_get_thread_num() * T * S;
        float *P = p + att_prow(g, i, h, 0);
        for (int t0 = 0; t0 < T; t0 += blk) {
            const int t1 = t0 + blk < T ? t0 + blk : T, m = t1 - t0, c = cols_of(g, t1);
            float *Pb = P + (size_t)t0 * S;
            /* scores of the visible keys; softmax_row masks the columns past them */
            mw_sgemm_cpu('N', 'T', m, c, dk, g->scale, q + att_qrow(g, i, h, t0, dk), H * dk,
                         kk + att_hrow(g, i, h, 0, dk), KH * dk, 0.0f, Pb, S);
            if (fin_needed(g))
                fin_rows(Pb, m, c, g);
            int empty = 0;
            for (int t = t0; t < t1; t++)
                empty |= softmax_row(P + (size_t)t * S, g, i, t);
            const int cv = empty && g->empty_uniform ? S : c; /* a uniform row reads every key */
            const float *W = Pb;
            if (!mw_attn_p_as_is(g))
                dropped(w, P, g, i, h, t0, t1, cv), W = w + (size_t)t0 * S;
            mw_sgemm_cpu('N', 'N', m, dv, cv, 1.0f, W, S, v + att_hrow(g, i, h, 0, dv), KH * dv,
                         0.0f, o + att_qrow(g, i, h, t0, dv), H * dv);
        }
    }
}

/* Rows [t0, t0 + m) of head (i, h)'s scores' gradient ds (columns [0, c)) become the raw
 * scores' (att_ds_raw); under a soft cap the raw scores recomputed into w as the forward
 * computed them. */
static void ds_raw(float *w, float *ds, int m, int c, const float *q, const float *kk,
                   const mw_attn_geom *g, int i, int h, int t0)
{
    const int S = g->S, H = g->H, dk = g->dk, KH = att_kvh(g), cap = g->soft_cap > 0.0f;
    if (cap)
        mw_sgemm_cpu('N', 'T', m, c, dk, g->scale, q + att_qrow(g, i, h, t0, dk), H * dk,
                     kk + att_hrow(g, i, h, 0, dk), KH * dk, 0.0f, w, S);
    for (int t = 0; t < m; t++)
        for (int u = 0; u < c; u++) {
            float *x = ds + (size_t)t * S + u;
            *x = att_ds_raw(g, *x, cap ? w[(size_t)t * S + u] : 0.0f);
        }
}

/* Head (i, h)'s backward on thread scratch w: its rows of dq, and its terms of its key head's
 * dk and dv (added after the group's earlier heads'). */
static void bwd_head(float *w, float *dq, float *dk, float *dv, float *p, const float *dout,
                     const float *q, const float *kk, const float *v, const mw_attn_geom *g, int i,
                     int h)
{
    const int T = g->T, S = g->S, H = g->H, dK = g->dk, dV = g->dv, KH = att_kvh(g);
    const int blk = g->causal ? ATT_BLOCK : T;
    float *P = p + att_prow(g, i, h, 0);
    const float *V = v + att_hrow(g, i, h, 0, dV);
    for (int t0 = 0; t0 < T; t0 += blk) {
        const int t1 = t0 + blk < T ? t0 + blk : T, m = t1 - t0;
        const int c = block_empty(g, i, t0, t1) ? S : cols_of(g, t1);
        float *Pb = P + (size_t)t0 * S, *wb = w + (size_t)t0 * S;
        const float *dO = dout + att_qrow(g, i, h, t0, dV);
        const float *W = Pb;
        if (!mw_attn_p_as_is(g))
            dropped(w, P, g, i, h, t0, t1, c), W = wb;
        /* dV[0, c) += (P drop)^T dO; then w = dP = (dO V^T) drop */
        mw_sgemm_cpu('T', 'N', c, dV, m, 1.0f, W, S, dO, H * dV, 1.0f,
                     dv + att_hrow(g, i, h, 0, dV), KH * dV);
        mw_sgemm_cpu('N', 'T', m, c, dV, 1.0f, dO, H * dV, V, KH * dV, 0.0f, wb, S);
        for (int t = 0; t < m && g->half; t++) /* a 16-bit tensor's gradient */
            for (int u = 0; u < c; u++)
                wb[(size_t)t * S + u] = att_p16(g, wb[(size_t)t * S + u]);
        for (int t = t0; t < t1; t++) { /* p is 0 past c: so is ds */
            float *pr = P + (size_t)t * S, *wr = w + (size_t)t * S, sum = 0.0f;
            if (att_row_empty(g, i, t)) { /* no score moves it */
                memset(pr, 0, (size_t)S * sizeof *pr);
                continue;
            }
            if (!(g->rate > 0.0f)) {
                ds_row(pr, wr, c);
                continue;
            }
            for (int u = 0; u < c; u++) {
                wr[u] *= att_drop(g, i, h, t, u);
                sum += pr[u] * wr[u];
            }
            for (int u = 0; u < c; u++)
                pr[u] = pr[u] * (wr[u] - sum);
        }
        if (fin_needed(g))
            ds_raw(wb, Pb, m, c, q, kk, g, i, h, t0);
        mw_sgemm_cpu('N', 'N', m, dK, c, g->scale, Pb, S, kk + att_hrow(g, i, h, 0, dK), KH * dK,
                     1.0f, dq + att_qrow(g, i, h, t0, dK), H * dK);
        mw_sgemm_cpu('T', 'N', c, dK, m, g->scale, Pb, S, q + att_qrow(g, i, h, t0, dK), H * dK,
                     1.0f, dk + att_hrow(g, i, h, 0, dK), KH * dK);
    }
}

void mw_attn_bwd_cpu(const mw_kctx *k, float *dq, float *dk, float *dv, float *p, const float *dout,
                     const float *q, const float *kk, const float *v, const mw_attn_geom *g, int n)
{
    const int nt = slots(k, g);
    if (nt < 1) {
        mw_attn_bwd_ref(k, dq, dk, dv, p, dout, q, kk, v, g, n);
        return;
    }
    /* a key head's dk and dv sum over its group: one thread takes the group's heads in turn */
    const int KH = att_kvh(g), grp = att_group(g);
    const long pairs = (long)n * KH;
#pragma omp parallel for num_threads(nt) schedule(dynamic)
    for (long ij = 0; ij < pairs; ij++) {
        float *w = k->ws + (size_t)omp_get_thread_num() * g->T * g->S;
        const int i = (int)(ij / KH), j = (int)(ij % KH);
        for (int h = j * grp; h < (j + 1) * grp; h++)
            bwd_head(w, dq, dk, dv, p, dout, q, kk, v, g, i, h);
    }
}
