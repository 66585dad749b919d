/* Fast CPU ReLU and smooth activations (parallel, vectorizable; the smooth ones bitwise the
 * reference's, for any thread count: the reference's expressions, the kind hoisted out of the
 * loops), except SiLU (Llama's gate: a tenth of its training step in expf calls), whose sigmoid
 * is kernels/cpu/vexp.h's vectorized one, within a few ulp of the reference's (its loops compiled
 * for the machine's widest vectors, MW_WIDE_CLONES). The cross-entropy's forward (a softmax over
 * the classes of every position of a language model) runs its rows over the threads on the same
 * exp, within a few ulp of the reference's; its backward is the reference's on chunks of rows,
 * bitwise. */
#include "kernels/cpu/cpu.h"
#include "kernels/twins.h"

#define MW_ACT_HD static inline
#include "kernels/act_rules.h"

void mw_relu_fwd_cpu(const mw_kctx *k, float *y, const float *x, size_t count)
{
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void mw_relu_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, const float *y, size_t count)
{
#pragma omp parallel for simd num_threads(MW_NT(k)) schedule(static)
    for (size_t i = 0; i < count; i++) {
        float d = dy[i]; /* unconditional load: keeps the loop branch-free */
        dx[i] = y[i] > 0.0f ? d : 0.0f;
    }
}

/* Keras' ReLU in full: the reference's relux_value and relux_slope, branch-free over the
 * threads (bitwise the reference: the same float operations on each element). MobileNetV2's
 * ReLU6 inputs sit on both sides of 0 and 6 at random, so the reference's scalar branches
 * mispredicted through a fifth of its training step. */
MW_WIDE_CLONES static void relux_fwd_span(float *y, const float *x, size_t i0, size_t i1,
                                          float max_value, float slope, float threshold)
{
    for (size_t i = i0; i < i1; i++)
        y[i] = relux_value(x[i], max_value, slope, threshold);
}

void mw_relux_fwd_cpu(const mw_kctx *k, float *y, const float *x, size_t count, float max_value,
                      float slope, float threshold)
{
    const int nt = MW_NT(k);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; t++)
        relux_fwd_span(y, x, MW_SPAN_LO(count, t, nt), MW_SPAN_LO(count, t + 1, nt), max_value,
                       slope, threshold);
}

/* dy f'(x) for i in [i0, i1), added into dx (ADD 1) or written (0): a constant in each clone's
 * inlined copy, so neither loop tests it. */
static inline __attribute__((always_inline)) void
relux_bwd_loop(float *dx, const float *dy, const float *x, size_t i0, size_t i1, float max_value,
               float slope, float threshold, int add)
{
    if (slope != 0.0f && threshold == 0.0f && max_value == INFINITY) { /* leaky_relu's slope */
        for (size_t i = i0; i < i1; i++) {
            const float d = dy[i] * (x[i] >= 0.0f ? 1.0f : slope);
            dx[i] = add ? dx[i] + d : d;
        }
        return;
    }
    for (size_t i = i0; i < i1; i++) {
        const float v = x[i];
        const float in = (float)((v > threshold) & (v < max_value)); /* no && : no branch */
        const float below = v < threshold ? slope : 0.0f;
        const float d = dy[i] * (in + below);
        dx[i] = add ? dx[i] + d : d;
    }
}

MW_WIDE_CLONES static void relux_bwd_span(float *dx, const float *dy, const float *x, size_t i0,
                                          size_t i1, float max_value, float slope, float threshold,
                                          int set_dx)
{
    if (set_dx)
        relux_bwd_loop(dx, dy, x, i0, i1, max_value, slope, threshold, 0);
    else
        relux_bwd_loop(dx, dy, x, i0, i1, max_value, slope, threshold, 1);
}

void mw_relux_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, const float *x, size_t count,
                      float max_value, float slope, float threshold, int set_dx)
{
    const int nt = MW_NT(k);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; t++)
        relux_bwd_span(dx, dy, x, MW_SPAN_LO(count, t, nt), MW_SPAN_LO(count, t + 1, nt), max_value,
                       slope, threshold, set_dx);
}

/* The backward's rows are independent: the reference on chunks of rows, one per thread, computes
 * every row exactly as the reference does (bitwise equal). */
void mw_xent_bwd_cpu(const mw_kctx *k, float *dlogits, const float *prob, const int32_t *labels,
                     float scale, int N, int K)
{
    const int nt = MW_NT(k), per = (N + nt - 1) / (nt > 0 ? nt : 1);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int c = 0; c < nt; c++) {
        const int r0 = c * per, m = N - r0 < per ? N - r0 : per;
        if (m > 0)
            mw_xent_bwd_ref(k, dlogits + (size_t)r0 * K, prob + (size_t)r0 * K, labels + r0, scale,
                            m, K);
    }
}

