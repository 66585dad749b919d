/* Suite 'unit': the dense-target losses of the reference (kernels/ref/loss.c, the formulas of
 * kernels/loss_rules.h) and the metrics' per-example values (metric_value).
 *
 * - Every loss kind and option: the backward against central differences of the forward's
 *   loss summed over the examples (scale 1), with a control that the check can fail.
 * - The forward against Keras' formulas written out again here, in double, from
 *   keras/src/losses/losses.py (not from loss_rules.h), and a few values worked by hand.
 * - prob: CCE writes softmax rows that sum to 1; every other kind copies out bitwise.
 * - metric_value for each mw_metric_kind: ties (the first maximum wins) and the binary
 *   threshold (0.5 is not above 0.5). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MW_LOSS_HD static inline
#include "kernels/loss_rules.h"
#include "kernels/twins.h"
#include "tests/util.h"

#define N_EX 3  /* examples per case */
#define K_MAX 5 /* outputs per example (CCE: 5, the others 4) */

/* Where a case draws its targets. */
enum { TGT_REAL, TGT_BIN, TGT_SOFT };

typedef struct {
    char name[96];
    mw_dloss p;
    float lo, hi; /* outputs drawn uniformly from [lo, hi) */
    float kink;   /* |out - y| kept at least 1e-2 from it (MAE: 0, HUBER: delta); < 0: none */
    int targets;
    int K;
} loss_case;

static loss_case mk(const char *name, mw_dloss p, float lo, float hi, float kink, int targets)
{
    loss_case c = {.p = p, .lo = lo, .hi = hi, .kink = kink, .targets = targets};
    snprintf(c.name, sizeof c.name, "%s", name);
    c.K = p.kind == MW_DLOSS_CCE ? 5 : 4;
    return c;
}

/* The 16 focal cases: from_logits 0/1, gamma 2 and 1.5, balanced 0/1 (alpha 0.25), smoothing
 * 0 and 0.1. Probabilities in (0.05, 0.95), logits in (-3, 3) (sigmoid within (0.047,
 * 0.953)): never clipped, and 1 - p_t >= 0.047, so u^(gamma - 1) stays smooth. */
static int focal_cases(loss_case *c)
{
    int n = 0;
    for (int f = 0; f < 16; f++) {
        const int logits = f & 1, balanced = f >> 2 & 1;
        const float gamma = f & 2 ? 1.5f : 2.0f, s = f & 8 ? 0.1f : 0.0f;
        char name[96];
        snprintf(name, sizeof name, "focal logits %d gamma %g balanced %d smoothing %g", logits,
                 gamma, balanced, s);
        mw_dloss p = {.kind = MW_DLOSS_FOCAL,
                      .from_logits = logits,
                      .smoothing = s,
                      .gamma = gamma,
                      .alpha = 0.25f,
                      .balanced = balanced};
        c[n++] = mk(name, p, logits ? -3.0f : 0.05f, logits ? 3.0f : 0.95f, -1.0f, TGT_BIN);
    }
    return n;
}

/* Every case; returns the count (at most 32). */
static int all_cases(loss_case *c)
{
    int n = 0;
    c[n++] = mk("mse", (mw_dloss){.kind = MW_DLOSS_MSE}, -1.5f, 1.5f, -1.0f, TGT_REAL);
    c[n++] = mk("mae", (mw_dloss){.kind = MW_DLOSS_MAE}, -2.0f, 2.0f, 0.0f, TGT_REAL);
    c[n++] = mk("huber 1", (mw_dloss){.kind = MW_DLOSS_HUBER, .delta = 1.0f}, -2.5f, 2.5f, 1.0f,
                TGT_REAL);
    c[n++] = mk("huber 0.3", (mw_dloss){.kind = MW_DLOSS_HUBER, .delta = 0.3f}, -1.5f, 1.5f, 0.3f,
                TGT_REAL);
    c[n++] = mk("logcosh", (mw_dloss){.kind = MW_DLOSS_LOGCOSH}, -3.0f, 3.0f, -1.0f, TGT_REAL);
    for (int b = 0; b < 4; b++) {
        const int logits = b & 1;
        const float s = b & 2 ? 0.2f : 0.0f;
        char name[96];
        snprintf(name, sizeof name, "bce logits %d smoothing %g", logits, s);
        mw_dloss p = {.kind = MW_DLOSS_BCE, .from_logits = logits, .smoothing = s};
        c[n++] = mk(name, p, logits ? -4.0f : 0.05f, logits ? 4.0f : 0.95f, -1.0f, TGT_BIN);
    }
    n += focal_cases(c + n);
    c[n++] = mk("cce", (mw_dloss){.kind = MW_DLOSS_CCE}, -3.0f, 3.0f, -1.0f, TGT_SOFT);
    c[n++] = mk("cce smoothing 0.1", (mw_dloss){.kind = MW_DLOSS_CCE, .smoothing = 0.1f}, -3.0f,
                3.0f, -1.0f, TGT_SOFT);
    return n;
}

