/* The GPU replica backend (see replicas.h), built into the CUDA module
 * (mwtrain-cuda.so) with kernels/cuda and cluster/nccl.c; worker/replicas/device.c opens it
 * only when a GPU trains, so a CPU run never maps a CUDA library.
 *
 * A rank drives the devices worker/replicas/device.c gave it (one per rank, or all of its
 * node's), one CUDA context each, and its replicas_per_worker replicas are dealt out
 * in order: device d runs replicas [d rpd, (d+1) rpd), rpd = replicas per device.
 * Every device holds the whole state in device arrays of the host arenas' layout; how a step
 * runs (the staging slots, the streams' marks, the prefetch, the metrics' sums on the device,
 * the NCCL all-reduce and the one polled wait) is described in docs/gpus.md, "How a step runs
 * on the GPUs".
 *
 * Synchronized BatchNormalization (worker/model/model.h) needs one replica per device: the devices
 * run their slices in lockstep, and at each synchronized layer every device's 2 C sums come
 * down to pinned memory (a polled wait), are added in device order, summed over the ranks by
 * a polled MPI all-reduce, and go back up to every device; a host round trip per synchronized
 * layer and direction. */
#include "worker/replicas/replicas_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/comm.h"
#include "cluster/nccl.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/timeline.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cudnn.h"
#include "kernels/cuda/graph.h"
#include "kernels/cuda/metrics.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/table.h"
#include "kernels/embed.h"
#include "kernels/geom.h"
#include "worker/replicas/gpu_backend.h"
#include "worker/replicas/gpu_stage.h"
#include "worker/replicas/lockstep.h"
#include "worker/replicas/overlap.h"

static size_t up64(size_t nbytes)
{
    return (nbytes + 63) / 64 * 64;
}

/* The device scratch to reserve: what the conv kernels' chunking uses for max_n images when
 * capped at MW_CUDA_WS_CAP floats (never less than one image of the largest layer), what
 * an Embedding's deterministic backward sorts for max_n sequences (mw_cuda_embed_ws), the
 * device metrics' per-example values (mw_cuda_metrics_ws), and MW_ATTN_WS_SLOTS (or max_n) of
 * an attention layer's T x S matrices (the CUDA twin's chunks of examples, one matrix each).
 * The model's scratch_count is the un-chunked size, which for large images asks for
 * gigabytes. */
static size_t dev_scratch(const mw_model *m, int max_n)
{
    size_t want = mw_cuda_metrics_ws(max_n, MW_METRICS_MAX);
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        size_t s = 0;
        if (l->kind == MW_LAYER_CONV2D || l->kind == MW_LAYER_CONV2DT)
            s = mw_conv2d_ws_capped(&l->conv, max_n, MW_CUDA_WS_CAP);
        else if (l->kind == MW_LAYER_EMBED && !l->tied)
            s = mw_cuda_embed_ws((size_t)max_n * l->out_w, l->vocab);
        else if (l->kind == MW_LAYER_MHA) /* a chunk holds max_n examples at most */
            s = (size_t)(max_n < MW_ATTN_WS_SLOTS ? max_n : MW_ATTN_WS_SLOTS) * l->in_w *
                l->mha.steps;
        want = s > want ? s : want;
    }
    return want;
}

