/* MultiHeadAttention's core, the CUDA twin (kernels/kernel_list.h: attn_fwd, attn_bwd), the fast
 * CPU twin's design on the device: the scores Q K^T, the products P V and the backward's four
 * products (dV += P^T dO, dP = dO V^T, dQ += scale dS K, dK += scale dS^T Q) are cuBLAS
 * strided-batched GEMMs (float32, or TF32 tensor cores under --tf32: the handle's math mode),
 * one call per head over a chunk of examples (a head's rows are H dk apart, an example's heads
 * T H dk: the batch stride); the masked softmax and the scores' gradient are warp-per-row
 * kernels on the reference's per-element rules (kernels/attention_rules.h), which visit only a
 * row's visible keys [lo, hi] (the causal mask's, the window's; the others are written 0).
 * Under the causal mask a head's rows go in blocks that multiply only the keys they can see, unless
 * a row may be masked everywhere and read every key (empty_uniform with a padding mask: the masks
 * are device memory, the host cannot tell). The T x S matrices the GEMMs write besides p (the
 * dropped probabilities, dP, the backward's recomputed scores) go in k's device scratch, one per
 * example of a chunk; the backward needs room for one at least (the GPU replicas reserve
 * MW_ATTN_WS_SLOTS), else it records an error on the context. Grouped-query attention: query head h
 * reads key head h / (H / kv_heads); heads run in order, each adding its terms to its key head's dk
 * and dv (beta 1): the same sums in the same order on every run, no atomics. The geometry goes by
 * value; its masks and ids are device memory. */
#include "kernels/cuda/cast.cuh"
#include "kernels/cuda/gemm.cuh"
#include "kernels/cuda/runtime.cuh"

extern "C" {
#include "kernels/twins.h"
}
#define MW_ATT_HD __device__ static inline
#define MW_ATT_HASH mw_cuda_rng_hash
#define MW_ATT_ROUND16(half, x) ((half) == 1 ? mw_cuda_bf16_round(x) : mw_cuda_f16_round(x))
#include "kernels/attention_rules.h"

#define ATT_FULL 0xffffffffu

/* A row kernel's first step: the step's dropout seed from the context's device word where the
 * wrapper was given it (runtime.cuh: mw_cuda_seed_at), so a CUDA graph draws each step's masks. */
#define ATT_SEED(g, seed_at)                                                                       \
    do {                                                                                           \
        if (seed_at)                                                                               \
            (g).seed = *(seed_at);                                                                 \
    } while (0)

/* Under the causal mask a head's rows go in blocks (block [t0, t1) reads keys [0, t1) only) of
 * a multiple of ATT_BLOCK rows, about ATT_BLOCKS of them: the GEMMs then compute
 * (ATT_BLOCKS + 1) / (2 ATT_BLOCKS) of the full products, in few calls. */
#define ATT_BLOCK 64
#define ATT_BLOCKS 8

/* Row r of a chunk (examples i0.., head h): its example and position, its visible keys
 * [lo, hi] (every key outside them is masked: the query's padding, the causal mask, the
 * window; hi < lo when none is visible), its row of p and of the scratch (rows T S apart per
 * example: row r). */
struct att_row {
    int i, t, lo, hi;
    float *pr, *wr;
};

__device__ static att_row row_of(const mw_attn_geom &g, float *p, float *w, int h, int i0, size_t r)
{
    att_row R;
    R.i = i0 + (int)(r / g.T), R.t = (int)(r % g.T);
    R.pr = p + att_prow(&g, R.i, h, R.t);
    R.wr = w ? w + r * g.S : NULL;
    const int t = R.t;
    R.hi = g.qids && g.qids[(size_t)R.i * g.T + t] == 0.0f ? -1
           : g.causal && t < g.S - 1                       ? t
                                                           : g.S - 1;
    R.lo = 0;
    if (g.window > 0) {
        R.lo = t - g.window + 1 > 0 ? t - g.window + 1 : 0;
        R.hi = R.hi < t + g.window - 1 ? R.hi : t + g.window - 1;
    }
    return R;
}