/* Targets of one case, N_EX x K. Real: uniform in [-1, 1). Binary: 0, 1 and a soft 0.25
 * (Keras takes any target in [0, 1]). Soft: rows of a distribution (positive, summing to 1
 * in double before rounding), row 0 one-hot. */
static void fill_targets(float *y, const loss_case *c, uint64_t seed)
{
    const int nk = N_EX * c->K;
    mw_test_fill_uniform(y, nk, seed, c->targets == TGT_REAL ? -1.0f : 0.05f, 1.0f);
    if (c->targets == TGT_BIN)
        for (int i = 0; i < nk; i++)
            y[i] = i % 3 == 2 ? 0.25f : y[i] < 0.5f ? 0.0f : 1.0f;
    if (c->targets != TGT_SOFT)
        return;
    for (int i = 0; i < N_EX; i++) {
        float *r = y + i * c->K;
        double s = 0.0;
        for (int j = 0; j < c->K; j++)
            s += r[j];
        for (int j = 0; j < c->K; j++)
            r[j] = i == 0 ? (j == 2 ? 1.0f : 0.0f) : (float)(r[j] / s);
    }
}

/* Outputs of one case, moved off the kink: where ||out - y| - kink| < 1e-2, out += 3e-2
 * (|e| then moves 3e-2 along one side, so it ends at least 2e-2 from the kink). */
static void fill_outputs(float *out, const float *y, const loss_case *c, uint64_t seed)
{
    const int nk = N_EX * c->K;
    mw_test_fill_uniform(out, nk, seed, c->lo, c->hi);
    if (c->kink < 0.0f)
        return;
    for (int i = 0; i < nk; i++)
        if (fabsf(fabsf(out[i] - y[i]) - c->kink) < 1e-2f)
            out[i] += 3e-2f;
}

/* ---- central differences ---- */

typedef struct {
    const mw_dloss *p;
    float loss[N_EX], prob[N_EX * K_MAX];
    float *out;
    const float *y;
    int K;
} fd_env;

static double sum_loss(fd_env *e)
{
    mw_dloss_fwd_ref(NULL, e->p, e->loss, e->prob, e->out, e->y, N_EX, e->K);
    double s = 0.0;
    for (int i = 0; i < N_EX; i++)
        s += e->loss[i];
    return s;
}

/* The tolerance of the central difference (h = 1e-3 on float outputs), from float32 rounding:
 *   Moving out[i][j] changes only loss[i]; every other example's float loss is the same in
 *   L+ and L- and cancels exactly in the double sum, as do the other K - 1 elements of row
 *   i. What is left is loss[i]'s final rounding to float (1/2 ulp, twice) and the evaluation
 *   error of the one moved element (a few float operations with expf/logf/log1pf/tanhf/powf:
 *   at most ~4 ulp, twice, divided by K = 4 in the mean). The losses here stay below 8
 *   (ulp 9.5e-7), so the difference is off by at most 2 (4.8e-7 + 4 * 9.5e-7 / 4) = 2.9e-6,
 *   and the quotient by 2.9e-6 / 2e-3 = 1.4e-3. The truncation error h^2/6 |f'''| is worst
 *   for BCE on probabilities at 0.05: (2 / 0.05^3) / K * 1.7e-7 = 6.7e-4 against a slope of
 *   (1 / 0.05) / K = 5, i.e. 1.3e-4 relative. Together: |fd - ana| <= 2e-3 max(1, |ana|).
 *   The step is the stored one, (out + h) - (out - h) as floats, not 2h. */
