/* The `cuda` suite's element-wise layer cases (run by tests/test_cuda.c's main; they skip, the
 * reason printed, without a device): Rescaling's per-channel map against the reference. */
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