static mw_status dev_open(mw_replicas *r, gpu_dev *g, int ordinal, int max_n)
{
    const mw_model *m = r->env.model;
    const size_t count = m->params.count;
    g->ordinal = ordinal;
    MW_TRY(mw_cuda_ctx_open(&g->k, ordinal));
    MW_TRY(mw_cuda_activate(&g->k)); /* the allocations below land on this device */
    /* no host wait inside the backend outlasts --collective-timeout (a hung device) */
    MW_TRY(mw_cuda_set_timeout(&g->k, r->env.o->collective_timeout));
    if (r->env.o->tf32)
        MW_TRY(mw_cuda_set_tf32(&g->k, 1));
    g->graphs.on = r->env.o->cuda_graphs;
    g->graphs.device = ordinal;
    float **arr[5] = {&g->params, &g->grads, &g->m1, &g->m2, &g->m3};
    for (int i = 0; i < 5; i++)
        MW_TRY(mw_cuda_alloc((void **)arr[i], count * sizeof(float)));
    MW_TRY(mw_cuda_zero(g->grads, count * sizeof(float), &g->k));
    MW_TRY(mw_cuda_alloc((void **)&g->reg, 2 * sizeof(double)));
    MW_TRY(mw_cuda_alloc((void **)&g->metrics, MW_SUMS * sizeof(double)));
    MW_TRY(mw_model_ws_alloc_with(&g->ws, m, max_n, mw_cuda_alloc, mw_cuda_free));
    g->ws.params = g->params;
    const size_t scratch = dev_scratch(m, max_n);
    if (scratch > g->k.ws_count)
        MW_TRY(mw_cuda_ws_reserve(&g->k, scratch));
    const size_t n = (size_t)g->ws.max_n;
    const size_t in = n * (size_t)m->in_h * m->in_w * m->in_c;
    const size_t yb = mw_model_target_bytes(m);
    const size_t o_lab = up64(in * sizeof(float)), o_w = o_lab + up64(n * yb);
    const size_t P = m->positions > 1 ? (size_t)m->positions : 1; /* loss weights per example */
    const size_t o_ids = o_w + up64(n * P * sizeof(float));
    const size_t slot = o_ids + up64(n * sizeof(uint32_t)); /* bytes of one staging slot */
    MW_TRY(mw_cuda_host_alloc(&g->stage,
                              2 * slot + up64(sizeof(double)) + up64(MW_SUMS * sizeof(double))));
    char *b = g->stage;
    for (int s = 0; s < 2; s++, b += slot) {
        g->h_x[s] = (float *)b;
        g->h_y[s] = b + o_lab;
        g->h_w[s] = (float *)(b + o_w);
        g->h_ids[s] = (uint32_t *)(b + o_ids);
    }
    g->h_reg = (double *)b;
    g->h_metrics = (double *)(b + up64(sizeof(double)));
    MW_TRY(mw_cuda_alloc(&g->dstage, 2 * slot));
    b = g->dstage;
    for (int s = 0; s < 2; s++, b += slot) {
        g->d_x[s] = (float *)b;
        g->d_y[s] = b + o_lab;
        g->d_w[s] = (float *)(b + o_w);
        g->d_ids[s] = (uint32_t *)(b + o_ids);
    }
    if (r->sync_c > 0) {
        const size_t sb = 2 * (size_t)r->sync_c * sizeof(double);
        MW_TRY(mw_cuda_alloc((void **)&g->dsum, sb));
        MW_TRY(mw_cuda_alloc((void **)&g->dtot, sb));
        MW_TRY(mw_cuda_host_alloc(&g->sstage, 2 * up64(sb)));
        g->h_sum = g->sstage;
        g->h_tot = (double *)((char *)g->sstage + up64(sb));
    }
    return mw_cuda_sync(&g->k);
}

static mw_status gpu_open(mw_replicas **out, const mw_replicas_env *env)
{
    mw_replicas *r = *out = calloc(1, sizeof *r);
    if (!r)
        return mw_err(MW_ENOMEM, "out of memory");
    r->env = *env;
    const int ndev = env->ndevices, first = env->first_device;
    if (ndev > MAX_GPUS)
        return mw_err(MW_EUNSUPPORTED,
                      "this rank was given %d CUDA devices; a rank drives at "
                      "most %d: run more ranks per node",
                      ndev, MAX_GPUS);
    mw_kernels_init_cuda(&r->kt);
    if (strcmp(r->kt.name, "cuda") != 0)
        return mw_err(MW_EDEVICE, "CUDA device %d: the CUDA kernels are not available", first);
    MW_TRY(mw_model_check_kernels(env->model, &r->kt));
    if ((r->sync_c = mw_model_sync_channels(env->model)) > 0 && env->o->replicas_per_worker != ndev)
        return mw_err(MW_EUNSUPPORTED,
                      "synchronized BatchNormalization on GPUs runs one replica per GPU; this "
                      "rank has %d replicas on %d GPU(s): set --replicas-per-worker %d, or "
                      "train on the CPU (--device cpu)",
                      env->o->replicas_per_worker, ndev, ndev);
    if (r->sync_c > 0 &&
        !(r->stot = malloc(mw_lockstep_host_count(env->model, ndev) * sizeof *r->stot)))
        return mw_err(MW_ENOMEM, "out of memory");
    if (!(r->gd = calloc((size_t)ndev, sizeof *r->gd)))
        return mw_err(MW_ENOMEM, "out of memory");
    /* a device runs a replica's whole slice at once: micro-batches are for the CPU's caches;
     * BatchNormalization's batch statistics are over the whole slice, so it is never cut */
    const int bpr = env->o->batch_per_replica;
    const int max_n =
        bpr < GPU_MAX_BATCH || mw_model_has_batchnorm(env->model) ? bpr : GPU_MAX_BATCH;
    for (int d = 0; d < ndev; d++) {
        r->ngpu = d + 1; /* close releases what was opened */
        MW_TRY(dev_open(r, &r->gd[d], first + d, max_n));
    }
    return MW_OK;
}

/* The first failure among the devices' contexts, waiting for each (so no work is left in
 * flight). */
static mw_status sync_all(mw_replicas *r)
{
    mw_status first = MW_OK;
    for (int d = 0; d < r->ngpu; d++) {
        mw_status rc = mw_cuda_sync(&r->gd[d].k);
        if (first == MW_OK)
            first = rc;
    }
    return first;
}

