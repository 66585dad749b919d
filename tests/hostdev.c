/* A host stand-in for the CUDA backend (kernels/cuda/runtime.h, graph.h, context.h, table.h,
 * cudnn.h, metrics.h), linked with tests/nccl_mock.c into `mwtrain-hostdev`, a build of mwtrain
 * whose "GPUs" are fake devices in host memory. It lets the GPU backend
 * (worker/replicas/replicas_gpu.c, under worker/train.c's loop) run on a machine without a GPU:
 * device selection, one context per device, state upload and download, the rounds of micro-batches
 * over a rank's devices, the weight penalty, the NCCL all-reduce (cluster/nccl.c against the mock),
 * the device optimizer, checkpoints and evaluation. What it cannot show is that the CUDA kernels
 * themselves are right: those are the `cuda` suite's, on a real device.
 *
 * The "CUDA kernels" are the CPU table's, wrapped: one wrapper per entry of
 * kernels/kernel_list.h, made from its line. Every call first checks that its context is an
 * open stand-in context and that each array the line lists lies inside that context's fake
 * device memory at the size the line gives (a host pointer, or another device's, aborts with a
 * message naming the kernel and the argument), then runs the CPU kernel on the context's
 * scratch. Copies check their
 * device side the same way. Work runs at once: streams are always idle. The copy stream's
 * ordering is checked all the same: a kernel or copy on the compute stream that touches memory
 * an upload on the copy stream wrote, before a copy mark after that upload was made a wait of
 * the compute stream (mw_cuda_copy_mark, mw_cuda_compute_after), aborts naming both. So is
 * the reduce stream's (the overlapped all-reduce's buckets): a collective posted on it over
 * memory a compute kernel used since the context's last mw_cuda_reduce_after_compute, or a
 * compute kernel that uses memory a collective on it writes before mw_cuda_compute_after_reduce,
 * aborts naming the memory (the mock reports each collective: mock_on_post).
 *
 * Environment:
 *   MW_HOSTDEV_GPUS=N       fake devices per process (default 0: no device)
 *   MW_HOSTDEV_FAULT=K:AT   inject a mock fault from NCCL collective AT on: K is async (an
 *                           asynchronous NCCL error) or hang (the streams never go idle)
 *   MW_HOSTDEV_SLOW=S       slow devices: each NCCL collective completes S seconds after it
 *                           runs, the devices' progress (mw_cuda_progress) moving meanwhile,
 *                           as when a long backward runs before it (tests/nccl_mock.h's
 *                           mock_slow)
 *   MW_HOSTDEV_STATS=1      at exit, print what the loop asked of the "devices" on stderr:
 *                           "hostdev stats: S syncs, W mark waits, D downloads of B bytes"
 *                           (host waits and device-to-host traffic, to show the step's shape)
 *   MW_HOSTDEV_GRAPH=frozen CUDA graphs' replays use every argument as captured, the step's
 *                           seed too (the negative control: what kernels taking the seed by
 *                           value would do); =fail: every capture fails at its end, as when a
 *                           call cannot be captured (the fallback's test)
 *
 * CUDA graphs (kernels/cuda/graph.h) are recorded and replayed: between mw_cuda_capture_begin
 * and _end a wrapper runs nothing; it keeps its arguments, as a CUDA launch keeps its parameters,
 * the structures its pointers give (geometries, the attention's) copied then, and
 * mw_cuda_graph_launch runs the calls in order with those arguments. The step's seed is the one
 * argument read at the replay: a 64-bit argument (or an attention geometry's seed) equal to the
 * seed of the last mw_cuda_step_seed before the capture is replaced by the one the device holds
 * at the replay, as the CUDA wrappers read it from the device word. Anything else the host calls
 * on a capturing context (a copy, a wait, a mark) aborts: on a GPU it would be captured or
 * refused, not run when called.
 * At exit, misuses found by the mock (tests/nccl_mock.h) make the process exit with 99. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "kernels/cpu/table.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cudnn.h"
#include "kernels/cuda/graph.h"
#include "kernels/cuda/metrics.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/table.h"
#include "kernels/embed.h"
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

/* Ranges of fake device memory, a growing list. */
typedef struct {
    const char **p;
    size_t *nbytes;
    int n, cap;
} hd_ranges;

