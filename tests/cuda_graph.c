/* The `cuda` suite's CUDA graph cases (kernels/cuda/graph.cu, run by tests/test_cuda.c's main;
 * they skip, the reason printed, without a device): what --cuda-graphs relies on. */
#include <math.h>
#include <string.h>

#include "kernels/cuda/graph.h"
#include "kernels/cuda/runtime.h"
#include "kernels/twins.h"
#include "tests/test_cuda.h"
#include "tests/util.h"

/* Capture the launches of body on the suite's context into a graph. */
static void *capture(void (*body)(void *), void *arg)
{
    char why[512];
    void *exec = NULL;
    check_rc(mw_cuda_capture_begin(&ctx), "mw_cuda_capture_begin");
    body(arg);
    if (mw_cuda_capture_end(&ctx, &exec, why, sizeof why) != MW_OK)
        fail_msg("the capture failed: %s", why);
    assert_non_null(exec);
    return exec;
}

typedef struct {
    float *y, *mask, *x;
    const uint32_t *ids;
    uint64_t seed;
    int N;
    size_t D;
    float *o, *p, *q, *k, *v, *dq, *dk, *dv, *dout;
    const mw_attn_geom *g;
} graph_args;

static void dropout_body(void *arg)
{
    const graph_args *a = arg;
    cuda.dropout_fwd(&ctx, a->y, a->mask, a->x, a->ids, a->seed, 5, 0.3f, a->N, a->D);
}

static void attn_body(void *arg)
{
    const graph_args *a = arg;
    cuda.attn_fwd(&ctx, a->o, a->p, a->q, a->k, a->v, a->g, a->N);
    cuda.attn_bwd(&ctx, a->dq, a->dk, a->dv, a->p, a->dout, a->q, a->k, a->v, a->g, a->N);
}

/* Dropout captured in a step whose seed is 1111, launched after each later step's
 * mw_cuda_step_seed: each launch draws that step's mask, the reference's bit for bit; a call
 * given another seed than the step's takes it as given. The control: the seed written after the
 * launch leaves the launch's mask as it was. */
static void dropout_replays(void)
{
    pool P = {0};
    const int N = 3;
    const size_t D = 1001, n = (size_t)N * D, nb = n * sizeof(float);
    uint32_t ids[3] = {7, 1000003, 42};
    float *x = h_rand(&P, n, 51, -1, 1), *y = h_rand(&P, n, 52, 0, 1);
    float *mask = h_rand(&P, n, 53, 0, 1);
    graph_args a = {.y = d_put(&P, NULL, nb),
                    .mask = d_put(&P, NULL, nb),
                    .x = d_put(&P, x, nb),
                    .ids = d_put(&P, ids, sizeof ids),
                    .seed = 1111,
                    .N = N,
                    .D = D};
    check_rc(mw_cuda_step_seed(&ctx, 1111), "mw_cuda_step_seed");
    void *exec = capture(dropout_body, &a);
    static const uint64_t seeds[] = {1111, 2222, 0x9e3779b97f4a7c15ull};
    for (size_t s = 0; s < sizeof seeds / sizeof *seeds; s++) {
        check_rc(mw_cuda_step_seed(&ctx, seeds[s]), "mw_cuda_step_seed");
        check_rc(mw_cuda_graph_launch(&ctx, exec), "mw_cuda_graph_launch");
        check_rc(mw_cuda_step_seed(&ctx, 31337), "the control's seed, after the launch");
        mw_dropout_fwd_ref(NULL, y, mask, x, ids, seeds[s], 5, 0.3f, N, D);
        expect_close((float *)d_get(&P, a.mask, nb), mask, n, 0.0f, 0.0f);
        expect_close((float *)d_get(&P, a.y, nb), y, n, 0.0f, 0.0f);
    }
    cuda.dropout_fwd(&ctx, a.y, a.mask, a.x, a.ids, 4444, 5, 0.3f, N, D); /* not the step's */
    mw_dropout_fwd_ref(NULL, y, mask, x, ids, 4444, 5, 0.3f, N, D);
    expect_close((float *)d_get(&P, a.mask, nb), mask, n, 0.0f, 0.0f);
    mw_cuda_graph_free(exec);
    pool_free(&P);
}

/* Attention with dropout (64 causal steps, 4 heads of 16, ids), its forward and backward
 * captured in step 77's and launched in step 78's: the probabilities, output and gradients of
 * seed 78, within cuda_attn.c's tolerances for this geometry (1e-5 of the value or absolute for
 * the probabilities and outputs, 3e-5 for the gradients); every launch starts from the same
 * inputs (the gradients' starting values uploaded again). */
