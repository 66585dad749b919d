/* Suite 'cuda': every CUDA kernel twin against the reference (kernels/ref).
 *
 * Each test draws random inputs (odd sizes, padding, strides, chunked scratch,
 * ties, empty batches), runs the reference on the host and the CUDA twin on the
 * device from the same starting buffers (backward passes accumulate, so the
 * outputs start non-zero), and compares with expect_close. Without a device
 * (or in a build without CUDA) those tests skip with the reason printed; one
 * test always runs and checks that the missing device is reported clearly and
 * that the kernel table keeps working on the host. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/status.h"
#include "common/timer.h"
#include "kernels/cast.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cudnn.h"
#include "kernels/cuda/metrics.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/table.h"
#include "kernels/dropout.h"
#include "kernels/embed.h"
#include "kernels/geom.h"
#include "kernels/ref/table.h"
#include "kernels/twins.h"
#include "tests/kernel_check.h"
#include "tests/test_cuda.h"
#include "tests/util.h"

#define MW_LOSS_HD static inline
#include "kernels/loss_rules.h" /* metrics_add_example: the host's sums of the device metrics */

mw_kctx ctx;     /* the suite's CUDA context; ctx.dev == NULL without a device */
mw_kernels cuda; /* the table after mw_kernels_init_cuda */

void check_rc(mw_status rc, const char *what)
{
    if (rc != MW_OK)
        fail_msg("%s: %s: %s", what, mw_status_str(rc), mw_err_msg());
}

/* Wait for the stream and fail on any recorded error. */
void check_sync(void)
{
    check_rc(mw_cuda_sync(&ctx), "mw_cuda_sync");
}

void *h_keep(pool *P, void *p)
{
    assert_non_null(p);
    assert_true(P->nh < 64);
    return P->host[P->nh++] = p;
}

float *h_rand(pool *P, size_t count, uint64_t seed, float lo, float hi)
{
    float *p = h_keep(P, malloc((count ? count : 1) * sizeof(float)));
    mw_test_fill_uniform(p, count, seed, lo, hi);
    return p;
}

/* Values on a coarse grid (ties for maxpool). */
float *h_grid(pool *P, size_t count, uint64_t seed, int levels)
{
    float *p = h_rand(P, count, seed, 0.0f, (float)levels);
    for (size_t i = 0; i < count; i++)
        p[i] = floorf(p[i]);
    return p;
}

float *h_copy(pool *P, const void *src, size_t nbytes)
{
    void *p = h_keep(P, malloc(nbytes ? nbytes : 1));
    memcpy(p, src, nbytes);
    return p;
}

static int32_t *h_labels(pool *P, int N, int K, uint64_t seed)
{
    int32_t *p = h_keep(P, malloc((N ? N : 1) * sizeof(int32_t)));
    mw_rng r;
    mw_rng_seed(&r, seed, 3);
    for (int i = 0; i < N; i++)
        p[i] = (int32_t)mw_rng_below(&r, (uint32_t)K);
    return p;
}

/* A device copy of nbytes of host memory (src NULL: uninitialized). */
void *d_put(pool *P, const void *src, size_t nbytes)
{
    void *p = NULL;
    check_rc(mw_cuda_alloc(&p, nbytes ? nbytes : 4), "mw_cuda_alloc");
    assert_true(P->nd < 64);
    P->dev[P->nd++] = p;
    if (src)
        check_rc(mw_cuda_upload(p, src, nbytes, &ctx), "mw_cuda_upload");
    return p;
}

/* Download into a new host buffer, after waiting for every kernel before it. */
void *d_get(pool *P, const void *dev, size_t nbytes)
{
    void *p = h_keep(P, malloc(nbytes ? nbytes : 1));
    check_rc(mw_cuda_download(p, dev, nbytes, &ctx), "mw_cuda_download");
    check_sync();
    return p;
}

void pool_free(pool *P)
{
    for (int i = 0; i < P->nd; i++)
        mw_cuda_free(P->dev[i]);
    for (int i = 0; i < P->nh; i++)
        free(P->host[i]);
    P->nd = P->nh = 0;
}

/* Absolute tolerance for outputs that sum `terms` products of values in
 * [-1, 1]: cuBLAS sums in another order than the reference's loops. */
static float tol(size_t terms)
{
    return 2e-6f * (float)terms + 1e-6f;
}

/* --- always runs ------------------------------------------------------- */

static void test_no_device_fallback(void **state)
{
    (void)state;
    mw_err_clear();
    const char *ver = mw_cuda_version_string();
    assert_non_null(ver);
    assert_true(strlen(ver) > 0);
    expect_contains(ver, "CUDA");
    int n = mw_cuda_device_count();
    assert_true(n >= 0);
    print_message("%s; %d device(s)\n", ver, n);

    /* Opening a device that does not exist fails with one clear message. */
    mw_kctx k;
    memset(&k, 0x5a, sizeof k);
    mw_status rc = mw_cuda_ctx_open(&k, n); /* n is one past the last device */
    print_message("ctx_open(%d): %s\n", n, mw_err_msg());
    expect_err(rc, MW_EDEVICE, n ? "only" : "CUDA");
    assert_int_equal(mw_err_status(), MW_EDEVICE);
    assert_null(k.dev);
    assert_null(k.ws);
    mw_cuda_ctx_close(&k); /* safe after a failed open */
    mw_cuda_ctx_close(&k);
    mw_err_clear();
    assert_int_equal(mw_cuda_ctx_open(&k, -1), MW_EDEVICE);
    mw_cuda_ctx_close(&k);

    /* A CUDA twin given a host context records an error and touches nothing. */
    mw_err_clear();
    mw_kctx host = {.nthreads = 1};
    float x[4] = {-1, 2, -3, 4}, y[4] = {9, 9, 9, 9};
    mw_relu_fwd_cuda(&host, y, x, 4);
    assert_int_equal(mw_err_status(), MW_EDEVICE);
    assert_true(y[0] == 9 && y[3] == 9);
    assert_int_equal(mw_cuda_last_status(&host), MW_EDEVICE);
    mw_err_clear();
    mw_acc_cuda(&host, y, x, 4); /* a graph op too */
    assert_int_equal(mw_err_status(), MW_EDEVICE);
    assert_true(y[0] == 9 && y[3] == 9);
    mw_err_clear();

    /* The table: init_cuda overrides it only when a device is usable. */
    mw_kernels t;
    mw_kernels_init_ref(&t);
    mw_kernels_init_cuda(&t);
    if (n > 0) {
        assert_string_equal(t.name, "cuda");
        assert_ptr_equal(t.conv2d_fwd, mw_conv2d_fwd_cuda);
        assert_ptr_equal(t.sgd_step, mw_sgd_step_cuda);
        assert_ptr_equal(t.adam_step, mw_adam_step_cuda);
        assert_ptr_equal(t.sumsq, mw_sumsq_cuda);
        assert_ptr_equal(t.regularize, mw_regularize_cuda);
        assert_ptr_equal(t.dropout_fwd, mw_dropout_fwd_cuda);
        assert_ptr_equal(t.bn_bwd, mw_bn_bwd_cuda);
        assert_ptr_equal(t.bn_stats_update, mw_bn_stats_update_cuda);
        assert_ptr_equal(t.avgpool_bwd, mw_avgpool_bwd_cuda);
        assert_ptr_equal(t.softmax_fwd, mw_softmax_fwd_cuda);
        return;
    }
    assert_string_equal(t.name, "ref");
    pool P = {0};
    int N = 3, I = 5, O = 4;
    float *xh = h_rand(&P, (size_t)N * I, 1, -1, 1), *w = h_rand(&P, (size_t)I * O, 2, -1, 1);
    float *b = h_rand(&P, O, 3, -1, 1);
    float *got = h_rand(&P, (size_t)N * O, 4, 0, 1), *want = h_rand(&P, (size_t)N * O, 5, 0, 1);
    t.dense_fwd(&host, got, xh, w, b, N, I, O);
    mw_dense_fwd_ref(&host, want, xh, w, b, N, I, O);
    expect_close(got, want, (size_t)N * O, 0.0f, 0.0f);
    assert_int_equal(mw_err_status(), MW_OK);
    pool_free(&P);
}

/* --- runtime helpers ----------------------------------------------------- */

static void test_memory(void **state)
{
    (void)state;
    NEED_DEVICE();
    pool P = {0};
    size_t count = 100003;
    float *pinned = NULL;
    check_rc(mw_cuda_host_alloc((void **)&pinned, count * sizeof(float)), "mw_cuda_host_alloc");
    mw_test_fill_uniform(pinned, count, 11, -1, 1);
    float *want = h_copy(&P, pinned, count * sizeof(float));
    float *d = d_put(&P, pinned, count * sizeof(float));
    check_sync(); /* the upload reads the pinned buffer until then (the first GPU run's failure) */
    memset(pinned, 0, count * sizeof(float));
    check_rc(mw_cuda_download(pinned, d, count * sizeof(float), &ctx), "mw_cuda_download");
    check_sync();
    assert_memory_equal(pinned, want, count * sizeof(float));

    /* zero a middle range */
    check_rc(mw_cuda_zero(d + 10, 77 * sizeof(float), &ctx), "mw_cuda_zero");
    float *got = d_get(&P, d, count * sizeof(float));
    memset(want + 10, 0, 77 * sizeof(float));
    assert_memory_equal(got, want, count * sizeof(float));
    mw_cuda_host_free(pinned);

    /* zero bytes: fine, NULL */
    void *z = (void *)1;
    check_rc(mw_cuda_alloc(&z, 0), "mw_cuda_alloc(0)");
    assert_null(z);
    mw_cuda_free(NULL);
    mw_cuda_host_free(NULL);
    check_rc(mw_cuda_upload(NULL, NULL, 0, &ctx), "mw_cuda_upload(0)");

    /* growing the scratch keeps the context working; shrinking is a no-op */
    size_t before = ctx.ws_count;
    check_rc(mw_cuda_ws_reserve(&ctx, before / 2), "ws_reserve smaller");
    assert_int_equal(ctx.ws_count, before);
    check_rc(mw_cuda_ws_reserve(&ctx, before + 1000), "ws_reserve larger");
    assert_true(ctx.ws_count >= before + 1000);
    assert_non_null(ctx.ws);
    check_rc(mw_cuda_last_status(&ctx), "last_status");
    pool_free(&P);
}

/* A context whose first kernel fails stays failed, reports the first error, and skips later
 * kernels. The failing kernel is BatchNormalization's forward with one float too little
 * scratch: no library of a device can take that call over (cuDNN's implicit-GEMM convolution
 * needs no scratch at all, so a convolution cannot be the failing call once cuDNN runs). */
static void test_sticky_error(void **state)
{
    (void)state;
    NEED_DEVICE();
    mw_kctx k, other;
    check_rc(mw_cuda_ctx_open(&k, 0), "mw_cuda_ctx_open");
    check_rc(mw_cuda_ctx_open(&other, 0), "mw_cuda_ctx_open (a second context)");
    float *y = NULL, *x = NULL, *st = NULL, host[10];
    check_rc(mw_cuda_alloc((void **)&y, 16 * sizeof(float)), "alloc");
    check_rc(mw_cuda_alloc((void **)&x, 16 * sizeof(float)), "alloc");
    check_rc(mw_cuda_alloc((void **)&st, 12 * sizeof(float)), "alloc");
    check_rc(mw_cuda_zero(x, 16 * sizeof(float), &k), "mw_cuda_zero");
    for (int i = 0; i < 10; i++)
        host[i] = -1.0f;
    check_rc(mw_cuda_upload(y, host, sizeof host, &k), "upload");
    check_rc(mw_cuda_sync(&k), "sync");
    mw_kctx small = k;
    small.ws_count = 31; /* 4 channels need 32 */
    cuda.bn_fwd_train(&small, x + 8, st, st + 4, st + 8, x, NULL, NULL, 2, 4, 1e-3f);
    print_message("expected failure: %s\n", mw_err_msg());
    expect_err(mw_cuda_last_status(&k), MW_EINVAL, "workspace");
    cuda.relu_fwd(&k, y, y, 10);                          /* skipped: the context already failed */
    expect_err(mw_cuda_sync(&k), MW_EINVAL, "workspace"); /* the first failure, still */
    mw_err_clear();
    /* y is as it was: the ReLU never ran (read through a context that has not failed) */
    for (int i = 0; i < 10; i++)
        host[i] = 0.0f;
    check_rc(mw_cuda_download(host, y, sizeof host, &other), "download");
    check_rc(mw_cuda_sync(&other), "sync");
    for (int i = 0; i < 10; i++)
        assert_true(host[i] == -1.0f);
    mw_cuda_free(y);
    mw_cuda_free(x);
    mw_cuda_free(st);
    mw_cuda_ctx_close(&k);
    mw_cuda_ctx_close(&other);
    assert_null(k.dev);
    mw_err_clear();
}

/* The progress count: every MW_CUDA_PROGRESS_EVERY-th kernel wrapper records a mark that the
 * count passes once the stream does; and a host wait's deadline counts from the count's last
 * move, so a stream kept busy past the timeout by a run of kernels (about 1 s of them, timed
 * first, against 0.25 s) is waited for, not reported stuck. */
