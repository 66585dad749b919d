/* The `cuda` suite's cases for the kernels whose sums run in parallel in a fixed order (run by
 * tests/test_cuda.c's main; they skip, the reason printed, without a device): Embedding's
 * sorted backward (the reference's bits), the normalizations' two-stage parameter gradients
 * (within their argued float32 bound of the reference), the per-example device metrics; each
 * run twice from the same start for the same bits, and each refusing a workspace one float too
 * small by name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/context.h"
#include "kernels/cuda/metrics.h"
#include "kernels/cuda/runtime.h"
#include "kernels/embed.h"
#include "kernels/twins.h"
#include "tests/test_cuda.h"
#include "tests/util.h"

#define MW_LOSS_HD static inline
#include "kernels/loss_rules.h" /* loss_argmax, metrics_add_example: the host's */

/* The reference's scatter-add with the positions in reverse: the control that shows that a
 * bitwise comparison sees the order of a row's sums. */
static void embed_bwd_reversed(float *g, const float *dy, const float *ids, size_t np, int D, int V)
{
    for (size_t p = np; p-- > 0;) {
        const long r = mw_embed_row(ids[p], V);
        for (int j = 0; r >= 0 && j < D; j++)
            g[(size_t)r * D + j] += dy[p * D + j];
    }
}

/* One shape of embed_bwd: the device's gradient equals the reference's bit for bit, twice. */
static void embed_case(int n, int T, int D, int V, uint64_t s)
{
    pool P = {0};
    const size_t np = (size_t)n * T, ny = np * D, nt = (size_t)V * D;
    float *ids = h_rand(&P, np, s, 0, 1);
    for (size_t i = 0; i < np; i++)
        ids[i] = (float)(int)(ids[i] * V);
    ids[1] = (float)V, ids[5] = -1.0f, ids[9] = 0.5f; /* no row */
    float *dy = h_rand(&P, ny, s + 1, -1, 1), *g0 = h_rand(&P, nt, s + 2, -1, 1);
    float *want = h_copy(&P, g0, nt * sizeof(float)), *rev = h_copy(&P, g0, nt * sizeof(float));
    mw_embed_bwd_ref(NULL, want, dy, ids, n, T, D, V);
    embed_bwd_reversed(rev, dy, ids, np, D, V);
    assert_true(memcmp(rev, want, nt * sizeof(float)) != 0); /* the control */
    float *dIds = d_put(&P, ids, np * sizeof(float)), *dDy = d_put(&P, dy, ny * sizeof(float));
    float *got[2];
    for (int run = 0; run < 2; run++) {
        float *dG = d_put(&P, g0, nt * sizeof(float));
        cuda.embed_bwd(&ctx, dG, dDy, dIds, n, T, D, V);
        got[run] = d_get(&P, dG, nt * sizeof(float));
    }
    expect_close(got[0], want, nt, 0.0f, 0.0f);
    assert_memory_equal(got[0], want, nt * sizeof(float));
    assert_memory_equal(got[1], got[0], nt * sizeof(float));
    pool_free(&P);
}

/* Embedding's backward sorted, not atomic: the table's gradient is the reference's bit for bit
 * (each row's positions added in ascending order, as its loop) on every run. Shapes: 8192
 * positions over 5000 rows (repeats rare, many blocks), 4096 over 7 rows (each ~600 times), D of
 * 96 and 33 (longer than a warp, odd), one position; ids outside [0, V) or not integers skipped.
 * Control: the reference summed in reverse differs in some bit, as a sum in another order (an
 * atomicAdd's) would. */
void test_embed_det(void **state)
{
    (void)state;
    NEED_DEVICE();
    embed_case(64, 128, 96, 5000, 1100);
    embed_case(32, 128, 33, 7, 1110);
    embed_case(16, 1, 1, 3, 1120);
    check_sync();
}

