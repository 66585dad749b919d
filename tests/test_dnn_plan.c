/* Suite 'unit': the cuDNN choices' cache and fallbacks (kernels/cuda/dnn_plan.h), the policy
 * half of kernels/cuda/cudnn.cu, on any host: a plan is made once per key (geometry, batch,
 * math, workspace room) and found again with no new query; a refused candidate gives way to the
 * next, the last to im2col, for good; each plan is announced once per process (info) and each
 * fallback once (warning), and the words say what runs. The mechanism's half (descriptors,
 * cuDNN's lists, the calls, MW_FAULT=cudnn:...) is test_cuda's, on a device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "kernels/cuda/dnn_plan.h"
#include "kernels/geom.h"
#include "tests/util.h"

/* stderr of fn(arg) as a string (static storage) */
static const char *captured(void (*fn)(void *), void *arg)
{
    static char buf[8192];
    fflush(stderr);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    int saved = dup(2);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(tmp), 2) >= 0);
    fn(arg);
    fflush(stderr);
    assert_true(dup2(saved, 2) >= 0);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    buf[n] = '\0';
    fclose(tmp);
    return buf;
}

static mw_conv2d_geom geom(int H, int C, int O)
{
    mw_conv2d_geom g;
    assert_int_equal(mw_conv2d_geom_init(&g, H, H, C, O, 3, 3, 1, 1, 0), 0);
    return g;
}

/* What a mechanism does when it makes a plan: two candidates per pass. */
static void fill(mw_dnn_plan *p, int first_algo)
{
    for (int pass = 0; pass < MW_DNN_PASSES; pass++) {
        p->ncand[pass] = 2;
        p->cand[pass][0] = (mw_dnn_cand){first_algo, 0, 4096};
        p->cand[pass][1] = (mw_dnn_cand){first_algo + 1, 0, 0};
    }
}

static void test_cache_keys(void **state)
{
    (void)state;
    mw_dnn_cache c = {0};
    mw_conv2d_geom a = geom(28, 1, 32), b = geom(13, 32, 64);
    int fresh = 0;
    mw_dnn_plan *pa = mw_dnn_cache_get(&c, &a, 64, 0, 1 << 20, &fresh);
    assert_non_null(pa);
    assert_int_equal(fresh, 1);
    fill(pa, 1);
    mw_dnn_plan_made(&c, pa, 0);
    assert_int_equal(c.made, 1);
    /* the same key: the same plan, nothing made */
    for (int i = 0; i < 5; i++) {
        assert_ptr_equal(mw_dnn_cache_get(&c, &a, 64, 0, 1 << 20, &fresh), pa);
        assert_int_equal(fresh, 0);
    }
    /* each part of the key gives another plan: batch, math, room, geometry */
    const struct {
        const mw_conv2d_geom *g;
        int n, tf32;
        size_t room;
    } other[] = {
        {&a, 63, 0, 1 << 20}, {&a, 64, 1, 1 << 20}, {&a, 64, 0, 1 << 19}, {&b, 64, 0, 1 << 20}};
    for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
        mw_dnn_plan *q =
            mw_dnn_cache_get(&c, other[i].g, other[i].n, other[i].tf32, other[i].room, &fresh);
        assert_non_null(q);
        assert_int_equal(fresh, 1);
        assert_ptr_not_equal(q, pa);
        fill(q, 1);
        mw_dnn_plan_made(&c, q, 0);
    }
    assert_int_equal(c.made, 5);
    assert_int_equal(c.count, 5);
    /* many shapes (a deep model): the array grows, earlier plans keep their addresses */
    for (int h = 5; h < 60; h++) {
        mw_conv2d_geom g = geom(h, 3, 8);
        mw_dnn_plan *q = mw_dnn_cache_get(&c, &g, 1, 0, 0, &fresh);
        assert_non_null(q);
        assert_int_equal(fresh, 1);
    }
    assert_ptr_equal(mw_dnn_cache_get(&c, &a, 64, 0, 1 << 20, &fresh), pa);
    assert_int_equal(fresh, 0);
    mw_dnn_cache_free(&c, NULL);
    assert_int_equal(c.count, 0);
    assert_null(c.plans);
}

static int freed;
static void count_free(void *p)
{
    freed++;
    free(p);
}

static void test_free_descs(void **state)
{
    (void)state;
    mw_dnn_cache c = {0};
    int fresh;
    for (int h = 5; h < 8; h++) {
        mw_conv2d_geom g = geom(h, 1, 1);
        mw_dnn_plan *p = mw_dnn_cache_get(&c, &g, 1, 0, 0, &fresh);
        p->descs = h == 6 ? NULL : malloc(8); /* a plan whose set-up failed has none */
    }
    freed = 0;
    mw_dnn_cache_free(&c, count_free);
    assert_int_equal(freed, 2);
}

typedef struct {
    mw_dnn_cache *c;
    mw_dnn_plan *p;
    const mw_dnn_cand *got[4];
} fall_ctx;

