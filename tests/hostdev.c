/* A host stand-in for the CUDA backend (kernels/cuda/cuda.h), linked with tests/nccl_mock.c
 * into `mwtrain-hostdev`, a build of mwtrain whose "GPUs" are fake devices in host memory. It
 * lets the GPU backend (worker/replicas/replicas_gpu.c, under worker/train.c's loop) run on a
 * machine without a GPU: device selection, one context per device, state upload and download, the
 * rounds of micro-batches over a rank's devices, the weight penalty, the NCCL all-reduce
 * (cluster/nccl.c against the mock), the device optimizer, checkpoints and evaluation. What it
 * cannot show is that the CUDA kernels themselves are right: those are the `cuda` suite's, on a
 * real device.
 *
 * The "CUDA kernels" are the CPU table's (the graph ops of Functional models included),
 * wrapped: every call first checks that its context is
 * an open stand-in context and that each array it is given lies inside that context's fake
 * device memory (a host pointer, or another device's, aborts with a message naming the kernel
 * and the argument), then runs the CPU kernel on the context's scratch. Copies check their
 * device side the same way. Work runs at once: streams are always idle. The copy stream's
 * ordering is checked all the same: a kernel or copy on the compute stream that touches memory
 * an upload on the copy stream wrote, before a copy mark after that upload was made a wait of
 * the compute stream (mw_cuda_copy_mark, mw_cuda_compute_after), aborts naming both.
 *
 * Environment:
 *   MW_HOSTDEV_GPUS=N       fake devices per process (default 0: no device)
 *   MW_HOSTDEV_FAULT=K:AT   inject a mock fault from NCCL collective AT on: K is async (an
 *                           asynchronous NCCL error) or hang (the streams never go idle)
 *   MW_HOSTDEV_STATS=1      at exit, print what the loop asked of the "devices" on stderr:
 *                           "hostdev stats: S syncs, W mark waits, D downloads of B bytes"
 *                           (host waits and device-to-host traffic, to show the step's shape)
 * At exit, misuses found by the mock (tests/nccl_mock.h) make the process exit with 99. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda.h"
#include "kernels/kernels.h"
#include "tests/nccl_mock.h"

#define MW_LOSS_HD static inline
#include "kernels/loss_rules.h" /* metrics_add_example, as kernels/cuda/metrics.cu's */

#define HD_MAGIC 0x68646576 /* "hdev" */

/* An upload on the copy stream whose data the compute stream may not read yet: until a copy
 * mark recorded after it (slot >= 0) is waited for by mw_cuda_compute_after. */
#define HD_PENDING 16
typedef struct {
    const char *p;
    size_t nbytes;
    int slot; /* -1: no copy mark recorded since */
} hd_pending;

typedef struct {
    int magic;
    int device;
    cudaStream_t stream; /* the mock's, for NCCL calls on "the context's stream" */
    mw_status status;
    hd_pending pending[HD_PENDING];
    int npending;
} hd_ctx;

static int hd_ndev = -1;
static mw_kernels hd_cpu; /* the kernels behind the wrappers */
static struct {
    long syncs, waits, downloads, download_bytes;
} hd_stats;

static void hd_at_exit(void)
{
    const char *s = getenv("MW_HOSTDEV_STATS");
    if (s && *s && strcmp(s, "0") != 0)
        fprintf(stderr, "hostdev stats: %ld syncs, %ld mark waits, %ld downloads of %ld bytes\n",
                hd_stats.syncs, hd_stats.waits, hd_stats.downloads, hd_stats.download_bytes);
    if (mock_violations() > 0) {
        fprintf(stderr, "hostdev: %d misuse(s) of the CUDA/NCCL stand-in (see above)\n",
                mock_violations());
        _exit(99);
    }
}

static void hd_init(void)
{
    if (hd_ndev >= 0)
        return;
    const char *g = getenv("MW_HOSTDEV_GPUS");
    hd_ndev = g && *g ? atoi(g) : 0;
    if (hd_ndev < 0)
        hd_ndev = 0;
    mock_reset(hd_ndev);
    const char *f = getenv("MW_HOSTDEV_FAULT");
    if (f && *f) {
        int at = 0;
        if (sscanf(f, "async:%d", &at) == 1)
            mock_inject(MOCK_ASYNC_ERROR, at);
        else if (sscanf(f, "hang:%d", &at) == 1)
            mock_inject(MOCK_HANG, at);
        else {
            fprintf(stderr, "hostdev: MW_HOSTDEV_FAULT=%s: expected async:N or hang:N\n", f);
            exit(2);
        }
    }
    mw_kernels_init_cpu(&hd_cpu);
    atexit(hd_at_exit);
}

static void hd_misuse(const char *op, const char *what) __attribute__((noreturn));
static void hd_misuse(const char *op, const char *what)
{
    fprintf(stderr, "hostdev: misuse in %s: %s\n", op, what);
    fflush(stderr);
    abort();
}

/* The stand-in context behind k, made current; aborts when k is not one. */
static hd_ctx *hd_of(const mw_kctx *k, const char *op)
{
    if (!k || !k->dev || ((hd_ctx *)k->dev)->magic != HD_MAGIC)
        hd_misuse(op, "not an open CUDA context (a host context given to a CUDA kernel?)");
    hd_ctx *c = k->dev;
    cudaSetDevice(c->device);
    return c;
}

/* Abort unless [p, p + nbytes) is device memory of c's device (NULL allowed when optional). */
static void hd_check(const hd_ctx *c, const char *op, const char *arg, const void *p, size_t nbytes,
                     int optional)
{
    if (optional && !p)
        return;
    if (!mock_inside(p, nbytes, c->device)) {
        char what[256];
        snprintf(what, sizeof what, "%s (%zu bytes at %p) is not memory of CUDA device %d", arg,
                 nbytes, p, c->device);
        hd_misuse(op, what);
    }
    const char *q = p;
    for (int i = 0; i < c->npending; i++) {
        const hd_pending *u = &c->pending[i];
        if (q < u->p + u->nbytes && u->p < q + nbytes) {
            char what[256];
            snprintf(what, sizeof what,
                     "%s (%zu bytes at %p) overlaps an upload on the copy stream that the "
                     "compute stream has not waited for (%s)",
                     arg, nbytes, p,
                     u->slot < 0 ? "no copy mark after it" : "mw_cuda_compute_after not called");
            hd_misuse(op, what);
        }
    }
}

