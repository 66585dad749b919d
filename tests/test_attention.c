/* Suite 'unit' (and 'isa'): MultiHeadAttention's core (kernels/kernel_list.h: attn_fwd,
 * attn_bwd), the reference and the fast CPU twin, on kernel_check.c's geometries: the contract
 * of the probabilities and outputs, every gradient by central differences, and under a mixed
 * policy (mw_attn_geom.half) the 16-bit probabilities and dp against their contract, and with
 * 16-bit scores (half_scores) every score and scores' gradient; and the
 * rotation of the query and key (rope_fwd, rope_bwd) in 16 bits against its contract. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "kernels/cast.h"
#include "kernels/dropout.h"
#include "kernels/twins.h"
#include "tests/kernel_check.h"
#include "tests/kernel_test.h"

/* The attention core (kernels.h: mw_attn_geom), n = 2, dk = 3, dv = 2, on kernel_check.c's
 * geometries (masks, causal, cross, 70 steps, grouped-query, dropout, soft cap, windows).
 * Asserted, for the reference and the fast CPU twin: each probability row sums to 1; a masked
 * entry of a row with an unmasked one is 0 exactly (exp of -1e9); a row masked everywhere is
 * Keras' (empty_uniform); o equals the contract's sum over u of p drop v, the multipliers
 * recomputed from mw_rng_hash as kernels.h states them; every gradient (q, k, v) by central
 * differences of sum(r * o) (a padded query step's too: its scores are replaced, not used). */
typedef struct {
    const mw_kernels *t;
    const mw_kctx *k;
    float *o, *p;
    const float *q, *kk, *v, *r;
    const mw_attn_geom *g;
    int n;
} attn_env;

static double attn_loss(void *env)
{
    attn_env *e = env;
    e->t->attn_fwd(e->k, e->o, e->p, e->q, e->kk, e->v, e->g, e->n);
    return dot_r(e->r, e->o, (size_t)e->n * e->g->T * e->g->H * e->g->dv);
}

/* The dropout multiplier of p[i, h, t, u] as kernels.h states it. */
static float attn_drop_spec(const mw_attn_geom *g, int i, int h, int t, int u)
{
    if (!(g->rate > 0.0f))
        return 1.0f;
    const uint64_t id = g->ids ? g->ids[i] : (uint32_t)i;
    const uint64_t c = id * ((uint64_t)g->H * g->T * g->S) + ((uint64_t)h * g->T + t) * g->S + u;
    return (uint32_t)(mw_rng_hash(g->seed, g->stream, c) >> 40) >= mw_dropout_threshold(g->rate)
               ? 1.0f / (1.0f - g->rate)
               : 0.0f;
}

/* 1 when (t, u) of example i is masked, as kernels.h states it. */
static int attn_masked_spec(const mw_attn_geom *g, int i, int t, int u)
{
    return (g->causal && u > t) || (g->window > 0 && abs(t - u) >= g->window) ||
           (g->qids && g->qids[i * g->T + t] == 0) || (g->vids && g->vids[i * g->S + u] == 0);
}

