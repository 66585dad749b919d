/* The CPU replica backend (see replicas.h): a rank's replicas run in turn, each
 * replica's slice cut again among the rank's threads.
 *
 * Threads split the batch, not the ops: each thread runs forward and backward on
 * its part of the slice, in micro-batches that keep the activations in cache, with
 * single-threaded kernels, its own workspace and its own gradient buffer (no
 * barriers inside a step). The buffers are summed in thread order, so a given
 * layout and thread count is bitwise reproducible. The gradients of thread 0 live
 * in the all-reduce's shared slot when it has one (no copy in).
 *
 * BatchNormalization takes its batch statistics over the replica's whole slice, so a
 * model with BN trains each slice in ONE forward/backward on thread 0's workspace (sized
 * for the whole slice) with kernels that may use every thread: --micro-batch and the thread
 * count do not change its statistics. Its moving statistics travel in the gradient
 * all-reduce and are folded in before the optimizer (mw_model_update_stats).
 *
 * Synchronized BN (worker/model/model.h) runs the rank's replicas in lockstep, each on its own
 * whole-slice workspace: the parts between synchronized layers replica by replica, and at
 * each such layer the replicas' sums added in replica order, then summed over the ranks by
 * one polled MPI all-reduce of 2 C doubles (under --collective-timeout). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cluster/allreduce.h"
#include "cluster/comm.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/timeline.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/table.h"
#include "kernels/ref/table.h"
#include "worker/replicas/lockstep.h"
#include "worker/replicas/overlap.h"
#include "worker/replicas/replicas.h"

#define EVAL_IDS 1024 /* ids built per evaluation micro-batch */

struct mw_replicas {
    mw_replicas_env env;
    mw_kernels kt;
    mw_kctx k;                          /* whole-rank context (optimizer update) */
    mw_kctx tk[MW_CPU_MAX_THREADS];     /* per-thread contexts */
    mw_kctx bk;                         /* BN models: a whole slice on ws[0], all threads */
    int whole_slice;                    /* the model has BN: train a slice in one pass */
    int arenas;                         /* tgrads written: nthreads, or 1 with whole_slice */
    mw_model_ws ws[MW_CPU_MAX_THREADS]; /* per-thread activations */
    float *tgrads[MW_CPU_MAX_THREADS];  /* per-thread gradients (thread 0: the all-reduce's) */
    double tsum[MW_CPU_MAX_THREADS][MW_SUMS]; /* per-thread running sums (kernels.h) */
    double acc[MW_SUMS];                      /* running sums (replicas.h) */
    double acc0[MW_SUMS]; /* acc before this step: a skipped step's sums are dropped */
    mw_allreduce ar;
    float *own_grads; /* thread 0's gradients when the all-reduce has no slot (owned) */
    int sync;         /* synchronized BN: the local replicas train in lockstep */
    mw_model_ws *rws; /* sync: replicas 1 .. rpw-1's whole-slice workspaces (replica 0: ws[0]) */
    double *ssum;     /* sync: the lockstep's host sums (lockstep.h) */
    long gb;          /* sync: this step's global batch, for the lockstep's slices */
    long step;        /* this step, for messages */
    mw_overlap *ov;   /* --overlap-allreduce on, where it runs: the bucketed all-reduce */
    int last_slice;   /* the slice being trained is the step's last on this rank */
};

/* Local replica lr's workspace in lockstep. */
static mw_model_ws *rep_ws(mw_replicas *r, int lr)
{
    return lr ? &r->rws[lr - 1] : &r->ws[0];
}

/* Host blocks for the lockstep workspaces: through mw_model_ws_alloc_with they get no conv
 * scratch of their own (every replica's kernels run on bk, whose scratch is ws[0]'s). */
static mw_status host_block(void **p, size_t nbytes)
{
    *p = mw_alloc_aligned(nbytes);
    return *p ? MW_OK : mw_err(MW_ENOMEM, "lockstep workspace: out of memory (%zu bytes)", nbytes);
}