/* The host context the CPU kernel runs with: the device scratch, one thread. */
static mw_kctx hd_host(const mw_kctx *k)
{
    mw_kctx h = {.nthreads = 1, .ws = k->ws, .ws_count = k->ws_count, .bf16 = k->bf16};
    return h;
}

#define F sizeof(float)
#define CHK(arg, count, size) hd_check(c, __func__, #arg, arg, (size_t)(count) * (size), 0)
#define CHK_OPT(arg, count, size) hd_check(c, __func__, #arg, arg, (size_t)(count) * (size), 1)

/* ---- the kernel table: checked wrappers around the CPU kernels ---------------------------- */

static void hd_conv2d_fwd(const mw_kctx *k, float *y, const float *x, const float *w,
                          const float *b, const mw_conv2d_geom *g, int N)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, (size_t)N * g->OH * g->OW * g->O, F);
    CHK(x, (size_t)N * g->H * g->W * g->C, F);
    CHK(w, (size_t)g->KH * g->KW * g->C * g->O, F);
    CHK_OPT(b, g->O, F);
    mw_kctx h = hd_host(k);
    hd_cpu.conv2d_fwd(&h, y, x, w, b, g, N);
}

static void hd_conv2d_bwd(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,
                          const float *x, const float *w, const mw_conv2d_geom *g, int N)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK_OPT(dx, (size_t)N * g->H * g->W * g->C, F);
    CHK(dw, (size_t)g->KH * g->KW * g->C * g->O, F);
    CHK_OPT(db, g->O, F);
    CHK(dy, (size_t)N * g->OH * g->OW * g->O, F);
    CHK(x, (size_t)N * g->H * g->W * g->C, F);
    CHK(w, (size_t)g->KH * g->KW * g->C * g->O, F);
    mw_kctx h = hd_host(k);
    hd_cpu.conv2d_bwd(&h, dx, dw, db, dy, x, w, g, N);
}

static void hd_maxpool_fwd(const mw_kctx *k, float *y, int32_t *argmax, const float *x,
                           const mw_pool_geom *g, int N)
{
    hd_ctx *c = hd_of(k, __func__);
    const size_t out = (size_t)N * g->OH * g->OW * g->C;
    CHK(y, out, F);
    CHK(argmax, out, sizeof(int32_t));
    CHK(x, (size_t)N * g->H * g->W * g->C, F);
    mw_kctx h = hd_host(k);
    hd_cpu.maxpool_fwd(&h, y, argmax, x, g, N);
}

static void hd_maxpool_bwd(const mw_kctx *k, float *dx, const float *dy, const int32_t *argmax,
                           const mw_pool_geom *g, int N)
{
    hd_ctx *c = hd_of(k, __func__);
    const size_t out = (size_t)N * g->OH * g->OW * g->C;
    CHK(dx, (size_t)N * g->H * g->W * g->C, F);
    CHK(dy, out, F);
    CHK(argmax, out, sizeof(int32_t));
    mw_kctx h = hd_host(k);
    hd_cpu.maxpool_bwd(&h, dx, dy, argmax, g, N);
}

static void hd_dense_fwd(const mw_kctx *k, float *y, const float *x, const float *w, const float *b,
                         int N, int I, int O)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, (size_t)N * O, F);
    CHK(x, (size_t)N * I, F);
    CHK(w, (size_t)I * O, F);
    CHK_OPT(b, O, F);
    mw_kctx h = hd_host(k);
    hd_cpu.dense_fwd(&h, y, x, w, b, N, I, O);
}

static void hd_dense_bwd(const mw_kctx *k, float *dx, float *dw, float *db, const float *dy,
                         const float *x, const float *w, int N, int I, int O)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK_OPT(dx, (size_t)N * I, F);
    CHK(dw, (size_t)I * O, F);
    CHK_OPT(db, O, F);
    CHK(dy, (size_t)N * O, F);
    CHK(x, (size_t)N * I, F);
    CHK(w, (size_t)I * O, F);
    mw_kctx h = hd_host(k);
    hd_cpu.dense_bwd(&h, dx, dw, db, dy, x, w, N, I, O);
}

static void hd_relu_fwd(const mw_kctx *k, float *y, const float *x, size_t count)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, count, F);
    CHK(x, count, F);
    mw_kctx h = hd_host(k);
    hd_cpu.relu_fwd(&h, y, x, count);
}

static void hd_relu_bwd(const mw_kctx *k, float *dx, const float *dy, const float *y, size_t count)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(dx, count, F);
    CHK(dy, count, F);
    CHK(y, count, F);
    mw_kctx h = hd_host(k);
    hd_cpu.relu_bwd(&h, dx, dy, y, count);
}

static void hd_xent_fwd(const mw_kctx *k, float *loss, float *prob, const float *logits,
                        const int32_t *labels, int N, int K)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(loss, N, F);
    CHK(prob, (size_t)N * K, F);
    CHK(logits, (size_t)N * K, F);
    CHK(labels, N, sizeof(int32_t));
    mw_kctx h = hd_host(k);
    hd_cpu.xent_fwd(&h, loss, prob, logits, labels, N, K);
}

static void hd_xent_bwd(const mw_kctx *k, float *dlogits, const float *prob, const int32_t *labels,
                        float scale, int N, int K)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(dlogits, (size_t)N * K, F);
    CHK(prob, (size_t)N * K, F);
    CHK(labels, N, sizeof(int32_t));
    mw_kctx h = hd_host(k);
    hd_cpu.xent_bwd(&h, dlogits, prob, labels, scale, N, K);
}