static void test_progress(void **state)
{
    (void)state;
    NEED_DEVICE();
    mw_kctx k;
    check_rc(mw_cuda_ctx_open(&k, 0), "mw_cuda_ctx_open");
    const size_t n = (size_t)1 << 28; /* 1 GiB: about half a millisecond a pass */
    float *x = NULL;
    check_rc(mw_cuda_alloc((void **)&x, n * sizeof(float)), "alloc");
    check_rc(mw_cuda_zero(x, n * sizeof(float), &k), "zero");
    const long p0 = mw_cuda_progress(&k);
    for (int i = 0; i < 4 * MW_CUDA_PROGRESS_EVERY; i++)
        cuda.relu_fwd(&k, x, x, n);
    check_rc(mw_cuda_sync(&k), "sync");
    const long p1 = mw_cuda_progress(&k);
    print_message("progress: %ld -> %ld after %d kernels\n", p0, p1, 4 * MW_CUDA_PROGRESS_EVERY);
    assert_true(p1 == p0 + 4); /* marks at 4 of the 64 calls, never more than 4 in flight */
    double t0 = mw_now();
    for (int i = 0; i < 8; i++)
        cuda.relu_fwd(&k, x, x, n);
    check_rc(mw_cuda_sync(&k), "sync");
    const double each = (mw_now() - t0) / 8;
    int runs = (int)(1.0 / each) + 1; /* below the launch queue's depth, so the host waits */
    runs = runs > 900 ? 900 : runs;
    check_rc(mw_cuda_set_timeout(&k, 0.25), "mw_cuda_set_timeout");
    t0 = mw_now();
    for (int i = 0; i < runs; i++)
        cuda.relu_fwd(&k, x, x, n);
    check_rc(mw_cuda_sync(&k), "a wait longer than the timeout on a device that keeps working");
    print_message("%d kernels of %.2f ms: waited %.2f s under a 0.25 s deadline\n", runs,
                  1e3 * each, mw_now() - t0);
    mw_cuda_free(x);
    mw_cuda_ctx_close(&k);
}

/* --- element-wise ops ---------------------------------------------------- */

static void test_relu(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const size_t counts[] = {1, 7, 1000, 65537};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        pool P = {0};
        size_t n = counts[c], nb = n * sizeof(float);
        float *x = h_rand(&P, n, 20 + c, -1, 1), *dy = h_rand(&P, n, 30 + c, -1, 1);
        float *dx = h_rand(&P, n, 40 + c, -1, 1);
        float *y = h_copy(&P, x, nb), *dxr = h_copy(&P, dx, nb);
        float *dX = d_put(&P, x, nb), *dY = d_put(&P, NULL, nb), *dDY = d_put(&P, dy, nb);
        float *dDX = d_put(&P, dx, nb);

        mw_relu_fwd_ref(NULL, y, x, n);
        cuda.relu_fwd(&ctx, dY, dX, n);
        expect_close((float *)d_get(&P, dY, nb), y, n, 0.0f, 0.0f);
        mw_relu_bwd_ref(NULL, dxr, dy, y, n);
        cuda.relu_bwd(&ctx, dDX, dDY, dY, n);
        expect_close((float *)d_get(&P, dDX, nb), dxr, n, 0.0f, 0.0f);
        cuda.relu_fwd(&ctx, dX, dX, n); /* in place */
        expect_close((float *)d_get(&P, dX, nb), y, n, 0.0f, 0.0f);
        pool_free(&P);
    }
    cuda.relu_fwd(&ctx, NULL, NULL, 0);
    cuda.relu_bwd(&ctx, NULL, NULL, NULL, 0);
    check_sync();
}

/* The mask is a hash of (seed, layer, example id, element): the device's must equal the
 * reference's bit for bit, with ids (a device array) and without, in place too. */
static void test_dropout(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const struct {
        int N;
        size_t D;
        float rate;
    } cases[] = {{1, 1, 0.5f}, {3, 1001, 0.25f}, {7, 4096, 0.9f}, {2, 70000, 0.0f}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        pool P = {0};
        const int N = cases[c].N;
        const size_t D = cases[c].D, n = (size_t)N * D, nb = n * sizeof(float);
        uint32_t *ids = h_keep(&P, malloc(N * sizeof(uint32_t)));
        for (int i = 0; i < N; i++)
            ids[i] = (uint32_t)(1000003u * (unsigned)i + 17u * (unsigned)c);
        float *x = h_rand(&P, n, 50 + c, -1, 1), *dy = h_rand(&P, n, 60 + c, -1, 1);
        float *y = h_rand(&P, n, 70 + c, 0, 1), *mask = h_rand(&P, n, 80 + c, 0, 1);
        float *dx = h_rand(&P, n, 90 + c, 0, 1);
        float *dX = d_put(&P, x, nb), *dY = d_put(&P, NULL, nb), *dM = d_put(&P, NULL, nb);
        float *dDY = d_put(&P, dy, nb), *dDX = d_put(&P, NULL, nb);
        uint32_t *dI = d_put(&P, ids, N * sizeof(uint32_t));

        mw_dropout_fwd_ref(NULL, y, mask, x, ids, 1234, 5, cases[c].rate, N, D);
        cuda.dropout_fwd(&ctx, dY, dM, dX, dI, 1234, 5, cases[c].rate, N, D);
        expect_close((float *)d_get(&P, dM, nb), mask, n, 0.0f, 0.0f);
        expect_close((float *)d_get(&P, dY, nb), y, n, 0.0f, 0.0f);
        mw_dropout_bwd_ref(NULL, dx, dy, mask, n);
        cuda.dropout_bwd(&ctx, dDX, dDY, dM, n);
        expect_close((float *)d_get(&P, dDX, nb), dx, n, 0.0f, 0.0f);
        cuda.dropout_fwd(&ctx, dX, dM, dX, dI, 1234, 5, cases[c].rate, N, D); /* in place */
        expect_close((float *)d_get(&P, dX, nb), y, n, 0.0f, 0.0f);
        mw_dropout_fwd_ref(NULL, y, mask, x, NULL, 9, 2, cases[c].rate, N, D); /* ids NULL */
        cuda.dropout_fwd(&ctx, dY, dM, dX, NULL, 9, 2, cases[c].rate, N, D);
        expect_close((float *)d_get(&P, dM, nb), mask, n, 0.0f, 0.0f);
        pool_free(&P);
    }
    cuda.dropout_fwd(&ctx, NULL, NULL, NULL, NULL, 1, 1, 0.5f, 0, 10);
    cuda.dropout_bwd(&ctx, NULL, NULL, NULL, 0);
    check_sync();
}

static void test_xent(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const struct {
        int N, K;
        float lo, hi;
    } cs[] = {{1, 1, -1, 1},    {5, 10, -5, 5},   {33, 10, -5, 5},    {3, 37, -3, 3},
              {2, 1000, -8, 8}, {9, 10, 80, 120}, {4, 33, -120, -80}, {64, 10, -1, 1}};
    for (size_t c = 0; c < sizeof cs / sizeof *cs; c++) {
        pool P = {0};
        int N = cs[c].N, K = cs[c].K;
        size_t nk = (size_t)N * K;
        float *z = h_rand(&P, nk, 50 + c, cs[c].lo, cs[c].hi);
        int32_t *lab = h_labels(&P, N, K, 60 + c);
        if (N > 4) /* ignore_class labels outside [0, K): loss 0, no one-hot term */
            lab[1] = K, lab[3] = 255 + K;
        float *loss = h_rand(&P, N, 1, 0, 1), *prob = h_rand(&P, nk, 2, 0, 1);
        float *dz = h_rand(&P, nk, 70 + c, -1, 1), *dzr = h_copy(&P, dz, nk * sizeof(float));
        float *dZ = d_put(&P, z, nk * sizeof(float)), *dL = d_put(&P, NULL, N * sizeof(float));
        float *dP = d_put(&P, NULL, nk * sizeof(float));
        int32_t *dLab = d_put(&P, lab, N * sizeof(int32_t));
        float *dDZ = d_put(&P, dz, nk * sizeof(float));

        mw_xent_fwd_ref(NULL, loss, prob, z, lab, N, K);
        cuda.xent_fwd(&ctx, dL, dP, dZ, dLab, N, K);
        expect_close((float *)d_get(&P, dL, N * sizeof(float)), loss, N, 1e-5f, 1e-5f);
        if (N > 4)
            assert_true(loss[1] == 0.0f && loss[3] == 0.0f);
        expect_close((float *)d_get(&P, dP, nk * sizeof(float)), prob, nk, 1e-7f, 1e-5f);
        float scale = 1.0f / 64;
        mw_xent_bwd_ref(NULL, dzr, prob, lab, scale, N, K);
        cuda.xent_bwd(&ctx, dDZ, dP, dLab, scale, N, K);
        expect_close((float *)d_get(&P, dDZ, nk * sizeof(float)), dzr, nk, 1e-7f, 1e-5f);
        pool_free(&P);
    }
    cuda.xent_fwd(&ctx, NULL, NULL, NULL, NULL, 0, 10);
    cuda.xent_bwd(&ctx, NULL, NULL, NULL, 1.0f, 0, 10);
    check_sync();
}

/* The dense-target losses (dloss_fwd, dloss_bwd) against the reference: every kind, with each
 * option that changes the arithmetic (from_logits, smoothing, delta, gamma, balanced), BCE's
 * clip (probabilities outside [1e-7, 1 - 1e-7]: a zero slope), one example and one output,
 * and more examples than one block.
 *
 * Tolerance 1e-6 absolute + 1e-5 relative. The formulas are the same code
 * (kernels/loss_rules.h) in the same order; what differs is the device's expf, logf, log1pf,
 * tanhf and powf (within 1 to 4 ulp of glibc's, the CUDA Programming Guide's table) and nvcc's
 * fma contraction (a product and a sum rounded once): a few ulp, far below 1e-5 (84 ulp) of
 * a loss whose terms share one sign. Where terms cancel (log cosh's e + softplus(-2 e), Huber's
 * d |e| - d^2 / 2), the value stays above the largest term less log 2 or d^2 / 2, so the
 * relative part still holds; the gradient's cancellations (focal's df bce + f dbce, CCE's
 * prob sum(t) - t) are a few ulp of terms below 1 / 0.01 = 100, times scale / K = 1 / 64 / K:
 * below 1e-6 absolute. */
typedef struct {
    mw_dloss p;
    float lo, hi; /* outputs uniform in [lo, hi) */
    int targets;  /* 0: uniform in [-1, 1); 1: 0 or 1; 2: soft, uniform in [0, 1) */
} dloss_case;

static const dloss_case dloss_cases[] = {
    {{.kind = MW_DLOSS_MSE}, -2, 2, 0},
    {{.kind = MW_DLOSS_MAE}, -2, 2, 0},
    {{.kind = MW_DLOSS_HUBER, .delta = 1}, -3, 3, 0},
    {{.kind = MW_DLOSS_HUBER, .delta = 0.3f}, -2, 2, 0},
    {{.kind = MW_DLOSS_LOGCOSH}, -3, 3, 0},
    {{.kind = MW_DLOSS_BCE}, 0.01f, 0.99f, 1},
    {{.kind = MW_DLOSS_BCE, .smoothing = 0.2f}, -0.2f, 1.2f, 2}, /* clipped */
    {{.kind = MW_DLOSS_BCE, .from_logits = 1}, -6, 6, 1},
    {{.kind = MW_DLOSS_BCE, .from_logits = 1, .smoothing = 0.2f}, -6, 6, 2},
    {{.kind = MW_DLOSS_FOCAL, .gamma = 2}, 0.01f, 0.99f, 1},
    {{.kind = MW_DLOSS_FOCAL, .smoothing = 0.1f, .gamma = 1.5f, .alpha = 0.25f, .balanced = 1},
     0.01f,
     0.99f,
     2},
    {{.kind = MW_DLOSS_FOCAL, .from_logits = 1, .gamma = 2, .alpha = 0.25f, .balanced = 1},
     -6,
     6,
     1},
    {{.kind = MW_DLOSS_FOCAL, .from_logits = 1, .smoothing = 0.1f, .gamma = 1.5f}, -6, 6, 2},
    {{.kind = MW_DLOSS_CCE}, -5, 5, 2},
    {{.kind = MW_DLOSS_CCE, .smoothing = 0.1f}, -5, 5, 2},
};

static void run_dloss(const dloss_case *dc, int N, int K, uint64_t s)
{
    pool P = {0};
    const size_t nk = (size_t)N * K, nb = nk * sizeof(float);
    float *out = h_rand(&P, nk, s, dc->lo, dc->hi);
    float *y = dc->targets == 1 ? h_grid(&P, nk, s + 1, 2)
                                : h_rand(&P, nk, s + 1, dc->targets ? 0.0f : -1.0f, 1.0f);
    float *loss = h_rand(&P, N, s + 2, 0, 1), *prob = h_rand(&P, nk, s + 3, 0, 1);
    float *dout = h_rand(&P, nk, s + 4, -1, 1); /* bwd overwrites */
    float *dO = d_put(&P, out, nb), *dY = d_put(&P, y, nb), *dP = d_put(&P, prob, nb);
    float *dL = d_put(&P, loss, N * sizeof(float)), *dD = d_put(&P, dout, nb);
    const float scale = 1.0f / 64;

    mw_dloss_fwd_ref(NULL, &dc->p, loss, prob, out, y, N, K);
    cuda.dloss_fwd(&ctx, &dc->p, dL, dP, dO, dY, N, K);
    expect_close((float *)d_get(&P, dL, N * sizeof(float)), loss, N, 1e-6f, 1e-5f);
    expect_close((float *)d_get(&P, dP, nb), prob, nk, 1e-6f, 1e-5f);
    mw_dloss_bwd_ref(NULL, &dc->p, dout, out, prob, y, scale, N, K);
    cuda.dloss_bwd(&ctx, &dc->p, dD, dO, dP, dY, scale, N, K);
    expect_close((float *)d_get(&P, dD, nb), dout, nk, 1e-6f, 1e-5f);
    pool_free(&P);
}

static void test_dloss(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const int shapes[][2] = {{1, 1}, {37, 5}, {1000, 3}};
    for (size_t c = 0; c < sizeof dloss_cases / sizeof *dloss_cases; c++)
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            run_dloss(&dloss_cases[c], shapes[s][0], shapes[s][1], 500 + 10 * c + s);
    cuda.dloss_fwd(&ctx, &dloss_cases[0].p, NULL, NULL, NULL, NULL, 0, 4);
    cuda.dloss_bwd(&ctx, &dloss_cases[0].p, NULL, NULL, NULL, NULL, 1.0f, 0, 4);
    check_sync();
}