static void test_attention(void **state)
{
    (void)state;
    const int n = 2, dk = 3, dv = 2;
    mw_attn_geom g;
    for (size_t ci = 0; mw_test_attn_geom((int)ci, &g); ci++) { /* kernel_check.c's cases */
        const int T = g.T, S = g.S, H = g.H, KH = mw_attn_kvh(&g);
        const size_t nq = (size_t)n * T * H * dk, nk = (size_t)n * S * KH * dk,
                     nv = (size_t)n * S * KH * dv, no = (size_t)n * T * H * dv,
                     np = (size_t)n * H * T * S;
        for (int cpu = 0; cpu < 2; cpu++) {
            mw_kernels t;
            table(&t, cpu);
            pool P = {0};
            ctx C;
            ctx_open(&C, (size_t)MW_ATTN_WS_SLOTS * T * S, 2);
            float *q = frand(&P, nq, 201 + ci, -1.5f, 1.5f),
                  *kk = frand(&P, nk, 211 + ci, -1.5f, 1.5f);
            float *v = frand(&P, nv, 221 + ci, -1.0f, 1.0f),
                  *r = frand(&P, no, 231 + ci, -1.0f, 1.0f);
            float *o = fzero(&P, no), *p = fzero(&P, np);
            t.attn_fwd(&C.k, o, p, q, kk, v, &g, n);
            ctx_check(&C, "attn_fwd");
            char what[96];
            for (int i = 0; i < n; i++)
                for (int h = 0; h < H; h++)
                    for (int tt = 0; tt < T; tt++) {
                        const float *pr = p + (((size_t)i * H + h) * T + tt) * S;
                        double sum = 0;
                        int any = 0;
                        for (int u = 0; u < S; u++) {
                            sum += pr[u];
                            any |= !attn_masked_spec(&g, i, tt, u);
                        }
                        expect_near(sum, any || g.empty_uniform ? 1.0 : 0.0, 1e-6);
                        for (int u = 0; u < S; u++) {
                            const int masked = attn_masked_spec(&g, i, tt, u);
                            if (masked && any && pr[u] != 0.0f)
                                fail_msg("%s case %zu: p[%d,%d,%d,%d] = %g, masked", t.name, ci, i,
                                         h, tt, u, (double)pr[u]);
                            if (!any && pr[u] != (g.empty_uniform ? 1.0f / (float)S : 0.0f))
                                fail_msg("%s case %zu: p[%d,%d,%d,%d] = %g in a row masked "
                                         "everywhere (uniform %d)",
                                         t.name, ci, i, h, tt, u, (double)pr[u], g.empty_uniform);
                        }
                        for (int d = 0; d < dv; d++) { /* o by the contract */
                            double want = 0;
                            for (int u = 0; u < S; u++)
                                want += (double)pr[u] * attn_drop_spec(&g, i, h, tt, u) *
                                        v[(((size_t)i * S + u) * KH + h / (H / KH)) * dv + d];
                            expect_near(o[(((size_t)i * T + tt) * H + h) * dv + d], want, 2e-6);
                        }
                    }
            float *dq = fzero(&P, nq), *dkk = fzero(&P, nk), *dvv = fzero(&P, nv);
            t.attn_bwd(&C.k, dq, dkk, dvv, p, r, q, kk, v, &g, n);
            ctx_check(&C, "attn_bwd");
            attn_env e = {&t, &C.k, fzero(&P, no), fzero(&P, np), q, kk, v, r, &g, n};
            snprintf(what, sizeof what, "%s attention dq (case %zu)", t.name, ci);
            grad_check(attn_loss, &e, q, nq, dq, 1e-2f, 241, what);
            snprintf(what, sizeof what, "%s attention dk (case %zu)", t.name, ci);
            grad_check(attn_loss, &e, kk, nk, dkk, 1e-2f, 242, what);
            snprintf(what, sizeof what, "%s attention dv (case %zu)", t.name, ci);
            grad_check(attn_loss, &e, v, nv, dvv, 1e-2f, 243, what);
            ctx_close(&C);
            pool_free(&P);
        }
    }
}

/* The attention core under a mixed policy (mw_attn_geom.half: bfloat16 1, float16 2) on three
 * of kernel_check.c's geometries (causal with both padding masks; 70 steps of grouped-query
 * heads, rows masked everywhere; dropout with grouped-query heads), for the reference and the
 * fast CPU twin, each against the contract computed from its own probabilities p (float32, the
 * softmax's output, as JAX keeps it):
 *   o = sum over u of r16(p) drop v, and dv = sum over t of r16(p) drop dout, within 2e-6 (the
 *   same rounded values, summed in double here): exact in what is rounded;
 *   control: o differs from the float32 contract (p unrounded) by more than 1e-5 somewhere;
 *   dq and dk from ds = p (dp - sum p dp), dp = r16(dout . v) drop: dp's rounding depends on
 *   the order of its float32 sum (an element within float32 rounding of a 16-bit boundary
 *   rounds either way, one step of r16, u |dp|), so each element is held to 2e-6 plus what
 *   one such step in every dp of its sum could move it: scale sum over u of
 *   |kk| p (u |dp| + sum p u |dp|). */