static void hd_dloss_fwd(const mw_kctx *k, const mw_dloss *p, float *loss, float *prob,
                         const float *out, const float *y, int N, int K)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(loss, N, F);
    CHK(prob, (size_t)N * K, F);
    CHK(out, (size_t)N * K, F);
    CHK(y, (size_t)N * K, F);
    mw_kctx h = hd_host(k);
    hd_cpu.dloss_fwd(&h, p, loss, prob, out, y, N, K);
}

static void hd_dloss_bwd(const mw_kctx *k, const mw_dloss *p, float *dout, const float *out,
                         const float *prob, const float *y, float scale, int N, int K)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(dout, (size_t)N * K, F);
    CHK(out, (size_t)N * K, F);
    CHK(prob, (size_t)N * K, F);
    CHK(y, (size_t)N * K, F);
    mw_kctx h = hd_host(k);
    hd_cpu.dloss_bwd(&h, p, dout, out, prob, y, scale, N, K);
}

static void hd_scale_rows(const mw_kctx *k, float *a, const float *w, int n, int width)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(a, (size_t)n * width, F);
    CHK(w, n, F);
    mw_kctx h = hd_host(k);
    hd_cpu.scale_rows(&h, a, w, n, width);
}

static void hd_row_mean(const mw_kctx *k, float *out, const float *in, int n, int P)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(out, n, F);
    CHK(in, (size_t)n * P, F);
    mw_kctx h = hd_host(k);
    hd_cpu.row_mean(&h, out, in, n, P);
}

static void hd_embed_fwd(const mw_kctx *k, float *y, const float *ids, const float *table, int n,
                         int T, int D, int V)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, (size_t)n * T * D, F);
    CHK(ids, (size_t)n * T, F);
    CHK(table, (size_t)V * D, F);
    mw_kctx h = hd_host(k);
    hd_cpu.embed_fwd(&h, y, ids, table, n, T, D, V);
}

static void hd_embed_bwd(const mw_kctx *k, float *gtable, const float *dy, const float *ids, int n,
                         int T, int D, int V)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(gtable, (size_t)V * D, F);
    CHK(dy, (size_t)n * T * D, F);
    CHK(ids, (size_t)n * T, F);
    mw_kctx h = hd_host(k);
    hd_cpu.embed_bwd(&h, gtable, dy, ids, n, T, D, V);
}

static void hd_sine_pos(const mw_kctx *k, float *y, int n, int T, int D, float max_wavelength)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, (size_t)n * T * D, F);
    mw_kctx h = hd_host(k);
    hd_cpu.sine_pos(&h, y, n, T, D, max_wavelength);
}

static void hd_masked_mean_fwd(const mw_kctx *k, float *y, const float *x, const float *ids, int n,
                               int T, int D)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, (size_t)n * D, F);
    CHK(x, (size_t)n * T * D, F);
    CHK(ids, (size_t)n * T, F);
    mw_kctx h = hd_host(k);
    hd_cpu.masked_mean_fwd(&h, y, x, ids, n, T, D);
}

static void hd_masked_mean_bwd(const mw_kctx *k, float *dx, const float *dy, const float *ids,
                               int n, int T, int D)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(dx, (size_t)n * T * D, F);
    CHK(dy, (size_t)n * D, F);
    CHK(ids, (size_t)n * T, F);
    mw_kctx h = hd_host(k);
    hd_cpu.masked_mean_bwd(&h, dx, dy, ids, n, T, D);
}

static void hd_layernorm_fwd(const mw_kctx *k, float *y, float *stat, const float *x,
                             const float *gamma, const float *beta, int rows, int D, float eps)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, (size_t)rows * D, F);
    CHK(stat, 2 * (size_t)rows, F);
    CHK(x, (size_t)rows * D, F);
    CHK_OPT(gamma, D, F);
    CHK_OPT(beta, D, F);
    mw_kctx h = hd_host(k);
    hd_cpu.layernorm_fwd(&h, y, stat, x, gamma, beta, rows, D, eps);
}

static void hd_layernorm_bwd(const mw_kctx *k, float *dx, float *dgamma, float *dbeta,
                             const float *dy, const float *x, const float *stat, const float *gamma,
                             int rows, int D)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK_OPT(dx, (size_t)rows * D, F);
    CHK_OPT(dgamma, D, F);
    CHK_OPT(dbeta, D, F);
    CHK(dy, (size_t)rows * D, F);
    CHK(x, (size_t)rows * D, F);
    CHK(stat, 2 * (size_t)rows, F);
    CHK_OPT(gamma, D, F);
    mw_kctx h = hd_host(k);
    hd_cpu.layernorm_bwd(&h, dx, dgamma, dbeta, dy, x, stat, gamma, rows, D);
}

/* The attention's geometry's device pointers: the masks' ids and the dropout's example ids. */
static void hd_attn_geom(hd_ctx *c, const char *op, const mw_attn_geom *g, int n)
{
    hd_check(c, op, "g->qids", g->qids, (size_t)n * g->T * F, 1);
    hd_check(c, op, "g->vids", g->vids, (size_t)n * g->S * F, 1);
    if (g->rate > 0.0f)
        hd_check(c, op, "g->ids", g->ids, (size_t)n * sizeof(uint32_t), 1);
}

static void hd_attn_fwd(const mw_kctx *k, float *o, float *p, const float *q, const float *kk,
                        const float *v, const mw_attn_geom *g, int n)
{
    hd_ctx *c = hd_of(k, __func__);
    const size_t nT = (size_t)n * g->T * g->H, nS = (size_t)n * g->S * g->H;
    CHK(o, nT * g->dv, F);
    CHK(p, nT * g->S, F);
    CHK(q, nT * g->dk, F);
    CHK(kk, nS * g->dk, F);
    CHK(v, nS * g->dv, F);
    hd_attn_geom(c, __func__, g, n);
    mw_kctx h = hd_host(k);
    hd_cpu.attn_fwd(&h, o, p, q, kk, v, g, n);
}