static double fd_worst; /* the largest |fd - ana| / fd_tol seen by a reported check */

static double fd_tol(double ana)
{
    return 2e-3 * fmax(1.0, fabs(ana));
}

/* The number of elements whose analytic gradient ana misses the central difference; the
 * first is printed, with the largest error, when `report`. */
static int fd_bad(fd_env *e, const float *ana, const char *what, int report)
{
    const float h = 1e-3f;
    int bad = 0;
    double maxerr = 0.0;
    for (int i = 0; i < N_EX * e->K; i++) {
        const float save = e->out[i], hi = save + h, lo = save - h;
        e->out[i] = hi;
        const double lp = sum_loss(e);
        e->out[i] = lo;
        const double lm = sum_loss(e);
        e->out[i] = save;
        const double num = (lp - lm) / ((double)hi - (double)lo), err = fabs(num - ana[i]);
        maxerr = fmax(maxerr, err);
        if (report)
            fd_worst = fmax(fd_worst, err / fd_tol(ana[i]));
        if (!(err <= fd_tol(ana[i])) && bad++ == 0 && report)
            print_error("%s: d/dout[%d]: numeric %.9g, analytic %.9g\n", what, i, num,
                        (double)ana[i]);
    }
    if (bad && report)
        print_error("%s: %d of %d gradients off, max |err| %.3g\n", what, bad, N_EX * e->K, maxerr);
    return bad;
}

/* Every case: bwd (scale 1) against central differences, with a control (one gradient moved
 * by 1.5 times the tolerance must be caught); bwd overwrites and is linear in scale (0.25: a
 * power of two, so exactly). */
static void test_grad(void **state)
{
    (void)state;
    loss_case cs[32];
    const int nc = all_cases(cs);
    int failed = 0;
    for (int c = 0; c < nc; c++) {
        const int nk = N_EX * cs[c].K;
        float out[N_EX * K_MAX], y[N_EX * K_MAX], d[N_EX * K_MAX], d4[N_EX * K_MAX];
        fill_targets(y, &cs[c], 100 + c);
        fill_outputs(out, y, &cs[c], 200 + c);
        fd_env e = {.p = &cs[c].p, .out = out, .y = y, .K = cs[c].K};
        sum_loss(&e);
        for (int i = 0; i < nk; i++)
            d[i] = d4[i] = 12345.0f;
        mw_dloss_bwd_ref(NULL, e.p, d, out, e.prob, y, 1.0f, N_EX, cs[c].K);
        mw_dloss_bwd_ref(NULL, e.p, d4, out, e.prob, y, 0.25f, N_EX, cs[c].K);
        failed += fd_bad(&e, d, cs[c].name, 1) > 0;
        for (int i = 0; i < nk; i++)
            d[i] *= 0.25f;
        expect_close(d4, d, nk, 0.0f, 0.0f);
        for (int i = 0; i < nk; i++)
            d[i] = 4.0f * d4[i];                       /* the scale-1 gradient again, exactly */
        d[nk / 2] += (float)(1.5 * fd_tol(d[nk / 2])); /* the control */
        assert_int_equal(fd_bad(&e, d, cs[c].name, 0), 1);
    }
    print_message("central differences: largest |fd - ana| is %.3g of the tolerance\n", fd_worst);
    assert_int_equal(failed, 0);
}

/* ---- the forward against Keras' formulas ---- */

/* binary_crossentropy of a probability q against t, q clipped to [eps, 1 - eps] in float32 as
 * Keras clips it (1 - 1e-7 rounds to 1 - 2^-23 in float32). */
static double keras_bce(double q, double t)
{
    q = fmin(fmax(q, (double)1e-7f), (double)(1.0f - 1e-7f));
    return -(t * log(q) + (1 - t) * log(1 - q));
}

