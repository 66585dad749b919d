/* Suite 'unit': Keras 3's optimizer update rules (kernels/optim_rules.h, the table's
 * sgd_step ... adamax_step) against steps written out by hand, in both CPU tables: Adam's and
 * SGD's worked examples, centered RMSprop with momentum and Adagrad with weight decay, and
 * Adam in Keras' own order of float32 operations. The fast twins against the reference over
 * every rule and option are tests/kernel_check.c's; the whole family against Keras itself is
 * the keras suite's (tests/keras/optim_parity.py). */
#include <math.h>
#include <stdio.h>

#include "kernels/cpu/table.h"
#include "kernels/kernels.h"
#include "kernels/ref/table.h"
#include "tests/util.h"

/* Fail unless |got - want| <= tol, printing both. */
#define expect_near(got, want, tol) expect_near_(got, want, tol, #got, __LINE__)
static void expect_near_(double got, double want, double tol, const char *what, int line)
{
    if (!(fabs(got - want) <= tol))
        fail_msg("line %d: %s: got %.9g, want %.9g (|err| %.3g > %.3g)", line, what, got, want,
                 fabs(got - want), tol);
}

/* Keras Adam (the adam_step rule), written out in double: m = b1 m + (1-b1) g,
 * v = b2 v + (1-b2) g^2, lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), p -= lr_t m / (sqrt(v) + eps).
 * Element 0 is the worked example p = 1, g = 0.5, t = 1: m = 0.05,
 * v = 0.00025, p1 = 1 - lr_t 0.05 / (sqrt(0.00025) + 1e-7). Element 2 has
 * |g| ~ eps, where eps inside the sqrt would change the step ~2400x.
 * The kernel gets float hyperparameters (0.999f is 0.99899995, so 1 - b2 is
 * off by 5e-5 relative), so the exact expectation uses those same values. */
static void test_adam_by_hand(void **state)
{
    (void)state;
    enum { n = 5 };
    const float b1f = 0.9f, b2f = 0.999f, epsf = 1e-7f;
    const double b1 = b1f, b2 = b2f, eps = epsf;
    const double p0[n] = {1.0, 0.0, 0.0, -2.0, 0.5};
    const double g1[n] = {0.5, -0.25, 1e-6, 0.0, 3.0};
    const double g2[n] = {-0.25, 0.5, 1e-6, 0.0, -3.0};
    /* The worked example, element 0 at step 1, with the decimal constants. */
    const double lr_t = 1e-3 * sqrt(1.0 - 0.999) / (1.0 - 0.9);
    const double p1_hand = 1.0 - lr_t * 0.05 / (sqrt(0.00025) + 1e-7);
    const float lr_t1 = (float)lr_t;
    const float lr_t2 = (float)(1e-3 * sqrt(1.0 - 0.999 * 0.999) / (1.0 - 0.9 * 0.9));

    double em[n], ev[n], ep1[n], ep2[n];
    for (int i = 0; i < n; i++) {
        double m = (1 - b1) * (float)g1[i], v = (1 - b2) * (float)g1[i] * (float)g1[i];
        ep1[i] = (float)p0[i] - (double)lr_t1 * m / (sqrt(v) + eps);
        m = b1 * m + (1 - b1) * (float)g2[i];
        v = b2 * v + (1 - b2) * (float)g2[i] * (float)g2[i];
        ep2[i] = ep1[i] - (double)lr_t2 * m / (sqrt(v) + eps);
        em[i] = m, ev[i] = v;
    }

    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        cpu ? mw_kernels_init_cpu(&t) : mw_kernels_init_ref(&t);
        float p[n], m[n] = {0}, v[n] = {0}, g[n], want[n];
        for (int i = 0; i < n; i++)
            p[i] = (float)p0[i], g[i] = (float)g1[i];
        const mw_kctx k = {.nthreads = 2};
        mw_optim_hyper h = {.lr = lr_t1, .gscale = 1.0f, .epsilon = epsf};
        h.one_minus_beta1 = (float)(1.0 - b1), h.one_minus_beta2 = (float)(1.0 - b2);
        t.adam_step(&k, p, m, v, NULL, g, n, &h);
        /* The worked example (float hyperparameters move v by 5e-5 relative). */
        expect_near(m[0], 0.05, 1e-7);
        expect_near(v[0], 0.00025, 1e-4 * 0.00025);
        expect_near(p[0], p1_hand, 1e-7);
        for (int i = 0; i < n; i++)
            want[i] = (float)ep1[i];
        expect_close(p, want, n, 1e-7f, 1e-5f);
        for (int i = 0; i < n; i++)
            g[i] = (float)g2[i];
        h.lr = lr_t2;
        t.adam_step(&k, p, m, v, NULL, g, n, &h);
        for (int i = 0; i < n; i++)
            want[i] = (float)ep2[i];
        expect_close(p, want, n, 1e-7f, 1e-5f);
        for (int i = 0; i < n; i++)
            want[i] = (float)em[i];
        expect_close(m, want, n, 0.0f, 1e-5f);
        for (int i = 0; i < n; i++)
            want[i] = (float)ev[i];
        expect_close(v, want, n, 0.0f, 1e-5f);
    }
}