static void hd_attn_bwd(const mw_kctx *k, float *dq, float *dk, float *dv, float *p,
                        const float *dout, const float *q, const float *kk, const float *v,
                        const mw_attn_geom *g, int n)
{
    hd_ctx *c = hd_of(k, __func__);
    const size_t nT = (size_t)n * g->T * g->H, nS = (size_t)n * g->S * g->H;
    CHK(dq, nT * g->dk, F);
    CHK(dk, nS * g->dk, F);
    CHK(dv, nS * g->dv, F);
    CHK(p, nT * g->S, F);
    CHK(dout, nT * g->dv, F);
    CHK(q, nT * g->dk, F);
    CHK(kk, nS * g->dk, F);
    CHK(v, nS * g->dv, F);
    hd_attn_geom(c, __func__, g, n);
    mw_kctx h = hd_host(k);
    hd_cpu.attn_bwd(&h, dq, dk, dv, p, dout, q, kk, v, g, n);
}

static void hd_dropout_fwd(const mw_kctx *k, float *y, float *mask, const float *x,
                           const uint32_t *ids, uint64_t seed, uint64_t stream, float rate, int N,
                           size_t D)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, (size_t)N * D, F);
    CHK(mask, (size_t)N * D, F);
    CHK(x, (size_t)N * D, F);
    CHK_OPT(ids, N, sizeof(uint32_t));
    mw_kctx h = hd_host(k);
    hd_cpu.dropout_fwd(&h, y, mask, x, ids, seed, stream, rate, N, D);
}

static void hd_dropout_bwd(const mw_kctx *k, float *dx, const float *dy, const float *mask,
                           size_t count)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(dx, count, F);
    CHK(dy, count, F);
    CHK(mask, count, F);
    mw_kctx h = hd_host(k);
    hd_cpu.dropout_bwd(&h, dx, dy, mask, count);
}

static void hd_zero(const mw_kctx *k, void *p, size_t nbytes)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(p, nbytes, 1);
    if (nbytes)
        memset(p, 0, nbytes);
}

static void hd_regularize(const mw_kctx *k, float *g, double *acc, const float *w, size_t count,
                          double l1, double l2, float scale)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK_OPT(g, count, F);
    CHK(acc, 1, sizeof(double));
    CHK(w, count, F);
    mw_kctx h = hd_host(k);
    hd_cpu.regularize(&h, g, acc, w, count, l1, l2, scale);
}

/* Keras 3's update rules: p, g and the first slot always; the others when the rule uses
 * them (NULL otherwise). sumsq's result is host memory. */
#define HD_RULE(name)                                                                              \
    static void hd_##name(const mw_kctx *k, float *p, float *s1, float *s2, float *s3,             \
                          const float *g, size_t count, const mw_optim_hyper *h)                   \
    {                                                                                              \
        hd_ctx *c = hd_of(k, __func__);                                                            \
        CHK(p, count, F);                                                                          \
        CHK_OPT(s1, count, F);                                                                     \
        CHK_OPT(s2, count, F);                                                                     \
        CHK_OPT(s3, count, F);                                                                     \
        CHK(g, count, F);                                                                          \
        mw_kctx hk = hd_host(k);                                                                   \
        hd_cpu.name(&hk, p, s1, s2, s3, g, count, h);                                              \
    }
HD_RULE(sgd_step)
HD_RULE(adam_step)
HD_RULE(rmsprop_step)
HD_RULE(adagrad_step)
#undef HD_RULE

static void hd_sumsq(const mw_kctx *k, double *out, const float *g, size_t count)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(g, count, F);
    mw_kctx h = hd_host(k);
    hd_cpu.sumsq(&h, out, g, count);
}

/* ---- the graph ops (kernels/graphops.h) ---- */

static void hd_bn_fwd_train(const mw_kctx *k, float *y, float *mean, float *var, float *invstd,
                            const float *x, const float *gamma, const float *beta, size_t rows,
                            int C, float eps)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, rows * C, F);
    CHK(mean, C, F);
    CHK(var, C, F);
    CHK(invstd, C, F);
    CHK(x, rows * C, F);
    CHK_OPT(gamma, C, F);
    CHK_OPT(beta, C, F);
    mw_kctx h = hd_host(k);
    hd_cpu.bn_fwd_train(&h, y, mean, var, invstd, x, gamma, beta, rows, C, eps);
}

static void hd_bn_fwd_infer(const mw_kctx *k, float *y, const float *x, const float *gamma,
                            const float *beta, const float *mean, const float *var, size_t rows,
                            int C, float eps)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, rows * C, F);
    CHK(x, rows * C, F);
    CHK_OPT(gamma, C, F);
    CHK_OPT(beta, C, F);
    CHK(mean, C, F);
    CHK(var, C, F);
    mw_kctx h = hd_host(k);
    hd_cpu.bn_fwd_infer(&h, y, x, gamma, beta, mean, var, rows, C, eps);
}

static void hd_bn_bwd(const mw_kctx *k, float *dx, float *dgamma, float *dbeta, const float *dy,
                      const float *x, const float *mean, const float *invstd, const float *gamma,
                      size_t rows, int C)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK_OPT(dx, rows * C, F);
    CHK_OPT(dgamma, C, F);
    CHK_OPT(dbeta, C, F);
    CHK(dy, rows * C, F);
    CHK(x, rows * C, F);
    CHK(mean, C, F);
    CHK(invstd, C, F);
    CHK_OPT(gamma, C, F);
    mw_kctx h = hd_host(k);
    hd_cpu.bn_bwd(&h, dx, dgamma, dbeta, dy, x, mean, invstd, gamma, rows, C);
}

