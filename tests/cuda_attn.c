/* The `cuda` suite's attention cases (run by tests/test_cuda.c's main; they skip, the reason
 * printed, without a device): MultiHeadAttention's core, the CUDA twin against the reference,
 * in float32 and under each mixed policy's 16-bit probabilities, and 16-bit scores. */
#include <math.h>

#include "kernels/cuda/runtime.h"
#include "kernels/twins.h"
#include "tests/kernel_check.h"
#include "tests/test_cuda.h"
#include "tests/util.h"

/* MultiHeadAttention's core (attn_fwd, attn_bwd) on geometry g (host masks and ids) of n
 * examples against the reference. The twin sums its products in cuBLAS' order, the reference
 * in its own: a float32 dot of K terms differs by a few ulps (6e-8) times sqrt(K) of the terms'
 * magnitudes; here K is dk <= 16 (|scores| <= 9), a row's <= 200 keys (|p v| summed <= 1) or a
 * key head's <= 2 x 200 query rows (the gradients, which add onto starting values in [-1, 1]):
 * 1e-5 of the value or 1e-5 absolute for the probabilities and outputs (sqrt 200 x 6e-8 x a
 * few), 3e-5 absolute for the gradients (sqrt 400 x 6e-8 x a few units, with room). Under a
 * mixed policy (g->half) the probabilities and dp are rounded to 16 bits from values that
 * differ by those ulps, so an element within them of a 16-bit boundary rounds the other way:
 * one step u of one term (|p v|, |p dout|, |p dp| <= 1 here), u = 2^-8 or 2^-11 more absolute
 * for the outputs and the gradients (p itself is float32: unchanged). With 16-bit scores
 * (g->half_scores, scale 1 as the Gemma layer passes it) q, kk, v and dout are multiples of
 * 1/64 (their dot products exact in any order: the scores and dp rounded from the same values on
 * both sides); the scores' gradient is rounded from float32 values (one step of |ds| <= 1 each
 * way), and under a soft cap a device tanhf an ulp from the host's can round the other way
 * (one step of c16 = 1.5 in a score, moving p by 1.5 u relative): 4 u absolute in all. */
static void attn_case(const mw_attn_geom *g, int n, uint64_t s, int control)
{
    pool P = {0};
    const float a16 = (g->half == 1   ? 0x1p-8f
                       : g->half == 2 ? 0x1p-11f
                                      : 0.0f) *
                      (g->half_scores ? 4.0f : 1.0f);
    const int T = g->T, S = g->S, H = g->H, KH = mw_attn_kvh(g), dk = g->dk, dv = g->dv;
    const size_t nq = (size_t)n * T * H * dk, nk = (size_t)n * S * KH * dk,
                 nv = (size_t)n * S * KH * dv, no = (size_t)n * T * H * dv,
                 np = (size_t)n * H * T * S;
    float *q = h_rand(&P, nq, 1030 + s, -1.5f, 1.5f), *k = h_rand(&P, nk, 1040 + s, -1.5f, 1.5f);
    float *v = h_rand(&P, nv, 1050 + s, -1, 1), *dout = h_rand(&P, no, 1060 + s, -1, 1);
    float *o = h_rand(&P, no, 1070 + s, 0, 1), *p = h_rand(&P, np, 1080 + s, 0, 1);
    float *dq = h_rand(&P, nq, 1090 + s, -1, 1), *dk_ = h_rand(&P, nk, 1100 + s, -1, 1);
    float *dv_ = h_rand(&P, nv, 1110 + s, -1, 1);
    float *const exact[4] = {q, k, v, dout};
    const size_t counts[4] = {nq, nk, nv, no};
    for (int a = 0; a < 4 && g->half_scores; a++)
        for (size_t e = 0; e < counts[a]; e++)
            exact[a][e] = roundf(exact[a][e] * 64.0f) / 64.0f;
    float *dQ = d_put(&P, q, nq * 4), *dK = d_put(&P, k, nk * 4), *dV = d_put(&P, v, nv * 4);
    float *dO = d_put(&P, o, no * 4), *dPr = d_put(&P, p, np * 4), *dDout = d_put(&P, dout, no * 4);
    float *dDq = d_put(&P, dq, nq * 4), *dDk = d_put(&P, dk_, nk * 4),
          *dDv = d_put(&P, dv_, nv * 4);
    mw_attn_geom gd = *g;
    gd.qids = g->qids ? d_put(&P, g->qids, (size_t)n * T * 4) : NULL;
    gd.vids = g->vids ? d_put(&P, g->vids, (size_t)n * S * 4) : NULL;
    gd.ids = g->ids ? d_put(&P, g->ids, (size_t)n * sizeof *g->ids) : NULL;
    gd.causal ^= control; /* the control: the device's causal mask flipped is caught */
    mw_attn_fwd_ref(NULL, o, p, q, k, v, g, n);
    cuda.attn_fwd(&ctx, dO, dPr, dQ, dK, dV, &gd, n);
    if (control) {
        assert_false(mw_test_close_(d_get(&P, dPr, np * 4), p, np, 1e-5f, 1e-5f, "control",
                                    __FILE__, __LINE__));
        pool_free(&P);
        return;
    }
    expect_close((float *)d_get(&P, dO, no * 4), o, no, 1e-5f + a16, 1e-5f);
    expect_close((float *)d_get(&P, dPr, np * 4), p, np, 1e-5f, 1e-5f);
    mw_attn_bwd_ref(NULL, dq, dk_, dv_, p, dout, q, k, v, g, n);
    cuda.attn_bwd(&ctx, dDq, dDk, dDv, dPr, dDout, dQ, dK, dV, &gd, n);
    expect_close((float *)d_get(&P, dDq, nq * 4), dq, nq, 3e-5f + a16, 1e-5f);
    expect_close((float *)d_get(&P, dDk, nk * 4), dk_, nk, 3e-5f + a16, 1e-5f);
    expect_close((float *)d_get(&P, dDv, nv * 4), dv_, nv, 3e-5f + a16, 1e-5f);
    expect_close((float *)d_get(&P, dPr, np * 4), p, np, 3e-5f + a16, 1e-5f); /* ds over p */
    pool_free(&P);
}