static mw_status gpu_push(mw_replicas *r, int weights_only)
{
    const mw_replicas_env *e = &r->env;
    const size_t nb = e->model->params.count * sizeof(float);
    for (int d = 0; d < r->ngpu; d++) {
        gpu_dev *g = &r->gd[d];
        MW_TRY(mw_cuda_upload(g->params, e->model->params.data, nb, &g->k));
        if (!weights_only) {
            MW_TRY(mw_cuda_upload(g->m1, e->m1->data, nb, &g->k));
            MW_TRY(mw_cuda_upload(g->m2, e->m2->data, nb, &g->k));
            MW_TRY(mw_cuda_upload(g->m3, e->m3->data, nb, &g->k));
        }
    }
    return sync_all(r);
}

/* Device 0 -> host arenas: every device holds the same state. */
static mw_status gpu_pull(mw_replicas *r)
{
    const mw_replicas_env *e = &r->env;
    const size_t nb = e->model->params.count * sizeof(float);
    gpu_dev *g = &r->gd[0];
    MW_TRY(mw_cuda_download(e->model->params.data, g->params, nb, &g->k));
    MW_TRY(mw_cuda_download(e->m1->data, g->m1, nb, &g->k));
    MW_TRY(mw_cuda_download(e->m2->data, g->m2, nb, &g->k));
    MW_TRY(mw_cuda_download(e->m3->data, g->m3, nb, &g->k));
    return mw_cuda_sync(&g->k);
}

/* --overlap-allreduce on: the buckets on the reduce streams (overlap_gpu.h) where they can
 * run, else one line saying why the gradients are all-reduced after the backward. */
static mw_status open_overlap(mw_replicas *r)
{
    const mw_replicas_env *e = &r->env;
    const char *why = NULL;
    if (!r->nccl)
        why = "one GPU in all: there is nothing to all-reduce";
    else if (mw_nccl_nodes(r->nccl) > 1)
        why = "across nodes the sums go through the host ring after the backward; "
              "--gpu-allreduce nccl overlaps them";
    else if (r->sync_c > 0)
        why = "synchronized BatchNormalization steps the devices in lockstep";
    if (why) {
        mw_overlap_not_used(e->rank, why);
        return MW_OK;
    }
    mw_kctx *k[MAX_GPUS];
    float *params[MAX_GPUS], *grads[MAX_GPUS];
    double *scratch[MAX_GPUS];
    for (int d = 0; d < r->ngpu; d++)
        k[d] = &r->gd[d].k, params[d] = r->gd[d].params, grads[d] = r->gd[d].grads,
        scratch[d] = r->gd[d].reg + 1;
    const mw_gpu_overlap_env oe = {.model = e->model,
                                   .kt = &r->kt,
                                   .nccl = r->nccl,
                                   .ndev = r->ngpu,
                                   .k = k,
                                   .params = params,
                                   .grads = grads,
                                   .scratch = scratch,
                                   .bucket_bytes = e->o->bucket_mb * 1048576.0};
    MW_TRY(mw_gpu_overlap_open(&r->ov, &oe));
    if (e->rank == 0)
        mw_log_info("overlapped all-reduce: %d bucket(s) (--bucket-mb %g) on a reduce stream "
                    "per GPU",
                    mw_gpu_overlap_buckets(r->ov), e->o->bucket_mb);
    return MW_OK;
}

/* How far this rank's GPUs have got (mw_nccl_set_progress): the sum of their compute streams'
 * progress marks passed. */
static long gpu_progress(void *ctx)
{
    const mw_replicas *r = ctx;
    long sum = 0;
    for (int d = 0; d < r->ngpu; d++)
        sum += mw_cuda_progress(&r->gd[d].k);
    return sum;
}