static void hd_bn_stats_acc(const mw_kctx *k, float *g, const float *st, size_t count, float w)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(g, count, F);
    CHK(st, count, F);
    mw_kctx h = hd_host(k);
    hd_cpu.bn_stats_acc(&h, g, st, count, w);
}

static void hd_bn_stats_update(const mw_kctx *k, float *p, float *g, size_t count, float momentum)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(p, count, F);
    CHK(g, count, F);
    mw_kctx h = hd_host(k);
    hd_cpu.bn_stats_update(&h, p, g, count, momentum);
}

static void hd_bn_sums(const mw_kctx *k, double *s, const float *x, const float *dy,
                       const float *mean, const float *invstd, float *dgamma, float *dbeta,
                       size_t rows, int C)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(s, 2 * C, sizeof(double));
    CHK_OPT(x, rows * C, F);
    CHK_OPT(dy, rows * C, F);
    if (dy) {
        CHK(mean, C, F);
        CHK(invstd, C, F);
        CHK_OPT(dgamma, C, F);
        CHK_OPT(dbeta, C, F);
    }
    mw_kctx h = hd_host(k);
    hd_cpu.bn_sums(&h, s, x, dy, mean, invstd, dgamma, dbeta, rows, C);
}

static void hd_bn_sync_fwd(const mw_kctx *k, float *y, float *mean, float *var, float *invstd,
                           const float *x, const float *gamma, const float *beta, const double *s,
                           double M, size_t rows, int C, float eps)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK_OPT(y, rows * C, F);
    CHK(mean, C, F);
    CHK(var, C, F);
    CHK(invstd, C, F);
    CHK_OPT(x, rows * C, F);
    CHK_OPT(gamma, C, F);
    CHK_OPT(beta, C, F);
    CHK(s, 2 * C, sizeof(double));
    mw_kctx h = hd_host(k);
    hd_cpu.bn_sync_fwd(&h, y, mean, var, invstd, x, gamma, beta, s, M, rows, C, eps);
}

static void hd_bn_sync_bwd(const mw_kctx *k, float *dx, const float *dy, const float *x,
                           const float *mean, const float *invstd, const float *gamma,
                           const double *s, double M, size_t rows, int C)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK_OPT(dx, rows * C, F);
    CHK(dy, rows * C, F);
    CHK(x, rows * C, F);
    CHK(mean, C, F);
    CHK(invstd, C, F);
    CHK_OPT(gamma, C, F);
    CHK(s, 2 * C, sizeof(double));
    mw_kctx h = hd_host(k);
    hd_cpu.bn_sync_bwd(&h, dx, dy, x, mean, invstd, gamma, s, M, rows, C);
}

static void hd_avgpool_fwd(const mw_kctx *k, float *y, const float *x, const mw_pool_geom *g, int N)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, (size_t)N * g->OH * g->OW * g->C, F);
    CHK(x, (size_t)N * g->H * g->W * g->C, F);
    mw_kctx h = hd_host(k);
    hd_cpu.avgpool_fwd(&h, y, x, g, N);
}

static void hd_avgpool_bwd(const mw_kctx *k, float *dx, const float *dy, const mw_pool_geom *g,
                           int N)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(dx, (size_t)N * g->H * g->W * g->C, F);
    CHK(dy, (size_t)N * g->OH * g->OW * g->C, F);
    mw_kctx h = hd_host(k);
    hd_cpu.avgpool_bwd(&h, dx, dy, g, N);
}

static void hd_pad2d_fwd(const mw_kctx *k, float *y, const float *x, int H, int W, int C, int PT,
                         int PB, int PL, int PR, int N)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, (size_t)N * (PT + H + PB) * (PL + W + PR) * C, F);
    CHK(x, (size_t)N * H * W * C, F);
    mw_kctx h = hd_host(k);
    hd_cpu.pad2d_fwd(&h, y, x, H, W, C, PT, PB, PL, PR, N);
}

static void hd_pad2d_bwd(const mw_kctx *k, float *dx, const float *dy, int H, int W, int C, int PT,
                         int PB, int PL, int PR, int N)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(dx, (size_t)N * H * W * C, F);
    CHK(dy, (size_t)N * (PT + H + PB) * (PL + W + PR) * C, F);
    mw_kctx h = hd_host(k);
    hd_cpu.pad2d_bwd(&h, dx, dy, H, W, C, PT, PB, PL, PR, N);
}

static void hd_acc(const mw_kctx *k, float *y, const float *x, size_t count)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, count, F);
    CHK(x, count, F);
    mw_kctx h = hd_host(k);
    hd_cpu.acc(&h, y, x, count);
}

static void hd_round_bf16(const mw_kctx *k, float *p, size_t count)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(p, count, F);
    mw_kctx h = hd_host(k);
    hd_cpu.round_bf16(&h, p, count);
}

static void hd_round_f16(const mw_kctx *k, float *p, size_t count)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(p, count, F);
    mw_kctx h = hd_host(k);
    hd_cpu.round_f16(&h, p, count);
}

static void hd_mul_fwd(const mw_kctx *k, float *y, const float *a, const float *b, size_t count)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, count, F);
    CHK(a, count, F);
    CHK(b, count, F);
    mw_kctx h = hd_host(k);
    hd_cpu.mul_fwd(&h, y, a, b, count);
}

static void hd_mul_bwd(const mw_kctx *k, float *da, float *db, const float *dy, const float *a,
                       const float *b, size_t count)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK_OPT(da, count, F);
    CHK_OPT(db, count, F);
    CHK(dy, count, F);
    CHK(a, count, F);
    CHK(b, count, F);
    mw_kctx h = hd_host(k);
    hd_cpu.mul_bwd(&h, da, db, dy, a, b, count);
}