/* A synchronized-BN model's extra state: a workspace per further local replica and the sums. */
static mw_status open_lockstep(mw_replicas *r)
{
    const mw_model *m = r->env.model;
    const int rpw = r->env.o->replicas_per_worker;
    r->sync = 1;
    r->ssum = calloc(mw_lockstep_host_count(m, rpw), sizeof *r->ssum);
    r->rws = calloc((size_t)rpw, sizeof *r->rws);
    if (!r->ssum || !r->rws)
        return mw_err(MW_ENOMEM, "out of memory");
    for (int lr = 0; lr < rpw; lr++)
        mw_model_ws_init(&r->rws[lr]);
    for (int lr = 1; lr < rpw; lr++)
        MW_TRY(mw_model_ws_alloc_with(&r->rws[lr - 1], m, r->env.o->batch_per_replica, host_block,
                                      free));
    return MW_OK;
}

/* Mixed precision on the CPU: mixed_bfloat16 where oneDNN has bfloat16 instructions; on the
 * reference backend (the spec) both policies anywhere; mixed_float16 not on the fast path,
 * with the reasons. */
static mw_status check_policy(const mw_model *m, const char *backend)
{
    const mw_policy p = mw_model_policy(m);
    if (p == MW_POLICY_MIXED_FLOAT16 && strcmp(backend, "ref") != 0)
        return mw_err(MW_EUNSUPPORTED,
                      "dtype policy mixed_float16 is not offered on the CPU: x86 CPUs compute "
                      "float16 fast only with AVX512_FP16 or AMX-FP16, which the CPU kernels do "
                      "not use, so it would train slower than float32, and with loss scaling; "
                      "use mixed_bfloat16 (same speed-up where the CPU has AVX512_BF16 or AMX, "
                      "no loss scaling) or float32 (--backend ref computes mixed_float16 "
                      "anywhere, slowly, for tests)");
    if (p != MW_POLICY_MIXED_BFLOAT16 || strcmp(backend, "ref") == 0 || mw_kernels_cpu_has_bf16())
        return MW_OK;
    const char *cap = getenv("ONEDNN_MAX_CPU_ISA");
    const char *isa = mw_kernels_cpu_isa();
    return mw_err(MW_EUNSUPPORTED,
                  "dtype policy mixed_bfloat16: this CPU's matrix kernels (%s%s%s%s%s) have no "
                  "bfloat16 instructions, so it would train slower than float32; it needs "
                  "AVX512_BF16 or AMX%s. Use --dtype-policy float32 here (--backend ref "
                  "computes mixed_bfloat16 anywhere, slowly, for tests)",
                  mw_kernels_cpu_blas(), *isa ? ", ISA " : "", isa,
                  cap ? ", capped by ONEDNN_MAX_CPU_ISA=" : "", cap ? cap : "",
                  cap ? " and no ONEDNN_MAX_CPU_ISA below it" : "");
}

static mw_status cpu_open(mw_replicas **out, const mw_replicas_env *env)
{
    mw_replicas *r = *out = calloc(1, sizeof *r);
    if (!r)
        return mw_err(MW_ENOMEM, "out of memory");
    r->env = *env;
    mw_allreduce_init(&r->ar);
    for (int i = 0; i < MW_CPU_MAX_THREADS; i++)
        mw_model_ws_init(&r->ws[i]);
    const mw_train_opts *o = env->o;
    MW_TRY(check_policy(env->model, o->backend));
    const int T = mw_cpu_threads(env->nthreads);
    r->env.nthreads = T;
    if (strcmp(o->backend, "ref") == 0)
        mw_kernels_init_ref(&r->kt);
    else
        mw_kernels_init_cpu(&r->kt);
    mw_kernels_cpu_set_threads(T);
    r->k.nthreads = T;
#ifdef _OPENMP
    omp_set_max_active_levels(1); /* kernels inside a thread's slice stay sequential */
#endif
    const size_t count = env->model->params.count;
    const int per_thread = mw_cpu_examples_per_thread(o, T);
    r->whole_slice = mw_model_has_batchnorm(env->model);
    r->arenas = mw_cpu_grad_arenas(env->model, T);
    for (int i = 0; i < T; i++) {
        int max_n = i == 0 && r->whole_slice && o->batch_per_replica > per_thread
                        ? o->batch_per_replica
                        : per_thread;
        MW_TRY(mw_model_ws_alloc(&r->ws[i], env->model, max_n));
        r->tk[i].nthreads = 1;
        r->tk[i].ws = r->ws[i].scratch;
        r->tk[i].ws_count = r->ws[i].scratch_count;
        if (i > 0 && i < r->arenas && !(r->tgrads[i] = mw_alloc_aligned(count * sizeof(float))))
            return mw_err(MW_ENOMEM, "cannot allocate per-thread gradients");
    }
    r->bk.nthreads = T;
    r->bk.ws = r->ws[0].scratch;
    r->bk.ws_count = r->ws[0].scratch_count;
    return mw_model_has_sync(env->model) ? open_lockstep(r) : MW_OK;
}