/* How many of D column sums miss their bound (the first printed): got against the reference's
 * want, the device adding each float32 term through at most `depth` float32 additions (a
 * thread's share of its chunk, the 8 shares, the chunks, the start, and one for a fused
 * multiply-add's unrounded product), so within depth 2^-24 sum |t| (abs) of the exact sum (in
 * double: exact), while the reference's own error is |want - exact|, measured. Any order of
 * float32 additions obeys such a bound; a sum that lost or doubled a term misses it. */
static int colsum_misses(const float *got, const float *want, const double *exact,
                         const double *abs, int D, double depth, const char *what)
{
    int miss = 0;
    for (int j = 0; j < D; j++) {
        const double tol = depth * 0x1p-24 * abs[j] + fabs(want[j] - exact[j]);
        if (!(fabs((double)got[j] - want[j]) <= tol) && miss++ == 0)
            print_message("%s[%d]: device %.9g, reference %.9g, bound %.3g\n", what, j, got[j],
                          want[j], tol);
    }
    return miss;
}

/* The depth of cs_sums' additions for rows rows (kernels/cuda/colsum.cuh: 64 rows per chunk,
 * at most 256 chunks, 8 rows of a chunk at once; D small enough for the default scratch). */
static double colsum_depth(int rows)
{
    int chunks = (rows + 63) / 64;
    chunks = chunks < 256 ? chunks : 256;
    const int chunk_rows = (rows + chunks - 1) / chunks;
    return (chunk_rows + 7) / 8 + 8 + chunks + 2;
}

/* The parameters' exact column sums from the starts g0, b0: gamma's term dy t, t = x r (RMS) or
 * (x - mean) r in float32 as the kernels round it, beta's dy; and the sums of their |.|. out:
 * exact gamma, exact beta, abs gamma, abs beta (D doubles each). */
static void norm_exact(double *out, const float *g0, const float *b0, const float *dy,
                       const float *x, const float *st, int rows, int D, int rms)
{
    for (int j = 0; j < D; j++) {
        out[j] = g0[j], out[D + j] = b0[j], out[2 * D + j] = fabs(g0[j]);
        out[3 * D + j] = fabs(b0[j]);
    }
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < D; j++) {
            const size_t i = (size_t)r * D + j;
            const float t = rms ? x[i] * st[rows + r] : (x[i] - st[r]) * st[rows + r];
            out[j] += (double)dy[i] * t, out[D + j] += dy[i];
            out[2 * D + j] += fabs((double)dy[i] * t), out[3 * D + j] += fabs(dy[i]);
        }
}

void expect_norm_params(const float *got_g, const float *got_b, const float *want_g,
                        const float *want_b, const float *g0, const float *b0, const float *dy,
                        const float *x, const float *st, int rows, int D, int rms)
{
    double *ex = malloc(4 * (size_t)D * sizeof(double));
    assert_non_null(ex);
    norm_exact(ex, g0, b0, dy, x, st, rows, D, rms);
    const double depth = colsum_depth(rows);
    const int miss =
        colsum_misses(got_g, want_g, ex, ex + 2 * D, D, depth, "dgamma") +
        (got_b ? colsum_misses(got_b, want_b, ex + D, ex + 3 * D, D, depth, "dbeta") : 0);
    free(ex);
    assert_int_equal(miss, 0);
}

/* The reference's forward and backward of LayerNormalization (rms 0) or RMSNormalization
 * (rms 1) on the host: y, st, then dx, dg, db (dg, db, dx holding their starts). */
static void norm_ref(float *y, float *st, float *dx, float *dg, float *db, const float *x,
                     const float *dy, const float *g, const float *b, int rows, int D, int rms)
{
    if (rms) {
        mw_rmsnorm_fwd_ref(NULL, y, st, x, g, rows, D, 1e-6f, 0, 0.0f);
        mw_rmsnorm_bwd_ref(NULL, dx, dg, dy, x, st, g, rows, D, 0.0f);
    } else {
        mw_layernorm_fwd_ref(NULL, y, st, x, g, b, rows, D, 1e-3f);
        mw_layernorm_bwd_ref(NULL, dx, dg, db, dy, x, st, g, rows, D);
    }
}