static double r16_of(int half, double x)
{
    return half == 1 ? mw_bf16_round((float)x) : mw_f16_round((float)x);
}

/* The tensors of one run of the core on g (n = 2, dk = 3, dv = 2): q and kk drawn in
 * [-1.5, 1.5], v and the output's gradient r in [-vr, vr] (seeds from seed), each a multiple of
 * 1/64 when exact; o and p from the forward, p0 a copy of p, then the backward's dq, dk, dv (p
 * then holding the raw scores' gradient). */
typedef struct {
    float *q, *kk, *v, *r, *o, *p, *p0, *dq, *dkk, *dvv;
} attn_run;

static attn_run attn_run_on(const mw_kernels *t, ctx *C, pool *P, const mw_attn_geom *g,
                            uint64_t seed, float vr, int exact, const char *what)
{
    const int n = 2, T = g->T, S = g->S, H = g->H, KH = mw_attn_kvh(g);
    const size_t nq = (size_t)n * T * H * 3, nk = (size_t)n * S * KH * 3,
                 nv = (size_t)n * S * KH * 2, no = (size_t)n * T * H * 2,
                 np = (size_t)n * H * T * S;
    attn_run a;
    a.q = frand(P, nq, seed, -1.5f, 1.5f), a.kk = frand(P, nk, seed + 10, -1.5f, 1.5f);
    a.v = frand(P, nv, seed + 20, -vr, vr), a.r = frand(P, no, seed + 30, -vr, vr);
    float *const all[4] = {a.q, a.kk, a.v, a.r};
    const size_t cnt[4] = {nq, nk, nv, no};
    for (int j = 0; j < 4 && exact; j++)
        for (size_t e = 0; e < cnt[j]; e++)
            all[j][e] = roundf(all[j][e] * 64.0f) / 64.0f;
    a.o = fzero(P, no), a.p = fzero(P, np), a.p0 = fzero(P, np);
    a.dq = fzero(P, nq), a.dkk = fzero(P, nk), a.dvv = fzero(P, nv);
    t->attn_fwd(&C->k, a.o, a.p, a.q, a.kk, a.v, g, n);
    memcpy(a.p0, a.p, np * sizeof *a.p);
    t->attn_bwd(&C->k, a.dq, a.dkk, a.dvv, a.p, a.r, a.q, a.kk, a.v, g, n);
    ctx_check(C, what);
    return a;
}

/* Element (i, h, t, u) of p; (i, t, h, d) of q and o (rows of width w); (i, u, j, d) of kk, v. */
#define PI(i, h, tt, u) ((((size_t)(i)*H + (h)) * T + (tt)) * S + (u))
#define QI(i, tt, h, d, w) ((((size_t)(i)*T + (tt)) * H + (h)) * (w) + (d))
#define KI(i, u, j, d, w) ((((size_t)(i)*S + (u)) * KH + (j)) * (w) + (d))