static void hd_concat_fwd(const mw_kctx *k, float *y, const float *x, size_t rows, int CX, int CY,
                          int off)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, rows * CY, F);
    CHK(x, rows * CX, F);
    if (off < 0 || off + CX > CY)
        hd_misuse(__func__, "channels [off, off + CX) outside [0, CY)");
    mw_kctx h = hd_host(k);
    hd_cpu.concat_fwd(&h, y, x, rows, CX, CY, off);
}

static void hd_concat_bwd(const mw_kctx *k, float *dx, const float *dy, size_t rows, int CX, int CY,
                          int off)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(dx, rows * CX, F);
    CHK(dy, rows * CY, F);
    if (off < 0 || off + CX > CY)
        hd_misuse(__func__, "channels [off, off + CX) outside [0, CY)");
    mw_kctx h = hd_host(k);
    hd_cpu.concat_bwd(&h, dx, dy, rows, CX, CY, off);
}

static void hd_act_fwd(const mw_kctx *k, float *y, const float *x, size_t count, mw_act_kind kind,
                       float alpha)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, count, F);
    CHK(x, count, F);
    mw_kctx h = hd_host(k);
    hd_cpu.act_fwd(&h, y, x, count, kind, alpha);
}

static void hd_act_bwd(const mw_kctx *k, float *dx, const float *dy, const float *x, const float *y,
                       size_t count, mw_act_kind kind, float alpha)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(dx, count, F);
    CHK(dy, count, F);
    CHK(x, count, F);
    CHK(y, count, F);
    mw_kctx h = hd_host(k);
    hd_cpu.act_bwd(&h, dx, dy, x, y, count, kind, alpha);
}

static void hd_softmax_fwd(const mw_kctx *k, float *y, const float *x, size_t rows, int C)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(y, rows * C, F);
    CHK(x, rows * C, F);
    mw_kctx h = hd_host(k);
    hd_cpu.softmax_fwd(&h, y, x, rows, C);
}

static void hd_softmax_bwd(const mw_kctx *k, float *dx, const float *dy, const float *y,
                           size_t rows, int C)
{
    hd_ctx *c = hd_of(k, __func__);
    CHK(dx, rows * C, F);
    CHK(dy, rows * C, F);
    CHK(y, rows * C, F);
    mw_kctx h = hd_host(k);
    hd_cpu.softmax_bwd(&h, dx, dy, y, rows, C);
}

#undef CHK
#undef CHK_OPT
#undef F

/* ---- kernels/cuda/cuda.h ------------------------------------------------------------------ */

void mw_kernels_init_cuda(mw_kernels *t)
{
    hd_init();
    if (hd_ndev <= 0)
        return;
    t->name = "cuda";
    t->conv2d_fwd = hd_conv2d_fwd;
    t->conv2d_bwd = hd_conv2d_bwd;
    t->maxpool_fwd = hd_maxpool_fwd;
    t->maxpool_bwd = hd_maxpool_bwd;
    t->dense_fwd = hd_dense_fwd;
    t->dense_bwd = hd_dense_bwd;
    t->relu_fwd = hd_relu_fwd;
    t->relu_bwd = hd_relu_bwd;
    t->xent_fwd = hd_xent_fwd;
    t->xent_bwd = hd_xent_bwd;
    t->dloss_fwd = hd_dloss_fwd;
    t->dloss_bwd = hd_dloss_bwd;
    t->scale_rows = hd_scale_rows;
    t->row_mean = hd_row_mean;
    t->embed_fwd = hd_embed_fwd;
    t->sine_pos = hd_sine_pos;
    t->embed_bwd = hd_embed_bwd;
    t->masked_mean_fwd = hd_masked_mean_fwd;
    t->masked_mean_bwd = hd_masked_mean_bwd;
    t->layernorm_fwd = hd_layernorm_fwd;
    t->layernorm_bwd = hd_layernorm_bwd;
    t->attn_fwd = hd_attn_fwd;
    t->attn_bwd = hd_attn_bwd;
    t->dropout_fwd = hd_dropout_fwd;
    t->dropout_bwd = hd_dropout_bwd;
    t->zero = hd_zero;
    t->regularize = hd_regularize;
    t->bn_fwd_train = hd_bn_fwd_train;
    t->bn_fwd_infer = hd_bn_fwd_infer;
    t->bn_bwd = hd_bn_bwd;
    t->bn_stats_acc = hd_bn_stats_acc;
    t->bn_stats_update = hd_bn_stats_update;
    t->bn_sums = hd_bn_sums;
    t->bn_sync_fwd = hd_bn_sync_fwd;
    t->bn_sync_bwd = hd_bn_sync_bwd;
    t->avgpool_fwd = hd_avgpool_fwd;
    t->avgpool_bwd = hd_avgpool_bwd;
    t->pad2d_fwd = hd_pad2d_fwd;
    t->pad2d_bwd = hd_pad2d_bwd;
    t->acc = hd_acc;
    t->round_bf16 = hd_round_bf16;
    t->round_f16 = hd_round_f16;
    t->mul_fwd = hd_mul_fwd;
    t->mul_bwd = hd_mul_bwd;
    t->concat_fwd = hd_concat_fwd;
    t->concat_bwd = hd_concat_bwd;
    t->act_fwd = hd_act_fwd;
    t->act_bwd = hd_act_bwd;
    t->softmax_fwd = hd_softmax_fwd;
    t->softmax_bwd = hd_softmax_bwd;
    t->sgd_step = hd_sgd_step;
    t->adam_step = hd_adam_step;
    t->rmsprop_step = hd_rmsprop_step;
    t->adagrad_step = hd_adagrad_step;
    t->sumsq = hd_sumsq;
}

int mw_cuda_device_count(void)
{
    hd_init();
    return hd_ndev;
}

int mw_cuda_probe(char *reason, size_t reason_len)
{
    hd_init();
    if (hd_ndev <= 0 && reason && reason_len)
        snprintf(reason, reason_len,
                 "cudaGetDeviceCount found 0 devices (host stand-in, "
                 "MW_HOSTDEV_GPUS unset)");
    return hd_ndev;
}