static void attn_replays(void)
{
    pool P = {0};
    const int n = 3, T = 64, H = 4, dk = 16;
    static const uint32_t ids[3] = {5, 11, 2};
    mw_attn_geom g = {.T = T,
                      .S = T,
                      .H = H,
                      .kv_heads = H,
                      .dk = dk,
                      .dv = dk,
                      .scale = 0.25f,
                      .causal = 1,
                      .rate = 0.2f,
                      .seed = 77,
                      .stream = 4,
                      .ids = ids};
    const size_t nq = (size_t)n * T * H * dk, np = (size_t)n * H * T * T;
    float *q = h_rand(&P, nq, 61, -1.5f, 1.5f), *k = h_rand(&P, nq, 62, -1.5f, 1.5f);
    float *v = h_rand(&P, nq, 63, -1, 1), *dout = h_rand(&P, nq, 64, -1, 1);
    float *o = h_rand(&P, nq, 65, 0, 1), *p = h_rand(&P, np, 66, 0, 1);
    float *dq = h_rand(&P, nq, 67, -1, 1), *dk_ = h_rand(&P, nq, 68, -1, 1);
    float *dv = h_rand(&P, nq, 69, -1, 1);
    mw_attn_geom gd = g;
    gd.ids = d_put(&P, ids, sizeof ids);
    graph_args a = {.o = d_put(&P, NULL, nq * 4),
                    .p = d_put(&P, NULL, np * 4),
                    .q = d_put(&P, q, nq * 4),
                    .k = d_put(&P, k, nq * 4),
                    .v = d_put(&P, v, nq * 4),
                    .dq = d_put(&P, dq, nq * 4),
                    .dk = d_put(&P, dk_, nq * 4),
                    .dv = d_put(&P, dv, nq * 4),
                    .dout = d_put(&P, dout, nq * 4),
                    .g = &gd,
                    .N = n};
    check_rc(mw_cuda_step_seed(&ctx, 77), "mw_cuda_step_seed");
    void *exec = capture(attn_body, &a);
    gd.seed = 12345; /* the graph keeps what the capture read: this changes nothing */
    check_rc(mw_cuda_step_seed(&ctx, 78), "mw_cuda_step_seed");
    check_rc(mw_cuda_graph_launch(&ctx, exec), "mw_cuda_graph_launch");
    g.seed = 78;
    mw_attn_fwd_ref(NULL, o, p, q, k, v, &g, n);
    mw_attn_bwd_ref(NULL, dq, dk_, dv, p, dout, q, k, v, &g, n);
    expect_close((float *)d_get(&P, a.o, nq * 4), o, nq, 1e-5f, 1e-5f);
    expect_close((float *)d_get(&P, a.dq, nq * 4), dq, nq, 3e-5f, 1e-5f);
    expect_close((float *)d_get(&P, a.dk, nq * 4), dk_, nq, 3e-5f, 1e-5f);
    expect_close((float *)d_get(&P, a.dv, nq * 4), dv, nq, 3e-5f, 1e-5f);
    expect_close((float *)d_get(&P, a.p, np * 4), p, np, 3e-5f, 1e-5f); /* ds over p */
    mw_cuda_graph_free(exec);
    pool_free(&P);
}

static void no_room_body(void *arg)
{
    (void)arg; /* more than the scratch holds: fails before it reads a pointer */
    const mw_attn_geom g = {.T = 4096, .S = 4096, .H = 1, .kv_heads = 1, .dk = 1, .dv = 1};
    cuda.attn_bwd(&ctx, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &g, 1);
}

/* A wrapper that fails inside a capture: the capture hands its reason back, leaves no error
 * behind, and the context still runs kernels. */
static void failed_capture(void)
{
    char why[512];
    void *exec = (void *)1;
    mw_err_clear();
    check_rc(mw_cuda_capture_begin(&ctx), "mw_cuda_capture_begin");
    no_room_body(NULL);
    assert_int_equal(mw_cuda_capture_end(&ctx, &exec, why, sizeof why), MW_EDEVICE);
    assert_null(exec);
    if (!strstr(why, "mw_attn_bwd_cuda: the device scratch holds"))
        fail_msg("the reason names the wrapper: '%s'", why);
    assert_string_equal(mw_err_msg(), "");
    check_rc(mw_cuda_last_status(&ctx), "the context after a failed capture");
    dropout_replays(); /* captures and launches again */
}

void test_graphs(void **state)
{
    (void)state;
    NEED_DEVICE();
    dropout_replays();
    attn_replays();
    failed_capture();
    check_sync();
}