__device__ static float warp_max(float x)
{
    for (int o = 16; o > 0; o >>= 1)
        x = fmaxf(x, __shfl_xor_sync(ATT_FULL, x, o));
    return x;
}

__device__ static float warp_sum(float x)
{
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(ATT_FULL, x, o);
    return x;
}

/* One warp per row of rows, lane its lane (the warp's trip count is the same for its lanes). */
#define ATT_ROWS(r, rows)                                                                          \
    const int lane = threadIdx.x % 32;                                                             \
    for (size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32; r < (rows);              \
         r += (size_t)gridDim.x * blockDim.x / 32)
/* The keys u of [lo, hi] this lane visits. */
#define ATT_VISIBLE(u, R) for (int u = (R).lo + lane; u <= (R).hi; u += 32)

/* Row r's scores (from the GEMM, columns [lo, hi]) become its probabilities: soft-capped and
 * in 16 bits with half_scores (att_score_fin), masked (att_masked: -1e9), softmax as att_softmax
 * (exp(z) 0 below MW_ATT_EXP_ZERO), 0 outside [lo, hi]; a row masked everywhere att_empty_p. w (not
 * NULL): the probabilities that multiply v, 16-bit under a mixed policy (att_p16), times the
 * dropout multipliers (att_drop, computed where p is not 0). */
static __global__ void softmax_kernel(float *p, float *w, mw_attn_geom g, const uint64_t *seed_at,
                                      int h, int i0, size_t rows)
{
    ATT_SEED(g, seed_at);
    ATT_ROWS(r, rows)
    {
        const att_row R = row_of(g, p, w, h, i0, r);
        float mx = -INFINITY;
        int open = 0;
        ATT_VISIBLE(u, R)
        {
            const int m = att_masked(&g, R.i, R.t, u);
            const float s = att_score_fin(&g, R.pr[u]);
            R.pr[u] = m ? MW_ATT_MASKED : s;
            mx = m ? mx : fmaxf(mx, s);
            open |= !m;
        }
        const int any = __any_sync(ATT_FULL, open);
        float sum = 0.0f;
        if (any) {
            mx = warp_max(mx);
            ATT_VISIBLE(u, R)
            {
                const float z = R.pr[u] - mx;
                R.pr[u] = z < MW_ATT_EXP_ZERO ? 0.0f : expf(z);
                sum += R.pr[u];
            }
            sum = warp_sum(sum);
        }
        for (int u = lane; u < g.S; u += 32) {
            const float x = !any ? att_empty_p(&g) : u >= R.lo && u <= R.hi ? R.pr[u] / sum : 0.0f;
            R.pr[u] = x;
            if (R.wr)
                R.wr[u] = x != 0.0f ? att_p16(&g, x) * att_drop(&g, R.i, h, R.t, u) : 0.0f;
        }
    }
}

/* The backward's probabilities that multiply dO: w = att_p16(p) att_drop over whole rows. */
static __global__ void dropped_kernel(float *w, const float *p, mw_attn_geom g,
                                      const uint64_t *seed_at, int h, int i0, size_t rows)
{
    ATT_SEED(g, seed_at);
    ATT_ROWS(r, rows)
    {
        const att_row R = row_of(g, (float *)p, w, h, i0, r);
        for (int u = lane; u < g.S; u += 32) {
            const float x = R.pr[u];
            R.wr[u] = x != 0.0f ? att_p16(&g, x) * att_drop(&g, R.i, h, R.t, u) : 0.0f;
        }
    }
}

/* Row r of p becomes the scores' gradient p (dp - sum p dp), dp = w (dO V^T, 16-bit under a
 * mixed policy) times the dropout multiplier (written back to w); outside [lo, hi] p is 0 and stays
 * so. A row masked everywhere becomes 0 (as att_row_ds). */