/* --overlap-allreduce on: the bucketed all-reduce, or the reason it cannot give the serial
 * path's bits here (then the gradients are all-reduced after the backward, as with off). */
static mw_status open_overlap(mw_replicas *r)
{
    const mw_replicas_env *e = &r->env;
    const size_t count = e->model->params.count;
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    const char *why = NULL;
    if (r->sync)
        why = "synchronized BatchNormalization all-reduces inside the backward";
    else if (r->ar.size > 1 && level < MPI_THREAD_SERIALIZED)
        why = "this MPI does not provide MPI_THREAD_SERIALIZED";
    else if (!mw_allreduce_cut_exact(&r->ar, count))
        why = "this all-reduce on 3 or more ranks would add some gradients in another order "
              "when cut into buckets (exact: ring, hierarchical, any on 2 ranks)";
    if (why) {
        mw_overlap_not_used(e->rank, why);
        return MW_OK;
    }
    const mw_overlap_env oe = {.model = e->model,
                               .ar = &r->ar,
                               .grads = r->tgrads,
                               .nthreads = r->arenas, /* a BN model: thread 0's backward */
                               .bucket_bytes = e->o->bucket_mb * 1048576.0};
    MW_TRY(mw_overlap_open(&r->ov, &oe));
    if (e->rank == 0)
        mw_log_info("overlapped all-reduce: %d bucket(s) (--bucket-mb %g)",
                    mw_overlap_buckets(r->ov), e->o->bucket_mb);
    return MW_OK;
}

static mw_status cpu_connect(mw_replicas *r)
{
    const mw_replicas_env *e = &r->env;
    const size_t count = e->model->params.count;
    MW_TRY(mw_allreduce_open(&r->ar, e->comm, e->topo->node_comm, e->topo->cross, count,
                             e->o->allreduce, e->o->collective_timeout));
    r->tgrads[0] = mw_allreduce_buffer(&r->ar);
    if (!r->tgrads[0]) {
        if (!(r->own_grads = mw_alloc_aligned(count * sizeof(float))))
            return mw_err(MW_ENOMEM, "cannot allocate the gradients");
        r->tgrads[0] = r->own_grads;
    }
    return e->o->overlap_allreduce ? open_overlap(r) : MW_OK;
}

/* A BN model's training slice: one forward and backward over all cnt examples. */
static void run_whole_slice(mw_replicas *r, const mw_dataset *data, const uint32_t *ids, long cnt,
                            long gb, uint64_t dseed, double sums[MW_SUMS])
{
    const mw_model *m = r->env.model;
    mw_model_ws *ws = &r->ws[0];
    const int n = (int)cnt;
    double ls = 0;
    MW_TL_BEGIN("data", "data"); /* with encoded images: decoding, or waiting for the pool */
    mw_dataset_batch(data, ws->act[0], ws->y, ids, n);
    ws->w = mw_dataset_batch_weights(data, ws->w_buf, ids, n);
    MW_TL_END("data", "data");
    ws->training = 1;
    ws->dropout_seed = dseed;
    ws->example_ids = ids;
    mw_model_forward(m, &r->kt, &r->bk, ws, n);
    if (r->ov && r->last_slice)
        mw_overlap_last(r->ov, 0, ws);
    mw_model_backward(m, &r->kt, &r->bk, ws, r->tgrads[0], n, 1.0f / (float)gb);
    if (r->ov && r->last_slice)
        mw_overlap_finish(r->ov, 0, ws);
    for (int j = 0; j < n; j++)
        ls += ws->loss[j];
    sums[MW_SUM_LOSS] += ls / (double)gb;
    sums[MW_SUM_COUNT] += (double)cnt;
    mw_model_metrics_add(m, ws, n, sums);
}