static mw_status gpu_connect(mw_replicas *r)
{
    const mw_replicas_env *e = &r->env;
    /* NCCL over every GPU of the training ranks; agreed inside mw_nccl_open */
    if (e->world * r->ngpu > 1) {
        int ordinals[MAX_GPUS];
        for (int d = 0; d < r->ngpu; d++)
            ordinals[d] = r->gd[d].ordinal;
        MW_TRY(mw_nccl_open_flat(&r->nccl, e->topo->node_comm, e->topo->cross,
                                 e->o->gpu_allreduce ? e->comm : MPI_COMM_NULL, r->ngpu, ordinals,
                                 e->model->params.count, e->o->collective_timeout));
        /* the deadline of its waits counts from this rank's GPUs' last finished kernel */
        mw_nccl_set_progress(r->nccl, gpu_progress, r);
    }
    if (e->rank == 0 && r->nccl && e->topo->nnodes > 1)
        mw_log_info("gradients across nodes: %s",
                    e->o->gpu_allreduce ? "one NCCL communicator over every GPU "
                                          "(--gpu-allreduce nccl)"
                                        : "NCCL inside each node, the MPI ring between nodes "
                                          "through host memory (--gpu-allreduce hierarchical)");
    if (e->o->overlap_allreduce)
        MW_TRY(open_overlap(r));
    if (e->rank == 0 && e->o->cuda_graphs)
        mw_log_info("CUDA graphs on: a micro-batch shape's forward and backward are captured at "
                    "its second micro-batch and replayed from then on (--cuda-graphs on)");
    if (e->rank == 0) {
        const mw_policy p = mw_model_policy(e->model);
        const char *f32 = e->o->tf32 ? "float32 layers TF32, --tf32" : "float32 layers FP32";
        char math[256];
        if (p == MW_POLICY_MIXED_BFLOAT16)
            snprintf(math, sizeof math,
                     "mixed_bfloat16 (bfloat16 values on TF32 and bfloat16 tensor cores; %s)", f32);
        else if (p == MW_POLICY_MIXED_FLOAT16)
            snprintf(math, sizeof math,
                     "mixed_float16 (float16 values on TF32 and float16 tensor cores, dynamic "
                     "loss scale from %g; %s)",
                     e->o->loss_scale_initial, f32);
        else
            snprintf(math, sizeof math, "%s",
                     e->o->tf32 ? "TF32 tensor-core math (--tf32)" : "FP32 math");
        if (r->ngpu == 1)
            mw_log_info("training on CUDA device %d (%s); %s, %s", r->gd[0].ordinal,
                        mw_cuda_version_string(), mw_cuda_conv_backend(), math);
        else
            mw_log_info("training on CUDA devices %d-%d as %d replicas (%s); %s, %s",
                        r->gd[0].ordinal, r->gd[r->ngpu - 1].ordinal, e->o->replicas_per_worker,
                        mw_cuda_version_string(), mw_cuda_conv_backend(), math);
    }
    return MW_OK;
}

/* The loss sum and the metrics' sums of the n examples in g's workspace into g->metrics. */
static void metrics_add(const mw_model *m, gpu_dev *g, int n)
{
    const mw_metric_list ml = mw_model_metrics(m);
    mw_cuda_metrics_add(&g->k, g->metrics, g->ws.loss, g->ws.prob, g->ws.y,
                        mw_model_target_bytes(m), g->ws.act[m->mask_t], g->ws.w, &ml, n,
                        m->nclasses);
}

/* The bytes of the running sums the model's metrics use: what is zeroed and downloaded. */
static size_t sums_bytes(const mw_model *m)
{
    const mw_metric_list ml = mw_loss_metrics(&m->loss);
    return (size_t)mw_sums_len(&ml) * sizeof(double);
}

/* A micro-batch's launches on one device, as run hands them to mw_graph_run. */
typedef struct {
    const mw_model *m;
    const mw_kernels *kt;
    gpu_dev *g;
    int n, backward;
    float scale; /* the backward's 1 / global batch */
} step_body;

static void forward_backward(void *arg)
{
    const step_body *b = arg;
    mw_model_forward(b->m, b->kt, &b->g->k, &b->g->ws, b->n);
    if (b->backward)
        mw_model_backward(b->m, b->kt, &b->g->k, &b->g->ws, b->g->grads, b->n, b->scale);
}

/* What a micro-batch's launches depend on besides device memory's contents: the graph cache's key
 * (gpu_graphs.h). The staging slot fixes where its inputs, targets, weights and ids lie; the
 * scratch's address and size change when it grows. */
typedef struct {
    int backward, slot, n, training, weighted;
    float scale, loss_scale;
    const void *scratch;
    size_t scratch_count;
} graph_key;

/* The micro-batch staged on g (n examples) through mw_graph_run: its forward, and its backward
 * unless backward is 0. The step's dropout seed goes to the device first, where the captured
 * kernels read it. */
static mw_status launch(mw_replicas *r, gpu_dev *g, int n, int backward, float scale)
{
    const mw_model *m = r->env.model;
    step_body b = {.m = m, .kt = &r->kt, .g = g, .n = n, .backward = backward, .scale = scale};
    if (!g->graphs.on) {
        forward_backward(&b);
        return MW_OK;
    }
    if (g->ws.training)
        MW_TRY(mw_cuda_step_seed(&g->k, g->ws.dropout_seed));
    graph_key key;
    memset(&key, 0, sizeof key); /* the padding too: the key is compared as bytes */
    key.backward = backward, key.slot = g->slot, key.n = n, key.training = g->ws.training;
    key.weighted = g->ws.w != NULL, key.scale = scale, key.loss_scale = mw_model_loss_scale(m);
    key.scratch = g->k.ws, key.scratch_count = g->k.ws_count;
    return mw_graph_run(&g->graphs, &g->k, &key, sizeof key, forward_backward, &b);
}