static __global__ void ds_kernel(float *p, float *w, mw_attn_geom g, const uint64_t *seed_at, int h,
                                 int i0, size_t rows)
{
    ATT_SEED(g, seed_at);
    ATT_ROWS(r, rows)
    {
        const att_row R = row_of(g, p, w, h, i0, r);
        int open = 0;
        float sum = 0.0f;
        ATT_VISIBLE(u, R)
        {
            open |= !att_masked(&g, R.i, R.t, u);
            const float dp = att_p16(&g, R.wr[u]) * att_drop(&g, R.i, h, R.t, u);
            R.wr[u] = dp;
            sum += R.pr[u] * dp;
        }
        if (!__any_sync(ATT_FULL, open)) {
            for (int u = lane; u < g.S; u += 32)
                R.pr[u] = 0.0f;
            continue;
        }
        sum = warp_sum(sum);
        ATT_VISIBLE(u, R)
        {
            R.pr[u] = R.pr[u] * (R.wr[u] - sum);
        }
    }
}

/* Row r of the scores' gradient becomes the raw scores' (att_ds_raw), under a soft cap from the
 * raw scores recomputed in w (NULL: none). */
static __global__ void ds_raw_kernel(float *p, const float *w, mw_attn_geom g,
                                     const uint64_t *seed_at, int h, int i0, size_t rows)
{
    ATT_SEED(g, seed_at);
    ATT_ROWS(r, rows)
    {
        const att_row R = row_of(g, p, (float *)w, h, i0, r);
        ATT_VISIBLE(u, R)
        {
            R.pr[u] = att_ds_raw(&g, R.pr[u], R.wr ? R.wr[u] : 0.0f);
        }
    }
}