mw_status mw_cuda_ctx_open(mw_kctx *k, int device)
{
    hd_init();
    memset(k, 0, sizeof *k);
    if (device < 0 || device >= hd_ndev)
        return mw_err(MW_EDEVICE, "CUDA device %d: only %d fake device(s)", device, hd_ndev);
    hd_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return mw_err(MW_ENOMEM, "CUDA context: out of host memory");
    c->magic = HD_MAGIC;
    c->device = device;
    cudaSetDevice(device);
    if (cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) != cudaSuccess) {
        free(c);
        return mw_err(MW_EDEVICE, "cudaStreamCreateWithFlags failed");
    }
    k->dev = c;
    k->nthreads = 1;
    k->ws = mock_dev_alloc(device, MW_CUDA_WS_DEFAULT / 16 * sizeof(float));
    k->ws_count = k->ws ? MW_CUDA_WS_DEFAULT / 16 : 0;
    if (!k->ws) {
        mw_cuda_ctx_close(k);
        return mw_err(MW_EDEVICE, "fake device %d: out of memory", device);
    }
    return MW_OK;
}

void mw_cuda_ctx_close(mw_kctx *k)
{
    if (!k)
        return;
    hd_ctx *c = k->dev;
    if (c) {
        cudaSetDevice(c->device);
        mock_dev_free(k->ws);
        if (c->stream)
            cudaStreamDestroy(c->stream);
        c->magic = 0;
        free(c);
    }
    memset(k, 0, sizeof *k);
}

static mw_status hd_status(const mw_kctx *k, const char *op)
{
    if (!k || !k->dev || ((hd_ctx *)k->dev)->magic != HD_MAGIC)
        return mw_err(MW_EDEVICE, "%s: not a CUDA context (open it with mw_cuda_ctx_open)", op);
    return ((hd_ctx *)k->dev)->status;
}

mw_status mw_cuda_activate(const mw_kctx *k)
{
    MW_TRY(hd_status(k, "mw_cuda_activate"));
    cudaSetDevice(((hd_ctx *)k->dev)->device);
    return MW_OK;
}

mw_status mw_cuda_ws_reserve(mw_kctx *k, size_t ws_count)
{
    MW_TRY(hd_status(k, "mw_cuda_ws_reserve"));
    if (ws_count <= k->ws_count)
        return MW_OK;
    hd_ctx *c = k->dev;
    mock_dev_free(k->ws);
    k->ws = mock_dev_alloc(c->device, ws_count * sizeof(float));
    k->ws_count = k->ws ? ws_count : 0;
    return k->ws ? MW_OK : mw_err(MW_EDEVICE, "fake device %d: out of memory", c->device);
}

mw_status mw_cuda_sync(const mw_kctx *k)
{
    hd_stats.syncs++;
    return hd_status(k, "mw_cuda_sync");
}

mw_status mw_cuda_set_tf32(const mw_kctx *k, int on)
{
    (void)on; /* the CPU kernels have one precision */
    return hd_status(k, "mw_cuda_set_tf32");
}

const char *mw_cuda_conv_backend(void)
{
    return "im2col convolutions (the CPU kernels of the host stand-in)";
}

/* Work runs at once here: every mark is passed when it is recorded. */
mw_status mw_cuda_mark(const mw_kctx *k, int slot)
{
    MW_TRY(hd_status(k, "mw_cuda_mark"));
    if (slot < 0 || slot >= MW_CUDA_MARKS)
        hd_misuse("mw_cuda_mark", "slot out of range");
    return MW_OK;
}

mw_status mw_cuda_wait_mark(const mw_kctx *k, int slot, double timeout, const char *what)
{
    (void)timeout, (void)what;
    hd_stats.waits++;
    MW_TRY(hd_status(k, "mw_cuda_wait_mark"));
    if (slot < 0 || slot >= MW_CUDA_MARKS)
        hd_misuse("mw_cuda_wait_mark", "slot out of range");
    return MW_OK;
}

void mw_cuda_metrics_add(const mw_kctx *k, double *acc, const float *loss, const float *prob,
                         const void *y, size_t ybytes, const float *ids, const mw_metric_list *ml,
                         int n, int K)
{
    hd_ctx *c = hd_of(k, __func__);
    hd_check(c, __func__, "acc", acc, MW_SUMS * sizeof(double), 0);
    if (n <= 0)
        return;
    hd_check(c, __func__, "loss", loss, (size_t)n * sizeof(float), 0);
    const size_t P = (size_t)(ml->positions > 1 ? ml->positions : 1), per = P * (size_t)K;
    hd_check(c, __func__, "prob", prob, (size_t)n * per * sizeof(float), 0);
    hd_check(c, __func__, "y", y, (size_t)n * ybytes, 0);
    if (ml->masked)
        hd_check(c, __func__, "ids", ids, (size_t)n * P * sizeof(float), 0);
    double ls = 0;
    for (int i = 0; i < n; i++) {
        metrics_add_example(ml, acc, prob + (size_t)i * per, (const char *)y + (size_t)i * ybytes,
                            K, ml->masked ? ids + (size_t)i * P : NULL);
        ls += loss[i];
    }
    acc[MW_SUM_LOSS] += ls;
}

mw_status mw_cuda_last_status(const mw_kctx *k)
{
    if (!k || !k->dev)
        return MW_EDEVICE;
    return ((hd_ctx *)k->dev)->status;
}

mw_status mw_cuda_alloc(void **p, size_t nbytes)
{
    hd_init();
    *p = NULL;
    if (nbytes == 0)
        return MW_OK;
    *p = mock_dev_alloc(mock_current_device(), nbytes);
    return *p ? MW_OK : mw_err(MW_EDEVICE, "fake device %d: out of memory", mock_current_device());
}