/* Sample weights (scale_rows): one product per element on both sides, so bitwise. */
/* Embedding's twins against the reference: the gather bitwise; the scatter-add bitwise too
 * (sorted: each row's positions added in ascending order, the reference's; test_embed_det
 * checks wider shapes and runs twice); ids outside [0, V) give zero rows and no gradient. */
static void test_embed(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const int shapes[][4] = {{1, 1, 1, 1}, {3, 5, 4, 7}, {64, 16, 33, 50}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        pool P = {0};
        const int n = shapes[s][0], T = shapes[s][1], D = shapes[s][2], V = shapes[s][3];
        const size_t np = (size_t)n * T, ny = np * D, nt = (size_t)V * D;
        float *ids = h_rand(&P, np, 720 + s, 0, 1);
        for (size_t i = 0; i < np; i++)
            ids[i] = (float)(int)(ids[i] * V);
        if (np > 4)
            ids[1] = (float)V, ids[3] = -1.0f; /* no row */
        float *tab = h_rand(&P, nt, 730 + s, -1, 1), *dy = h_rand(&P, ny, 740 + s, -1, 1);
        float *y = h_rand(&P, ny, 750 + s, 0, 1), *g = h_rand(&P, nt, 760 + s, -1, 1);
        float *dIds = d_put(&P, ids, np * sizeof(float)), *dTab = d_put(&P, tab, nt * 4);
        float *dY = d_put(&P, y, ny * 4), *dDy = d_put(&P, dy, ny * 4), *dG = d_put(&P, g, nt * 4);
        mw_embed_fwd_ref(NULL, y, ids, tab, n, T, D, V);
        cuda.embed_fwd(&ctx, dY, dIds, dTab, n, T, D, V);
        expect_close((float *)d_get(&P, dY, ny * 4), y, ny, 0.0f, 0.0f);
        mw_embed_bwd_ref(NULL, g, dy, ids, n, T, D, V);
        cuda.embed_bwd(&ctx, dG, dDy, dIds, n, T, D, V);
        expect_close((float *)d_get(&P, dG, nt * 4), g, nt, 0.0f, 0.0f);
        pool_free(&P);
    }
    cuda.embed_fwd(&ctx, NULL, NULL, NULL, 0, 5, 4, 7);
    cuda.embed_bwd(&ctx, NULL, NULL, NULL, 0, 5, 4, 7);
    check_sync();
}

/* The padding mask's mean against the reference: the same sums in the same step order
 * (forward within 1 ulp of a T-term float32 sum's rounding, 1e-6); the backward's one
 * division per value (1e-6); ids with padding at the end, in the middle, and none. */
/* LayerNormalization's twins against the reference: a warp per row for the forward and dx, the
 * reference's double sums in another order (within 1e-6: sqrtf and the double sums may round
 * differently on the device); gamma's and beta's gradients fixed-order two-stage sums within
 * the float32 bound expect_norm_params argues; with and without gamma and beta, dx NULL too. */
static void test_layernorm(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const int shapes[][2] = {{1, 1}, {7, 5}, {2048, 96}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int affine = 1; affine >= 0; affine--) {
            pool P = {0};
            const int rows = shapes[s][0], D = shapes[s][1];
            const size_t nx = (size_t)rows * D;
            float *x = h_rand(&P, nx, 820 + s, -3, 5), *y = h_rand(&P, nx, 830 + s, 0, 1);
            float *st = h_rand(&P, 2 * (size_t)rows, 840 + s, 0, 1);
            float *g = affine ? h_rand(&P, D, 850 + s, 0.5f, 1.5f) : NULL;
            float *b = affine ? h_rand(&P, D, 860 + s, -1, 1) : NULL;
            float *dy = h_rand(&P, nx, 870 + s, -1, 1), *dx = h_rand(&P, nx, 880 + s, -1, 1);
            float *dg = h_rand(&P, D, 890 + s, -1, 1), *db = h_rand(&P, D, 900 + s, -1, 1);
            float *dX = d_put(&P, x, nx * 4), *dY = d_put(&P, y, nx * 4);
            float *dSt = d_put(&P, st, 2 * (size_t)rows * 4);
            float *dG = affine ? d_put(&P, g, D * 4) : NULL,
                  *dB = affine ? d_put(&P, b, D * 4) : NULL;
            float *dDy = d_put(&P, dy, nx * 4), *dDx = d_put(&P, dx, nx * 4);
            float *dDg = d_put(&P, dg, D * 4), *dDb = d_put(&P, db, D * 4);
            mw_layernorm_fwd_ref(NULL, y, st, x, g, b, rows, D, 1e-3f);
            cuda.layernorm_fwd(&ctx, dY, dSt, dX, dG, dB, rows, D, 1e-3f);
            expect_close((float *)d_get(&P, dY, nx * 4), y, nx, 1e-6f, 1e-6f);
            expect_close((float *)d_get(&P, dSt, 2 * (size_t)rows * 4), st, 2 * (size_t)rows, 1e-6f,
                         1e-6f);
            const float *g0 = h_copy(&P, dg, D * 4), *b0 = h_copy(&P, db, D * 4);
            mw_layernorm_bwd_ref(NULL, dx, dg, db, dy, x, st, g, rows, D);
            cuda.layernorm_bwd(&ctx, dDx, dDg, dDb, dDy, dX, dSt, dG, rows, D);
            expect_close((float *)d_get(&P, dDx, nx * 4), dx, nx, 1e-6f, 1e-5f);
            expect_norm_params(d_get(&P, dDg, D * 4), d_get(&P, dDb, D * 4), dg, db, g0, b0, dy, x,
                               st, rows, D, 0);
            cuda.layernorm_bwd(&ctx, NULL, dDg, NULL, dDy, dX, dSt, dG, rows, D); /* no dx */
            pool_free(&P);
        }
    check_sync();
}

/* The RMS normalizations' twins against the reference (rmsnorm_fwd, rmsnorm_bwd), as
 * test_layernorm's: a warp per row (forward and dx within 1e-6), gamma's gradient within
 * expect_norm_params' bound; the mean of squares and the variance, gamma's offset 0 and Gemma's
 * 1, dx NULL too. */
static void test_rmsnorm(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const int shapes[][2] = {{1, 1}, {7, 5}, {2048, 96}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int v = 0; v < 4; v++) {
            pool P = {0};
            const int rows = shapes[s][0], D = shapes[s][1], centered = v % 2;
            const float off = (float)(v / 2);
            const size_t nx = (size_t)rows * D;
            float *x = h_rand(&P, nx, 920 + s, -3, 5), *y = h_rand(&P, nx, 930 + s, 0, 1);
            float *st = h_rand(&P, 2 * (size_t)rows, 940 + s, 0, 1);
            float *g = h_rand(&P, D, 950 + s, 0.5f, 1.5f);
            float *dy = h_rand(&P, nx, 970 + s, -1, 1), *dx = h_rand(&P, nx, 980 + s, -1, 1);
            float *dg = h_rand(&P, D, 990 + s, -1, 1);
            float *dX = d_put(&P, x, nx * 4), *dY = d_put(&P, y, nx * 4);
            float *dSt = d_put(&P, st, 2 * (size_t)rows * 4), *dG = d_put(&P, g, D * 4);
            float *dDy = d_put(&P, dy, nx * 4), *dDx = d_put(&P, dx, nx * 4);
            float *dDg = d_put(&P, dg, D * 4);
            mw_rmsnorm_fwd_ref(NULL, y, st, x, g, rows, D, 1e-6f, centered, off);
            cuda.rmsnorm_fwd(&ctx, dY, dSt, dX, dG, rows, D, 1e-6f, centered, off);
            expect_close((float *)d_get(&P, dY, nx * 4), y, nx, 1e-6f, 1e-6f);
            expect_close((float *)d_get(&P, dSt, 2 * (size_t)rows * 4), st, 2 * (size_t)rows, 1e-6f,
                         1e-6f);
            const float *g0 = h_copy(&P, dg, D * 4);
            mw_rmsnorm_bwd_ref(NULL, dx, dg, dy, x, st, g, rows, D, off);
            cuda.rmsnorm_bwd(&ctx, dDx, dDg, dDy, dX, dSt, dG, rows, D, off);
            expect_close((float *)d_get(&P, dDx, nx * 4), dx, nx, 1e-6f, 1e-5f);
            expect_norm_params(d_get(&P, dDg, D * 4), NULL, dg, NULL, g0, g0, dy, x, st, rows, D,
                               1);
            cuda.rmsnorm_bwd(&ctx, NULL, dDg, dDy, dX, dSt, dG, rows, D, off); /* no dx */
            pool_free(&P);
        }
    check_sync();
}

/* SinePositionEncoding's CUDA twin against the reference: device sinf, cosf and powf within
 * 2 ulp of the host's (1e-6 absolute for values in [-1, 1]). */
static void test_sine_pos(void **state)
{
    (void)state;
    NEED_DEVICE();
    pool P = {0};
    const int n = 4, T = 129, D = 32;
    const size_t cnt = (size_t)n * T * D;
    float *y = h_rand(&P, cnt, 1201, 0, 1), *dY = d_put(&P, y, cnt * 4);
    mw_sine_pos_ref(NULL, y, n, T, D, 10000.0f);
    cuda.sine_pos(&ctx, dY, n, T, D, 10000.0f);
    expect_close((float *)d_get(&P, dY, cnt * 4), y, cnt, 1e-6f, 0.0f);
    pool_free(&P);
    check_sync();
}

/* RotaryEmbedding's CUDA twins against the reference, heads of width 8 from step 5: the device
 * powf within 2 ulp moves an angle below 41 rad by up to 41 x 2.4e-7 = 1e-5, so a rotated pair
 * of values in [-1, 1] by up to 2e-5 (3e-5 allowed); the backward accumulates onto dx. In 16
 * bits (half 1, 2; x rounded to the format) that 1e-5 can move a rounded cosine or sine, a
 * product or the sum across a rounding boundary: each such flip is one unit in the last place
 * of a value under 2 (2^-7 for bfloat16, 2^-10 for float16), and a value takes at most the
 * sum's and its two products' (3 of them allowed). */
static void test_rope(void **state)
{
    (void)state;
    NEED_DEVICE();
    const int n = 3, T = 37, D = 24, W = 8, start = 5, denom = 8;
    const size_t cnt = (size_t)n * T * D;
    for (int half = 0; half <= 2; half++) {
        pool P = {0};
        float *x = h_rand(&P, cnt, 1301, -1, 1), *y = h_rand(&P, cnt, 1302, 0, 1);
        for (size_t e = 0; e < cnt && half; e++)
            x[e] = half == 1 ? mw_bf16_round(x[e]) : mw_f16_round(x[e]);
        float *dx = h_rand(&P, cnt, 1303, -1, 1), *dX = d_put(&P, dx, cnt * 4);
        float *dXin = d_put(&P, x, cnt * 4), *dY = d_put(&P, y, cnt * 4);
        const float tol = half == 0 ? 3e-5f : half == 1 ? 3.0f / 128 : 3.0f / 1024;
        mw_rope_fwd_ref(NULL, y, x, n, T, D, W, start, denom, 500.0f, 2.5f, half);
        cuda.rope_fwd(&ctx, dY, dXin, n, T, D, W, start, denom, 500.0f, 2.5f, half);
        expect_close((float *)d_get(&P, dY, cnt * 4), y, cnt, tol, 0.0f);
        mw_rope_bwd_ref(NULL, dx, x, n, T, D, W, start, denom, 500.0f, 2.5f, half); /* x as dy */
        cuda.rope_bwd(&ctx, dX, dXin, n, T, D, W, start, denom, 500.0f, 2.5f, half);
        expect_close((float *)d_get(&P, dX, cnt * 4), dx, cnt, tol, 0.0f);
        pool_free(&P);
    }
    check_sync();
}

static void test_masked_mean(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const int shapes[][3] = {{1, 1, 1}, {3, 7, 5}, {64, 32, 48}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        pool P = {0};
        const int n = shapes[s][0], T = shapes[s][1], D = shapes[s][2];
        const size_t np = (size_t)n * T, nx = np * D, ny = (size_t)n * D;
        float *ids = h_rand(&P, np, 770 + s, 0, 1);
        for (size_t i = 0; i < np; i++) /* about a third padding; step 0 never */
            ids[i] = i % T == 0 ? 1.0f : ids[i] < 0.33f ? 0.0f : 5.0f;
        float *x = h_rand(&P, nx, 780 + s, -1, 1), *y = h_rand(&P, ny, 790 + s, 0, 1);
        float *dy = h_rand(&P, ny, 800 + s, -1, 1), *dx = h_rand(&P, nx, 810 + s, -1, 1);
        float *dIds = d_put(&P, ids, np * 4), *dX = d_put(&P, x, nx * 4),
              *dY = d_put(&P, y, ny * 4);
        float *dDy = d_put(&P, dy, ny * 4), *dDx = d_put(&P, dx, nx * 4);
        mw_masked_mean_fwd_ref(NULL, y, x, ids, n, T, D);
        cuda.masked_mean_fwd(&ctx, dY, dX, dIds, n, T, D);
        expect_close((float *)d_get(&P, dY, ny * 4), y, ny, 1e-6f, 1e-6f);
        mw_masked_mean_bwd_ref(NULL, dx, dy, ids, n, T, D);
        cuda.masked_mean_bwd(&ctx, dDx, dDy, dIds, n, T, D);
        expect_close((float *)d_get(&P, dDx, nx * 4), dx, nx, 1e-6f, 1e-6f);
        pool_free(&P);
    }
    check_sync();
}

