/* Suite 'unit': the convolution and pooling geometry (kernels/geom.c) as TensorFlow computes it:
 * output sizes and the padding before, for 'same' and 'valid', on each axis alone; the scratch
 * sizes of the im2col path; the refused shapes. The cases are worked by hand from TF's rules.
 * (The dilated geometry: tests/test_dwconv.c.) */
#include "kernels/geom.h"
#include "tests/util.h"

typedef struct {
    int in, k, s, same;
    int out, pad; /* out 0: the init must fail */
} dim_case;

/* TF: same -> out = ceil(in/s), total = max((out-1)s + k - in, 0), before = total/2;
 * valid -> out = floor((in-k)/s) + 1, empty when k > in. Worked by hand. */
static const dim_case dim_cases[] = {
    {6, 3, 1, 0, 4, 0}, {5, 3, 1, 0, 3, 0}, {9, 5, 2, 0, 3, 0}, {7, 5, 2, 0, 2, 0},
    {7, 2, 2, 0, 3, 0}, {8, 3, 3, 0, 2, 0}, {6, 2, 2, 0, 3, 0}, {5, 2, 2, 0, 2, 0},
    {3, 3, 1, 0, 1, 0}, {2, 3, 1, 0, 0, 0}, {1, 5, 2, 0, 0, 0}, {4, 1, 3, 0, 2, 0},
    {9, 5, 2, 1, 5, 2}, {7, 5, 2, 1, 4, 2}, {5, 3, 1, 1, 5, 1}, {8, 3, 2, 1, 4, 0},
    {6, 4, 1, 1, 6, 1}, {7, 3, 2, 1, 4, 1}, {5, 2, 2, 1, 3, 0}, {12, 1, 5, 1, 3, 0},
    {7, 1, 3, 1, 3, 0}, {2, 5, 1, 1, 2, 2}, {1, 3, 2, 1, 1, 1}, {28, 5, 1, 1, 28, 2},
};

static void test_conv_geom(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof dim_cases / sizeof dim_cases[0]; i++) {
        const dim_case *d = &dim_cases[i];
        mw_conv2d_geom g;
        /* The case on H with W fixed (10, k 1, s 1), then on W with H fixed. */
        int rc = mw_conv2d_geom_init(&g, d->in, 10, 3, 4, d->k, 1, d->s, 1, d->same);
        if (!d->out) {
            assert_int_equal(rc, -1);
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(g.OH, d->out);
            assert_int_equal(g.PT, d->pad);
            assert_int_equal(g.OW, 10);
            assert_int_equal(g.PL, 0);
            assert_int_equal(g.C, 3);
            assert_int_equal(g.O, 4);
        }
        rc = mw_conv2d_geom_init(&g, 10, d->in, 2, 5, 1, d->k, 1, d->s, d->same);
        if (!d->out) {
            assert_int_equal(rc, -1);
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(g.OW, d->out);
            assert_int_equal(g.PL, d->pad);
            assert_int_equal(g.OH, 10);
            assert_int_equal(g.PT, 0);
        }
    }
    /* Both dimensions at once (the 'same' 5x5/2 on 9x7 used below). */
    mw_conv2d_geom g;
    assert_int_equal(mw_conv2d_geom_init(&g, 9, 7, 2, 3, 5, 5, 2, 2, 1), 0);
    assert_int_equal(g.OH, 5);
    assert_int_equal(g.OW, 4);
    assert_int_equal(g.PT, 2);
    assert_int_equal(g.PL, 2);
    assert_int_equal(mw_conv2d_geom_init(&g, 7, 6, 2, 3, 2, 3, 2, 1, 0), 0);
    assert_int_equal(g.OH, 3);
    assert_int_equal(g.OW, 4);
    /* A kernel larger than a 'valid' input, and non-positive sizes. */
    assert_int_equal(mw_conv2d_geom_init(&g, 2, 7, 1, 1, 3, 3, 1, 1, 0), -1);
    assert_int_equal(mw_conv2d_geom_init(&g, 7, 2, 1, 1, 3, 3, 1, 1, 0), -1);
    assert_int_equal(mw_conv2d_geom_init(&g, 0, 7, 1, 1, 3, 3, 1, 1, 1), -1);
    assert_int_equal(mw_conv2d_geom_init(&g, 7, 7, 0, 1, 3, 3, 1, 1, 1), -1);
    assert_int_equal(mw_conv2d_geom_init(&g, 7, 7, 1, 0, 3, 3, 1, 1, 1), -1);
    assert_int_equal(mw_conv2d_geom_init(&g, 7, 7, 1, 1, 3, 3, 0, 1, 1), -1);
    /* Scratch sizes: one image's im2col matrix, times N. */
    assert_int_equal(mw_conv2d_geom_init(&g, 9, 7, 2, 3, 5, 5, 2, 2, 1), 0);
    assert_int_equal(mw_conv2d_ws_min(&g), (size_t)5 * 4 * 5 * 5 * 2);
    assert_int_equal(mw_conv2d_ws_count(&g, 3), (size_t)3 * 5 * 4 * 5 * 5 * 2);
}

static void test_pool_geom(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof dim_cases / sizeof dim_cases[0]; i++) {
        const dim_case *d = &dim_cases[i];
        mw_pool_geom g;
        int rc = mw_pool_geom_init(&g, d->in, 6, 2, d->k, 2, d->s, 2, d->same);
        if (!d->out) {
            assert_int_equal(rc, -1);
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(g.OH, d->out);
            assert_int_equal(g.PT, d->pad);
            assert_int_equal(g.OW, 3);
            assert_int_equal(g.PL, 0);
        }
        rc = mw_pool_geom_init(&g, 6, d->in, 2, 2, d->k, 2, d->s, d->same);
        if (!d->out) {
            assert_int_equal(rc, -1);
        } else {
            assert_int_equal(rc, 0);
            assert_int_equal(g.OW, d->out);
            assert_int_equal(g.PL, d->pad);
            assert_int_equal(g.OH, 3);
            assert_int_equal(g.PT, 0);
        }
    }
    mw_pool_geom g;
    assert_int_equal(mw_pool_geom_init(&g, 28, 28, 32, 2, 2, 2, 2, 0), 0); /* MNIST-sized */
    assert_int_equal(g.OH, 14);
    assert_int_equal(g.OW, 14);
    assert_int_equal(mw_pool_geom_init(&g, 7, 5, 2, 3, 3, 2, 2, 1), 0);
    assert_int_equal(g.OH, 4);
    assert_int_equal(g.OW, 3);
    assert_int_equal(g.PT, 1);
    assert_int_equal(g.PL, 1);
    assert_int_equal(mw_pool_geom_init(&g, 1, 5, 2, 2, 2, 2, 2, 0), -1);
    assert_int_equal(mw_pool_geom_init(&g, 5, 5, 2, 0, 2, 2, 2, 0), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_geom),
        cmocka_unit_test(test_pool_geom),
    };
    return cmocka_run_group_tests_name("geom", tests, NULL, NULL);
}