void mw_cuda_free(void *p)
{
    if (p)
        mock_dev_free(p);
}

mw_status mw_cuda_host_alloc(void **p, size_t nbytes)
{
    hd_init();
    *p = NULL;
    if (nbytes == 0)
        return MW_OK;
    return cudaHostAlloc(p, nbytes, cudaHostAllocPortable) == cudaSuccess
               ? MW_OK
               : mw_err(MW_EDEVICE, "cudaHostAlloc: out of memory");
}

void mw_cuda_host_free(void *p)
{
    if (p)
        cudaFreeHost(p);
}

static mw_status hd_copy(void *dst, const void *src, size_t nbytes, const mw_kctx *k, int upload,
                         const char *op)
{
    MW_TRY(hd_status(k, op));
    hd_ctx *c = k->dev;
    hd_check(c, op, upload ? "the destination" : "the source", upload ? dst : src, nbytes, 0);
    if (nbytes)
        memmove(dst, src, nbytes);
    return MW_OK;
}

mw_status mw_cuda_upload(void *dst_dev, const void *src_host, size_t nbytes, const mw_kctx *k)
{
    return hd_copy(dst_dev, src_host, nbytes, k, 1, "mw_cuda_upload");
}

mw_status mw_cuda_download(void *dst_host, const void *src_dev, size_t nbytes, const mw_kctx *k)
{
    hd_stats.downloads++;
    hd_stats.download_bytes += (long)nbytes;
    return hd_copy(dst_host, src_dev, nbytes, k, 0, "mw_cuda_download");
}

mw_status mw_cuda_upload_copy(void *dst_dev, const void *src_host, size_t nbytes, const mw_kctx *k)
{
    MW_TRY(hd_status(k, "mw_cuda_upload_copy"));
    hd_ctx *c = k->dev;
    hd_check(c, "mw_cuda_upload_copy", "the destination", dst_dev, nbytes, 0);
    if (!nbytes)
        return MW_OK;
    if (c->npending == HD_PENDING)
        hd_misuse("mw_cuda_upload_copy",
                  "more than 16 uploads on the copy stream never waited for");
    memmove(dst_dev, src_host, nbytes);
    c->pending[c->npending++] = (hd_pending){dst_dev, nbytes, -1};
    return MW_OK;
}

mw_status mw_cuda_copy_mark(const mw_kctx *k, int slot)
{
    MW_TRY(hd_status(k, "mw_cuda_copy_mark"));
    if (slot < 0 || slot >= MW_CUDA_COPY_MARKS)
        hd_misuse("mw_cuda_copy_mark", "slot out of range");
    hd_ctx *c = k->dev;
    for (int i = 0; i < c->npending; i++)
        if (c->pending[i].slot < 0)
            c->pending[i].slot = slot;
    return MW_OK;
}

mw_status mw_cuda_compute_after(const mw_kctx *k, int slot)
{
    MW_TRY(hd_status(k, "mw_cuda_compute_after"));
    if (slot < 0 || slot >= MW_CUDA_COPY_MARKS)
        hd_misuse("mw_cuda_compute_after", "slot out of range");
    hd_ctx *c = k->dev;
    int kept = 0;
    for (int i = 0; i < c->npending; i++)
        if (c->pending[i].slot != slot)
            c->pending[kept++] = c->pending[i];
    c->npending = kept;
    return MW_OK;
}

mw_status mw_cuda_copy_after(const mw_kctx *k, int slot)
{
    MW_TRY(hd_status(k, "mw_cuda_copy_after"));
    if (slot < 0 || slot >= MW_CUDA_MARKS)
        hd_misuse("mw_cuda_copy_after", "slot out of range");
    return MW_OK;
}

mw_status mw_cuda_wait_copy_mark(const mw_kctx *k, int slot, double timeout, const char *what)
{
    (void)timeout, (void)what;
    hd_stats.waits++;
    MW_TRY(hd_status(k, "mw_cuda_wait_copy_mark"));
    if (slot < 0 || slot >= MW_CUDA_COPY_MARKS)
        hd_misuse("mw_cuda_wait_copy_mark", "slot out of range");
    return MW_OK;
}

mw_status mw_cuda_copy(void *dst_dev, const void *src_dev, size_t nbytes, const mw_kctx *k)
{
    MW_TRY(hd_status(k, "mw_cuda_copy"));
    hd_check(k->dev, "mw_cuda_copy", "the destination", dst_dev, nbytes, 0);
    hd_check(k->dev, "mw_cuda_copy", "the source", src_dev, nbytes, 0);
    if (nbytes)
        memmove(dst_dev, src_dev, nbytes);
    return MW_OK;
}

mw_status mw_cuda_set_timeout(const mw_kctx *k, double seconds)
{
    (void)seconds; /* work runs at once: nothing here can wait */
    return hd_status(k, "mw_cuda_set_timeout");
}

long mw_cuda_conv_plans(const mw_kctx *k)
{
    (void)k;
    return 0; /* no cuDNN here */
}

mw_status mw_cuda_zero(void *dst_dev, size_t nbytes, const mw_kctx *k)
{
    MW_TRY(hd_status(k, "mw_cuda_zero"));
    hd_check(k->dev, "mw_cuda_zero", "the destination", dst_dev, nbytes, 0);
    if (nbytes)
        memset(dst_dev, 0, nbytes);
    return MW_OK;
}

const char *mw_cuda_version_string(void)
{
    static char v[128];
    hd_init();
    snprintf(v, sizeof v, "CUDA host stand-in (tests/hostdev.c), %d fake device%s", hd_ndev,
             hd_ndev == 1 ? "" : "s");
    return v;
}

void *mw_cuda_stream(const mw_kctx *k)
{
    if (!k || !k->dev || ((hd_ctx *)k->dev)->magic != HD_MAGIC)
        return NULL;
    return ((hd_ctx *)k->dev)->stream;
}