/* Where a device is in its replicas' slices during run. */
typedef struct {
    int lr, end;   /* current local replica, one past its last */
    long off, cnt; /* the current replica's slice */
    long i;        /* examples of it done */
    int n;         /* examples in flight this round */
    int rounds;    /* micro-batches so far */
    long left;     /* examples of all its replicas' slices not run yet */
} cursor;

/* Move q to the next replica slice with examples left; 0 when the device is done. */
static int next_slice(const mw_replicas *r, cursor *q, long total)
{
    const int rpw = r->env.o->replicas_per_worker, nrep = r->env.world * rpw;
    while (q->lr < q->end && q->i >= q->cnt)
        if (++q->lr < q->end) {
            q->i = 0;
            mw_slice(total, nrep, r->env.rank * rpw + q->lr, &q->off, &q->cnt);
        }
    return q->lr < q->end;
}

/* This rank's replicas' slices of total examples on the devices, in rounds of one
 * micro-batch per device, all enqueued. base: the example ids the slices index, or NULL for
 * ids equal to positions (evaluation). Training: forward and backward into the devices'
 * gradients, scaled by 1 / gb; otherwise forward only. The loss sum and metrics' sums go
 * into each device's metrics (zeroed first) and their download into h_metrics is enqueued: read
 * it after the next wait. */
static mw_status run(mw_replicas *r, const mw_dataset *data, long total, const uint32_t *base,
                     int training, long gb, uint64_t dseed)
{
    const int rpw = r->env.o->replicas_per_worker, nrep = r->env.world * rpw;
    const int rpd = rpw / r->ngpu;
    const mw_model *m = r->env.model;
    const int pre = mw_gpu_take_next(r, data, training ? base : NULL, total, dseed);
    cursor c[MAX_GPUS];
    mw_gpu_overlap *ov = training ? r->ov : NULL; /* its hook on each last backward */
    for (int d = 0; d < r->ngpu; d++) {
        c[d].lr = d * rpd, c[d].end = (d + 1) * rpd, c[d].i = 0, c[d].rounds = 0, c[d].left = 0;
        for (int lr = c[d].lr; lr < c[d].end; lr++) {
            long off, cnt;
            mw_slice(total, nrep, r->env.rank * rpw + lr, &off, &cnt);
            c[d].left += cnt;
        }
        mw_slice(total, nrep, r->env.rank * rpw + c[d].lr, &c[d].off, &c[d].cnt);
        MW_TRY(mw_cuda_zero(r->gd[d].metrics, sums_bytes(m), &r->gd[d].k));
        if (ov && c[d].left == 0)
            mw_gpu_overlap_last(ov, d, NULL);
    }
    for (;;) {
        int busy = 0;
        for (int d = 0; d < r->ngpu; d++) {
            gpu_dev *g = &r->gd[d];
            cursor *q = &c[d];
            q->n = 0;
            if (!next_slice(r, q, total))
                continue;
            int n = q->cnt - q->i < g->ws.max_n ? (int)(q->cnt - q->i) : g->ws.max_n;
            const uint32_t *ids = base ? base + q->off + q->i : NULL;
            const uint32_t first = (uint32_t)(q->off + q->i);
            if (q->rounds++ == 0)
                MW_TRY(mw_gpu_stage_first(r, g, pre, data, ids, first, n, training, dseed));
            else
                MW_TRY(mw_gpu_stage(r, g, data, ids, first, n, training, dseed));
            q->left -= n;
            /* the overlap's last backward posts its buckets' all-reduces as it goes: not
             * captured, only its forward */
            const int last = ov && q->left == 0;
            MW_TRY(launch(r, g, n, training && !last, 1.0f / (float)gb));
            if (last) {
                mw_gpu_overlap_last(ov, d, &g->ws);
                mw_model_backward(m, &r->kt, &g->k, &g->ws, g->grads, n, 1.0f / (float)gb);
                mw_gpu_overlap_finish(ov, d, &g->ws);
            }
            metrics_add(m, g, n);
            MW_TRY(mw_gpu_done_with(g));
            q->n = n;
            q->i += n;
            busy = 1;
        }
        if (!busy)
            break;
    }
    for (int d = 0; d < r->ngpu; d++) /* a failed kernel surfaces at the next wait */
        MW_TRY(mw_cuda_download(r->gd[d].h_metrics, r->gd[d].metrics, sums_bytes(m), &r->gd[d].k));
    return MW_OK;
}

/* The lockstep's view of the devices (lockstep.h), one replica each: its sums on the device,
 * downloaded to pinned memory and marked, waited for under the collective timeout, the total
 * uploaded again. */
static void ls_replica(void *ctx, int d, mw_model_ws **ws, const mw_kctx **k, float **grads,
                       long *cnt)
{
    mw_replicas *r = ctx;
    gpu_dev *g = &r->gd[d];
    *ws = &g->ws, *k = &g->k, *grads = g->grads, *cnt = r->scnt[d];
}