static void attn_half_check(const mw_kernels *t, mw_attn_geom *g, int ci)
{
    const int n = 2, dk = 3, dv = 2, T = g->T, S = g->S, H = g->H, KH = mw_attn_kvh(g);
    const int grp = H / KH;
    const double u16 = g->half == 1 ? 0x1p-8 : 0x1p-11;
    pool P = {0};
    ctx C;
    ctx_open(&C, (size_t)MW_ATTN_WS_SLOTS * T * S, 2);
    const attn_run R = attn_run_on(t, &C, &P, g, 301 + (uint64_t)ci, 1.0f, 0, "attn half");
    const float *kk = R.kk, *v = R.v, *r = R.r, *o = R.o, *p0 = R.p0, *dq = R.dq, *dvv = R.dvv;
    double control = 0;
    for (int i = 0; i < n; i++)
        for (int h = 0; h < H; h++)
            for (int tt = 0; tt < T; tt++) {
                for (int d = 0; d < dv; d++) {
                    double want = 0, plain = 0;
                    for (int u = 0; u < S; u++) {
                        const double pv =
                            attn_drop_spec(g, i, h, tt, u) * v[KI(i, u, h / grp, d, dv)];
                        want += r16_of(g->half, p0[PI(i, h, tt, u)]) * pv;
                        plain += p0[PI(i, h, tt, u)] * pv;
                    }
                    expect_near(o[QI(i, tt, h, d, dv)], want, 2e-6);
                    control = fmax(control, fabs(o[QI(i, tt, h, d, dv)] - plain));
                }
                /* ds's spec and its bound, then dq's row */
                double ds[70], bnd[70], sum = 0, sb = 0;
                int open = 0;
                for (int u = 0; u < S; u++)
                    open |= !attn_masked_spec(g, i, tt, u);
                for (int u = 0; u < S; u++) {
                    double a = 0;
                    for (int d = 0; d < dv; d++)
                        a += (double)r[QI(i, tt, h, d, dv)] * v[KI(i, u, h / grp, d, dv)];
                    ds[u] = r16_of(g->half, a) * attn_drop_spec(g, i, h, tt, u);
                    sum += p0[PI(i, h, tt, u)] * ds[u];
                    sb += p0[PI(i, h, tt, u)] * u16 * fabs(ds[u]);
                }
                for (int u = 0; u < S; u++) {
                    const double pu = p0[PI(i, h, tt, u)];
                    bnd[u] = open ? pu * (u16 * fabs(ds[u]) + sb) : 0;
                    ds[u] = open ? pu * (ds[u] - sum) : 0;
                }
                for (int d = 0; d < dk; d++) {
                    double want = 0, tol = 2e-6;
                    for (int u = 0; u < S; u++) {
                        const double kv = kk[KI(i, u, h / grp, d, dk)] * (double)g->scale;
                        want += ds[u] * kv, tol += bnd[u] * fabs(kv);
                    }
                    expect_near(dq[QI(i, tt, h, d, dk)], want, tol);
                }
            }
    if (control <= 1e-5)
        fail_msg("%s half %d case %d: o is the float32 contract's within %g: p not rounded",
                 t->name, g->half, ci, control);
    for (int i = 0; i < n; i++) /* dv, a key head's column over its group's rows */
        for (int j = 0; j < KH; j++)
            for (int u = 0; u < S; u++)
                for (int d = 0; d < dv; d++) {
                    double want = 0;
                    for (int h = j * grp; h < (j + 1) * grp; h++)
                        for (int tt = 0; tt < T; tt++)
                            want += r16_of(g->half, p0[PI(i, h, tt, u)]) *
                                    attn_drop_spec(g, i, h, tt, u) * r[QI(i, tt, h, d, dv)];
                    expect_near(dvv[KI(i, u, j, d, dv)], want, 2e-6);
                }
    ctx_close(&C);
    pool_free(&P);
}

static float r16(int half, float x)
{
    return half == 1 ? mw_bf16_round(x) : mw_f16_round(x);
}