static void test_scale_rows(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const int shapes[][2] = {{1, 1}, {37, 5}, {1000, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        pool P = {0};
        const int N = shapes[s][0], K = shapes[s][1];
        const size_t nb = (size_t)N * K * sizeof(float);
        float *a = h_rand(&P, (size_t)N * K, 700 + s, -2, 2), *w = h_rand(&P, N, 710 + s, 0, 3);
        float *dA = d_put(&P, a, nb), *dW = d_put(&P, w, N * sizeof(float));
        mw_scale_rows_ref(NULL, a, w, N, K);
        cuda.scale_rows(&ctx, dA, dW, N, K);
        expect_close((float *)d_get(&P, dA, nb), a, (size_t)N * K, 0.0f, 0.0f);
        pool_free(&P);
    }
    cuda.scale_rows(&ctx, NULL, NULL, 0, 3);
    check_sync();
}

/* One mw_cuda_metrics_add call against the host's sequential sums (metrics_add_example),
 * added onto what the accumulators held. Targets: int32 labels (a sparse accuracy, 4 bytes
 * each), or K floats: grid values with ties (CAT_ACC: the first maximum on both sides), 0 or
 * 1 against outputs in {0, 0.25, 0.5, 0.75} (BIN_ACC: 0.5 exactly, which is not above 0.5;
 * AUC: ties within buckets and bucket edges), uniform (the errors); ml->positions of them per
 * example (a sequence); with ml->masked, input ids of 0 or 1 (half the positions padding).
 * Argmax accuracy counts of one position (or of a mask's counted positions), the positions
 * counted and AUC bucket counts are integers, exact in double in any order; the other sums
 * (n values below 4, in the device's tree order) are within n 2^-53 of the sum: 1e-12. */
void metrics_case(const mw_metric_list *ml, int N, int K, uint64_t s)
{
    pool P = {0};
    const int T = ml->positions > 1 ? ml->positions : 1; /* outputs per example: T x K */
    const size_t nk = (size_t)N * T * K;
    const mw_metric_kind first = ml->kind[0];
    float *loss = h_rand(&P, N, s, 0, 5), *prob = h_grid(&P, nk, s + 1, 4);
    const void *y = h_labels(&P, N * T, K, s + 2);
    size_t ybytes = sizeof(int32_t) * T;
    int binary = 0;
    for (int m = 0; m < ml->n; m++)
        binary |= ml->kind[m] == MW_METRIC_BIN_ACC || ml->kind[m] == MW_METRIC_AUC;
    if (first != MW_METRIC_SPARSE_ACC) {
        ybytes = (size_t)T * K * sizeof(float);
        y = binary                       ? h_grid(&P, nk, s + 3, 2)
            : first == MW_METRIC_CAT_ACC ? h_grid(&P, nk, s + 3, 4)
                                         : h_rand(&P, nk, s + 3, 0, 1);
    }
    if (binary)
        for (size_t i = 0; i < nk; i++)
            prob[i] /= 4;
    const float *ids = ml->masked ? h_grid(&P, (size_t)N * T, s + 4, 2) : NULL;
    const float *w = ml->weighted ? h_grid(&P, (size_t)N * T, s + 5, 4) : NULL; /* 0 .. 0.75 */
    double start[MW_SUMS], want[MW_SUMS];
    for (int j = 0; j < MW_SUMS; j++) /* what the accumulators hold before */
        start[j] = j == MW_SUM_LOSS ? 0.25 : j == MW_SUM_COUNT ? -1 : (double)(j % 5);
    memcpy(want, start, sizeof want);
    for (int i = 0; i < N; i++) {
        metrics_add_example(ml, want, prob + (size_t)i * T * K, (const char *)y + i * ybytes, K,
                            ids ? ids + (size_t)i * T : NULL, w ? w + (size_t)i * T : NULL);
        want[MW_SUM_LOSS] += loss[i];
    }
    double *dAcc = d_put(&P, start, sizeof start);
    mw_cuda_metrics_add(&ctx, dAcc, d_put(&P, loss, N * sizeof(float)),
                        d_put(&P, prob, nk * sizeof(float)), d_put(&P, y, N * ybytes), ybytes,
                        ids ? d_put(&P, ids, (size_t)N * T * sizeof(float)) : NULL,
                        w ? d_put(&P, w, (size_t)N * T * sizeof(float)) : NULL, ml, N, K);
    check_rc(mw_cuda_mark(&ctx, 0), "mw_cuda_mark");
    check_rc(mw_cuda_wait_mark(&ctx, 0, 30, "test"), "mw_cuda_wait_mark");
    const double *got = d_get(&P, dAcc, sizeof start);
    if (!(fabs(got[MW_SUM_LOSS] - want[MW_SUM_LOSS]) <= 1e-9 * fabs(want[MW_SUM_LOSS])))
        fail_msg("metrics n %d, K %d: loss sum %.17g, want %.17g", N, K, got[MW_SUM_LOSS],
                 want[MW_SUM_LOSS]);
    for (int j = MW_SUM_COUNT; j < MW_SUMS; j++) {
        const int m = j - MW_SUM_METRIC(0);
        /* integers: the counts, the AUC's buckets, and the argmax accuracies of one position
         * (a binary accuracy is a share of K, a sequence's a share of T: sums of fractions) */
        const int exact =
            j == MW_SUM_COUNT || j == MW_SUM_VALID || m >= MW_METRICS_MAX || m >= ml->n ||
            ((ml->kind[m] == MW_METRIC_SPARSE_ACC || ml->kind[m] == MW_METRIC_CAT_ACC) &&
             (T == 1 || ml->masked));
        if (!(fabs(got[j] - want[j]) <= (exact ? 0 : 1e-12 * fabs(want[j]))))
            fail_msg("metrics n %d, K %d: sum %d (first kind %d) %.17g, want %.17g", N, K, j,
                     (int)first, got[j], want[j]);
    }
    pool_free(&P);
}

/* The device metrics (mw_cuda_metrics_add) for each metric kind alone and in lists of up to
 * MW_METRICS_MAX with an AUC, sizes around the block (256 threads); and the marks: a wait
 * on a passed mark returns, one never marked too. */
static void test_metrics(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const int ns[] = {1, 7, 255, 256, 257, 1024}, ks[] = {1, 10, 3, 10, 37, 10};
    static const mw_metric_list lists[] = {
        {1, {MW_METRIC_SPARSE_ACC}, 1, 0, 0},
        {1, {MW_METRIC_CAT_ACC}, 1, 0, 0},
        {1, {MW_METRIC_BIN_ACC}, 1, 0, 0},
        {1, {MW_METRIC_MAE}, 1, 0, 0},
        {1, {MW_METRIC_MSE}, 1, 0, 0},
        {1, {MW_METRIC_RMSE}, 1, 0, 0},
        {1, {MW_METRIC_AUC}, 1, 0, 0},
        {4, {MW_METRIC_BIN_ACC, MW_METRIC_AUC, MW_METRIC_MAE, MW_METRIC_RMSE}, 1, 0, 0},
        {3, {MW_METRIC_CAT_ACC, MW_METRIC_MSE, MW_METRIC_MAE}, 1, 0, 0},
        {1, {MW_METRIC_SPARSE_ACC}, 5, 0, 0}, /* per position: the token accuracy */
        {2, {MW_METRIC_BIN_ACC, MW_METRIC_AUC}, 3, 0, 0},
        {1, {MW_METRIC_SPARSE_ACC}, 5, 1, 0}, /* the padding positions not counted */
        {2, {MW_METRIC_BIN_ACC, MW_METRIC_AUC}, 3, 1, 0},
        {1, {MW_METRIC_SPARSE_ACC}, 5, 0, 1}, /* weighted_metrics: each position's weight */
        {2, {MW_METRIC_CAT_ACC, MW_METRIC_MAE}, 3, 1, 1}, /* weights and a mask */
    };
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++)
        for (size_t m = 0; m < sizeof lists / sizeof *lists; m++)
            metrics_case(&lists[m], ns[c], ks[c], 80 + 10 * c + m);
    pool P = {0};
    double start[MW_SUMS] = {0.25, 3};
    double *dAcc = d_put(&P, start, sizeof start);
    mw_cuda_metrics_add(&ctx, dAcc, NULL, NULL, NULL, 4, NULL, NULL, &lists[0], 0, 10);
    assert_memory_equal(d_get(&P, dAcc, sizeof start), start, sizeof start); /* n = 0 */
    pool_free(&P);
    check_rc(mw_cuda_wait_mark(&ctx, MW_CUDA_MARKS - 1, 30, "test"), "a mark never recorded");
    assert_int_equal(mw_cuda_mark(&ctx, MW_CUDA_MARKS), MW_EINTERNAL);
    mw_err_clear();
    check_sync();
}

/* Keras 3's update rules (kernels/optim_rules.h) against the reference, with every option
 * that changes the arithmetic (momentum and nesterov, amsgrad, centered, weight decay, the
 * clipping factor and clipvalue), three steps each; and sumsq into host memory. */
static void test_optim_rules(void **state)
{
    (void)state;
    NEED_DEVICE();
    const mw_optim_hyper base = {.lr = 0.01f,
                                 .gscale = 1.0f,
                                 .one_minus_beta1 = 0.1f,
                                 .one_minus_beta2 = 0.001f,
                                 .epsilon = 1e-7f,
                                 .rho = 0.9f,
                                 .beta2 = 0.999f,
                                 .bias1 = 0.271f};
    mw_optim_hyper hs[6];
    for (int i = 0; i < 6; i++)
        hs[i] = base;
    hs[1].momentum = 0.9f, hs[1].nesterov = 1, hs[1].weight_decay = 0.01f, hs[1].decay_lr = 0.1f;
    hs[2].amsgrad = 1, hs[2].clipvalue = 0.3f;
    hs[3].momentum = 0.5f, hs[3].centered = 1, hs[3].gscale = 0.5f;
    hs[4].momentum = 0.9f, hs[4].amsgrad = 1, hs[4].centered = 1, hs[4].epsilon = 0.1f;
    hs[5].weight_decay = 0.004f, hs[5].decay_lr = 0.01f, hs[5].gscale = 0.25f;
    const mw_optim_fn refs[5] = {mw_sgd_step_ref, mw_adam_step_ref, mw_rmsprop_step_ref,
                                 mw_adagrad_step_ref, mw_adamax_step_ref};
    const mw_optim_fn devs[5] = {cuda.sgd_step, cuda.adam_step, cuda.rmsprop_step,
                                 cuda.adagrad_step, cuda.adamax_step};
    const size_t n = 10007, nb = n * sizeof(float);
    for (int r = 0; r < 5; r++) {
        for (int i = 0; i < 6; i++) {
            pool P = {0};
            float *p = h_rand(&P, n, 300 + i, -1, 1), *s[3];
            float *dP = d_put(&P, p, nb), *dS[3];
            for (int j = 0; j < 3; j++) {
                /* s1 a mean square or accumulator, well above s3^2 (centered RMSprop) */
                s[j] = h_rand(&P, n, 310 + j, j == 0 ? 0.05f : 0.0f, j == 2 ? 0.01f : 0.1f);
                dS[j] = d_put(&P, s[j], nb);
            }
            float *dG = d_put(&P, NULL, nb);
            for (int step = 1; step <= 3; step++) {
                float *g = h_rand(&P, n, 320 + 10 * i + step, -1, 1);
                check_rc(mw_cuda_upload(dG, g, nb, &ctx), "upload g");
                refs[r](NULL, p, s[0], s[1], s[2], g, n, &hs[i]);
                devs[r](&ctx, dP, dS[0], dS[1], dS[2], dG, n, &hs[i]);
                check_sync();
            }
            expect_close((float *)d_get(&P, dP, nb), p, n, 1e-6f, 1e-5f);
            for (int j = 0; j < 3; j++)
                expect_close((float *)d_get(&P, dS[j], nb), s[j], n, 1e-7f, 1e-5f);
            pool_free(&P);
        }
    }
    pool P = {0};
    float *g = h_rand(&P, n, 400, -1, 1);
    float *dG = d_put(&P, g, nb);
    double want, got = -1.0;
    mw_sumsq_ref(NULL, &want, g, n);
    cuda.sumsq(&ctx, &got, dG, n);
    check_sync();
    assert_true(fabs(got - want) <= 1e-12 * want);
    cuda.sumsq(&ctx, &got, NULL, 0);
    assert_true(got == 0.0);
    pool_free(&P);
}

/* The weight penalty against the reference: the gradient term, and the penalty added into a
 * device double; scratch smaller than 512 doubles is a recorded error, not a wrong sum. */
static void test_regularize(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const size_t counts[] = {1, 1000, 100003};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        pool P = {0};
        size_t n = counts[c], nb = n * sizeof(float);
        float *w = h_rand(&P, n, 70 + c, -1, 1), *g = h_rand(&P, n, 75 + c, -1, 1);
        float *dW = d_put(&P, w, nb), *dG = d_put(&P, g, nb);
        double acc = 0.25, acc2 = 0.0;
        double *dAcc = d_put(&P, &acc, sizeof acc), *dAcc2 = d_put(&P, &acc2, sizeof acc2);
        mw_regularize_ref(NULL, g, &acc, w, n, 0.01, 0.003, 0.5f);
        cuda.regularize(&ctx, dG, dAcc, dW, n, 0.01, 0.003, 0.5f);
        mw_regularize_ref(NULL, NULL, &acc2, w, n, 0.0, 0.2, 1.0f);
        cuda.regularize(&ctx, NULL, dAcc2, dW, n, 0.0, 0.2, 1.0f);
        expect_close((float *)d_get(&P, dG, nb), g, n, 1e-6f, 1e-6f);
        double got = *(double *)d_get(&P, dAcc, sizeof(double));
        double got2 = *(double *)d_get(&P, dAcc2, sizeof(double));
        assert_true(fabs(got - acc) <= 1e-12 * fabs(acc));
        assert_true(fabs(got2 - acc2) <= 1e-12 * fabs(acc2));
        pool_free(&P);
    }
    cuda.regularize(&ctx, NULL, NULL, NULL, 0, 0.01, 0.01, 1.0f);
    check_sync();
    mw_kctx small;
    check_rc(mw_cuda_ctx_open(&small, 0), "open a second context");
    mw_cuda_free(small.ws); /* pretend it has almost no scratch */
    small.ws = NULL;
    small.ws_count = 3;
    float one = 1.0f;
    double acc = 0.0;
    pool P = {0};
    float *dW = d_put(&P, &one, sizeof one);
    double *dAcc = d_put(&P, &acc, sizeof acc);
    mw_err_clear();
    cuda.regularize(&small, NULL, dAcc, dW, 1, 0.1, 0.1, 1.0f);
    expect_err(mw_cuda_sync(&small), MW_EDEVICE, "mw_regularize_cuda: 3 floats of scratch");
    mw_err_clear();
    mw_cuda_ctx_close(&small);
    pool_free(&P);
}