/* Keras SGD (the sgd_step rule): vel = mu vel - lr g; p += vel. mu = 0.9, lr = 0.1 from
 * p = 1, 0, -1:
 *   g1 = 0.5, -1, 0:    vel = -0.05, 0.1, 0;          p = 0.95, 0.1, -1
 *   g2 = -0.2, 0.3, 2:  vel = -0.025, 0.06, -0.2;     p = 0.925, 0.16, -1.2
 * and mu = 0 is plain p -= lr g. */
static void test_sgd_by_hand(void **state)
{
    (void)state;
    for (int cpu = 0; cpu < 2; cpu++) {
        mw_kernels t;
        cpu ? mw_kernels_init_cpu(&t) : mw_kernels_init_ref(&t);
        const mw_kctx k = {.nthreads = 2};
        float p[3] = {1.0f, 0.0f, -1.0f}, vel[3] = {0}, g1[3] = {0.5f, -1.0f, 0.0f};
        float g2[3] = {-0.2f, 0.3f, 2.0f};
        mw_optim_hyper h = {.lr = 0.1f, .gscale = 1.0f, .momentum = 0.9f};
        t.sgd_step(&k, p, vel, NULL, NULL, g1, 3, &h);
        expect_close(vel, ((float[]){-0.05f, 0.1f, 0.0f}), 3, 1e-7f, 1e-6f);
        expect_close(p, ((float[]){0.95f, 0.1f, -1.0f}), 3, 1e-7f, 1e-6f);
        t.sgd_step(&k, p, vel, NULL, NULL, g2, 3, &h);
        expect_close(vel, ((float[]){-0.025f, 0.06f, -0.2f}), 3, 1e-7f, 1e-6f);
        expect_close(p, ((float[]){0.925f, 0.16f, -1.2f}), 3, 1e-7f, 1e-6f);
        float q[3] = {1.0f, 0.0f, -1.0f};
        h.momentum = 0.0f; /* no momentum slot */
        t.sgd_step(&k, q, NULL, NULL, NULL, g1, 3, &h);
        expect_close(q, ((float[]){0.95f, 0.1f, -1.0f}), 3, 1e-7f, 1e-6f);
    }
}

/* Two rules by hand, in double from Keras' formulas, one element over two steps: centered
 * RMSprop with momentum, and Adagrad with weight decay. (The whole family is checked against
 * Keras itself in the keras suite.) */