/* The attention core with 16-bit scores (mw_attn_geom.half_scores: KerasHub's einsum attention
 * under a mixed policy, scale 1 as the Gemma layer passes it) on four of kernel_check.c's
 * geometries (both padding masks; the soft cap 1.5; 70 steps of grouped-query heads under the
 * cap and a window; dropout under the cap and a window), bfloat16 and float16, the reference
 * and the fast CPU twin. q, kk, v and dout are multiples of 1/64 in [-1.5, 1.5] (16-bit values
 * of 7 significant bits, whose products' sums of 3 and 2 terms, multiples of 2^-12 under 8, are
 * exact in float32 in any order and mostly not 16-bit values), so the scores and dp have one
 * right value each. Against kernels.h's contract written out here:
 *   p is the softmax of the masked 16-bit scores (each raw score rounded; under the cap c,
 *   s / c16, its tanh and the product by c16 each rounded), within 2e-6 (summed in double here);
 *   control: p differs from the softmax of the float32 scores by more than 1e-5 somewhere;
 *   o = sum over u of r16(p) drop v within 2e-6;
 *   after the backward, p holds the raw scores' gradient: each element is the cap's rounded
 *   gradients (transposed as JAX takes them) of r16(ds), ds = p (dp - sum p dp) with
 *   dp = r16(dout . v) drop, bit for bit, for one of the two 16-bit values a float32 ds can round
 *   to (ds is float32 arithmetic, within 1e-5 relative of the double one here: r16 is monotone,
 *   so r16 of anything in [ds (1 - 1e-5), ds (1 + 1e-5)] is one of the two ends' roundings);
 *   control: somewhere that differs from the float32 gradient (ds unrounded) by more than a
 *   quarter of the format's u (2^-8, 2^-11) relative, 2000 times float32's rounding;
 *   dq = sum over u of that gradient times kk, within 2e-6. */
static float cap16(int half, float c, float s) /* the forward's score from the raw one */
{
    s = r16(half, s);
    if (!(c > 0.0f))
        return s;
    const float c16 = r16(half, c);
    return r16(half, r16(half, tanhf(r16(half, s / c16))) * c16);
}

static float cap16_grad(int half, float c, float d, float s) /* d: ds rounded; s: raw */
{
    if (!(c > 0.0f))
        return d;
    const float c16 = r16(half, c), b = r16(half, tanhf(r16(half, r16(half, s) / c16)));
    const float w = r16(half, r16(half, d * c16) * r16(half, 1.0f - b));
    return r16(half, r16(half, w + r16(half, w * b)) / c16);
}