/* --- dense --------------------------------------------------------------- */

static void test_dense(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const int cs[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 64, 10}, {64, 1600, 64}, {33, 7, 129}};
    for (size_t c = 0; c < sizeof cs / sizeof *cs; c++)
        for (int variant = 0; variant < 2; variant++) { /* 1: no bias, dx, db */
            pool P = {0};
            int N = cs[c][0], I = cs[c][1], O = cs[c][2];
            size_t nx = (size_t)N * I, nw = (size_t)I * O, ny = (size_t)N * O;
            uint64_t s = 100 + 10 * c + variant;
            float *x = h_rand(&P, nx, s, -1, 1), *w = h_rand(&P, nw, s + 1, -1, 1);
            float *b = variant ? NULL : h_rand(&P, O, s + 2, -1, 1);
            float *dy = h_rand(&P, ny, s + 3, -1, 1), *y = h_rand(&P, ny, s + 4, -1, 1);
            float *dx = h_rand(&P, nx, s + 5, -1, 1), *dw = h_rand(&P, nw, s + 6, -1, 1);
            float *db = h_rand(&P, O, s + 7, -1, 1);
            float *dX = d_put(&P, x, nx * 4), *dW = d_put(&P, w, nw * 4);
            float *dB = b ? d_put(&P, b, O * 4) : NULL, *dY = d_put(&P, y, ny * 4);
            float *dDY = d_put(&P, dy, ny * 4), *dDX = d_put(&P, dx, nx * 4);
            float *dDW = d_put(&P, dw, nw * 4), *dDB = d_put(&P, db, O * 4);

            mw_dense_fwd_ref(NULL, y, x, w, b, N, I, O);
            cuda.dense_fwd(&ctx, dY, dX, dW, dB, N, I, O);
            expect_close((float *)d_get(&P, dY, ny * 4), y, ny, tol(I), 1e-5f);

            mw_dense_bwd_ref(NULL, variant ? NULL : dx, dw, variant ? NULL : db, dy, x, w, N, I, O);
            cuda.dense_bwd(&ctx, variant ? NULL : dDX, dDW, variant ? NULL : dDB, dDY, dX, dW, N, I,
                           O);
            expect_close((float *)d_get(&P, dDX, nx * 4), dx, nx, tol(O), 1e-5f);
            expect_close((float *)d_get(&P, dDW, nw * 4), dw, nw, tol(N), 1e-5f);
            expect_close((float *)d_get(&P, dDB, O * 4), db, O, tol(N), 1e-5f);
            pool_free(&P);
        }
    cuda.dense_fwd(&ctx, NULL, NULL, NULL, NULL, 0, 5, 3);
    cuda.dense_bwd(&ctx, NULL, NULL, NULL, NULL, NULL, NULL, 0, 5, 3);
    check_sync();
}

/* Dense with its activation (cuBLASLt's epilogues: the bias, the ReLU in place, the tanh GELU
 * with z as its auxiliary output; the bias epilogue then the activation's kernel for the rest),
 * every kind and the ReLU's three uses, with and without bias, against the reference's two
 * kernels. z is held as dense_fwd's is (tol(I)); y = f(z) moves by that times f's slope (at most
 * 1.5, elu's alpha), and by the device's expf / tanhf against the host's (test_act_softmax's
 * 1e-6 + 1e-5 |y|). Where O is a multiple of 8 and every pointer 256-byte aligned (d_put's
 * cudaMalloc), cuBLASLt must take every epilogue case: mw_cuda_lt_unfused stays 0 there. */
static void test_dense_act(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const int cs[][3] = {{64, 96, 128}, {17, 33, 10}, {1, 1, 8}, {32, 256, 1024}};
    const int cases = MW_ACTK_COUNT + 3; /* + the ReLU: in place, clipped at 6 in place, apart */
    for (size_t c = 0; c < sizeof cs / sizeof *cs; c++)
        for (int a = 0; a < cases; a++)
            for (int variant = 0; variant < 2; variant++) { /* 1: no bias */
                pool P = {0};
                const int N = cs[c][0], I = cs[c][1], O = cs[c][2], relu = a - MW_ACTK_COUNT;
                const mw_act_kind kind = relu >= 0 ? MW_ACTK_RELU : (mw_act_kind)a;
                const float alpha = relu == 1             ? 6.0f
                                    : relu >= 0           ? INFINITY
                                    : kind == MW_ACTK_ELU ? 1.5f
                                                          : 0.2f;
                const int in_place = relu == 0 || relu == 1;
                const size_t nx = (size_t)N * I, nw = (size_t)I * O, ny = (size_t)N * O;
                const uint64_t s = 2100 + 100 * c + 2 * (uint64_t)a + (uint64_t)variant;
                float *x = h_rand(&P, nx, s, -1, 1), *w = h_rand(&P, nw, s + 1, -1, 1);
                float *b = variant ? NULL : h_rand(&P, O, s + 2, -1, 1);
                float *y = h_rand(&P, ny, s + 3, -1, 1), *z = h_rand(&P, ny, s + 4, -1, 1);
                for (size_t i = 0; i < nw; i++) /* z of size about 1, whatever I */
                    w[i] /= sqrtf((float)I);
                float *dX = d_put(&P, x, nx * 4), *dW = d_put(&P, w, nw * 4);
                float *dB = b ? d_put(&P, b, O * 4) : NULL, *dZ = d_put(&P, z, ny * 4);
                float *dY = in_place ? dZ : d_put(&P, y, ny * 4);
                const long unfused = mw_cuda_lt_unfused(&ctx);
                mw_dense_act_fwd_ref(NULL, in_place ? z : y, z, x, w, b, N, I, O, kind, alpha);
                cuda.dense_act_fwd(&ctx, dY, dZ, dX, dW, dB, N, I, O, kind, alpha);
                const float tz = tol(I);
                if (!in_place)
                    expect_close((float *)d_get(&P, dZ, ny * 4), z, ny, tz, 1e-5f);
                expect_close((float *)d_get(&P, dY, ny * 4), in_place ? z : y, ny,
                             1.5f * tz + 1e-6f, 2e-5f);
                /* the epilogue cases: the ReLU in place unclipped, the tanh GELU apart (O a
                 * multiple of 8), and the bias of every other */
                const int epilogue = relu == 0 || (kind == MW_ACTK_GELU_TANH && O % 8 == 0) || b;
                if (epilogue && mw_cuda_lt_unfused(&ctx) != unfused)
                    fail_msg("dense_act_fwd N %d I %d O %d kind %d%s: cuBLASLt offered no "
                             "algorithm (the unfused kernels ran)",
                             N, I, O, (int)kind, b ? "" : ", no bias");
                pool_free(&P);
            }
    cuda.dense_act_fwd(&ctx, NULL, NULL, NULL, NULL, NULL, 0, 5, 3, MW_ACTK_TANH, 0.0f);
    check_sync();
}

/* --- conv2d -------------------------------------------------------------- */

typedef struct {
    int H, W, C, O, KH, KW, SH, SW, same, N;
    int G; /* groups */
} conv_case;

static const conv_case conv_cases[] = {
    {28, 28, 1, 32, 3, 3, 1, 1, 0, 3, 1}, /* the tutorial CNN's layers */
    {13, 13, 32, 64, 3, 3, 1, 1, 0, 2, 1},
    {7, 5, 3, 5, 3, 2, 2, 1, 1, 3, 1}, /* odd sizes, 'same', strides */
    {9, 8, 4, 6, 5, 5, 3, 2, 1, 2, 1}, /* mostly padding */
    {6, 7, 5, 3, 1, 1, 1, 1, 0, 2, 1}, /* pointwise: no im2col */
    {6, 7, 5, 3, 1, 1, 2, 2, 1, 2, 1}, /* 1x1 strided: im2col */
    {1, 1, 3, 2, 1, 1, 1, 1, 1, 1, 1},
    {4, 4, 2, 3, 4, 4, 1, 1, 0, 5, 1},  /* kernel covers the image */
    {9, 8, 6, 4, 3, 3, 2, 1, 1, 3, 2},  /* grouped: im2col only, per-group GEMMs */
    {6, 7, 8, 12, 1, 1, 1, 1, 0, 2, 4}, /* grouped pointwise */
};

/* chunk: 0 = the context's full scratch; else scratch for about that many
 * images (so the batch is cut into chunks). */
static int conv_half; /* run_conv: operands rounded to bfloat16 (1, k.bf16 set) or float16
                         (2, k.f16 set) */

static void round_host(float *p, size_t count)
{
    for (size_t i = 0; i < count; i++)
        p[i] = conv_half == 2 ? mw_f16_round(p[i]) : mw_bf16_round(p[i]);
}

static void run_conv(const conv_case *cc, int variant, double chunk, uint64_t s)
{
    mw_conv2d_geom g;
    assert_int_equal(mw_conv2d_geom_init(&g, cc->H, cc->W, cc->C, cc->O, cc->KH, cc->KW, cc->SH,
                                         cc->SW, cc->same),
                     0);
    assert_int_equal(mw_conv2d_geom_group(&g, cc->G), 0);
    int N = cc->N;
    size_t nx = (size_t)N * g.H * g.W * g.C, nw = mw_conv2d_w_count(&g);
    size_t ny = (size_t)N * g.OH * g.OW * g.O;
    size_t kc = (size_t)g.KH * g.KW * g.C / g.G;
    mw_kctx k = ctx;
    if (chunk > 0)
        k.ws_count = (size_t)(chunk * (double)mw_conv2d_ws_min(&g));
    assert_true(k.ws_count <= ctx.ws_count);

    pool P = {0};
    float *x = h_rand(&P, nx, s, -1, 1), *w = h_rand(&P, nw, s + 1, -1, 1);
    float *b = variant ? NULL : h_rand(&P, g.O, s + 2, -1, 1);
    float *dy = h_rand(&P, ny, s + 3, -1, 1), *y = h_rand(&P, ny, s + 4, -1, 1);
    float *dx = h_rand(&P, nx, s + 5, -1, 1), *dw = h_rand(&P, nw, s + 6, -1, 1);
    float *db = h_rand(&P, g.O, s + 7, -1, 1);
    if (conv_half) {
        round_host(x, nx), round_host(w, nw), round_host(dy, ny);
        k.bf16 = conv_half == 1, k.f16 = conv_half == 2;
    }
    float *dX = d_put(&P, x, nx * 4), *dW = d_put(&P, w, nw * 4);
    float *dB = b ? d_put(&P, b, g.O * 4) : NULL, *dY = d_put(&P, y, ny * 4);
    float *dDY = d_put(&P, dy, ny * 4), *dDX = d_put(&P, dx, nx * 4);
    float *dDW = d_put(&P, dw, nw * 4), *dDB = d_put(&P, db, g.O * 4);

    mw_conv2d_fwd_ref(NULL, y, x, w, b, &g, N);
    cuda.conv2d_fwd(&k, dY, dX, dW, dB, &g, N);
    expect_close((float *)d_get(&P, dY, ny * 4), y, ny, tol(kc), 1e-5f);

    mw_conv2d_bwd_ref(NULL, variant ? NULL : dx, dw, variant ? NULL : db, dy, x, w, &g, N, 0);
    cuda.conv2d_bwd(&k, variant ? NULL : dDX, dDW, variant ? NULL : dDB, dDY, dX, dW, &g, N, 0);
    size_t rows = (size_t)N * g.OH * g.OW;
    expect_close((float *)d_get(&P, dDX, nx * 4), dx, nx, tol((size_t)g.KH * g.KW * g.O), 1e-5f);
    expect_close((float *)d_get(&P, dDW, nw * 4), dw, nw, tol(rows), 1e-5f);
    expect_close((float *)d_get(&P, dDB, g.O * 4), db, g.O, tol(rows), 1e-5f);
    pool_free(&P);
}

static void test_conv2d(void **state)
{
    (void)state;
    NEED_DEVICE();
    for (size_t c = 0; c < sizeof conv_cases / sizeof *conv_cases; c++) {
        const conv_case *cc = &conv_cases[c];
        print_message("conv2d %dx%dx%d -> %d, kernel %dx%d, stride %dx%d, %s, N=%d, groups %d\n",
                      cc->H, cc->W, cc->C, cc->O, cc->KH, cc->KW, cc->SH, cc->SW,
                      cc->same ? "same" : "valid", cc->N, cc->G);
        run_conv(cc, 0, 0, 200 + 20 * c);
        run_conv(cc, 1, 0, 201 + 20 * c);   /* no bias, no dx, no db */
        run_conv(cc, 0, 1.0, 202 + 20 * c); /* one image per chunk */
        run_conv(cc, 0, 2.5, 203 + 20 * c); /* chunks of 2 and a remainder */
    }
    mw_conv2d_geom g;
    assert_int_equal(mw_conv2d_geom_init(&g, 5, 5, 2, 3, 3, 3, 1, 1, 0), 0);
    cuda.conv2d_fwd(&ctx, NULL, NULL, NULL, NULL, &g, 0);
    cuda.conv2d_bwd(&ctx, NULL, NULL, NULL, NULL, NULL, NULL, &g, 0, 0);
    check_sync();
}