/* One element of Keras' elementwise losses, in double (keras/src/losses/losses.py). */
static double keras_elem(const mw_dloss *p, double o, double y)
{
    const double e = o - y, s = p->smoothing, d = p->delta;
    const double t = y * (1 - s) + 0.5 * s; /* _smooth_labels */
    switch (p->kind) {
    case MW_DLOSS_MSE: /* mean_squared_error */
        return e * e;
    case MW_DLOSS_MAE: /* mean_absolute_error */
        return fabs(e);
    case MW_DLOSS_HUBER: /* huber */
        return fabs(e) <= d ? 0.5 * e * e : d * fabs(e) - 0.5 * d * d;
    case MW_DLOSS_LOGCOSH: /* log_cosh, as its name says */
        return log(cosh(e));
    case MW_DLOSS_BCE: /* binary_crossentropy; from logits (jax backend) -t log_sigmoid(o)
                          - (1 - t) log_sigmoid(-o), unclipped */
        return p->from_logits ? t * log1p(exp(-o)) + (1 - t) * log1p(exp(o)) : keras_bce(o, t);
    case MW_DLOSS_FOCAL: { /* binary_focal_crossentropy: sigmoid first when from logits */
        const double q = p->from_logits ? 1 / (1 + exp(-o)) : o;
        const double pt = t * q + (1 - t) * (1 - q);
        const double w = p->balanced ? t * p->alpha + (1 - t) * (1 - p->alpha) : 1.0;
        return w * pow(1 - pt, p->gamma) * keras_bce(q, t);
    }
    case MW_DLOSS_CCE:
        break;
    }
    return NAN;
}

/* categorical_crossentropy from logits, one row: -sum_k t_k log_softmax(z)_k with the
 * targets smoothed as y (1 - s) + s / K. */
static double keras_cce(const mw_dloss *p, const float *z, const float *y, int K)
{
    double mx = z[0], sum = 0.0, loss = 0.0;
    for (int j = 1; j < K; j++)
        mx = fmax(mx, z[j]);
    for (int j = 0; j < K; j++)
        sum += exp(z[j] - mx);
    const double lse = mx + log(sum), s = p->smoothing;
    for (int j = 0; j < K; j++)
        loss -= (y[j] * (1 - s) + s / K) * (z[j] - lse);
    return loss;
}

/* Keras' per-example loss: the mean over K of the elementwise loss (CCE: the row's). */
static double keras_loss(const mw_dloss *p, const float *o, const float *y, int K)
{
    if (p->kind == MW_DLOSS_CCE)
        return keras_cce(p, o, y, K);
    double s = 0.0;
    for (int j = 0; j < K; j++)
        s += keras_elem(p, o[j], y[j]);
    return s / K;
}

/* Fail unless |got - want| <= 2e-6 + 1e-5 |want|, printing both. The float forward does a
 * few float operations per element (each within 1/2 ulp) and expf/logf/log1pf/tanhf/powf
 * (glibc: within 1-2 ulp): about 20 roundings, 1.2e-6 relative to the terms. Where terms of
 * opposite sign cancel (log cosh's e + softplus(-2 e) - log 2, Huber's d |e| - d^2 / 2), the
 * error is a few ulp of the largest term instead (below 8 here: ulp 9.5e-7), hence 2e-6
 * absolute. */
static int loss_near(double got, double want, const char *what, int i)
{
    if (fabs(got - want) <= 2e-6 + 1e-5 * fabs(want))
        return 1;
    print_error("%s: loss[%d] = %.9g, Keras' formula %.9g (|err| %.3g)\n", what, i, got, want,
                fabs(got - want));
    return 0;
}

/* Every case's forward against Keras' formulas in double; prob: CCE's softmax rows sum to 1
 * and equal exp(z - logsumexp z), the others copy out bitwise. The softmax: each prob is
 * expf (1 ulp) times a rounded 1 / sum (1/2 ulp) rounded (1/2 ulp), 2 ulp = 1.2e-7 of itself;
 * the row's sum is off by that weighted by prob, at most 1.2e-7, within 1e-6. */