typedef struct {
    int magic;
    int device;
    cudaStream_t stream; /* the mock's, for NCCL calls on "the context's stream" */
    cudaStream_t reduce; /* mw_cuda_reduce_stream */
    mw_status status;
    hd_pending pending[HD_PENDING];
    int npending;
    hd_ranges used;       /* what compute kernels used since the last mw_cuda_reduce_after_compute
                             or mw_cuda_sync */
    hd_ranges written;    /* what collectives on the reduce stream write, until
                             mw_cuda_compute_after_reduce */
    struct hd_graph *rec; /* the graph being recorded (mw_cuda_capture_begin), or NULL */
    uint64_t seed_word;   /* the device's step seed (mw_cuda_step_seed) */
    int seed_set;
    uint64_t replay_seed; /* during a replay: the seed word as it was at the capture */
    int replay_seed_set;
    mw_attn_geom geom; /* during a replay: an attention geometry with the seed read now */
} hd_ctx;

/* A recorded call: the wrapper's replay with a copy of its arguments. */
typedef struct {
    void (*replay)(const mw_kctx *k, const void *args);
    void *args;
} hd_call;

/* A recorded graph (the stand-in's cudaGraphExec_t). */
typedef struct hd_graph {
    const mw_kctx *k; /* the context it was captured on */
    hd_call *calls;
    int n, cap;
    void **kept; /* the copies its arguments point at */
    int nkept, capkept;
    uint64_t seed; /* the seed word at the capture */
    int seed_set;
} hd_graph;

#define HD_MAX_CTX 64
static hd_ctx *hd_ctxs[HD_MAX_CTX]; /* the open contexts, for mock_on_post */

static void hd_add(hd_ranges *r, const void *p, size_t nbytes)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        r->p = realloc(r->p, (size_t)r->cap * sizeof *r->p);
        r->nbytes = realloc(r->nbytes, (size_t)r->cap * sizeof *r->nbytes);
        if (!r->p || !r->nbytes) {
            fprintf(stderr, "hostdev: out of memory\n");
            abort();
        }
    }
    r->p[r->n] = p, r->nbytes[r->n++] = nbytes;
}

/* The first range of r that [p, p + nbytes) overlaps, or -1. */
static int hd_overlap(const hd_ranges *r, const void *p, size_t nbytes)
{
    const char *q = p;
    for (int i = 0; i < r->n; i++)
        if (q < r->p[i] + r->nbytes[i] && r->p[i] < q + nbytes)
            return i;
    return -1;
}

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

static void hd_misuse(const char *op, const char *what) __attribute__((noreturn));

/* A collective posted: on a context's reduce stream, it may read and write nothing a compute
 * kernel used since the last mw_cuda_reduce_after_compute, and what it writes is off limits to
 * the compute stream until mw_cuda_compute_after_reduce. */