/* Same inputs twice give the same bits (no atomics, fixed reduction order). */
static void test_conv2d_reproducible(void **state)
{
    (void)state;
    NEED_DEVICE();
    const conv_case *cc = &conv_cases[1];
    mw_conv2d_geom g;
    assert_int_equal(mw_conv2d_geom_init(&g, cc->H, cc->W, cc->C, cc->O, cc->KH, cc->KW, cc->SH,
                                         cc->SW, cc->same),
                     0);
    int N = 8;
    size_t nx = (size_t)N * g.H * g.W * g.C, nw = (size_t)g.KH * g.KW * g.C * g.O;
    size_t ny = (size_t)N * g.OH * g.OW * g.O;
    pool P = {0};
    float *x = h_rand(&P, nx, 300, -1, 1), *w = h_rand(&P, nw, 301, -1, 1);
    float *dy = h_rand(&P, ny, 302, -1, 1);
    float *dX = d_put(&P, x, nx * 4), *dW = d_put(&P, w, nw * 4), *dDY = d_put(&P, dy, ny * 4);
    float *out[2][3];
    for (int r = 0; r < 2; r++) {
        float *dDX = d_put(&P, NULL, nx * 4), *dDW = d_put(&P, NULL, nw * 4);
        float *dDB = d_put(&P, NULL, g.O * 4);
        check_rc(mw_cuda_zero(dDX, nx * 4, &ctx), "zero");
        check_rc(mw_cuda_zero(dDW, nw * 4, &ctx), "zero");
        check_rc(mw_cuda_zero(dDB, g.O * 4, &ctx), "zero");
        cuda.conv2d_bwd(&ctx, dDX, dDW, dDB, dDY, dX, dW, &g, N, 0);
        out[r][0] = d_get(&P, dDX, nx * 4);
        out[r][1] = d_get(&P, dDW, nw * 4);
        out[r][2] = d_get(&P, dDB, g.O * 4);
    }
    assert_memory_equal(out[0][0], out[1][0], nx * 4);
    assert_memory_equal(out[0][1], out[1][1], nw * 4);
    assert_memory_equal(out[0][2], out[1][2], g.O * 4);
    pool_free(&P);
}

/* The convolution plans (kernels/cuda/dnn_plan.h) on a fresh context: the tutorial CNN's two
 * layers, forward and backward, five times each at one batch size, then once at another: one
 * plan (one round of cuDNN queries) per layer and batch, not per call. Without cuDNN no plan is
 * made, and the test says so. */
static void test_conv2d_plans(void **state)
{
    (void)state;
    NEED_DEVICE();
    print_message("%s\n", mw_cuda_conv_backend());
    mw_kctx k;
    check_rc(mw_cuda_ctx_open(&k, 0), "mw_cuda_ctx_open");
    const conv_case *layers[] = {&conv_cases[0], &conv_cases[1]};
    pool P = {0};
    for (int batch = 0; batch < 2; batch++)
        for (int rep = 0; rep < (batch ? 1 : 5); rep++)
            for (int l = 0; l < 2; l++) {
                const conv_case *cc = layers[l];
                mw_conv2d_geom g;
                assert_int_equal(mw_conv2d_geom_init(&g, cc->H, cc->W, cc->C, cc->O, cc->KH, cc->KW,
                                                     cc->SH, cc->SW, cc->same),
                                 0);
                const int N = batch ? 5 : 4;
                size_t nx = (size_t)N * g.H * g.W * g.C, nw = (size_t)g.KH * g.KW * g.C * g.O;
                size_t ny = (size_t)N * g.OH * g.OW * g.O;
                float *dX = d_put(&P, NULL, nx * 4), *dW = d_put(&P, NULL, nw * 4);
                float *dY = d_put(&P, NULL, ny * 4), *dB = d_put(&P, NULL, g.O * 4);
                check_rc(mw_cuda_zero(dX, nx * 4, &k), "zero");
                check_rc(mw_cuda_zero(dW, nw * 4, &k), "zero");
                check_rc(mw_cuda_zero(dB, g.O * 4, &k), "zero");
                cuda.conv2d_fwd(&k, dY, dX, dW, dB, &g, N);
                cuda.conv2d_bwd(&k, dX, dW, dB, dY, dX, dW, &g, N, 0);
                check_rc(mw_cuda_sync(&k), "conv2d");
                pool_free(&P);
            }
    const long plans = mw_cuda_conv_plans(&k);
    print_message("plans made: %ld for 22 convolution calls\n", plans);
    if (strncmp(mw_cuda_conv_backend(), "cuDNN", 5) == 0)
        assert_int_equal(plans, 4); /* 2 layers x 2 batch sizes */
    else
        assert_int_equal(plans, 0);
    mw_cuda_ctx_close(&k);
}

/* cuDNN refusing its choices at run time (MW_FAULT=cudnn:..., read when a plan is made, so each
 * case opens a fresh context): a refused first candidate gives way to the next; a refused
 * backward-filter pass leaves dx to cuDNN and dw to im2col, with nothing added twice; every
 * candidate refused is im2col throughout. Each result against the reference, as test_conv2d,
 * and the context never fails. */
static void test_conv2d_cudnn_fallback(void **state)
{
    (void)state;
    NEED_DEVICE();
    if (strncmp(mw_cuda_conv_backend(), "cuDNN", 5) != 0) {
        print_message("skipped: %s\n", mw_cuda_conv_backend());
        skip();
    }
    static const char *const faults[] = {"cudnn:first", "cudnn:filter", "cudnn:all"};
    const mw_kctx saved = ctx;
    for (size_t f = 0; f < sizeof faults / sizeof *faults; f++) {
        print_message("MW_FAULT=%s\n", faults[f]);
        setenv("MW_FAULT", faults[f], 1);
        check_rc(mw_cuda_ctx_open(&ctx, 0), "mw_cuda_ctx_open");
        for (size_t c = 0; c < 3; c++)
            run_conv(&conv_cases[c], 0, 0, 900 + 20 * c + f);
        check_sync();
        mw_cuda_ctx_close(&ctx);
    }
    unsetenv("MW_FAULT");
    ctx = saved;
}

/* --- maxpool ------------------------------------------------------------- */

static void test_maxpool(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const int cs[][9] = {
        /* H, W, C, PH, PW, SH, SW, same, N */
        {26, 26, 32, 2, 2, 2, 2, 0, 2}, {11, 11, 64, 2, 2, 2, 2, 0, 3}, /* odd: edge dropped */
        {7, 9, 3, 3, 3, 2, 2, 1, 2},    {6, 5, 2, 3, 3, 1, 1, 1, 2},    /* overlapping */
        {5, 8, 4, 2, 3, 1, 2, 0, 3},    {1, 1, 1, 1, 1, 1, 1, 0, 1},
    };
    for (size_t c = 0; c < sizeof cs / sizeof *cs; c++)
        for (int ties = 0; ties < 2; ties++) {
            const int *p = cs[c];
            mw_pool_geom g;
            assert_int_equal(mw_pool_geom_init(&g, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]),
                             0);
            int N = p[8];
            size_t nx = (size_t)N * g.H * g.W * g.C, ny = (size_t)N * g.OH * g.OW * g.C;
            uint64_t s = 400 + 10 * c + ties;
            pool P = {0};
            float *x = ties ? h_grid(&P, nx, s, 3) : h_rand(&P, nx, s, -1, 1);
            float *y = h_rand(&P, ny, s + 1, 0, 1), *dy = h_rand(&P, ny, s + 2, -1, 1);
            float *dx = h_rand(&P, nx, s + 3, -1, 1);
            int32_t *arg = h_keep(&P, malloc(ny * sizeof(int32_t)));
            float *dX = d_put(&P, x, nx * 4), *dY = d_put(&P, NULL, ny * 4);
            int32_t *dArg = d_put(&P, NULL, ny * sizeof(int32_t));
            float *dDY = d_put(&P, dy, ny * 4), *dDX = d_put(&P, dx, nx * 4);

            mw_maxpool_fwd_ref(NULL, y, arg, x, &g, N);
            cuda.maxpool_fwd(&ctx, dY, dArg, dX, &g, N);
            expect_close((float *)d_get(&P, dY, ny * 4), y, ny, 0.0f, 0.0f);
            assert_memory_equal(d_get(&P, dArg, ny * sizeof(int32_t)), arg, ny * sizeof(int32_t));
            /* the gather adds in the reference's order: bitwise equal */
            mw_maxpool_bwd_ref(NULL, dx, dy, arg, &g, N);
            cuda.maxpool_bwd(&ctx, dDX, dDY, dArg, &g, N);
            expect_close((float *)d_get(&P, dDX, nx * 4), dx, nx, 0.0f, 0.0f);
            pool_free(&P);
        }
    mw_pool_geom g;
    assert_int_equal(mw_pool_geom_init(&g, 4, 4, 1, 2, 2, 2, 2, 0), 0);
    cuda.maxpool_fwd(&ctx, NULL, NULL, NULL, &g, 0);
    cuda.maxpool_bwd(&ctx, NULL, NULL, NULL, &g, 0);
    check_sync();
}

/* --- layer ops of Functional graphs ---------------------------------------- */

/* BatchNormalization: training forward (outputs and statistics), inference, backward onto
 * non-zero dx / dgamma / dbeta, with and without gamma and beta, an empty batch; shapes of one
 * and of many chunks of rows (256, the cap, with a short last one) and channel counts that
 * leave part of the last 32-channel tile empty; the fixed-order reductions give the same bits
 * twice; and the moving-statistics entries, whose float expressions are the reference's bit
 * for bit. */
static void test_bn(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const struct {
        size_t rows;
        int C, affine;
    } cs[] = {{1, 1, 1}, {37, 19, 1},   {1000, 3, 1}, {5000, 64, 0}, {513, 7, 1},
              {0, 4, 1}, {5000, 40, 1}, {1, 3, 1},    {70000, 5, 1}};
    for (size_t c = 0; c < sizeof cs / sizeof *cs; c++) {
        pool P = {0};
        const size_t rows = cs[c].rows, n = rows * cs[c].C;
        const int C = cs[c].C;
        const uint64_t s = 900 + 10 * c;
        float *x = h_rand(&P, n, s, -2, 3), *dy = h_rand(&P, n, s + 1, -1, 1);
        float *g = cs[c].affine ? h_rand(&P, C, s + 2, 0.5f, 1.5f) : NULL;
        float *b = cs[c].affine ? h_rand(&P, C, s + 3, -1, 1) : NULL;
        float *y = h_rand(&P, n, s + 4, 0, 1), *st = h_rand(&P, 3 * C, s + 5, 0, 1);
        float *dx = h_rand(&P, n, s + 6, -1, 1), *dg = h_rand(&P, C, s + 7, -1, 1);
        float *db = h_rand(&P, C, s + 8, -1, 1), *yi = h_rand(&P, n, s + 9, 0, 1);
        float *dX = d_put(&P, x, n * 4), *dDY = d_put(&P, dy, n * 4);
        float *dG = g ? d_put(&P, g, C * 4) : NULL, *dB = b ? d_put(&P, b, C * 4) : NULL;
        float *dY = d_put(&P, NULL, n * 4), *dST = d_put(&P, NULL, 3 * C * 4);
        float *dDX = d_put(&P, dx, n * 4), *dDG = d_put(&P, dg, C * 4);
        float *dDB = d_put(&P, db, C * 4), *dYI = d_put(&P, NULL, n * 4);

        mw_bn_fwd_train_ref(NULL, y, st, st + C, st + 2 * C, x, g, b, rows, C, 1e-3f);
        cuda.bn_fwd_train(&ctx, dY, dST, dST + C, dST + 2 * C, dX, dG, dB, rows, C, 1e-3f);
        float *st1 = d_get(&P, dST, 3 * C * 4), *y1 = d_get(&P, dY, n * 4);
        expect_close(st1, st, 3 * C, 1e-6f, 1e-5f);
        expect_close(y1, y, n, 1e-5f, 1e-5f);
        cuda.bn_fwd_train(&ctx, dY, dST, dST + C, dST + 2 * C, dX, dG, dB, rows, C, 1e-3f);
        assert_memory_equal(d_get(&P, dST, 3 * C * 4), st1, 3 * C * 4); /* reproducible */
        assert_memory_equal(d_get(&P, dY, n * 4), y1, n * 4);
        float *dSTr = d_put(&P, st, 3 * C * 4); /* the rest: the reference's statistics */

        mw_bn_fwd_infer_ref(NULL, yi, x, g, b, st, st + C, rows, C, 1e-3f);
        cuda.bn_fwd_infer(&ctx, dYI, dX, dG, dB, dSTr, dSTr + C, rows, C, 1e-3f);
        expect_close((float *)d_get(&P, dYI, n * 4), yi, n, 1e-5f, 1e-5f);

        mw_bn_bwd_ref(NULL, dx, dg, db, dy, x, st, st + 2 * C, g, rows, C, 0);
        cuda.bn_bwd(&ctx, dDX, dDG, dDB, dDY, dX, dSTr, dSTr + 2 * C, dG, rows, C, 0);
        expect_close((float *)d_get(&P, dDX, n * 4), dx, n, 1e-5f, 1e-4f);
        expect_close((float *)d_get(&P, dDG, C * 4), dg, C, 1e-5f, 1e-4f);
        expect_close((float *)d_get(&P, dDB, C * 4), db, C, 1e-5f, 1e-4f);
        /* dx only, written (set_dx): the sums above are gone from both */
        mw_bn_bwd_ref(NULL, dx, NULL, NULL, dy, x, st, st + 2 * C, g, rows, C, 1);
        cuda.bn_bwd(&ctx, dDX, NULL, NULL, dDY, dX, dSTr, dSTr + 2 * C, dG, rows, C, 1);
        expect_close((float *)d_get(&P, dDX, n * 4), dx, n, 2e-5f, 1e-4f);
        /* dgamma and dbeta from zero, twice: the same bits */
        float *zero = h_keep(&P, calloc(2 * (size_t)C + 1, sizeof(float)));
        float *dZ1 = d_put(&P, zero, 2 * C * 4), *dZ2 = d_put(&P, zero, 2 * C * 4);
        cuda.bn_bwd(&ctx, NULL, dZ1, dZ1 + C, dDY, dX, dSTr, dSTr + 2 * C, dG, rows, C, 0);
        cuda.bn_bwd(&ctx, NULL, dZ2, dZ2 + C, dDY, dX, dSTr, dSTr + 2 * C, dG, rows, C, 0);
        assert_memory_equal(d_get(&P, dZ1, 2 * C * 4), d_get(&P, dZ2, 2 * C * 4), 2 * C * 4);

        /* the moving statistics (the reference's batch statistics on both sides): g += w st
         * twice, then folded into p, bitwise */
        float *mg = h_rand(&P, 2 * C, s + 10, -1, 1), *mp = h_rand(&P, 2 * C, s + 11, -1, 1);
        float *dMG = d_put(&P, mg, 2 * C * 4), *dMP = d_put(&P, mp, 2 * C * 4);
        for (int r = 0; r < 2; r++) {
            mw_bn_stats_acc_ref(NULL, mg, st, 2 * (size_t)C, 0.25f);
            cuda.bn_stats_acc(&ctx, dMG, dSTr, 2 * (size_t)C, 0.25f);
        }
        expect_close((float *)d_get(&P, dMG, 2 * C * 4), mg, 2 * C, 0.0f, 0.0f);
        mw_bn_stats_update_ref(NULL, mp, mg, 2 * (size_t)C, 0.99f);
        cuda.bn_stats_update(&ctx, dMP, dMG, 2 * (size_t)C, 0.99f);
        expect_close((float *)d_get(&P, dMP, 2 * C * 4), mp, 2 * C, 0.0f, 0.0f);
        expect_close((float *)d_get(&P, dMG, 2 * C * 4), mg, 2 * C, 0.0f, 0.0f); /* zeroed */
        pool_free(&P);
    }
    cuda.bn_stats_acc(&ctx, NULL, NULL, 0, 1.0f);
    cuda.bn_stats_update(&ctx, NULL, NULL, 0, 0.9f);
    check_sync();
}