static void test_keras_values(void **state)
{
    (void)state;
    loss_case cs[32];
    const int nc = all_cases(cs);
    int bad = 0;
    for (int c = 0; c < nc; c++) {
        const int K = cs[c].K, nk = N_EX * K;
        float out[N_EX * K_MAX], y[N_EX * K_MAX], loss[N_EX], prob[N_EX * K_MAX];
        fill_targets(y, &cs[c], 300 + c);
        fill_outputs(out, y, &cs[c], 400 + c);
        mw_dloss_fwd_ref(NULL, &cs[c].p, loss, prob, out, y, N_EX, K);
        for (int i = 0; i < N_EX; i++)
            bad +=
                !loss_near(loss[i], keras_loss(&cs[c].p, out + i * K, y + i * K, K), cs[c].name, i);
        if (cs[c].p.kind != MW_DLOSS_CCE) {
            assert_memory_equal(prob, out, nk * sizeof(float));
            continue;
        }
        for (int i = 0; i < N_EX; i++) {
            const float *z = out + i * K, *q = prob + i * K;
            double sum = 0.0, lse = 0.0;
            for (int j = 0; j < K; j++)
                sum += q[j], lse += exp((double)z[j]);
            assert_true(fabs(sum - 1.0) <= 1e-6);
            for (int j = 0; j < K; j++)
                assert_true(fabs(q[j] - exp(z[j] - log(lse))) <= 1e-6);
        }
    }
    assert_int_equal(bad, 0);
}

/* Values worked by hand, one example each; BCE's clip with a zero gradient there. */
typedef struct {
    const char *what;
    mw_dloss p;
    int K;
    float out[4], y[4];
    double want;
} hand_case;

static void test_hand_values(void **state)
{
    (void)state;
    const double ln2 = log(2.0), e1 = exp(1.0);
    const hand_case hc[] = {
        /* (1^2 + 2^2) / 2 */
        {"mse", {.kind = MW_DLOSS_MSE}, 2, {1, 2}, {0, 0}, 2.5},
        /* (|1 - 0.5| + |-3|) / 2 */
        {"mae", {.kind = MW_DLOSS_MAE}, 2, {1, -3}, {0.5f, 0}, 1.75},
        /* (0.5^2 / 2 + (1 * 3 - 1 / 2)) / 2 */
        {"huber", {.kind = MW_DLOSS_HUBER, .delta = 1}, 2, {0.5f, 3}, {0, 0}, 1.3125},
        /* log cosh(+-1) = log((e + 1/e) / 2) */
        {"logcosh", {.kind = MW_DLOSS_LOGCOSH}, 2, {1, -1}, {0, 0}, log((e1 + 1 / e1) / 2)},
        /* clipped: q = 0 -> 1e-7f; q = 1 -> 1 - 2^-23, -log(2^-23) = 23 log 2 */
        {"bce clip", {.kind = MW_DLOSS_BCE}, 2, {0, 1}, {1, 0}, (-log(1e-7f) + 23 * ln2) / 2},
        /* -log sigmoid(0) */
        {"bce logits", {.kind = MW_DLOSS_BCE, .from_logits = 1}, 1, {0}, {1}, ln2},
        /* (1 - 0.5)^2 (-log 0.5), times alpha = 0.25 for y = 1 */
        {"focal", {.kind = MW_DLOSS_FOCAL, .gamma = 2}, 1, {0.5f}, {1}, 0.25 * ln2},
        {"focal balanced",
         {.kind = MW_DLOSS_FOCAL, .gamma = 2, .alpha = 0.25f, .balanced = 1},
         1,
         {0.5f},
         {1},
         0.0625 * ln2},
        /* equal logits: log_softmax = -log 4 whatever the (smoothed) targets summing to 1 */
        {"cce", {.kind = MW_DLOSS_CCE}, 4, {0, 0, 0, 0}, {0, 1, 0, 0}, 2 * ln2},
        {"cce smoothing",
         {.kind = MW_DLOSS_CCE, .smoothing = 0.1f},
         4,
         {1, 1, 1, 1},
         {0, 0, 0, 1},
         2 * ln2},
    };
    int bad = 0;
    for (size_t c = 0; c < sizeof hc / sizeof *hc; c++) {
        float loss, prob[4], d[4];
        mw_dloss_fwd_ref(NULL, &hc[c].p, &loss, prob, hc[c].out, hc[c].y, 1, hc[c].K);
        bad += !loss_near(loss, hc[c].want, hc[c].what, 0);
        if (strcmp(hc[c].what, "bce clip") != 0)
            continue;
        mw_dloss_bwd_ref(NULL, &hc[c].p, d, hc[c].out, prob, hc[c].y, 1.0f, 1, 2);
        assert_true(d[0] == 0.0f && d[1] == 0.0f); /* jnp.clip passes no gradient */
    }
    assert_int_equal(bad, 0);
}