/* One shape: the forward and dx (a warp per row) within 1e-6 of the reference (their double
 * sums in another order round to the same float32 but for a rare last bit); the parameters'
 * gradients within colsum_misses' bound, twice the same bits; control: the reference's dgamma
 * less the last row's term misses the bound. */
static void norm_case(int rows, int D, int rms, uint64_t s)
{
    pool P = {0};
    const size_t nx = (size_t)rows * D, ns = 2 * (size_t)rows, fx = nx * sizeof(float);
    float *x = h_rand(&P, nx, s, -3, 5), *dy = h_rand(&P, nx, s + 1, -1, 1);
    float *g = h_rand(&P, D, s + 2, 0.5f, 1.5f), *b = h_rand(&P, D, s + 3, -1, 1);
    float *y = h_rand(&P, nx, s + 4, 0, 1), *st = h_rand(&P, ns, s + 5, 0, 1);
    float *dx0 = h_rand(&P, nx, s + 6, -1, 1), *g0 = h_rand(&P, D, s + 7, -1, 1);
    float *b0 = h_rand(&P, D, s + 8, -1, 1);
    float *dx = h_copy(&P, dx0, nx * sizeof(float)), *dg = h_copy(&P, g0, D * sizeof(float)),
          *db = h_copy(&P, b0, D * sizeof(float));
    norm_ref(y, st, dx, dg, db, x, dy, g, b, rows, D, rms);
    double *ex = h_keep(&P, malloc(4 * (size_t)D * sizeof(double)));
    norm_exact(ex, g0, b0, dy, x, st, rows, D, rms);
    float *dX = d_put(&P, x, fx), *dDy = d_put(&P, dy, fx), *dG = d_put(&P, g, D * 4);
    float *dB = d_put(&P, b, D * 4), *dY = d_put(&P, NULL, fx), *dSt = d_put(&P, NULL, ns * 4);
    if (rms)
        cuda.rmsnorm_fwd(&ctx, dY, dSt, dX, dG, rows, D, 1e-6f, 0, 0.0f);
    else
        cuda.layernorm_fwd(&ctx, dY, dSt, dX, dG, dB, rows, D, 1e-3f);
    expect_close((float *)d_get(&P, dY, fx), y, nx, 1e-6f, 1e-6f);
    expect_close((float *)d_get(&P, dSt, ns * 4), st, ns, 1e-6f, 1e-6f);
    dSt = d_put(&P, st, ns * 4); /* the reference's statistics, as the exact sums' */
    float *got[2][3];
    for (int run = 0; run < 2; run++) {
        float *dDx = d_put(&P, dx0, fx), *dDg = d_put(&P, g0, D * 4), *dDb = d_put(&P, b0, D * 4);
        if (rms)
            cuda.rmsnorm_bwd(&ctx, dDx, dDg, dDy, dX, dSt, dG, rows, D, 0.0f);
        else
            cuda.layernorm_bwd(&ctx, dDx, dDg, dDb, dDy, dX, dSt, dG, rows, D);
        got[run][0] = d_get(&P, dDx, fx), got[run][1] = d_get(&P, dDg, D * 4);
        got[run][2] = d_get(&P, dDb, D * 4);
    }
    expect_close(got[0][0], dx, nx, 1e-6f, 1e-5f);
    const double depth = colsum_depth(rows);
    expect_norm_params(got[0][1], rms ? NULL : got[0][2], dg, db, g0, b0, dy, x, st, rows, D, rms);
    for (int q = 0; q < 3; q++)
        assert_memory_equal(got[1][q], got[0][q], (q ? (size_t)D : nx) * sizeof(float));
    float *lack = h_copy(&P, dg, D * sizeof(float)); /* the control */
    for (int j = 0; j < D; j++) {
        const size_t i = nx - D + j;
        lack[j] -= dy[i] * (rms ? x[i] * st[ns - 1] : (x[i] - st[rows - 1]) * st[ns - 1]);
    }
    assert_true(colsum_misses(lack, dg, ex, ex + 2 * D, D, depth, "control") > 0);
    pool_free(&P);
}