/* BatchNormalization's sums keep their partials in the context's scratch: 4 rows of 4 channels
 * make one chunk, which needs 2 (1 + 1) 4 doubles = 32 floats (partials and totals). With 32
 * they run; with 31 the context fails, naming the workspace. */
static void test_bn_workspace(void **state)
{
    (void)state;
    NEED_DEVICE();
    mw_kctx k;
    check_rc(mw_cuda_ctx_open(&k, 0), "mw_cuda_ctx_open");
    float *y = NULL, *x = NULL, *st = NULL;
    check_rc(mw_cuda_alloc((void **)&y, 16 * sizeof(float)), "alloc");
    check_rc(mw_cuda_alloc((void **)&x, 16 * sizeof(float)), "alloc");
    check_rc(mw_cuda_alloc((void **)&st, 12 * sizeof(float)), "alloc");
    check_rc(mw_cuda_zero(x, 16 * sizeof(float), &k), "mw_cuda_zero");
    mw_kctx small = k;
    small.ws_count = 32;
    cuda.bn_fwd_train(&small, y, st, st + 4, st + 8, x, NULL, NULL, 4, 4, 1e-3f);
    check_rc(mw_cuda_sync(&k), "bn_fwd_train with 32 floats of scratch");
    small.ws_count = 31;
    cuda.bn_fwd_train(&small, y, st, st + 4, st + 8, x, NULL, NULL, 4, 4, 1e-3f);
    print_message("expected failure: %s\n", mw_err_msg());
    expect_err(mw_cuda_sync(&k), MW_EINVAL, "workspace");
    mw_cuda_free(y);
    mw_cuda_free(x);
    mw_cuda_free(st);
    mw_cuda_ctx_close(&k);
    mw_err_clear();
}

/* Synchronized BatchNormalization's twins against the reference: a slice's forward and
 * backward sums (double, in a fixed order: the same bits twice), the forward from given sums
 * (here the slice's own, times 3: M = 3 rows) and the backward's dx. */
static void test_bn_sync(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const struct {
        size_t rows;
        int C, affine;
    } cs[] = {{1, 1, 1}, {37, 19, 1},   {5000, 64, 0}, {513, 7, 1},
              {0, 4, 1}, {5000, 40, 1}, {1, 3, 1}};
    for (size_t c = 0; c < sizeof cs / sizeof *cs; c++) {
        pool P = {0};
        const size_t rows = cs[c].rows, n = rows * cs[c].C;
        const int C = cs[c].C;
        const uint64_t s = 950 + 10 * c;
        const double M = 3.0 * (double)(rows ? rows : 1);
        float *x = h_rand(&P, n, s, -2, 3), *dy = h_rand(&P, n, s + 1, -1, 1);
        float *g = cs[c].affine ? h_rand(&P, C, s + 2, 0.5f, 1.5f) : NULL;
        float *b = cs[c].affine ? h_rand(&P, C, s + 3, -1, 1) : NULL;
        float *y = h_rand(&P, n, s + 4, 0, 1), *st = h_rand(&P, 3 * C, s + 5, 0, 1);
        float *dx = h_rand(&P, n, s + 6, -1, 1);
        double *sum = h_keep(&P, calloc(2 * (size_t)C, sizeof(double)));
        float *dX = d_put(&P, x, n * 4), *dDY = d_put(&P, dy, n * 4);
        float *dG = g ? d_put(&P, g, C * 4) : NULL, *dB = b ? d_put(&P, b, C * 4) : NULL;
        float *dY = d_put(&P, NULL, n * 4), *dST = d_put(&P, NULL, 3 * C * 4);
        float *dDX = d_put(&P, dx, n * 4);
        double *dS = d_put(&P, NULL, 2 * C * sizeof(double));

        mw_bn_sums_ref(NULL, sum, x, NULL, NULL, NULL, NULL, NULL, rows, C);
        cuda.bn_sums(&ctx, dS, dX, NULL, NULL, NULL, NULL, NULL, rows, C);
        const double *s1 = d_get(&P, dS, 2 * C * sizeof(double));
        for (int i = 0; i < 2 * C; i++)
            assert_true(fabs(s1[i] - sum[i]) <= 1e-9 * (1.0 + fabs(sum[i])));
        cuda.bn_sums(&ctx, dS, dX, NULL, NULL, NULL, NULL, NULL, rows, C);
        assert_memory_equal(d_get(&P, dS, 2 * C * sizeof(double)), s1, 2 * C * sizeof(double));

        for (int i = 0; i < 2 * C; i++)
            sum[i] *= 3.0; /* three such slices */
        double *dSum = d_put(&P, sum, 2 * C * sizeof(double));
        mw_bn_sync_fwd_ref(NULL, y, st, st + C, st + 2 * C, x, g, b, sum, M, rows, C, 1e-3f);
        cuda.bn_sync_fwd(&ctx, dY, dST, dST + C, dST + 2 * C, dX, dG, dB, dSum, M, rows, C, 1e-3f);
        expect_close((float *)d_get(&P, dST, 3 * C * 4), st, 3 * C, 1e-6f, 1e-5f);
        expect_close((float *)d_get(&P, dY, n * 4), y, n, 1e-5f, 1e-5f);
        float *dSTr = d_put(&P, st, 3 * C * 4); /* the rest: the reference's statistics */

        float *dg = h_rand(&P, C, s + 7, -1, 1), *db = h_rand(&P, C, s + 8, -1, 1);
        float *dDG = d_put(&P, dg, C * 4), *dDB = d_put(&P, db, C * 4);
        mw_bn_sums_ref(NULL, sum, x, dy, st, st + 2 * C, dg, db, rows, C);
        cuda.bn_sums(&ctx, dS, dX, dDY, dSTr, dSTr + 2 * C, dDG, dDB, rows, C);
        s1 = d_get(&P, dS, 2 * C * sizeof(double));
        for (int i = 0; i < 2 * C; i++)
            assert_true(fabs(s1[i] - sum[i]) <= 1e-6 * (1.0 + fabs(sum[i])));
        expect_close((float *)d_get(&P, dDG, C * 4), dg, C, 1e-5f, 1e-4f);
        expect_close((float *)d_get(&P, dDB, C * 4), db, C, 1e-5f, 1e-4f);
        dSum = d_put(&P, sum, 2 * C * sizeof(double));
        mw_bn_sync_bwd_ref(NULL, dx, dy, x, st, st + 2 * C, g, sum, M, rows, C);
        cuda.bn_sync_bwd(&ctx, dDX, dDY, dX, dSTr, dSTr + 2 * C, dG, dSum, M, rows, C);
        expect_close((float *)d_get(&P, dDX, n * 4), dx, n, 1e-5f, 1e-4f);
        pool_free(&P);
    }
    check_sync();
}

/* AveragePooling2D ('same' edges count only their cells, overlapping windows, a global
 * pool) and ZeroPadding2D: the device sums in the reference's order, so forward and the
 * accumulating backward are bitwise the reference's. */
static void test_avgpool_pad(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const int cs[][9] = {
        /* H, W, C, PH, PW, SH, SW, same, N */
        {7, 9, 3, 3, 3, 2, 2, 1, 2}, {6, 5, 2, 3, 3, 1, 1, 1, 2},  {6, 6, 4, 2, 2, 2, 2, 0, 3},
        {5, 8, 4, 2, 3, 1, 2, 0, 3}, {7, 7, 16, 7, 7, 7, 7, 0, 5}, {1, 1, 1, 1, 1, 1, 1, 0, 1},
    };
    for (size_t c = 0; c < sizeof cs / sizeof *cs; c++) {
        const int *p = cs[c];
        mw_pool_geom g;
        assert_int_equal(mw_pool_geom_init(&g, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]), 0);
        const int N = p[8];
        const size_t nx = (size_t)N * g.H * g.W * g.C, ny = (size_t)N * g.OH * g.OW * g.C;
        const uint64_t s = 1000 + 10 * c;
        pool P = {0};
        float *x = h_rand(&P, nx, s, -1, 1), *y = h_rand(&P, ny, s + 1, 0, 1);
        float *dy = h_rand(&P, ny, s + 2, -1, 1), *dx = h_rand(&P, nx, s + 3, -1, 1);
        float *dX = d_put(&P, x, nx * 4), *dY = d_put(&P, NULL, ny * 4);
        float *dDY = d_put(&P, dy, ny * 4), *dDX = d_put(&P, dx, nx * 4);
        mw_avgpool_fwd_ref(NULL, y, x, &g, N);
        cuda.avgpool_fwd(&ctx, dY, dX, &g, N);
        expect_close((float *)d_get(&P, dY, ny * 4), y, ny, 0.0f, 0.0f);
        mw_avgpool_bwd_ref(NULL, dx, dy, &g, N);
        cuda.avgpool_bwd(&ctx, dDX, dDY, &g, N);
        expect_close((float *)d_get(&P, dDX, nx * 4), dx, nx, 0.0f, 0.0f);

        /* ZeroPadding2D of the same input, pads (top, bottom, left, right) from the case */
        const int PT = p[3] - 1, PB = p[5] - 1, PL = p[4], PR = c % 2;
        const size_t nz = (size_t)N * (PT + g.H + PB) * (PL + g.W + PR) * g.C;
        float *z = h_rand(&P, nz, s + 4, 5, 6), *dz = h_rand(&P, nz, s + 5, -1, 1);
        float *dZ = d_put(&P, z, nz * 4), *dDZ = d_put(&P, dz, nz * 4); /* z: stale values */
        mw_pad2d_fwd_ref(NULL, z, x, g.H, g.W, g.C, PT, PB, PL, PR, N);
        cuda.pad2d_fwd(&ctx, dZ, dX, g.H, g.W, g.C, PT, PB, PL, PR, N);
        expect_close((float *)d_get(&P, dZ, nz * 4), z, nz, 0.0f, 0.0f);
        mw_pad2d_bwd_ref(NULL, dx, dz, g.H, g.W, g.C, PT, PB, PL, PR, N);
        cuda.pad2d_bwd(&ctx, dDX, dDZ, g.H, g.W, g.C, PT, PB, PL, PR, N);
        expect_close((float *)d_get(&P, dDX, nx * 4), dx, nx, 0.0f, 0.0f);
        pool_free(&P);
    }
    mw_pool_geom g;
    assert_int_equal(mw_pool_geom_init(&g, 4, 4, 1, 2, 2, 2, 2, 0), 0);
    cuda.avgpool_fwd(&ctx, NULL, NULL, &g, 0);
    cuda.avgpool_bwd(&ctx, NULL, NULL, &g, 0);
    cuda.pad2d_fwd(&ctx, NULL, NULL, 4, 4, 1, 1, 1, 1, 1, 0);
    cuda.pad2d_bwd(&ctx, NULL, NULL, 4, 4, 1, 1, 1, 1, 1, 0);
    check_sync();
}

/* Add (acc), Multiply and Concatenate: exact arithmetic (a product and a sum rounded on their
 * own), so bitwise; concatenation leaves the other channels of y alone; Multiply's backward
 * with one side NULL. */