/* Launch a row kernel over rows (one warp each) on d's stream; its status. */
#define ATT_LAUNCH(kernel, rows, ...)                                                              \
    do {                                                                                           \
        kernel<<<mw_cuda_grid((rows)*32), MW_CUDA_BLOCK, 0, d->stream>>>(__VA_ARGS__, rows);       \
        MW_TRY(mw_cuda_launched_(#kernel, __FILE__, __LINE__));                                    \
    } while (0)

/* Head h of examples [i0, i0 + nb): the offsets of its first rows in q (and dq), kk (dk), v (dv),
 * o (dout) and p, the strides between examples, the rows' strides. */
struct att_span {
    size_t q, k, v, o, p;
    long long sq, sk, sv, so, sp, sw;
    int lq, lk, lv, lo;
    int h, i0, nb;
    int blk; /* rows per block */
};

static att_span span_of(const mw_attn_geom *g, int h, int i0, int nb)
{
    const int T = g->T, S = g->S, H = g->H, KH = mw_attn_kvh(g), j = h / (H / KH);
    att_span a;
    a.q = ((size_t)i0 * T * H + h) * g->dk, a.lq = H * g->dk, a.sq = (long long)T * a.lq;
    a.o = ((size_t)i0 * T * H + h) * g->dv, a.lo = H * g->dv, a.so = (long long)T * a.lo;
    a.k = ((size_t)i0 * S * KH + j) * g->dk, a.lk = KH * g->dk, a.sk = (long long)S * a.lk;
    a.v = ((size_t)i0 * S * KH + j) * g->dv, a.lv = KH * g->dv, a.sv = (long long)S * a.lv;
    a.p = ((size_t)i0 * H + h) * T * S, a.sp = (long long)H * T * S, a.sw = (long long)T * S;
    a.h = h, a.i0 = i0, a.nb = nb;
    /* a row masked everywhere may read every key (empty_uniform): not blocked where a padding
     * mask can make one (a causal row alone always sees its own key) */
    const int blk = ((T + ATT_BLOCKS - 1) / ATT_BLOCKS + ATT_BLOCK - 1) / ATT_BLOCK * ATT_BLOCK;
    a.blk = g->causal && !(g->empty_uniform && (g->qids || g->vids)) ? blk : T;
    return a;
}

/* The keys the rows of the block ending at t1 can see: [0, c). */
static int cols_of(const mw_attn_geom *g, const att_span *a, int t1)
{
    return g->causal && a->blk < g->T && t1 < g->S ? t1 : g->S;
}

/* Each block's raw scores, scale Q K^T, into s (rows S apart, ss between examples). */
static mw_status scores(mw_cuda_dev *d, float *s, long long ss, const float *q, const float *kk,
                        const mw_attn_geom *g, const att_span *a)
{
    for (int t0 = 0; t0 < g->T; t0 += a->blk) {
        const int t1 = t0 + a->blk < g->T ? t0 + a->blk : g->T, c = cols_of(g, a, t1);
        MW_TRY(mw_cuda_gemm_rm_batched(d, false, true, t1 - t0, c, g->dk, g->scale,
                                       q + a->q + (size_t)t0 * a->lq, a->lq, a->sq, kk + a->k,
                                       a->lk, a->sk, 0.0f, s + (size_t)t0 * g->S, g->S, ss, a->nb));
    }
    return MW_OK;
}

static mw_status fwd_span(mw_cuda_dev *d, float *ws, float *o, float *p, const float *q,
                          const float *kk, const float *v, const mw_attn_geom *g, const att_span *a)
{
    const int T = g->T, S = g->S;
    const size_t rows = (size_t)a->nb * T;
    float *P = p + a->p, *w = mw_attn_p_as_is(g) ? NULL : ws;
    MW_TRY(scores(d, P, a->sp, q, kk, g, a));
    ATT_LAUNCH(softmax_kernel, rows, p, w, *g, mw_cuda_seed_at(d, g->seed), a->h, a->i0);
    const float *W = w ? w : P;
    const long long sW = w ? a->sw : a->sp;
    for (int t0 = 0; t0 < T; t0 += a->blk) {
        const int t1 = t0 + a->blk < T ? t0 + a->blk : T, c = cols_of(g, a, t1);
        MW_TRY(mw_cuda_gemm_rm_batched(d, false, false, t1 - t0, g->dv, c, 1.0f, W + (size_t)t0 * S,
                                       S, sW, v + a->v, a->lv, a->sv, 0.0f,
                                       o + a->o + (size_t)t0 * a->lo, a->lo, a->so, a->nb));
    }
    return MW_OK;
}

/* Examples per chunk: each needs one T x S matrix of k's scratch (need), all n otherwise. */
static int chunk_of(const mw_kctx *k, const mw_attn_geom *g, int n, int need)
{
    if (!need)
        return n;
    const size_t ts = (size_t)g->T * g->S, s = k->ws && ts ? k->ws_count / ts : 0;
    return s < (size_t)n ? (int)s : n;
}

static mw_status no_room(const mw_kctx *k, const mw_attn_geom *g, const char *op)
{
    return mw_err(MW_EINTERNAL,
                  "%s: the device scratch holds %zu floats, less than one %d x %d matrix of "
                  "attention scores (the GPU replicas reserve %d of them)",
                  op, k->ws ? k->ws_count : (size_t)0, g->T, g->S, MW_ATTN_WS_SLOTS);
}

extern "C" void mw_attn_fwd_cuda(const mw_kctx *k, float *o, float *p, const float *q,
                                 const float *kk, const float *v, const mw_attn_geom *g, int n)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_attn_fwd_cuda");
    if (!d || n <= 0 || g->T <= 0 || g->S <= 0)
        return;
    const int nb = chunk_of(k, g, n, !mw_attn_p_as_is(g));
    if (nb < 1) {
        mw_cuda_note(d, no_room(k, g, "mw_attn_fwd_cuda"));
        return;
    }
    for (int h = 0; h < g->H; h++)
        for (int i0 = 0; i0 < n; i0 += nb) {
            const att_span a = span_of(g, h, i0, n - i0 < nb ? n - i0 : nb);
            MW_TRY_K(d, fwd_span(d, k->ws, o, p, q, kk, v, g, &a));
        }
    mw_cuda_end(d, "mw_attn_fwd_cuda");
}

/* Head h of a chunk's backward: dv += (P drop)^T dO, ds over p, dq and dk += its products. */
static mw_status bwd_span(mw_cuda_dev *d, float *ws, float *dq, float *dk, float *dv, float *p,
                          const float *dout, const float *q, const float *kk, const float *v,
                          const mw_attn_geom *g, const att_span *a)
{
    const int T = g->T, S = g->S;
    const size_t rows = (size_t)a->nb * T;
    float *P = p + a->p;
    const int own = !mw_attn_p_as_is(g); /* the probabilities that multiply dO, in ws */
    if (own)
        ATT_LAUNCH(dropped_kernel, rows, ws, p, *g, mw_cuda_seed_at(d, g->seed), a->h, a->i0);
    const float *W = own ? ws : P;
    const long long sW = own ? a->sw : a->sp;
    for (int t0 = 0; t0 < T; t0 += a->blk) { /* a block's dP overwrites only its rows of w */
        const int t1 = t0 + a->blk < T ? t0 + a->blk : T, m = t1 - t0, c = cols_of(g, a, t1);
        const float *dO = dout + a->o + (size_t)t0 * a->lo;
        MW_TRY(mw_cuda_gemm_rm_batched(d, true, false, c, g->dv, m, 1.0f, W + (size_t)t0 * S, S, sW,
                                       dO, a->lo, a->so, 1.0f, dv + a->v, a->lv, a->sv, a->nb));
        MW_TRY(mw_cuda_gemm_rm_batched(d, false, true, m, c, g->dv, 1.0f, dO, a->lo, a->so,
                                       v + a->v, a->lv, a->sv, 0.0f, ws + (size_t)t0 * S, S, a->sw,
                                       a->nb));
    }
    ATT_LAUNCH(ds_kernel, rows, p, ws, *g, mw_cuda_seed_at(d, g->seed), a->h, a->i0);
    if (g->soft_cap > 0.0f) {
        MW_TRY(scores(d, ws, a->sw, q, kk, g, a));
        ATT_LAUNCH(ds_raw_kernel, rows, p, ws, *g, mw_cuda_seed_at(d, g->seed), a->h, a->i0);
    } else if (g->half_scores) {
        ATT_LAUNCH(ds_raw_kernel, rows, p, (const float *)NULL, *g, mw_cuda_seed_at(d, g->seed),
                   a->h, a->i0);
    }
    for (int t0 = 0; t0 < T; t0 += a->blk) {
        const int t1 = t0 + a->blk < T ? t0 + a->blk : T, m = t1 - t0, c = cols_of(g, a, t1);
        const float *dS = P + (size_t)t0 * S, *Q = q + a->q + (size_t)t0 * a->lq;
        MW_TRY(mw_cuda_gemm_rm_batched(d, false, false, m, g->dk, c, g->scale, dS, S, a->sp,
                                       kk + a->k, a->lk, a->sk, 1.0f,
                                       dq + a->q + (size_t)t0 * a->lq, a->lq, a->sq, a->nb));
        MW_TRY(mw_cuda_gemm_rm_batched(d, true, false, c, g->dk, m, g->scale, dS, S, a->sp, Q,
                                       a->lq, a->sq, 1.0f, dk + a->k, a->lk, a->sk, a->nb));
    }
    return MW_OK;
}

extern "C" void mw_attn_bwd_cuda(const mw_kctx *k, float *dq, float *dk, float *dv, float *p,
                                 const float *dout, const float *q, const float *kk, const float *v,
                                 const mw_attn_geom *g, int n)
{
    mw_cuda_dev *d = mw_cuda_begin(k, "mw_attn_bwd_cuda");
    if (!d || n <= 0 || g->T <= 0 || g->S <= 0)
        return;
    const int nb = chunk_of(k, g, n, 1);
    if (nb < 1) {
        mw_cuda_note(d, no_room(k, g, "mw_attn_bwd_cuda"));
        return;
    }
    /* heads in order: a key head's dk and dv gain its group's terms one query head after
     * another, block after block */
    for (int h = 0; h < g->H; h++)
        for (int i0 = 0; i0 < n; i0 += nb) {
            const att_span a = span_of(g, h, i0, n - i0 < nb ? n - i0 : nb);
            MW_TRY_K(d, bwd_span(d, k->ws, dq, dk, dv, p, dout, q, kk, v, g, &a));
        }
    mw_cuda_end(d, "mw_attn_bwd_cuda");
}