/* LayerNormalization's and RMSNormalization's twins on shapes that cross their parallel paths:
 * 3000 rows of 200 (47 chunks, 7 feature tiles, rows longer than a warp), 5 rows of 1000, one
 * row of 37, 64 rows of 1; the gradients of gamma and beta two-stage fixed-order sums (same
 * bits twice), within the bound colsum_misses argues. */
void test_norm_params_det(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const int shapes[][2] = {{3000, 200}, {5, 1000}, {1, 37}, {64, 1}};
    for (int rms = 0; rms < 2; rms++)
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
            norm_case(shapes[i][0], shapes[i][1], rms, 1200 + 20 * i + 10 * rms);
    check_sync();
}

/* rows rows of K uniform outputs and their labels: row r's label its argmax when r is even, the
 * next index when odd; every third row's largest value copied to an earlier index (the first
 * now counts), row 1's first output NaN (loss_argmax keeps index 0), row 2's last NaN
 * (skipped). */
static void argmax_rows(float *prob, int32_t *y, const float *u, size_t rows, int K)
{
    for (size_t r = 0; r < rows; r++) {
        float *q = prob + r * K;
        const int a = loss_argmax(q, K), e = (int)(u[r] * (float)a);
        if (r % 3 == 0 && e < a)
            q[e] = q[a];
        if ((r == 1 || r == 2) && K > 1)
            q[r == 1 ? 0 : K - 1] = NAN;
        const int best = loss_argmax(q, K);
        y[r] = r % 2 ? (best + 1) % K : best;
    }
}

/* Sparse token accuracy over wide rows (argmax_rows) against the host's sums: under a mask of
 * no padding (each position counts 1: integer sums) exactly; weighted by uniform sample
 * weights (fractions: the host's order differs) within 1e-12; each the same bits twice. */
static void argmax_case(int n, int P, int K, uint64_t s)
{
    pool H = {0};
    const size_t rows = (size_t)n * P, nk = rows * K;
    float *prob = h_rand(&H, nk, s, 0, 1), *u = h_rand(&H, rows, s + 1, 0, 1);
    float *w = h_rand(&H, rows, s + 2, 0, 1), *ones = h_grid(&H, rows, s + 3, 1);
    int32_t *y = h_keep(&H, malloc(rows * sizeof(int32_t)));
    for (size_t r = 0; r < rows; r++)
        ones[r] = 1.0f;
    argmax_rows(prob, y, u, rows, K);
    const mw_metric_list ml[2] = {{1, {MW_METRIC_SPARSE_ACC}, P, 1, 0},
                                  {1, {MW_METRIC_SPARSE_ACC}, P, 0, 1}};
    double want[2][MW_SUMS] = {{0}}, *got[2][2];
    for (int i = 0; i < n; i++)
        for (int m = 0; m < 2; m++)
            metrics_add_example(&ml[m], want[m], prob + (size_t)i * P * K, y + (size_t)i * P, K,
                                ones + (size_t)i * P, w + (size_t)i * P);
    float *dProb = d_put(&H, prob, nk * sizeof(float)), *dLoss = d_put(&H, u, n * 4);
    float *dOnes = d_put(&H, ones, rows * 4), *dW = d_put(&H, w, rows * 4);
    const int32_t *dY = d_put(&H, y, rows * sizeof(int32_t));
    for (int run = 0; run < 2; run++)
        for (int m = 0; m < 2; m++) {
            double *dAcc = d_put(&H, (double[MW_SUMS]){0}, MW_SUMS * sizeof(double));
            mw_cuda_metrics_add(&ctx, dAcc, dLoss, dProb, dY, P * sizeof(int32_t), dOnes, dW,
                                &ml[m], n, K);
            got[run][m] = d_get(&H, dAcc, MW_SUMS * sizeof(double));
        }
    const double g0 = got[0][0][MW_SUM_METRIC(0)], g1 = got[0][1][MW_SUM_METRIC(0)];
    if (g0 != want[0][MW_SUM_METRIC(0)] || got[0][0][MW_SUM_VALID] != (double)rows)
        fail_msg("token accuracy n %d P %d K %d: %.17g of %.17g, want %.17g of %zu", n, P, K, g0,
                 got[0][0][MW_SUM_VALID], want[0][MW_SUM_METRIC(0)], rows);
    if (!(fabs(g1 - want[1][MW_SUM_METRIC(0)]) <= 1e-12 * fabs(want[1][MW_SUM_METRIC(0)])))
        fail_msg("weighted token accuracy: %.17g, want %.17g", g1, want[1][MW_SUM_METRIC(0)]);
    for (int m = 0; m < 2; m++)
        assert_memory_equal(got[1][m], got[0][m], MW_SUMS * sizeof(double));
    pool_free(&H);
}