static double *ls_sums(void *ctx, int d, double *host)
{
    (void)host;
    return ((mw_replicas *)ctx)->gd[d].dsum;
}

static mw_status ls_fetch(void *ctx, int d, size_t nbytes)
{
    gpu_dev *g = &((mw_replicas *)ctx)->gd[d];
    MW_TRY(mw_cuda_download(g->h_sum, g->dsum, nbytes, &g->k));
    return mw_cuda_mark(&g->k, STEP_MARK);
}

static mw_status ls_wait(void *ctx, int d, double *host, size_t nbytes, const char *what)
{
    mw_replicas *r = ctx;
    gpu_dev *g = &r->gd[d];
    MW_TRY(mw_cuda_wait_mark(&g->k, STEP_MARK, r->env.o->collective_timeout, what));
    memcpy(host, g->h_sum, nbytes);
    return MW_OK;
}

static mw_status ls_put(void *ctx, int d, const double *tot, size_t nbytes, const double **at)
{
    gpu_dev *g = &((mw_replicas *)ctx)->gd[d];
    memcpy(g->h_tot, tot, nbytes); /* its last upload is done: the wait for its sums */
    MW_TRY(mw_cuda_upload(g->dtot, g->h_tot, nbytes, &g->k));
    *at = g->dtot;
    return MW_OK;
}

static const mw_lockstep_ops gpu_lockstep = {
    .replica = ls_replica, .sums = ls_sums, .fetch = ls_fetch, .wait = ls_wait, .put = ls_put};

/* A synchronized-BN model's training pass: each device's one replica slice, staged whole, the
 * parts between synchronized layers enqueued device by device, synchronized at each. */
static mw_status run_sync(mw_replicas *r, const mw_dataset *data, const uint32_t *ids, long gb,
                          uint64_t dseed)
{
    const mw_replicas_env *e = &r->env;
    const mw_model *m = e->model;
    const int rpw = e->o->replicas_per_worker, nrep = e->world * rpw;
    const int pre = mw_gpu_take_next(r, data, ids, gb, dseed);
    long *cnt = r->scnt;
    for (int d = 0; d < r->ngpu; d++) {
        gpu_dev *g = &r->gd[d];
        long off;
        mw_slice(gb, nrep, e->rank * rpw + d, &off, &cnt[d]);
        MW_TRY(mw_cuda_zero(g->metrics, sums_bytes(m), &g->k));
        if (cnt[d] > 0)
            MW_TRY(mw_gpu_stage_first(r, g, pre, data, ids + off, (uint32_t)off, (int)cnt[d], 1,
                                      dseed));
    }
    const mw_lockstep lock = {.model = m,
                              .kt = &r->kt,
                              .ops = &gpu_lockstep,
                              .ctx = r,
                              .replicas = r->ngpu,
                              .comm = e->comm,
                              .world = e->world,
                              .world_rank = e->topo->world_rank,
                              .timeout = e->o->collective_timeout,
                              .step = r->step,
                              .host = r->stot};
    MW_TRY(mw_lockstep_step(&lock, gb));
    for (int d = 0; d < r->ngpu; d++) {
        gpu_dev *g = &r->gd[d];
        if (cnt[d] > 0) {
            metrics_add(m, g, (int)cnt[d]);
            MW_TRY(mw_gpu_done_with(g));
        }
        MW_TRY(mw_cuda_download(g->h_metrics, g->metrics, sums_bytes(m), &g->k));
    }
    return MW_OK;
}

/* The devices' metrics downloads (complete after a wait) into sums: the loss sum / div, the
 * metrics' sums as they are (the examples are counted on the host). */
static void take_macc(const mw_replicas *r, double *sums, double div)
{
    const int len = (int)(sums_bytes(r->env.model) / sizeof(double));
    for (int d = 0; d < r->ngpu; d++) {
        const double *h = r->gd[d].h_metrics;
        sums[MW_SUM_LOSS] += h[MW_SUM_LOSS] / div;
        for (int j = MW_SUM_VALID; j < len; j++)
            sums[j] += h[j];
    }
}