/* The lockstep's view of the local replicas (lockstep.h): each its own whole-slice workspace,
 * all on the whole-rank kernel context and thread 0's gradients; the sums in host memory. */
static void ls_replica(void *ctx, int lr, mw_model_ws **ws, const mw_kctx **k, float **grads,
                       long *cnt)
{
    mw_replicas *r = ctx;
    const mw_replicas_env *e = &r->env;
    const int rpw = e->o->replicas_per_worker;
    long off;
    mw_slice(r->gb, e->world * rpw, e->rank * rpw + lr, &off, cnt);
    *ws = rep_ws(r, lr);
    *k = &r->bk;
    *grads = r->tgrads[0];
}

static double *ls_sums(void *ctx, int lr, double *host)
{
    (void)ctx, (void)lr;
    return host;
}

static const mw_lockstep_ops cpu_lockstep = {.replica = ls_replica, .sums = ls_sums};

/* A synchronized-BN model's training step on this rank: every local replica's slice in its
 * own workspace, forward and backward in lockstep, synchronized at each such layer. */
static mw_status run_lockstep(mw_replicas *r, const mw_dataset *data, const uint32_t *ids, long gb,
                              uint64_t dseed)
{
    const mw_replicas_env *e = &r->env;
    const mw_model *m = e->model;
    const int rpw = e->o->replicas_per_worker, nrep = e->world * rpw;
    for (int lr = 0; lr < rpw; lr++) {
        long off, cnt;
        mw_slice(gb, nrep, e->rank * rpw + lr, &off, &cnt);
        mw_model_ws *ws = rep_ws(r, lr);
        mw_dataset_batch(data, ws->act[0], ws->y, ids + off, (int)cnt);
        ws->w = mw_dataset_batch_weights(data, ws->w_buf, ids + off, (int)cnt);
        ws->training = 1;
        ws->dropout_seed = dseed;
        ws->example_ids = ids + off;
    }
    r->gb = gb;
    const mw_lockstep lock = {.model = m,
                              .kt = &r->kt,
                              .ops = &cpu_lockstep,
                              .ctx = r,
                              .replicas = rpw,
                              .comm = e->comm,
                              .world = e->world,
                              .world_rank = e->topo->world_rank,
                              .timeout = e->o->collective_timeout,
                              .step = r->step,
                              .host = r->ssum};
    MW_TRY(mw_lockstep_step(&lock, gb));
    for (int lr = 0; lr < rpw; lr++) {
        long off, cnt;
        mw_slice(gb, nrep, e->rank * rpw + lr, &off, &cnt);
        const mw_model_ws *ws = rep_ws(r, lr);
        double ls = 0;
        for (long j = 0; j < cnt; j++)
            ls += ws->loss[j];
        r->acc[MW_SUM_LOSS] += ls / (double)gb;
        r->acc[MW_SUM_COUNT] += (double)cnt;
        mw_model_metrics_add(m, ws, (int)cnt, r->acc);
    }
    return MW_OK;
}

/* One replica's slice of cnt examples of data, cut again among the threads. ids: the
 * slice's example ids, or NULL for first, first+1, ... (evaluation). Training: forward
 * and backward (dropout keyed by the example ids, gradients scaled by 1 / gb) into the
 * per-thread gradients; otherwise forward only. Adds each thread's loss sum / div,
 * correct count and examples into sums. */