/* The device metrics one block per example, a warp per position: wide rows (K 3000 across the
 * lanes), more positions than the block's 8 warps, more examples than one block, against the
 * host's sums (metrics_case: grid outputs with ties, masks, weights, AUC); the token accuracy
 * exactly on rows with ties and NaNs, and the same bits twice (argmax_case). */
void test_metrics_rows(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const mw_metric_list lists[] = {
        {1, {MW_METRIC_SPARSE_ACC}, 33, 0, 0},
        {2, {MW_METRIC_CAT_ACC, MW_METRIC_MAE}, 33, 1, 0},
        {3, {MW_METRIC_BIN_ACC, MW_METRIC_MSE, MW_METRIC_AUC}, 9, 0, 1},
        {1, {MW_METRIC_SPARSE_ACC}, 1, 0, 0},
    };
    for (size_t m = 0; m < sizeof lists / sizeof *lists; m++)
        metrics_case(&lists[m], 70, 3000, 1300 + m);
    metrics_case(&lists[0], 3, 1, 1350);
    argmax_case(70, 33, 3000, 1360);
    argmax_case(5, 1, 31, 1370);
    check_sync();
}

/* Each kernel's scratch checked before use: with what it needs it runs, with one float less
 * the context fails naming the workspace (a fresh context each: the failure is sticky). */
void test_det_workspace(void **state)
{
    (void)state;
    NEED_DEVICE();
    const mw_metric_list ml = {1, {MW_METRIC_MAE}, 0, 0, 0};
    for (int op = 0; op < 3; op++)
        for (int less = 0; less < 2; less++) {
            mw_kctx k;
            check_rc(mw_cuda_ctx_open(&k, 0), "mw_cuda_ctx_open");
            pool P = {0};
            float *a = d_put(&P, NULL, 2048 * sizeof(float)), *b = d_put(&P, NULL, 64 * 4);
            check_rc(mw_cuda_zero(a, 2048 * sizeof(float), &k), "mw_cuda_zero"); /* MW_SUMS */
            check_rc(mw_cuda_zero(b, 64 * sizeof(float), &k), "mw_cuda_zero");
            mw_kctx small = k; /* 3 x 4 ids of 5 rows, 4 rows of 4, 4 examples */
            const size_t need[3] = {mw_cuda_embed_ws(12, 5), 2 * 4, mw_cuda_metrics_ws(4, 1)};
            assert_true(need[0] >= 4 * 12);
            small.ws_count = need[op] - (size_t)less;
            if (op == 0)
                cuda.embed_bwd(&small, a, b, b, 3, 4, 4, 5);
            else if (op == 1)
                cuda.layernorm_bwd(&small, NULL, a, a + 4, b, b, b, NULL, 4, 4);
            else
                mw_cuda_metrics_add(&small, (double *)a, b, b, b, 4, NULL, NULL, &ml, 4, 1);
            if (less) {
                print_message("expected failure: %s\n", mw_err_msg());
                expect_err(mw_cuda_sync(&k), MW_EINVAL, "workspace");
            } else {
                check_rc(mw_cuda_sync(&k), "with the scratch it needs");
            }
            pool_free(&P);
            mw_cuda_ctx_close(&k);
            mw_err_clear();
        }
}