static void fall_back(void *arg)
{
    fall_ctx *f = arg;
    f->got[0] = mw_dnn_plan_failed(f->p, MW_DNN_BWD_FILTER, "CUDNN_STATUS_EXECUTION_FAILED", 3);
    f->got[1] = mw_dnn_plan_failed(f->p, MW_DNN_BWD_FILTER, "CUDNN_STATUS_NOT_SUPPORTED", 3);
    f->got[2] = mw_dnn_plan_current(f->p, MW_DNN_BWD_FILTER);
    f->got[3] = mw_dnn_plan_current(f->p, MW_DNN_FWD);
}

static void test_fallback(void **state)
{
    (void)state;
    mw_log_set_level(MW_LOG_INFO);
    mw_dnn_cache c = {0};
    mw_conv2d_geom g = geom(11, 2, 5);
    int fresh;
    mw_dnn_plan *p = mw_dnn_cache_get(&c, &g, 7, 0, 1 << 16, &fresh);
    fill(p, 4);
    assert_int_equal(mw_dnn_plan_current(p, MW_DNN_BWD_FILTER)->algo, 4);
    fall_ctx f = {&c, p, {0}};
    const char *err = captured(fall_back, &f);
    /* the next candidate, then none: im2col, for good; the other passes are untouched */
    assert_non_null(f.got[0]);
    assert_int_equal(f.got[0]->algo, 5);
    assert_null(f.got[1]);
    assert_null(f.got[2]);
    assert_non_null(f.got[3]);
    assert_int_equal(f.got[3]->algo, 4);
    expect_contains(err,
                    "CUDA device 3: cuDNN conv 11x11x2 -> 9x9x5 (3x3, stride 1x1), batch 7, "
                    "FP32: backward-filter algorithm 4 failed (CUDNN_STATUS_EXECUTION_FAILED); "
                    "trying algorithm 5");
    expect_contains(err, "backward-filter algorithm 5 failed (CUDNN_STATUS_NOT_SUPPORTED), the "
                         "last candidate; im2col + cuBLAS from now on");
    expect_contains(p->why[MW_DNN_BWD_FILTER], "algorithm 5 failed: CUDNN_STATUS_NOT_SUPPORTED");
    /* a failure past the end stays there */
    assert_null(mw_dnn_plan_failed(p, MW_DNN_BWD_FILTER, "again", 3));
    mw_dnn_cache_free(&c, NULL);
}

typedef struct {
    mw_dnn_cache *c;
    mw_dnn_plan *p[3];
} made_ctx;

static const char *names(int pass, int algo)
{
    return pass == MW_DNN_FWD && algo == 1 ? "IMPLICIT_PRECOMP_GEMM" : NULL;
}

static void announce(void *arg)
{
    made_ctx *m = arg;
    for (int i = 0; i < 3; i++)
        mw_dnn_plan_made(m->c, m->p[i], i); /* three devices, the same shape and choice */
}

static void test_announced_once(void **state)
{
    (void)state;
    mw_log_set_level(MW_LOG_INFO);
    mw_dnn_cache c[3] = {{0}, {0}, {0}};
    mw_conv2d_geom g = geom(28, 1, 32);
    made_ctx m = {c, {0}};
    int fresh;
    for (int i = 0; i < 3; i++) {
        c[i].algo_name = names;
        m.p[i] = mw_dnn_cache_get(&c[i], &g, 64, 1, 1 << 20, &fresh);
        fill(m.p[i], 1);
        m.p[i]->ncand[MW_DNN_BWD_DATA] = 0; /* no candidate: im2col, and why */
        snprintf(m.p[i]->why[MW_DNN_BWD_DATA], sizeof m.p[i]->why[0], "none fits");
    }
    m.c = &c[0];
    const char *err = captured(announce, &m);
    expect_contains(err, "CUDA device 0: cuDNN conv 28x28x1 -> 26x26x32 (3x3, stride 1x1), batch "
                         "64, TF32: forward algorithm 1 (IMPLICIT_PRECOMP_GEMM, 4 KiB workspace); "
                         "backward-data im2col (none fits); backward-filter algorithm 1 (4 KiB "
                         "workspace)");
    /* once in the process, whichever device made it */
    const char *second = strstr(err, "cuDNN conv");
    assert_non_null(second);
    assert_null(strstr(second + 1, "cuDNN conv"));
    assert_int_equal(c[0].made, 3);
    for (int i = 0; i < 3; i++)
        mw_dnn_cache_free(&c[i], NULL);
}

static void test_refuse(void **state)
{
    (void)state;
    mw_dnn_cache c = {0};
    mw_conv2d_geom g = geom(9, 1, 1);
    int fresh;
    mw_dnn_plan *p = mw_dnn_cache_get(&c, &g, 1, 0, 0, &fresh);
    fill(p, 0);
    mw_dnn_plan_refuse(p, "cudnnGetConvolutionForwardAlgorithm_v7: CUDNN_STATUS_SUBLIBRARY_"
                          "LOADING_FAILED");
    for (int pass = 0; pass < MW_DNN_PASSES; pass++) {
        assert_null(mw_dnn_plan_current(p, pass));
        expect_contains(p->why[pass], "SUBLIBRARY_LOADING_FAILED");
    }
    mw_dnn_cache_free(&c, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_keys), cmocka_unit_test(test_free_descs),
        cmocka_unit_test(test_fallback),   cmocka_unit_test(test_announced_once),
        cmocka_unit_test(test_refuse),
    };
    return cmocka_run_group_tests_name("dnn_plan", tests, NULL, NULL);
}