static void attn_scores16_check(const mw_kernels *t, mw_attn_geom *g, int ci)
{
    const int n = 2, dk = 3, dv = 2, T = g->T, S = g->S, H = g->H, KH = mw_attn_kvh(g);
    const int grp = H / KH, h16 = g->half;
    const float c = g->soft_cap;
    const double u16 = h16 == 1 ? 0x1p-8 : 0x1p-11;
    g->scale = 1.0f, g->half_scores = 1;
    pool P = {0};
    ctx C;
    ctx_open(&C, (size_t)MW_ATTN_WS_SLOTS * T * S, 2);
    const attn_run R = attn_run_on(t, &C, &P, g, 401 + (uint64_t)ci, 1.5f, 1, "attn scores16");
    const float *q = R.q, *kk = R.kk, *v = R.v, *r = R.r, *o = R.o, *p = R.p, *p0 = R.p0,
                *dq = R.dq;
    double control_p = 0;
    int control_ds = 0;
    for (int i = 0; i < n; i++)
        for (int h = 0; h < H; h++)
            for (int tt = 0; tt < T; tt++) {
                double raw[70], s16[70], m16 = -INFINITY, m32 = -INFINITY, z16 = 0, z32 = 0;
                int open = 0;
                for (int u = 0; u < S; u++) {
                    double a = 0;
                    for (int d = 0; d < dk; d++)
                        a += (double)q[QI(i, tt, h, d, dk)] * kk[KI(i, u, h / grp, d, dk)];
                    raw[u] = a;
                    s16[u] = cap16(h16, c, (float)a);
                    const double f = c > 0.0f ? c * tanh(a / c) : a;
                    if (!attn_masked_spec(g, i, tt, u))
                        open = 1, m16 = fmax(m16, s16[u]), m32 = fmax(m32, f);
                }
                for (int u = 0; u < S && open; u++)
                    if (!attn_masked_spec(g, i, tt, u)) {
                        const double f = c > 0.0f ? c * tanh(raw[u] / c) : raw[u];
                        z16 += exp(s16[u] - m16), z32 += exp(f - m32);
                    }
                for (int u = 0; u < S && open; u++) { /* p by the contract */
                    const int m = attn_masked_spec(g, i, tt, u);
                    const double f = c > 0.0f ? c * tanh(raw[u] / c) : raw[u];
                    const double want = m ? 0.0 : exp(s16[u] - m16) / z16;
                    expect_near(p0[PI(i, h, tt, u)], want, 2e-6);
                    if (!m)
                        control_p = fmax(control_p, fabs(want - exp(f - m32) / z32));
                }
                for (int d = 0; d < dv; d++) { /* o */
                    double want = 0;
                    for (int u = 0; u < S; u++)
                        want += r16(h16, p0[PI(i, h, tt, u)]) * attn_drop_spec(g, i, h, tt, u) *
                                v[KI(i, u, h / grp, d, dv)];
                    expect_near(o[QI(i, tt, h, d, dv)], want, 2e-6);
                }
                /* the raw scores' gradient, element by element */
                double dp[70], sum = 0;
                for (int u = 0; u < S; u++) {
                    double a = 0;
                    for (int d = 0; d < dv; d++)
                        a += (double)r[QI(i, tt, h, d, dv)] * v[KI(i, u, h / grp, d, dv)];
                    dp[u] = r16(h16, (float)a) * attn_drop_spec(g, i, h, tt, u);
                    sum += p0[PI(i, h, tt, u)] * dp[u];
                }
                for (int u = 0; u < S; u++) {
                    const double ds = open ? p0[PI(i, h, tt, u)] * (dp[u] - sum) : 0.0;
                    const float got = p[PI(i, h, tt, u)], s = (float)raw[u];
                    const float lo = cap16_grad(h16, c, r16(h16, (float)(ds * (1 - 1e-5))), s);
                    const float hi = cap16_grad(h16, c, r16(h16, (float)(ds * (1 + 1e-5))), s);
                    if (got != lo && got != hi)
                        fail_msg("%s half %d case %d: the scores' gradient [%d,%d,%d,%d] = %.9g; "
                                 "want %.9g or %.9g (ds %.9g)",
                                 t->name, h16, ci, i, h, tt, u, (double)got, (double)lo, (double)hi,
                                 ds);
                    const double f32 = c > 0.0f ? ds * (1 - pow(tanh(raw[u] / c), 2)) : ds;
                    control_ds |= fabs(got - f32) > u16 / 4 * fabs(f32);
                }
                for (int d = 0; d < dk; d++) { /* dq from the kernel's own gradient */
                    double want = 0;
                    for (int u = 0; u < S; u++)
                        want += (double)p[PI(i, h, tt, u)] * kk[KI(i, u, h / grp, d, dk)];
                    expect_near(dq[QI(i, tt, h, d, dk)], want, 2e-6);
                }
            }
    if (control_p <= 1e-5 || !control_ds)
        fail_msg("%s half %d case %d: the float32 scores' p within %g of the 16-bit ones', or "
                 "their gradient the float32 one's everywhere (%d): the scores not rounded",
                 t->name, h16, ci, control_p, !control_ds);
    ctx_close(&C);
    pool_free(&P);
}

#undef PI
#undef QI
#undef KI

/* check on kernel_check.c's geometries cases[0..nc), under each 16-bit format, for the
 * reference and the fast CPU twin. */
static void each_half(const int *cases, size_t nc,
                      void (*check)(const mw_kernels *, mw_attn_geom *, int))
{
    for (size_t c = 0; c < nc; c++)
        for (int half = 1; half <= 2; half++)
            for (int cpu = 0; cpu < 2; cpu++) {
                mw_attn_geom g;
                assert_true(mw_test_attn_geom(cases[c], &g));
                g.half = half;
                mw_kernels t;
                table(&t, cpu);
                check(&t, &g, cases[c]);
            }
}

static void test_attention_scores16(void **state)
{
    (void)state;
    static const int cases[] = {2, 13, 16, 17}; /* masks; cap; 70 steps, GQA, cap, window;
                                                   dropout, cap, window */
    each_half(cases, sizeof cases / sizeof *cases, attn_scores16_check);
}