static void test_merge(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const size_t ns[] = {1, 1001, 70000};
    for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
        pool P = {0};
        const size_t n = ns[c], nb = n * 4;
        const uint64_t s = 1100 + 10 * c;
        float *a = h_rand(&P, n, s, -2, 2), *b = h_rand(&P, n, s + 1, -2, 2);
        float *y = h_rand(&P, n, s + 2, -1, 1), *dy = h_rand(&P, n, s + 3, -1, 1);
        float *da = h_rand(&P, n, s + 4, -1, 1), *db = h_rand(&P, n, s + 5, -1, 1);
        float *dA = d_put(&P, a, nb), *dB = d_put(&P, b, nb), *dYv = d_put(&P, y, nb);
        float *dDY = d_put(&P, dy, nb), *dDA = d_put(&P, da, nb), *dDB = d_put(&P, db, nb);
        mw_acc_ref(NULL, y, a, n);
        cuda.acc(&ctx, dYv, dA, n);
        expect_close((float *)d_get(&P, dYv, nb), y, n, 0.0f, 0.0f);
        mw_mul_fwd_ref(NULL, y, a, b, n);
        cuda.mul_fwd(&ctx, dYv, dA, dB, n);
        expect_close((float *)d_get(&P, dYv, nb), y, n, 0.0f, 0.0f);
        mw_mul_bwd_ref(NULL, da, db, dy, a, b, n);
        cuda.mul_bwd(&ctx, dDA, dDB, dDY, dA, dB, n);
        expect_close((float *)d_get(&P, dDA, nb), da, n, 0.0f, 0.0f);
        expect_close((float *)d_get(&P, dDB, nb), db, n, 0.0f, 0.0f);
        mw_mul_bwd_ref(NULL, NULL, db, dy, a, b, n);
        cuda.mul_bwd(&ctx, NULL, dDB, dDY, dA, dB, n);
        expect_close((float *)d_get(&P, dDB, nb), db, n, 0.0f, 0.0f);
        pool_free(&P);
    }
    static const int cc[][3] = {/* rows, CX, CY; x at off and at CY - CX */
                                {33, 3, 8},
                                {1, 1, 1},
                                {4097, 16, 48}};
    for (size_t c = 0; c < sizeof cc / sizeof *cc; c++) {
        pool P = {0};
        const size_t rows = (size_t)cc[c][0], nx = rows * cc[c][1], ny = rows * cc[c][2];
        const int CX = cc[c][1], CY = cc[c][2], offs[2] = {CY > 2 * CX ? 2 : 0, CY - CX};
        const uint64_t s = 1200 + 10 * c;
        float *x = h_rand(&P, nx, s, -1, 1), *y = h_rand(&P, ny, s + 1, 5, 6);
        float *dy = h_rand(&P, ny, s + 2, -1, 1), *dx = h_rand(&P, nx, s + 3, -1, 1);
        float *dX = d_put(&P, x, nx * 4), *dYv = d_put(&P, y, ny * 4);
        float *dDY = d_put(&P, dy, ny * 4), *dDX = d_put(&P, dx, nx * 4);
        for (int o = 0; o < 2; o++) {
            mw_concat_fwd_ref(NULL, y, x, rows, CX, CY, offs[o]);
            cuda.concat_fwd(&ctx, dYv, dX, rows, CX, CY, offs[o]);
            expect_close((float *)d_get(&P, dYv, ny * 4), y, ny, 0.0f, 0.0f);
            mw_concat_bwd_ref(NULL, dx, dy, rows, CX, CY, offs[o]);
            cuda.concat_bwd(&ctx, dDX, dDY, rows, CX, CY, offs[o]);
            expect_close((float *)d_get(&P, dDX, nx * 4), dx, nx, 0.0f, 0.0f);
        }
        pool_free(&P);
    }
    cuda.acc(&ctx, NULL, NULL, 0);
    cuda.mul_fwd(&ctx, NULL, NULL, NULL, 0);
    cuda.mul_bwd(&ctx, NULL, NULL, NULL, NULL, NULL, 0);
    cuda.concat_fwd(&ctx, NULL, NULL, 0, 3, 8, 0);
    cuda.concat_bwd(&ctx, NULL, NULL, 0, 3, 8, 0);
    check_sync();
}

/* Every activation kind, forward and the accumulating backward, and the softmax layer (large
 * logits too): the device's expf / erff / tanhf against the host's, to rounding. */
static void test_act_softmax(void **state)
{
    (void)state;
    NEED_DEVICE();
    const size_t n = 4099, nb = n * 4;
    for (int a = 0; a < MW_ACTK_COUNT; a++) {
        pool P = {0};
        const uint64_t s = 1300 + 10 * a;
        const float alpha = (mw_act_kind)a == MW_ACTK_ELU ? 1.3f : 0.2f;
        float *x = h_rand(&P, n, s, -6, 6), *y = h_rand(&P, n, s + 1, 0, 1);
        float *dy = h_rand(&P, n, s + 2, -1, 1), *dx = h_rand(&P, n, s + 3, -1, 1);
        float *dX = d_put(&P, x, nb), *dYv = d_put(&P, NULL, nb), *dDY = d_put(&P, dy, nb);
        float *dDX = d_put(&P, dx, nb);
        mw_act_fwd_ref(NULL, y, x, n, (mw_act_kind)a, alpha);
        cuda.act_fwd(&ctx, dYv, dX, n, (mw_act_kind)a, alpha);
        float *yd = d_get(&P, dYv, nb);
        expect_close(yd, y, n, 1e-6f, 1e-5f);
        /* the backward from the same y on both sides */
        float *dYd = d_put(&P, y, nb);
        mw_act_bwd_ref(NULL, dx, dy, x, y, n, (mw_act_kind)a, alpha);
        cuda.act_bwd(&ctx, dDX, dDY, dX, dYd, n, (mw_act_kind)a, alpha);
        expect_close((float *)d_get(&P, dDX, nb), dx, n, 1e-5f, 1e-4f);
        pool_free(&P);
    }
    static const struct {
        int rows, C;
        float lo, hi;
    } cs[] = {{1, 1, -1, 1}, {5, 10, -5, 5}, {33, 37, -5, 5}, {3, 1000, -8, 8}, {9, 10, 80, 120}};
    for (size_t c = 0; c < sizeof cs / sizeof *cs; c++) {
        pool P = {0};
        const size_t rows = (size_t)cs[c].rows, nc = rows * cs[c].C;
        const int C = cs[c].C;
        const uint64_t s = 1400 + 10 * c;
        float *x = h_rand(&P, nc, s, cs[c].lo, cs[c].hi), *y = h_rand(&P, nc, s + 1, 0, 1);
        float *dy = h_rand(&P, nc, s + 2, -1, 1), *dx = h_rand(&P, nc, s + 3, -1, 1);
        float *dX = d_put(&P, x, nc * 4), *dYv = d_put(&P, NULL, nc * 4);
        float *dDY = d_put(&P, dy, nc * 4), *dDX = d_put(&P, dx, nc * 4);
        mw_softmax_fwd_ref(NULL, y, x, rows, C);
        cuda.softmax_fwd(&ctx, dYv, dX, rows, C);
        expect_close((float *)d_get(&P, dYv, nc * 4), y, nc, 1e-7f, 1e-5f);
        float *dYr = d_put(&P, y, nc * 4); /* backward from the reference's y */
        mw_softmax_bwd_ref(NULL, dx, dy, y, rows, C);
        cuda.softmax_bwd(&ctx, dDX, dDY, dYr, rows, C);
        expect_close((float *)d_get(&P, dDX, nc * 4), dx, nc, 1e-6f, 1e-4f);
        pool_free(&P);
    }
    cuda.act_fwd(&ctx, NULL, NULL, 0, MW_ACTK_TANH, 0.0f);
    cuda.act_bwd(&ctx, NULL, NULL, NULL, NULL, 0, MW_ACTK_TANH, 0.0f);
    cuda.softmax_fwd(&ctx, NULL, NULL, 0, 10);
    cuda.softmax_bwd(&ctx, NULL, NULL, NULL, 0, 10);
    check_sync();
}

static int group_setup(void **state)
{
    (void)state;
    mw_kernels_init_ref(&cuda);
    if (mw_cuda_device_count() == 0)
        return 0; /* the device tests skip */
    if (mw_cuda_ctx_open(&ctx, 0) != MW_OK) {
        fprintf(stderr, "a CUDA device is present but mw_cuda_ctx_open failed: %s\n", mw_err_msg());
        return -1;
    }
    mw_kernels_init_cuda(&cuda);
    return strcmp(cuda.name, "cuda") == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    mw_cuda_ctx_close(&ctx);
    return 0;
}

/* --- mixed_bfloat16 and mixed_float16 ------------------------------------- */

/* The rounding twin bit for bit (specials and random bit patterns), and the conv and dense twins
 * with k.bf16 or k.f16 (TF32 tensor cores in cuDNN, cuBLAS' CUBLAS_COMPUTE_32F_FAST_16BF or _16F)
 * on 16-bit-valued operands: exact products, so within the float32 tolerance of the reference's
 * sums, as the FP32 twins. A tensor core that rounded the products or summed in 16 bits would
 * miss it by far (bfloat16's step is 2^-8 relative, float16's 2^-11). half: 1 bf16, 2 f16. */
static void check_half(int half)
{
    NEED_DEVICE();
    mw_round_bf16_fn round_dev = half == 2 ? cuda.round_f16 : cuda.round_bf16;
    assert_non_null(round_dev);
    conv_half = half;
    pool P = {0};
    const size_t n = 100003;
    uint32_t *bits = h_keep(&P, malloc(n * sizeof *bits));
    static const uint32_t specials[] = {0x3F808000u, 0x3F818000u, 0x7F7FFFFFu, 0x7F800001u,
                                        0xFFFFFFFFu, 0x00008000u, 0x00018000u, 0x80000000u,
                                        0x477FF000u, 0x387FFFFFu, 0x33000000u, 0x33C00000u};
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        bits[i] = i < sizeof specials / sizeof *specials ? specials[i] : (uint32_t)(x >> 16);
    }
    float *h = h_copy(&P, bits, n * 4), *d = d_put(&P, bits, n * 4);
    (half == 2 ? mw_round_f16_ref : mw_round_bf16_ref)(NULL, h, n);
    round_dev(&ctx, d, n);
    const uint32_t *got = d_get(&P, d, n * 4);
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &h[i], 4) != 0)
            fail_msg("round_%s of 0x%08X: cuda 0x%08X, ref 0x%08X", half == 2 ? "f16" : "bf16",
                     bits[i], got[i], *(const uint32_t *)&h[i]);

    static const int cs[][3] = {{17, 64, 10}, {64, 1600, 64}, {33, 7, 129}};
    for (size_t c = 0; c < sizeof cs / sizeof *cs; c++) {
        int N = cs[c][0], I = cs[c][1], O = cs[c][2];
        size_t nx = (size_t)N * I, nw = (size_t)I * O, ny = (size_t)N * O;
        uint64_t s = 700 + 10 * c;
        float *xv = h_rand(&P, nx, s, -1, 1), *w = h_rand(&P, nw, s + 1, -1, 1);
        float *b = h_rand(&P, O, s + 2, -1, 1), *dy = h_rand(&P, ny, s + 3, -1, 1);
        float *y = h_rand(&P, ny, s + 4, -1, 1), *dx = h_rand(&P, nx, s + 5, -1, 1);
        float *dw = h_rand(&P, nw, s + 6, -1, 1), *db = h_rand(&P, O, s + 7, -1, 1);
        round_host(xv, nx), round_host(w, nw), round_host(dy, ny), round_host(b, O);
        float *dX = d_put(&P, xv, nx * 4), *dW = d_put(&P, w, nw * 4), *dB = d_put(&P, b, O * 4);
        float *dY = d_put(&P, y, ny * 4), *dDY = d_put(&P, dy, ny * 4);
        float *dDX = d_put(&P, dx, nx * 4), *dDW = d_put(&P, dw, nw * 4);
        float *dDB = d_put(&P, db, O * 4);
        mw_kctx k = ctx;
        k.bf16 = half == 1, k.f16 = half == 2;
        mw_dense_fwd_ref(NULL, y, xv, w, b, N, I, O);
        cuda.dense_fwd(&k, dY, dX, dW, dB, N, I, O);
        expect_close((float *)d_get(&P, dY, ny * 4), y, ny, tol(I), 1e-5f);
        mw_dense_bwd_ref(NULL, dx, dw, db, dy, xv, w, N, I, O);
        cuda.dense_bwd(&k, dDX, dDW, dDB, dDY, dX, dW, N, I, O);
        expect_close((float *)d_get(&P, dDX, nx * 4), dx, nx, tol(O), 1e-5f);
        expect_close((float *)d_get(&P, dDW, nw * 4), dw, nw, tol(N), 1e-5f);
        expect_close((float *)d_get(&P, dDB, O * 4), db, O, tol(N), 1e-5f);
    }
    pool_free(&P);
    for (size_t c = 0; c < 2; c++) /* the tutorial CNN's convolutions, whole and by image */
        for (int chunk = 0; chunk < 2; chunk++)
            run_conv(&conv_cases[c], 0, chunk ? 1.0 : 0, 950 + 20 * c + (uint64_t)chunk);
    conv_half = 0;
    check_sync();
}

static void test_bf16(void **state)
{
    (void)state;
    check_half(1);
}

static void test_f16(void **state)
{
    (void)state;
    check_half(2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_device_fallback),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_sticky_error),
        cmocka_unit_test(test_progress),
        cmocka_unit_test(test_relu),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_xent),
        cmocka_unit_test(test_dloss),
        cmocka_unit_test(test_scale_rows),
        cmocka_unit_test(test_embed),
        cmocka_unit_test(test_embed_det),
        cmocka_unit_test(test_masked_mean),
        cmocka_unit_test(test_rescale),
        cmocka_unit_test(test_bn_relu),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_norm_params_det),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_graphs),
        cmocka_unit_test(test_sine_pos),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_metrics_rows),
        cmocka_unit_test(test_optim_rules),
        cmocka_unit_test(test_regularize),
        cmocka_unit_test(test_dense),
        cmocka_unit_test(test_dense_act),
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_conv2d_reproducible),
        cmocka_unit_test(test_conv2d_plans),
        cmocka_unit_test(test_conv2d_cudnn_fallback),
        cmocka_unit_test(test_maxpool),
        cmocka_unit_test(test_bn),
        cmocka_unit_test(test_bn_workspace),
        cmocka_unit_test(test_det_workspace),
        cmocka_unit_test(test_bn_sync),
        cmocka_unit_test(test_avgpool_pad),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_act_softmax),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_f16),
    };
    return cmocka_run_group_tests_name("cuda", tests, group_setup, group_teardown);
}