/* Elements per block of the activations: the kind is switched on once per block, and each
 * case inlines act_value / act_slope with a constant kind, so the loop is the formula alone
 * (the reference's expressions; the math library's calls are the same ones). */
#define ACT_BLOCK 4096

#define FWD_CASE_(KIND)                                                                            \
    case MW_ACTK_##KIND:                                                                           \
        fwd_span(MW_ACTK_##KIND, y + i, x + i, n, alpha);                                          \
        break;
#define BWD_CASE_(KIND)                                                                            \
    case MW_ACTK_##KIND:                                                                           \
        bwd_span(MW_ACTK_##KIND, dx + i, dy + i, x + i, y + i, n, alpha);                          \
        break;

#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#include "kernels/cpu/vexp.h" /* inside: its functions inline only into code of its options */

/* SiLU's value and slope (act_rules.h's formulas) on the vectorized sigmoid. */
MW_WIDE_CLONES static void silu_fwd(float *restrict y, const float *restrict x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] * mw_sigmoid_v(x[i]);
}

MW_WIDE_CLONES static void silu_bwd(float *restrict dx, const float *restrict dy,
                                    const float *restrict x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        const float v = x[i], s = mw_sigmoid_v(v);
        dx[i] += dy[i] * (s * (1.0f + v * (1.0f - s)));
    }
}

/* One row of the cross-entropy's forward: the reference's softmax and loss (log(sum) + max -
 * z[label]), the exp kernels/cpu/vexp.h's (within 2 ulp of expf's; 0 below -87, where expf's is
 * under 2e-38) and the double sum in 8 lanes (the same on every vector width): the
 * probabilities within a few ulp of the reference's, the loss within a rounding of its log. */
MW_WIDE_CLONES static void xent_row(float *loss, float *restrict p, const float *restrict z,
                                    int32_t t, int K)
{
    enum { L = 8 };
    float mx = z[0];
#pragma omp simd reduction(max : mx)
    for (int j = 1; j < K; j++)
        mx = z[j] > mx ? z[j] : mx;
    double a[L] = {0};
    int j = 0;
    for (; j + L <= K; j += L)
        for (int q = 0; q < L; q++) {
            p[j + q] = mw_exp_neg(z[j + q] - mx);
            a[q] += p[j + q];
        }
    for (; j < K; j++) {
        p[j] = mw_exp_neg(z[j] - mx);
        a[j % L] += p[j];
    }
    double sum = 0.0;
    for (int q = 0; q < L; q++)
        sum += a[q];
    const float inv = (float)(1.0 / sum);
#pragma omp simd
    for (int q = 0; q < K; q++)
        p[q] *= inv;
    *loss = t >= 0 && t < K ? (float)(log(sum) + mx - z[t]) : 0.0f; /* outside [0, K): ignored */
}

#pragma GCC pop_options

/* The cross-entropy's rows are independent: xent_row's over k's threads. */
void mw_xent_fwd_cpu(const mw_kctx *k, float *loss, float *prob, const float *logits,
                     const int32_t *labels, int N, int K)
{
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (int n = 0; n < N; n++)
        xent_row(loss + n, prob + (size_t)n * K, logits + (size_t)n * K, labels[n], K);
}

static inline void fwd_span(mw_act_kind kind, float *restrict y, const float *restrict x, size_t n,
                            float alpha)
{
    if (kind == MW_ACTK_SILU) {
        silu_fwd(y, x, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        y[i] = act_value(x[i], kind, alpha);
}

static inline void bwd_span(mw_act_kind kind, float *dx, const float *dy, const float *x,
                            const float *y, size_t n, float alpha)
{
    if (kind == MW_ACTK_SILU) {
        silu_bwd(dx, dy, x, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        dx[i] += dy[i] * act_slope(x[i], y[i], kind, alpha);
}

void mw_act_fwd_cpu(const mw_kctx *k, float *y, const float *x, size_t count, mw_act_kind kind,
                    float alpha)
{
    const size_t nblk = (count + ACT_BLOCK - 1) / ACT_BLOCK;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t b = 0; b < nblk; b++) {
        const size_t i = b * ACT_BLOCK, n = count - i < ACT_BLOCK ? count - i : ACT_BLOCK;
        switch (kind) {
            MW_ACT_KINDS(FWD_CASE_)
        default:
            break;
        }
    }
}

void mw_act_bwd_cpu(const mw_kctx *k, float *dx, const float *dy, const float *x, const float *y,
                    size_t count, mw_act_kind kind, float alpha)
{
    const size_t nblk = (count + ACT_BLOCK - 1) / ACT_BLOCK;
#pragma omp parallel for num_threads(MW_NT(k)) schedule(static)
    for (size_t b = 0; b < nblk; b++) {
        const size_t i = b * ACT_BLOCK, n = count - i < ACT_BLOCK ? count - i : ACT_BLOCK;
        switch (kind) {
            MW_ACT_KINDS(BWD_CASE_)
        default:
            break;
        }
    }
}