static mw_status gpu_grads(mw_replicas *r, const mw_dataset *d, const uint32_t *ids, long gb,
                           uint64_t dseed, long step)
{
    r->step = step;
    memcpy(r->acc0, r->acc, sizeof r->acc);
    const mw_replicas_env *e = &r->env;
    const int rpw = e->o->replicas_per_worker, nrep = e->world * rpw;
    const size_t count = e->model->params.count;
    for (int dv = 0; dv < r->ngpu; dv++)
        MW_TRY(mw_cuda_zero(r->gd[dv].grads, count * sizeof(float), &r->gd[dv].k));
    /* the penalty scaled by the device's share of the replicas (its replicas / all
     * replicas), as tf.nn.scale_regularization_loss: the sum holds it once */
    r->reg_ls = mw_model_loss_scale(e->model); /* scales the gradients; the loss is unscaled */
    const float share = (float)(rpw / r->ngpu) / (float)nrep * r->reg_ls;
    if (r->ov) /* the buckets add the regularizers' gradients; the penalty is summed below */
        mw_gpu_overlap_begin(r->ov, step, share);
    if (r->sync_c > 0)
        MW_TRY(run_sync(r, d, ids, gb, dseed));
    else
        MW_TRY(run(r, d, gb, ids, 1, gb, dseed));
    r->gb = gb; /* the loss and metric sum are read after the update's wait */
    r->acc[MW_SUM_COUNT] += (double)mw_rank_examples(gb, e->world, rpw, e->rank);
    r->reg_pending = mw_model_has_regularizers(e->model);
    for (int dv = 0; dv < r->ngpu && r->reg_pending; dv++) {
        gpu_dev *g = &r->gd[dv];
        MW_TRY(mw_cuda_zero(g->reg, sizeof(double), &g->k));
        mw_model_regularize(e->model, &r->kt, &g->k, g->params, r->ov ? NULL : g->grads, g->reg,
                            share);
        MW_TRY(mw_cuda_download(g->h_reg, g->reg, sizeof(double), &g->k));
    }
    return MW_OK;
}

/* Enqueued only: the sums follow the backward passes on the compute streams, and the update
 * follows the sums; gpu_update waits. */
static mw_status gpu_allreduce(mw_replicas *r, long step)
{
    r->step = step;
    if (r->ov) /* the buckets were enqueued during the backward */
        return mw_gpu_overlap_end(r->ov);
    if (!r->nccl)
        return MW_OK;
    float *bufs[MAX_GPUS];
    void *streams[MAX_GPUS];
    for (int d = 0; d < r->ngpu; d++) {
        bufs[d] = r->gd[d].grads;
        streams[d] = mw_cuda_stream(&r->gd[d].k);
    }
    return mw_nccl_allreduce_start(r->nccl, bufs, r->env.model->params.count, streams, step);
}

/* Wait, polled under --collective-timeout, until every device has done all it was given. */
static mw_status wait_devices(mw_replicas *r, const char *what)
{
    for (int d = 0; d < r->ngpu; d++)
        MW_TRY(mw_cuda_mark(&r->gd[d].k, STEP_MARK));
    for (int d = 0; d < r->ngpu; d++)
        MW_TRY(mw_cuda_wait_mark(&r->gd[d].k, STEP_MARK, r->env.o->collective_timeout, what));
    return MW_OK;
}

/* The sums are waited for here (polled), so the update that follows waits for its own work
 * only (r->summed). */
static mw_status gpu_finite(mw_replicas *r, int *all_finite)
{
    if (r->nccl)
        MW_TRY(mw_nccl_wait(r->nccl));
    else
        MW_TRY(wait_devices(r, "the GPU step's all-reduce"));
    r->summed = 1;
    gpu_dev *g = &r->gd[0];
    *all_finite = mw_grads_finite(&r->kt, &g->k, g->grads, r->env.model->params.count);
    return mw_cuda_last_status(&g->k);
}

static void gpu_metrics(mw_replicas *r, double sums[MW_SUMS], int reset)
{
    mw_metrics_take(r->acc, sums, reset);
}

/* Enqueued behind the all-reduce on each stream; then the step's one host wait: NCCL's
 * polled wait (the sums and the update), or on one GPU the step mark. The step's metrics and
 * penalty downloads are complete then. */
static mw_status gpu_update(mw_replicas *r, const mw_optim_hyper *h)
{
    const mw_replicas_env *e = &r->env;
    /* A clip norm reads the summed gradient's norm back to the host (mw_sumsq_cuda waits on
     * the stream): take the polled wait for the sums first, so no host wait sits behind an
     * all-reduce outside --collective-timeout. */
    const int clip = h && (e->o->clipnorm > 0 || e->o->global_clipnorm > 0);
    const int summed = r->summed; /* gpu_finite waited for the sums */
    r->summed = 0;
    if (clip && r->nccl && !summed)
        MW_TRY(mw_nccl_wait(r->nccl));
    else if (clip && !summed)
        MW_TRY(wait_devices(r, "the GPU step's all-reduce"));
    for (int d = 0; d < r->ngpu; d++) {
        gpu_dev *g = &r->gd[d];
        float *const slots[3] = {g->m1, g->m2, g->m3};
        /* behind the sums on the stream, as the CPU's between the all-reduce and the update */
        mw_model_update_stats(e->model, &r->kt, &g->k, g->params, g->grads);
        if (h) /* NULL: a skipped step */
            mw_optimizer_apply(e->o, &r->kt, &g->k, e->model, g->params, slots, g->grads,
                               e->model->params.count, h);
    }
    MW_TRY(mw_gpu_stage_next(r)); /* the host assembles the next batch while the devices update */
    MW_TL_BEGIN("wait: the all-reduce and the update", "wait");
    if (r->nccl && !clip && !summed)
        MW_TRY(mw_nccl_wait(r->nccl));
    if (r->ov || !r->nccl || clip || summed) /* overlapped: the sums' wait is not the update's */
        MW_TRY(wait_devices(r, "the GPU step"));
    MW_TL_END("wait: the all-reduce and the update", "wait");
    for (int d = 0; d < r->ngpu; d++)
        MW_TRY(mw_cuda_last_status(&r->gd[d].k));
    if (!h) { /* skipped: neither its update nor its loss and metrics count */
        memcpy(r->acc, r->acc0, sizeof r->acc);
        r->reg_pending = 0;
        return MW_OK;
    }
    take_macc(r, r->acc, (double)r->gb);
    for (int d = 0; d < r->ngpu && r->reg_pending; d++)
        r->acc[MW_SUM_LOSS] += *r->gd[d].h_reg / r->reg_ls;
    r->reg_pending = 0;
    return MW_OK;
}