static void hd_on_post(void *stream, const void *send, size_t send_bytes, const void *recv,
                       size_t recv_bytes)
{
    for (int i = 0; i < HD_MAX_CTX; i++) {
        hd_ctx *c = hd_ctxs[i];
        if (!c || (void *)c->reduce != stream)
            continue;
        const void *p[2] = {send, recv};
        const size_t nb[2] = {send_bytes, recv_bytes};
        for (int j = 0; j < 2; j++)
            if (nb[j] && hd_overlap(&c->used, p[j], nb[j]) >= 0) {
                char what[256];
                snprintf(what, sizeof what,
                         "the collective's %s (%zu bytes at %p) was used by a compute kernel "
                         "after the last mw_cuda_reduce_after_compute of CUDA device %d",
                         j ? "output" : "input", nb[j], p[j], c->device);
                hd_misuse("a collective on the reduce stream", what);
            }
        hd_add(&c->written, recv, recv_bytes);
        return;
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
    const char *slow = getenv("MW_HOSTDEV_SLOW");
    if (slow && *slow) {
        char *end = NULL;
        const double sec = strtod(slow, &end);
        if (end == slow || *end || !(sec >= 0 && sec < 3600)) {
            fprintf(stderr, "hostdev: MW_HOSTDEV_SLOW=%s: expected seconds (0 to 3600)\n", slow);
            exit(2);
        }
        mock_slow(sec);
    }
    mw_kernels_init_cpu(&hd_cpu);
    mock_on_post = hd_on_post;
    atexit(hd_at_exit);
}

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
static void hd_check(hd_ctx *c, const char *op, const char *arg, const void *p, size_t nbytes,
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
    if (nbytes && hd_overlap(&c->written, p, nbytes) >= 0) {
        char what[256];
        snprintf(what, sizeof what,
                 "%s (%zu bytes at %p) overlaps an all-reduce on the reduce stream that the "
                 "compute stream has not waited for (mw_cuda_compute_after_reduce not called)",
                 arg, nbytes, p);
        hd_misuse(op, what);
    }
    if (nbytes)
        hd_add(&c->used, p, nbytes);
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

/* ---- the kernel table: checked wrappers around the CPU kernels ---------------------------- */

/* One wrapper per entry of kernels/kernel_list.h: the arrays the entry lists must lie in the
 * context's device memory, then the CPU table's kernel runs on the host context. */
#define MW_CHECK_(arg, count, size, optional)                                                      \
    hd_check(c, op, #arg, arg, (size_t)(count) * (size), optional);
#define MW_A(arg, count) MW_CHECK_(arg, count, sizeof *(arg), 0)
#define MW_O(arg, count) MW_CHECK_(arg, count, sizeof *(arg), 1)
#define MW_BYTES(arg, nbytes) MW_CHECK_(arg, nbytes, 1, 0)
#define MW_ASSERT(cond, what)                                                                      \
    if (!(cond))                                                                                   \
        hd_misuse(op, what);
/* HD_EACH(m, sep, a, b, ...): m(a) sep() m(b) ..., for the 14 parameters a kernel has at most. */
#define HD_N(...) HD_N_(__VA_ARGS__, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define HD_N_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, n, ...) n
#define HD_CAT(a, b) HD_CAT_(a, b)
#define HD_CAT_(a, b) a##b
#define HD_EACH(m, sep, ...) HD_CAT(HD_E, HD_N(__VA_ARGS__))(m, sep, __VA_ARGS__)
#define HD_E1(m, s, a) m(a)
#define HD_E2(m, s, a, ...) m(a) s() HD_E1(m, s, __VA_ARGS__)
#define HD_E3(m, s, a, ...) m(a) s() HD_E2(m, s, __VA_ARGS__)
#define HD_E4(m, s, a, ...) m(a) s() HD_E3(m, s, __VA_ARGS__)
#define HD_E5(m, s, a, ...) m(a) s() HD_E4(m, s, __VA_ARGS__)
#define HD_E6(m, s, a, ...) m(a) s() HD_E5(m, s, __VA_ARGS__)
#define HD_E7(m, s, a, ...) m(a) s() HD_E6(m, s, __VA_ARGS__)
#define HD_E8(m, s, a, ...) m(a) s() HD_E7(m, s, __VA_ARGS__)
#define HD_E9(m, s, a, ...) m(a) s() HD_E8(m, s, __VA_ARGS__)
#define HD_E10(m, s, a, ...) m(a) s() HD_E9(m, s, __VA_ARGS__)
#define HD_E11(m, s, a, ...) m(a) s() HD_E10(m, s, __VA_ARGS__)
#define HD_E12(m, s, a, ...) m(a) s() HD_E11(m, s, __VA_ARGS__)
#define HD_E13(m, s, a, ...) m(a) s() HD_E12(m, s, __VA_ARGS__)
#define HD_E14(m, s, a, ...) m(a) s() HD_E13(m, s, __VA_ARGS__)
#define HD_COMMA() ,
#define HD_NOSEP()
#define HD_FIELD(p) p;

/* A copy of nbytes at p that lives as long as the graph being recorded. */
static const void *hd_keep(hd_ctx *c, const void *p, size_t nbytes)
{
    hd_graph *g = c->rec;
    if (!p)
        return NULL;
    if (g->nkept == g->capkept) {
        g->capkept = g->capkept ? 2 * g->capkept : 64;
        g->kept = realloc(g->kept, (size_t)g->capkept * sizeof *g->kept);
    }
    void *q = malloc(nbytes);
    if (!g->kept || !q) {
        fprintf(stderr, "hostdev: out of memory\n");
        abort();
    }
    memcpy(q, p, nbytes);
    return g->kept[g->nkept++] = q;
}

/* A call recorded into c's graph: replay with a copy of args. */
static void hd_record(hd_ctx *c, void (*replay)(const mw_kctx *, const void *), const void *args,
                      size_t nbytes)
{
    hd_graph *g = c->rec;
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 256;
        g->calls = realloc(g->calls, (size_t)g->cap * sizeof *g->calls);
        if (!g->calls) {
            fprintf(stderr, "hostdev: out of memory\n");
            abort();
        }
    }
    g->calls[g->n++] = (hd_call){replay, (void *)hd_keep(c, args, nbytes)};
}

static int hd_graph_mode(const char *want)
{
    const char *m = getenv("MW_HOSTDEV_GRAPH");
    return m && strcmp(m, want) == 0;
}

/* At a replay: a recorded 64-bit argument, or the seed read now where it was the step's seed. */
static uint64_t hd_seed_now(hd_ctx *c, uint64_t v)
{
    if (c->replay_seed_set && v == c->replay_seed && !hd_graph_mode("frozen"))
        return c->seed_word;
    return v;
}

static const mw_attn_geom *hd_geom_now(hd_ctx *c, const mw_attn_geom *g)
{
    c->geom = *g;
    c->geom.seed = hd_seed_now(c, g->seed);
    return &c->geom;
}

/* At a capture: an argument as a launch keeps it, a structure its pointer gives copied. */
#define HD_KEEP_(T, x) (const T *)hd_keep(hd_c, (const void *)(uintptr_t)(x), sizeof(T))
#define HD_CAP(x)                                                                                  \
    _Generic((x),                                                                                  \
        const mw_attn_geom *: HD_KEEP_(mw_attn_geom, x),                                           \
        const mw_bcast_geom *: HD_KEEP_(mw_bcast_geom, x),                                         \
        const mw_conv2d_geom *: HD_KEEP_(mw_conv2d_geom, x),                                       \
        const mw_dloss *: HD_KEEP_(mw_dloss, x),                                                   \
        const mw_pool_geom *: HD_KEEP_(mw_pool_geom, x),                                           \
        const mw_rescale *: HD_KEEP_(mw_rescale, x),                                               \
        const mw_optim_hyper *: HD_KEEP_(mw_optim_hyper, x),                                       \
        default: (x))
/* At a replay: a kept argument, the step's seed read now. */
#define HD_REP(x)                                                                                  \
    _Generic((x),                                                                                  \
        uint64_t: hd_seed_now(hd_c, (uint64_t)(uintptr_t)(x)),                                     \
        const mw_attn_geom *: hd_geom_now(hd_c, (const mw_attn_geom *)(uintptr_t)(x)),             \
        default: (x))
#define HD_REP_ARG(a) HD_REP(hd_a->a)

/* Per entry: its run (the arrays checked, the CPU kernel on the host context), its recorded
 * arguments' structure and replay, and the table's wrapper, which records while capturing. */
#define MW_KERNEL(op_, fast, params, args, arrays)                                                 \
    static void hd_run_##op_(const mw_kctx *k, MW_UNPAREN params)                                  \
    {                                                                                              \
        const char *op = "hd_" #op_;                                                               \
        hd_ctx *c = hd_of(k, op);                                                                  \
        arrays mw_kctx hd_k = hd_host(k);                                                          \
        hd_cpu.op_(&hd_k, MW_UNPAREN args);                                                        \
    }                                                                                              \
    typedef struct {                                                                               \
        HD_EACH(HD_FIELD, HD_NOSEP, MW_UNPAREN params)                                             \
    } hd_args_##op_;                                                                               \
    static void hd_replay_##op_(const mw_kctx *k, const void *rec)                                 \
    {                                                                                              \
        const hd_args_##op_ *hd_a = rec;                                                           \
        hd_ctx *hd_c = k->dev;                                                                     \
        hd_run_##op_(k, HD_EACH(HD_REP_ARG, HD_COMMA, MW_UNPAREN args));                           \
    }                                                                                              \
    static void hd_##op_(const mw_kctx *k, MW_UNPAREN params)                                      \
    {                                                                                              \
        hd_ctx *hd_c = hd_of(k, "hd_" #op_);                                                       \
        if (!hd_c->rec) {                                                                          \
            hd_run_##op_(k, MW_UNPAREN args);                                                      \
            return;                                                                                \
        }                                                                                          \
        const hd_args_##op_ hd_a = {HD_EACH(HD_CAP, HD_COMMA, MW_UNPAREN args)};                   \
        hd_record(hd_c, hd_replay_##op_, &hd_a, sizeof hd_a);                                      \
    }
#include "kernels/kernel_list.h"
#undef MW_KERNEL
#undef MW_A
#undef MW_O
#undef MW_BYTES
#undef MW_ASSERT
#undef MW_CHECK_

/* ---- kernels/cuda/runtime.h, context.h, table.h, cudnn.h, metrics.h ---------------------- */

void mw_kernels_init_cuda(mw_kernels *t)
{
    hd_init();
    if (hd_ndev <= 0)
        return;
    t->name = "cuda";
#define MW_KERNEL(op, fast, params, args, arrays) t->op = hd_##op;
#include "kernels/kernel_list.h"
#undef MW_KERNEL
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
    if (cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&c->reduce, cudaStreamNonBlocking) != cudaSuccess) {
        if (c->stream)
            cudaStreamDestroy(c->stream);
        free(c);
        return mw_err(MW_EDEVICE, "cudaStreamCreateWithFlags failed");
    }
    for (int i = 0; i < HD_MAX_CTX; i++)
        if (!hd_ctxs[i]) {
            hd_ctxs[i] = c;
            break;
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
        if (c->reduce)
            cudaStreamDestroy(c->reduce);
        for (int i = 0; i < HD_MAX_CTX; i++)
            if (hd_ctxs[i] == c)
                hd_ctxs[i] = NULL;
        hd_ranges *rs[2] = {&c->used, &c->written};
        for (int i = 0; i < 2; i++)
            free(rs[i]->p), free(rs[i]->nbytes);
        c->magic = 0;
        free(c);
    }
    memset(k, 0, sizeof *k);
}

static mw_status hd_status(const mw_kctx *k, const char *op)
{
    if (!k || !k->dev || ((hd_ctx *)k->dev)->magic != HD_MAGIC)
        return mw_err(MW_EDEVICE, "%s: not a CUDA context (open it with mw_cuda_ctx_open)", op);
    if (((hd_ctx *)k->dev)->rec)
        hd_misuse(op, "called on a context that is capturing a CUDA graph (on a GPU it would be "
                      "captured or refused, not run now)");
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

/* The device's layout without the sort's own room: keys and values, twice, in 64-float strides
 * (the stand-in's embed_bwd is the CPU one and uses none of it). */
size_t mw_cuda_embed_ws(size_t positions, int V)
{
    (void)V;
    return positions == 0 ? 0 : 4 * ((positions + 63) / 64 * 64);
}

mw_status mw_cuda_sync(const mw_kctx *k)
{
    hd_stats.syncs++;
    MW_TRY(hd_status(k, "mw_cuda_sync"));
    ((hd_ctx *)k->dev)->used.n = 0; /* every stream is idle */
    return MW_OK;
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
                         const void *y, size_t ybytes, const float *ids, const float *w,
                         const mw_metric_list *ml, int n, int K)
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
    if (ml->weighted && w)
        hd_check(c, __func__, "w", w, (size_t)n * P * sizeof(float), 0);
    double ls = 0;
    for (int i = 0; i < n; i++) {
        metrics_add_example(ml, acc, prob + (size_t)i * per, (const char *)y + (size_t)i * ybytes,
                            K, ml->masked ? ids + (size_t)i * P : NULL,
                            ml->weighted && w ? w + (size_t)i * P : NULL);
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

void *mw_cuda_reduce_stream(const mw_kctx *k)
{
    if (!k || !k->dev || ((hd_ctx *)k->dev)->magic != HD_MAGIC)
        return NULL;
    return ((hd_ctx *)k->dev)->reduce;
}

/* From here the compute kernels' memory is tracked, for collectives on the reduce stream. */
mw_status mw_cuda_reduce_after_compute(const mw_kctx *k)
{
    MW_TRY(hd_status(k, "mw_cuda_reduce_after_compute"));
    ((hd_ctx *)k->dev)->used.n = 0;
    return MW_OK;
}

mw_status mw_cuda_compute_after_reduce(const mw_kctx *k)
{
    MW_TRY(hd_status(k, "mw_cuda_compute_after_reduce"));
    ((hd_ctx *)k->dev)->written.n = 0;
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

/* The devices' progress: the mock's (moving only while MW_HOSTDEV_SLOW's devices are busy). */
long mw_cuda_progress(const mw_kctx *k)
{
    (void)hd_of(k, "mw_cuda_progress");
    return mock_progress();
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

/* ---- CUDA graphs: recorded calls, replayed ------------------------------------------------ */

mw_status mw_cuda_step_seed(const mw_kctx *k, uint64_t seed)
{
    MW_TRY(hd_status(k, "mw_cuda_step_seed"));
    hd_ctx *c = k->dev;
    c->seed_word = seed;
    c->seed_set = 1;
    return MW_OK;
}

mw_status mw_cuda_capture_begin(const mw_kctx *k)
{
    MW_TRY(hd_status(k, "mw_cuda_capture_begin"));
    hd_ctx *c = k->dev;
    c->rec = calloc(1, sizeof *c->rec);
    if (!c->rec)
        return mw_err(MW_ENOMEM, "hostdev: out of memory");
    c->rec->k = k;
    c->rec->seed = c->seed_word;
    c->rec->seed_set = c->seed_set;
    return MW_OK;
}

void mw_cuda_graph_free(void *exec)
{
    hd_graph *g = exec;
    if (!g)
        return;
    for (int i = 0; i < g->nkept; i++)
        free(g->kept[i]);
    free(g->kept);
    free(g->calls);
    free(g);
}

mw_status mw_cuda_capture_end(const mw_kctx *k, void **exec, char *why, size_t why_len)
{
    hd_ctx *c = hd_of(k, "mw_cuda_capture_end");
    *exec = NULL;
    if (why_len)
        why[0] = '\0';
    if (!c->rec)
        hd_misuse("mw_cuda_capture_end", "no capture was begun");
    hd_graph *g = c->rec;
    c->rec = NULL;
    if (hd_graph_mode("fail")) {
        snprintf(why, why_len, "the host stand-in refused it (MW_HOSTDEV_GRAPH=fail)");
        mw_cuda_graph_free(g);
        return MW_EDEVICE;
    }
    *exec = g;
    return MW_OK;
}

mw_status mw_cuda_graph_launch(const mw_kctx *k, void *exec)
{
    MW_TRY(hd_status(k, "mw_cuda_graph_launch"));
    hd_ctx *c = k->dev;
    const hd_graph *g = exec;
    if (!g || g->k != k)
        hd_misuse("mw_cuda_graph_launch", "a graph launched on a context it was not captured on");
    c->replay_seed = g->seed;
    c->replay_seed_set = g->seed_set;
    for (int i = 0; i < g->n; i++)
        g->calls[i].replay(k, g->calls[i].args);
    c->replay_seed_set = 0;
    return MW_OK;
}