/* The geometries: every one of kernel_check.c's (mw_test_attn_geom: causal, padding masks,
 * cross attention, 70 steps past a causal block, grouped-query, dropout, soft cap, windows;
 * dk 3, dv 2), and wider heads: 1 x 1; causal with padding masks (padded query rows masked
 * everywhere); cross attention of 7 queries on 11 values with a value mask; 64 causal steps,
 * 4 heads of 16, with dropout keyed by example ids (the multipliers the host's);
 * grouped-query attention, 4 query heads on 2 key heads (causal, masked) and on 1 (64 steps,
 * dropout); 200 causal steps (four row blocks) on 2 key heads. Under each mixed policy
 * (bfloat16, float16): kernel_check.c's geometries 2 (padding masks), 11 (70 steps, grouped
 * query heads) and 12 (dropout); with 16-bit scores (Gemma's), 2, 13 (soft cap), 16 (70 steps,
 * grouped query heads, soft cap, window) and 17 (dropout, soft cap, window). The control:
 * geometry 1 with the device's causal mask off. */
void test_attention(void **state)
{
    (void)state;
    NEED_DEVICE();
    mw_attn_geom g;
    for (int ci = 0; mw_test_attn_geom(ci, &g); ci++)
        attn_case(&g, 2, 100 + (uint64_t)ci, 0);
    static const int halves[] = {2, 11, 12};
    for (int half = 1; half <= 2; half++)
        for (size_t c = 0; c < sizeof halves / sizeof *halves; c++) {
            assert_true(mw_test_attn_geom(halves[c], &g));
            g.half = half;
            attn_case(&g, 2, 300 + (uint64_t)(10 * half + halves[c]), 0);
        }
    static const int scores16[] = {2, 13, 16, 17};
    for (int half = 1; half <= 2; half++)
        for (size_t c = 0; c < sizeof scores16 / sizeof *scores16; c++) {
            assert_true(mw_test_attn_geom(scores16[c], &g));
            g.half = half, g.half_scores = 1, g.scale = 1.0f;
            attn_case(&g, 2, 500 + (uint64_t)(10 * half + scores16[c]), 0);
        }
    mw_test_attn_geom(1, &g); /* causal, 5 x 5 */
    attn_case(&g, 2, 101, 1);
    static const struct { /* uniform: example 1's padded query rows are 1 / S (no dropout) */
        int n, T, S, H, dk, dv, causal, masks;
        float rate;
        int uniform, kvh;
    } shapes[] = {
        {1, 1, 1, 1, 1, 1, 0, 0, 0.0f, 0, 1},     {2, 5, 5, 2, 3, 2, 1, 1, 0.0f, 0, 2},
        {2, 7, 11, 2, 4, 3, 0, 1, 0.0f, 0, 2},    {3, 64, 64, 4, 16, 16, 1, 0, 0.2f, 0, 4},
        {2, 5, 5, 2, 3, 2, 1, 1, 0.0f, 1, 2},     {2, 5, 5, 4, 4, 4, 1, 1, 0.0f, 1, 2},
        {3, 64, 64, 4, 16, 16, 1, 0, 0.2f, 0, 1}, {2, 200, 200, 4, 8, 8, 1, 1, 0.0f, 0, 2}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        pool P = {0};
        const int n = shapes[s].n, T = shapes[s].T, S = shapes[s].S;
        float *qi = h_rand(&P, (size_t)n * T, 1010 + s, 0, 1),
              *vi = h_rand(&P, (size_t)n * S, 1020 + s, 0, 1);
        for (int i = 0; i < n * T; i++) /* the last steps of example 1 are padding */
            qi[i] = T == S && i / T == 1 && i % T >= T - 2 ? 0.0f : 3.0f;
        for (int i = 0; i < n * S; i++)
            vi[i] = T == S ? qi[i] : vi[i] < 0.3f ? 0.0f : 7.0f;
        static const uint32_t ids[3] = {5, 11, 2};
        g = (mw_attn_geom){.T = T,
                           .S = S,
                           .H = shapes[s].H,
                           .kv_heads = shapes[s].kvh,
                           .dk = shapes[s].dk,
                           .dv = shapes[s].dv,
                           .scale = (float)(1.0 / sqrt((double)shapes[s].dk)),
                           .causal = shapes[s].causal,
                           .qids = shapes[s].masks && T == S ? qi : NULL,
                           .vids = shapes[s].masks ? vi : NULL,
                           .empty_uniform = shapes[s].uniform,
                           .rate = shapes[s].rate,
                           .seed = 77,
                           .stream = 4,
                           .ids = shapes[s].rate > 0 ? ids : NULL};
        attn_case(&g, n, s, 0);
        pool_free(&P);
    }
    check_sync();
}
