/* The `cuda` suite's element-wise layer cases (run by tests/test_cuda.c's main; they skip, the
 * reason printed, without a device): Rescaling's per-channel map against the reference;
 * BatchNormalization fused with a ReLU against the reference. */
#include <math.h>

#include "kernels/cuda/runtime.h"
#include "kernels/twins.h"
#include "tests/test_cuda.h"
#include "tests/util.h"

/* Rescaling as a layer, one pair and a pair per channel (3 and MW_RESCALE_MAX_C), against the
 * reference: the same float expression, within one FMA's rounding. */
void test_rescale(void **state)
{
    (void)state;
    NEED_DEVICE();
    static const mw_rescale maps[] = {
        {1, {0.5f}, {0.25f}},
        {3, {2.0f, 1.0f, 0.5f}, {-1.0f, 0.0f, 0.25f}},
        {MW_RESCALE_MAX_C, {1, 2, 3, 4, 5, 6, 7, 8}, {-4, -3, -2, -1, 1, 2, 3, 4}},
    };
    for (size_t m = 0; m < sizeof maps / sizeof *maps; m++) {
        pool P = {0};
        const size_t n = (size_t)37 * maps[m].C;
        float *x = h_rand(&P, n, 820 + m, -1, 1), *y = h_rand(&P, n, 830 + m, 0, 1);
        float *dx = h_rand(&P, n, 840 + m, -1, 1), *dy = h_rand(&P, n, 850 + m, -1, 1);
        float *dX = d_put(&P, x, n * 4), *dY = d_put(&P, y, n * 4), *dDx = d_put(&P, dx, n * 4);
        float *dDy = d_put(&P, dy, n * 4);
        mw_rescale_fwd_ref(NULL, y, x, n, &maps[m]);
        cuda.rescale_fwd(&ctx, dY, dX, n, &maps[m]);
        expect_close((float *)d_get(&P, dY, n * 4), y, n, 1e-6f, 1e-6f);
        mw_rescale_bwd_ref(NULL, dx, dy, n, &maps[m]);
        cuda.rescale_bwd(&ctx, dDx, dDy, n, &maps[m]);
        expect_close((float *)d_get(&P, dDx, n * 4), dx, n, 1e-6f, 1e-6f);
        pool_free(&P);
    }
    check_sync();
}

/* BatchNormalization fused with a ReLU (bn_relu_*), max_value 1 and none, with and without gamma
 * and beta, against the reference: the forward's v is rounded as the reference rounds it (no
 * fma), so with the reference's statistics the ReLU's masks agree bitwise and the outputs differ
 * only as bn_fwd_train's and bn_bwd's do (test_bn's tolerances: the statistics' two-stage
 * double sums, the backward's). */
void test_bn_relu(void **state)
{
    (void)state;
    NEED_DEVICE();
    for (int c = 0; c < 4; c++) {
        pool P = {0};
        const size_t rows = 513, n = rows * 7;
        const int C = 7;
        const float M = c % 2 ? INFINITY : 1.0f;
        float *x = h_rand(&P, n, 860 + c, -2, 3), *dy = h_rand(&P, n, 864 + c, -1, 1);
        float *g = c < 2 ? h_rand(&P, C, 868 + c, 0.5f, 1.5f) : NULL;
        float *b = c < 2 ? h_rand(&P, C, 872 + c, -1, 1) : NULL;
        float *y = h_rand(&P, n, 876 + c, 0, 1), *st = h_rand(&P, 3 * C, 880 + c, 0, 1);
        float *dx = h_rand(&P, n, 884 + c, -1, 1), *dg = h_rand(&P, C, 888 + c, -1, 1);
        float *db = h_rand(&P, C, 892 + c, -1, 1);
        float *dX = d_put(&P, x, n * 4), *dDY = d_put(&P, dy, n * 4), *dY = d_put(&P, NULL, n * 4);
        float *dG = g ? d_put(&P, g, C * 4) : NULL, *dB = b ? d_put(&P, b, C * 4) : NULL;
        float *dST = d_put(&P, NULL, 3 * C * 4), *dDX = d_put(&P, dx, n * 4);
        float *dDG = d_put(&P, dg, C * 4), *dDB = d_put(&P, db, C * 4);
        mw_bn_relu_fwd_train_ref(NULL, y, st, st + C, st + 2 * C, x, g, b, rows, C, 1e-3f, M);
        cuda.bn_relu_fwd_train(&ctx, dY, dST, dST + C, dST + 2 * C, dX, dG, dB, rows, C, 1e-3f, M);
        expect_close((float *)d_get(&P, dY, n * 4), y, n, 1e-5f, 1e-5f);
        float *dSTr = d_put(&P, st, 3 * C * 4);
        mw_bn_relu_bwd_ref(NULL, dx, dg, db, dy, x, st, st + 2 * C, g, b, rows, C, M, c / 2);
        cuda.bn_relu_bwd(&ctx, dDX, dDG, dDB, dDY, dX, dSTr, dSTr + 2 * C, dG, dB, rows, C, M,
                         c / 2);
        expect_close((float *)d_get(&P, dDX, n * 4), dx, n, 1e-5f, 1e-4f);
        expect_close((float *)d_get(&P, dDG, C * 4), dg, C, 1e-5f, 1e-4f);
        expect_close((float *)d_get(&P, dDB, C * 4), db, C, 1e-5f, 1e-4f);
        pool_free(&P);
    }
    check_sync();
}