static void run_slice(mw_replicas *r, const mw_dataset *data, const uint32_t *ids, long first,
                      long cnt, int training, long gb, uint64_t dseed, double div,
                      double sums[MW_SUMS])
{
    const int T = r->env.nthreads;
    const mw_model *m = r->env.model;
    if (training && r->whole_slice) {
        run_whole_slice(r, data, ids, cnt, gb, dseed, sums);
        return;
    }
#pragma omp parallel num_threads(T)
    {
        int th = 0;
#ifdef _OPENMP
        th = omp_get_thread_num();
#endif
        mw_model_ws *ws = &r->ws[th];
        long toff, tcnt;
        mw_slice(cnt, T, th, &toff, &tcnt);
        uint32_t pos[EVAL_IDS]; /* the ids when they are positions */
        double *ts = r->tsum[th], ls = 0;
        memset(ts, 0, sizeof r->tsum[th]);
        for (long i = 0; i < tcnt;) {
            int n = tcnt - i < ws->max_n ? (int)(tcnt - i) : ws->max_n;
            const uint32_t *mb = ids ? ids + toff + i : pos;
            if (!ids) {
                n = n < EVAL_IDS ? n : EVAL_IDS;
                for (int j = 0; j < n; j++)
                    pos[j] = (uint32_t)(first + toff + i + j);
            }
            /* the timeline is the loop thread's (thread 0): its micro-batches' assembly */
            const int tl = th == 0 && mw_timeline_on;
            if (tl)
                mw_timeline_begin("data", "data");
            mw_dataset_batch(data, ws->act[0], ws->y, mb, n);
            ws->w = mw_dataset_batch_weights(data, ws->w_buf, mb, n);
            if (tl)
                mw_timeline_end("data", "data");
            /* Dropout masks are keyed by example id: the same for any layout */
            ws->training = training;
            ws->dropout_seed = training ? dseed : 0;
            ws->example_ids = training ? mb : NULL;
            mw_model_forward(m, &r->kt, &r->tk[th], ws, n);
            if (training && r->ov && r->last_slice && i + n == tcnt)
                mw_overlap_last(r->ov, th, ws); /* the thread's last backward of the step */
            if (training)
                mw_model_backward(m, &r->kt, &r->tk[th], ws, r->tgrads[th], n, 1.0f / (float)gb);
            for (int j = 0; j < n; j++)
                ls += ws->loss[j];
            mw_model_metrics_add(m, ws, n, ts);
            i += n;
        }
        ts[MW_SUM_LOSS] = ls, ts[MW_SUM_COUNT] = (double)tcnt;
        if (training && r->ov && r->last_slice) /* also a thread with no examples */
            mw_overlap_finish(r->ov, th, ws);
    }
    const mw_metric_list ml = mw_loss_metrics(&m->loss);
    const int len = mw_sums_len(&ml);
    for (int th = 0; th < T; th++) {
        sums[MW_SUM_LOSS] += r->tsum[th][MW_SUM_LOSS] / div;
        for (int j = MW_SUM_COUNT; j < len; j++)
            sums[j] += r->tsum[th][j];
    }
}

/* tgrads[0] = the sum of the per-thread gradients, in thread order. */
static void reduce_threads(mw_replicas *r)
{
    const int T = r->arenas;
    const size_t count = r->env.model->params.count;
    if (T == 1)
        return;
    float *g = r->tgrads[0];
#pragma omp parallel for num_threads(T) schedule(static)
    for (size_t i = 0; i < count; i++) {
        float s = g[i];
        for (int th = 1; th < T; th++)
            s += r->tgrads[th][i];
        g[i] = s;
    }
}

static mw_status cpu_grads(mw_replicas *r, const mw_dataset *d, const uint32_t *ids, long gb,
                           uint64_t dseed, long step)
{
    r->step = step;
    memcpy(r->acc0, r->acc, sizeof r->acc);
    const mw_replicas_env *e = &r->env;
    const int rpw = e->o->replicas_per_worker, nrep = e->world * rpw;
    for (int th = 0; th < r->arenas; th++) /* on all threads: ResNet50's are 94 MB */
        r->kt.zero(&r->k, r->tgrads[th], e->model->params.count * sizeof(float));
    /* regularization scaled by 1/replicas per replica (this rank's share), as
     * tf.nn.scale_regularization_loss: the SUM holds it once */
    const float ls = mw_model_loss_scale(e->model); /* the gradients', not the loss's */
    const float reg = (float)rpw / (float)nrep * ls;
    if (r->ov) { /* the buckets sum the threads and add the regularizers' gradients */
        mw_overlap_begin(r->ov, step, reg);
    }
    if (r->sync)
        MW_TRY(run_lockstep(r, d, ids, gb, dseed));
    for (int lr = 0; lr < rpw && !r->sync; lr++) {
        long off, cnt;
        mw_slice(gb, nrep, e->rank * rpw + lr, &off, &cnt);
        r->last_slice = lr == rpw - 1;
        run_slice(r, d, ids + off, 0, cnt, 1, gb, dseed, (double)gb, r->acc);
    }
    if (!r->ov)
        reduce_threads(r);
    r->acc[MW_SUM_LOSS] += mw_model_regularization(e->model, r->ov ? NULL : r->tgrads[0], reg) / ls;
    return MW_OK;
}