static void test_attention_half(void **state)
{
    (void)state;
    static const int cases[] = {2, 11, 12}; /* kernel_check.c's: masks; 70 steps, GQA; dropout */
    each_half(cases, sizeof cases / sizeof *cases, attn_half_check);
}

/* The rotation under a mixed policy (rope_fwd, rope_bwd with half 1 and 2; heads of width 8 in
 * 16 features, from step 3, max_wavelength 500, scale 2.5), the reference and the fast CPU twin,
 * against kernels/kernel_list.h's contract written out here, bit for bit: the cosine and sine of
 * the float32 angle rounded, each product rounded, their sum rounded (KerasHub's steps, which
 * tests/keras/rope_e2e.py holds equal to KerasHub's layer); the gradient's products and sums
 * likewise, added into dx. Control: the float32 rotation rounded once differs somewhere. */
static void test_rope_half(void **state)
{
    (void)state;
    const int n = 2, T = 9, D = 16, W = 8, h = W / 2, start = 3;
    const size_t cnt = (size_t)n * T * D;
    for (int half = 1; half <= 2; half++)
        for (int cpu = 0; cpu < 2; cpu++) {
            mw_kernels t;
            table(&t, cpu);
            pool P = {0};
            ctx C;
            ctx_open(&C, 0, 2);
            float *x = frand(&P, cnt, 301 + half, -3.0f, 3.0f), *d = frand(&P, cnt, 311, -2, 2);
            for (size_t e = 0; e < cnt; e++)
                x[e] = r16(half, x[e]), d[e] = r16(half, d[e]);
            float *y = fzero(&P, cnt), *dx = frand(&P, cnt, 321, -1, 1);
            float *dx0 = fcopy(&P, dx, cnt);
            t.rope_fwd(&C.k, y, x, n, T, D, W, start, W, 500.0f, 2.5f, half);
            t.rope_bwd(&C.k, dx, d, n, T, D, W, start, W, 500.0f, 2.5f, half);
            int once_differs = 0;
            for (size_t r = 0; r < (size_t)n * T; r++)
                for (int g = 0; g < D; g += W)
                    for (int j = 0; j < h; j++) {
                        const float inv = powf(500.0f, -((float)(2 * j) / (float)W)) / 2.5f;
                        const float a = ((float)(r % (size_t)T) + (float)start) * inv;
                        const float c = r16(half, cosf(a)), s = r16(half, sinf(a));
                        const size_t e0 = r * D + (size_t)g + (size_t)j, e1 = e0 + (size_t)h;
                        const float x0 = x[e0], x1 = x[e1], d0 = d[e0], d1 = d[e1];
                        const float y0 = r16(half, r16(half, x0 * c) + r16(half, -x1 * s));
                        const float y1 = r16(half, r16(half, x1 * c) + r16(half, x0 * s));
                        const float g0 = r16(half, r16(half, d0 * c) + r16(half, d1 * s));
                        const float g1 = r16(half, r16(half, d1 * c) - r16(half, d0 * s));
                        if (y[e0] != y0 || y[e1] != y1 || dx[e0] != dx0[e0] + g0 ||
                            dx[e1] != dx0[e1] + g1)
                            fail_msg("%s half %d: pair %zu of row %zu: y (%g, %g), want (%g, %g); "
                                     "dx added (%g, %g), want (%g, %g)",
                                     t.name, half, (size_t)j, r, (double)y[e0], (double)y[e1],
                                     (double)y0, (double)y1, (double)(dx[e0] - dx0[e0]),
                                     (double)(dx[e1] - dx0[e1]), (double)g0, (double)g1);
                        once_differs |= r16(half, x0 * cosf(a) + -x1 * sinf(a)) != y0;
                    }
            assert_true(once_differs);
            ctx_close(&C);
            pool_free(&P);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_half),
        cmocka_unit_test(test_attention_scores16),
        cmocka_unit_test(test_rope_half),
    };
    return cmocka_run_group_tests_name("attention", tests, NULL, NULL);
}
