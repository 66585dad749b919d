/* Dropout with a shared mask (noise_shape all 1: one draw per example; SpatialDropout2D and
 * noise_shape (None, 1, 1, C): one per (example, channel)), through the layer table's row on
 * both kernel tables: the mask's structure (each draw's value on every value that shares it,
 * exactly 0 or 1 / (1 - rate)), the backward's same mask, the kept fraction against the rate,
 * rate 0 as the identity while training, and the per-value mask as the control that the
 * structure check can fail. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/table.h"
#include "kernels/ref/table.h"
#include "tests/util.h"
#include "worker/model/layer.h"
#include "worker/model/layers/dropout.h"
#include "worker/model/model.h"
#include "worker/model/model_ws.h"

enum { H = 4, W = 5, C = 8, N = 200, D = H * W * C };

/* Runs the layer of noise (on kernel table fast) forward over x (in place: the row's
 * layer is, so y is x) and backward over dy = 1; returns how many draws kept their values
 * and sets *shared_ok to whether every value followed its draw (the structure). */
static int run(int fast, mw_dropout_noise noise, float rate, float *x, const float *x0, float *dy,
               int *shared_ok)
{
    mw_model m;
    mw_model_init(&m, H, W, C);
    if (mw_model_add_dropout_noise(&m, NULL, rate, noise, 3, NULL) != MW_OK)
        fail_msg("add: %s", mw_err_msg());
    mw_kernels kt;
    (fast ? mw_kernels_init_cpu : mw_kernels_init_ref)(&kt);
    mw_kctx k = {.nthreads = 2};
    mw_model_ws ws;
    memset(&ws, 0, sizeof ws);
    ws.training = 1, ws.dropout_seed = 77;
    const mw_layer_ops *row = mw_layer_row(MW_LAYER_DROPOUT);
    void *buf = malloc(row->buf_bytes(&m.layers[0], N));
    mw_layer_call c = {.m = &m,
                       .l = &m.layers[0],
                       .kt = &kt,
                       .k = &k,
                       .ws = &ws,
                       .n = N,
                       .x = x,
                       .y = x,
                       .dx = dy,
                       .dy = dy,
                       .buf = buf,
                       .cnt = (size_t)N * D};
    memcpy(x, x0, (size_t)N * D * sizeof *x);
    for (size_t i = 0; i < (size_t)N * D; i++)
        dy[i] = 1.0f;
    row->forward(&c);
    row->backward(&c);
    const float keep = 1.0f / (1.0f - rate);
    int kept = 0;
    *shared_ok = 1;
    for (int n = 0; n < N; n++)
        for (int ch = 0; ch < (noise == MW_NOISE_EXAMPLE ? 1 : C); ch++) {
            const size_t first = (size_t)n * D + (size_t)ch; /* the draw's first value */
            const int on = dy[first] != 0.0f;
            kept += on;
            for (int p = 0; p < D; p++) {
                const size_t i = (size_t)n * D + (size_t)p;
                if (noise != MW_NOISE_EXAMPLE && p % C != ch)
                    continue;
                *shared_ok &= dy[i] == (on ? keep : 0.0f) && x[i] == (on ? x0[i] * keep : 0.0f);
            }
        }
    free(buf);
    mw_model_free(&m);
    return kept;
}

static void test_shared_masks(void **state)
{
    (void)state;
    float *x0 = malloc((size_t)N * D * sizeof *x0), *x = malloc((size_t)N * D * sizeof *x),
          *dy = malloc((size_t)N * D * sizeof *dy);
    mw_test_fill_uniform(x0, (size_t)N * D, 3, 0.5f, 1.5f);
    const float rate = 0.4f;
    for (int fast = 0; fast < 2; fast++) {
        int ok;
        /* per (example, channel): M = N C = 1600 draws, each kept with p = 0.6; the count's
         * standard deviation sqrt(M p (1 - p)) = 19.6: 5 of them is 98 */
        int kept = run(fast, MW_NOISE_CHANNEL, rate, x, x0, dy, &ok);
        printf("per channel: %d of %d draws kept (expected %g +- 98)\n", kept, N * C, 0.6 * N * C);
        assert_true(ok);
        assert_true(fabs(kept - 0.6 * N * C) <= 98.0);
        /* per example: M = 200, sd sqrt(200 0.24) = 6.9: 5 of them is 35 */
        kept = run(fast, MW_NOISE_EXAMPLE, rate, x, x0, dy, &ok);
        printf("per example: %d of %d kept (expected %g +- 35)\n", kept, N, 0.6 * N);
        assert_true(ok);
        assert_true(fabs(kept - 0.6 * N) <= 35.0);
        /* the control: a mask per value breaks the per-channel structure */
        run(fast, MW_NOISE_VALUE, rate, x, x0, dy, &ok);
        assert_false(ok);
        /* rate 0 trains as the identity */
        run(fast, MW_NOISE_EXAMPLE, 0.0f, x, x0, dy, &ok);
        assert_memory_equal(x, x0, (size_t)N * D * sizeof *x);
    }
    free(x0), free(x), free(dy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_masks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