static mw_status cpu_allreduce(mw_replicas *r, long step)
{
    if (r->ov)
        return mw_overlap_wait(r->ov);
    r->ar.step = step;
    return mw_allreduce_sum(&r->ar, r->tgrads[0], r->env.model->params.count);
}

static mw_status cpu_finite(mw_replicas *r, int *all_finite)
{
    *all_finite = mw_grads_finite(&r->kt, &r->k, r->tgrads[0], r->env.model->params.count);
    return MW_OK;
}

static void cpu_metrics(mw_replicas *r, double sums[MW_SUMS], int reset)
{
    mw_metrics_take(r->acc, sums, reset);
}

static mw_status cpu_update(mw_replicas *r, const mw_optim_hyper *h)
{
    const mw_replicas_env *e = &r->env;
    mw_model_update_stats(e->model, &r->kt, &r->k, e->model->params.data, r->tgrads[0]);
    if (!h) { /* skipped: neither its update nor its loss and metrics count */
        memcpy(r->acc, r->acc0, sizeof r->acc);
        return MW_OK;
    }
    float *const slots[3] = {e->m1->data, e->m2->data, e->m3->data};
    mw_optimizer_apply(e->o, &r->kt, &r->k, e->model, e->model->params.data, slots, r->tgrads[0],
                       e->model->params.count, h);
    return MW_OK;
}

static mw_status cpu_evaluate(mw_replicas *r, const mw_dataset *d, long n, double sums[MW_SUMS])
{
    const mw_replicas_env *e = &r->env;
    const int rpw = e->o->replicas_per_worker, nrep = e->world * rpw;
    for (int lr = 0; lr < rpw; lr++) {
        long off, cnt;
        mw_slice(n, nrep, e->rank * rpw + lr, &off, &cnt);
        run_slice(r, d, NULL, off, cnt, 0, 0, 0, 1.0, sums);
    }
    return MW_OK;
}

/* The host arenas are this backend's state: nothing to copy. */
static mw_status cpu_push(mw_replicas *r, int weights_only)
{
    (void)r, (void)weights_only;
    return MW_OK;
}

static mw_status cpu_pull(mw_replicas *r)
{
    (void)r;
    return MW_OK;
}

static void cpu_describe(const mw_replicas *r, char *buf, size_t len)
{
    const mw_policy p = mw_model_policy(r->env.model);
    snprintf(buf, len, "%d thread(s) per rank, kernels %s (%s)%s%s, all-reduce %s", r->env.nthreads,
             r->kt.name, mw_kernels_cpu_blas(), p != MW_POLICY_FLOAT32 ? ", dtype policy " : "",
             p != MW_POLICY_FLOAT32 ? mw_policy_name(p) : "", mw_ar_algo_name(r->ar.requested));
}

static void cpu_close(mw_replicas **rp, int abandoned)
{
    mw_replicas *r = *rp;
    if (!r)
        return;
    if (!mw_overlap_close(&r->ov, abandoned)) { /* its thread still reads the gradients */
        *rp = NULL;                             /* all left to the process's end */
        return;
    }
    for (int i = 0; i < MW_CPU_MAX_THREADS; i++) {
        mw_model_ws_free(&r->ws[i]);
        if (i > 0)
            free(r->tgrads[i]);
    }
    /* Freeing the shared window is collective: with a peer gone it would block. */
    if (!abandoned)
        mw_allreduce_close(&r->ar);
    free(r->own_grads);
    for (int lr = 1; r->rws && lr < r->env.o->replicas_per_worker; lr++)
        mw_model_ws_free(&r->rws[lr - 1]);
    free(r->rws);
    free(r->ssum);
    free(r);
    *rp = NULL;
}

const mw_replicas_ops mw_replicas_cpu = {
    .name = "cpu",
    .open = cpu_open,
    .connect = cpu_connect,
    .grads = cpu_grads,
    .allreduce = cpu_allreduce,
    .finite = cpu_finite,
    .metrics = cpu_metrics,
    .update = cpu_update,
    .evaluate = cpu_evaluate,
    .push = cpu_push,
    .pull = cpu_pull,
    .describe = cpu_describe,
    .close = cpu_close,
};