/* An empty batch writes nothing. */
static void test_empty(void **state)
{
    (void)state;
    loss_case cs[32];
    const int nc = all_cases(cs);
    for (int c = 0; c < nc; c++) {
        float buf[3] = {7, 7, 7};
        mw_dloss_fwd_ref(NULL, &cs[c].p, buf, buf + 1, buf + 2, buf + 2, 0, cs[c].K);
        mw_dloss_bwd_ref(NULL, &cs[c].p, buf, buf + 1, buf + 1, buf + 2, 1.0f, 0, cs[c].K);
        assert_true(buf[0] == 7 && buf[1] == 7 && buf[2] == 7);
    }
}

/* ---- metrics ---- */

typedef struct {
    const char *what;
    mw_metric_kind kind;
    int K;
    float q[4], y[4]; /* y[0] as an int32 label for SPARSE_ACC */
    double want;
} metric_case;

static void test_metric_value(void **state)
{
    (void)state;
    const float above = nextafterf(0.5f, 1.0f);
    const metric_case mc[] = {
        {"none", MW_METRIC_NONE, 2, {1, 0}, {1, 0}, 0},
        /* a tie between 1 and 2: the first maximum, 1 */
        {"sparse tie first", MW_METRIC_SPARSE_ACC, 3, {0.2f, 0.4f, 0.4f}, {1}, 1},
        {"sparse tie second", MW_METRIC_SPARSE_ACC, 3, {0.2f, 0.4f, 0.4f}, {2}, 0},
        {"sparse", MW_METRIC_SPARSE_ACC, 3, {0.7f, 0.2f, 0.1f}, {0}, 1},
        /* argmax(q) = 1 (first of the tie) against argmax(y) = 2, then = 1 */
        {"cat tie q", MW_METRIC_CAT_ACC, 3, {0.1f, 0.45f, 0.45f}, {0, 0, 1}, 0},
        {"cat tie q ok", MW_METRIC_CAT_ACC, 3, {0.1f, 0.45f, 0.45f}, {0, 1, 0}, 1},
        /* a tie in y: argmax(y) = 0 */
        {"cat tie y", MW_METRIC_CAT_ACC, 3, {0.8f, 0.1f, 0.1f}, {0.5f, 0.5f, 0}, 1},
        {"cat tie y wrong", MW_METRIC_CAT_ACC, 3, {0.1f, 0.8f, 0.1f}, {0.5f, 0.5f, 0}, 0},
        /* 0.5 predicts 0 (right against 0, wrong against 1); the next float up predicts 1 */
        {"bin threshold", MW_METRIC_BIN_ACC, 4, {0.5f, 0.5f, above, above}, {0, 1, 1, 0}, 0.5},
        {"bin", MW_METRIC_BIN_ACC, 4, {0.9f, 0.1f, 0.2f, 0.6f}, {1, 0, 0, 0}, 0.75},
        /* (|1 - 0.5| + |-1 - 1|) / 2, then the squares */
        {"mae", MW_METRIC_MAE, 2, {1, -1}, {0.5f, 1}, 1.25},
        {"mse", MW_METRIC_MSE, 2, {1, -1}, {0.5f, 1}, 2.125},
        {"rmse", MW_METRIC_RMSE, 2, {1, -1}, {0.5f, 1}, 2.125},
    };
    for (size_t c = 0; c < sizeof mc / sizeof *mc; c++) {
        int32_t label = (int32_t)mc[c].y[0];
        const void *target = mc[c].kind == MW_METRIC_SPARSE_ACC ? (const void *)&label : mc[c].y;
        const double got = metric_value(mc[c].kind, mc[c].q, target, mc[c].K);
        if (got != mc[c].want)
            fail_msg("metric %s: got %.17g, want %.17g", mc[c].what, got, mc[c].want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad),         cmocka_unit_test(test_keras_values),
        cmocka_unit_test(test_hand_values),  cmocka_unit_test(test_empty),
        cmocka_unit_test(test_metric_value),
    };
    return cmocka_run_group_tests_name("loss", tests, NULL, NULL);
}