static void test_rmsprop_adagrad_by_hand(void **state)
{
    (void)state;
    mw_kernels t;
    mw_kernels_init_ref(&t);
    const double gs[2] = {0.5, -0.25}, lr = 0.01, rho = 0.9, mu = 0.5, eps = 1e-7;
    double p = 0.3, ms = 0, mom = 0, mg = 0;
    for (int k = 0; k < 2; k++) {
        ms = rho * ms + (1 - rho) * gs[k] * gs[k];
        mg = rho * mg + (1 - rho) * gs[k];
        mom = mu * mom + lr * gs[k] / sqrt(ms - mg * mg + eps);
        p -= mom;
    }
    mw_optim_hyper h = {.lr = 0.01f,
                        .gscale = 1.0f,
                        .epsilon = 1e-7f,
                        .rho = 0.9f,
                        .momentum = 0.5f,
                        .centered = 1};
    float fp = 0.3f, s1 = 0, s2 = 0, s3 = 0;
    for (int k = 0; k < 2; k++) {
        float g = (float)gs[k];
        t.rmsprop_step(NULL, &fp, &s1, &s2, &s3, &g, 1, &h);
    }
    assert_true(fabs(fp - p) <= 1e-6 && fabs(s1 - ms) <= 1e-7 && fabs(s3 - mg) <= 1e-7);
    double q = 0.3, acc = 0.1, wd = 0.01, alr = 0.05, aeps = 1e-3;
    for (int k = 0; k < 2; k++) {
        q -= q * wd * alr;
        acc += gs[k] * gs[k];
        q -= alr * gs[k] / sqrt(acc + aeps);
    }
    mw_optim_hyper a = {
        .lr = 0.05f, .decay_lr = 0.05f, .weight_decay = 0.01f, .gscale = 1.0f, .epsilon = 1e-3f};
    float fq = 0.3f, facc = 0.1f;
    for (int k = 0; k < 2; k++) {
        float g = (float)gs[k];
        t.adagrad_step(NULL, &fq, &facc, NULL, NULL, &g, 1, &a);
    }
    assert_true(fabs(fq - q) <= 1e-6 && fabs(facc - acc) <= 1e-6);
}

/* Adam as keras/src/optimizers/adam.py computes it, one float32 operation at a time, with
 * 1 - beta rounded once from Python's double: the reference rule equals it bitwise over three
 * steps. And a steady gradient (g == m, g^2 == v) leaves both moments exactly where they are,
 * for every value tried, which Keras' m += (g - m)(1 - b1) promises and b1 m + (1 - b1) g does
 * not (0.9f x + (1.0f - 0.9f) x is not x for x = 0.437166423f). */
static void test_adam_keras_order(void **state)
{
    (void)state;
    mw_kernels t;
    mw_kernels_init_ref(&t);
    const float c1 = (float)(1.0 - 0.9), c2 = (float)(1.0 - 0.999), eps = 1e-7f, alpha = 1e-3f;
    const mw_optim_hyper h = {
        .lr = alpha, .gscale = 1.0f, .one_minus_beta1 = c1, .one_minus_beta2 = c2, .epsilon = eps};
    const float gs[3] = {0.3f, -0.02f, 1.5e-4f};
    float p = 0.5f, m = 0.0f, v = 0.0f, fp = 0.5f, s1 = 0.0f, s2 = 0.0f;
    for (int k = 0; k < 3; k++) {
        float g = gs[k];
        m = m + (g - m) * c1;
        v = v + (g * g - v) * c2;
        p = p - m * alpha / (sqrtf(v) + eps);
        t.adam_step(NULL, &fp, &s1, &s2, NULL, &g, 1, &h);
        if (fp != p || s1 != m || s2 != v)
            fail_msg("step %d: p %.9g m %.9g v %.9g, Keras' order gives %.9g %.9g %.9g", k + 1, fp,
                     s1, s2, p, m, v);
    }
    int moved = 0;
    for (float x = 1e-3f; x < 4.0f; x *= 1.37f) {
        float q = 0.5f, sm = x, sv = x * x;
        t.adam_step(NULL, &q, &sm, &sv, NULL, &x, 1, &h);
        moved += sm != x || sv != x * x;
    }
    assert_int_equal(moved, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adam_by_hand),
        cmocka_unit_test(test_sgd_by_hand),
        cmocka_unit_test(test_rmsprop_adagrad_by_hand),
        cmocka_unit_test(test_adam_keras_order),
    };
    return cmocka_run_group_tests_name("optim_rules", tests, NULL, NULL);
}