static mw_status gpu_prefetch(mw_replicas *r, const mw_dataset *d, const uint32_t *ids, long gb,
                              uint64_t dseed)
{
    r->next.d = d, r->next.ids = ids, r->next.gb = gb, r->next.dseed = dseed;
    r->next.state = ids && gb > 0 ? 1 : 0;
    return MW_OK;
}

static mw_status gpu_evaluate(mw_replicas *r, const mw_dataset *d, long n, double sums[MW_SUMS])
{
    const mw_replicas_env *e = &r->env;
    MW_TRY(run(r, d, n, NULL, 0, 0, 0));
    MW_TRY(wait_devices(r, "GPU evaluation"));
    take_macc(r, sums, 1.0);
    sums[MW_SUM_COUNT] += (double)mw_rank_examples(n, e->world, e->o->replicas_per_worker, e->rank);
    return MW_OK;
}

static void gpu_describe(const mw_replicas *r, char *buf, size_t len)
{
    snprintf(buf, len, "%d GPU(s) per rank, kernels %s, all-reduce %s", r->ngpu, r->kt.name,
             r->nccl ? mw_nccl_version_string() : "none (one GPU)");
}

static void gpu_close(mw_replicas **rp, int abandoned)
{
    mw_replicas *r = *rp;
    if (!r)
        return;
    *rp = NULL;
    /* A peer or a device may be stuck: waiting for a stream or destroying the NCCL
     * communicator could block. The job is about to be aborted; leave it all. */
    if (abandoned)
        return;
    mw_gpu_overlap_close(&r->ov);
    mw_nccl_close(&r->nccl);
    for (int d = 0; d < r->ngpu; d++) {
        gpu_dev *g = &r->gd[d];
        if (!g->k.dev)
            continue;
        (void)mw_cuda_sync(&g->k);
        (void)mw_cuda_activate(&g->k); /* free on the device that allocated */
        if (r->env.o->cuda_graphs)
            mw_log_info("CUDA device %d: %ld micro-batches replayed from %ld CUDA graphs, %ld "
                        "launched kernel by kernel%s",
                        g->ordinal, g->graphs.launches, g->graphs.captures, g->graphs.eager,
                        g->graphs.on ? "" : " (graphs turned off)");
        mw_graph_cache_clear(&g->graphs);
        mw_model_ws_free(&g->ws);
        void *dev[] = {g->params, g->grads,   g->m1,   g->m2,   g->m3,
                       g->reg,    g->metrics, g->dsum, g->dtot, g->dstage};
        for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
            mw_cuda_free(dev[i]);
        mw_cuda_host_free(g->stage);
        mw_cuda_host_free(g->sstage);
        mw_cuda_ctx_close(&g->k);
    }
    free(r->gd);
    free(r->stot);
    free(r);
}

static const mw_replicas_ops gpu_ops = {
    .name = "cuda",
    .open = gpu_open,
    .connect = gpu_connect,
    .grads = gpu_grads,
    .prefetch = gpu_prefetch,
    .allreduce = gpu_allreduce,
    .finite = gpu_finite,
    .metrics = gpu_metrics,
    .update = gpu_update,
    .evaluate = gpu_evaluate,
    .push = gpu_push,
    .pull = gpu_pull,
    .describe = gpu_describe,
    .close = gpu_close,
};

static const mw_gpu_module module = {
    .abi = MW_GPU_MODULE_ABI,
    .probe = mw_cuda_probe,
    .version = mw_cuda_version_string,
    .replicas = &gpu_ops,
};

/* The module's one entry point (worker/replicas/device.c looks it up by name). */
const mw_gpu_module *mw_gpu_module_get(void)
{
    return &module;
}
