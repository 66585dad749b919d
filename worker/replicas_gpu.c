/* The GPU replica backend (see replicas.h), built into the CUDA module
 * (mwtrain-cuda.so) with kernels/cuda and cluster/nccl.c; worker/device.c opens it
 * only when a GPU trains, so a CPU run never maps a CUDA library.
 *
 * A rank drives the devices worker/device.c gave it (one per rank, or all of its
 * node's), one CUDA context each, and its replicas_per_worker replicas are dealt out
 * in order: device d runs replicas [d rpd, (d+1) rpd), rpd = replicas per device.
 * Every device holds the whole state (parameters, gradients, optimizer slots) in
 * device arrays of the host arenas' layout; the host arenas stay the source for the
 * initial broadcast and for checkpoints (pull downloads from device 0, push uploads to
 * every device). A step runs in rounds: each device in turn gets its next micro-batch
 * staged on the host into its pinned buffers, uploaded, and run forward and backward
 * (all enqueued, so the devices work at the same time); then the round's losses and
 * probabilities come back for the metrics. The weight penalty goes into each device's
 * gradients after the backward passes, scaled by its share of the replicas; the
 * gradient sum over every device of the cluster is NCCL (cluster/nccl.h) on the
 * contexts' streams, and every device applies the same optimizer update. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/nccl.h"
#include "common/log.h"
#include "kernels/cuda/cuda.h"
#include "worker/device.h"
#include "worker/replicas.h"

#define MAX_GPUS 16
#define GPU_MAX_BATCH 1024 /* examples per device micro-batch, at most */

/* One device this rank drives. */
typedef struct {
    int ordinal;                          /* CUDA device number */
    mw_kctx k;                            /* stream, cuBLAS, device scratch */
    float *params, *grads, *m1, *m2, *m3; /* device arrays, the host arenas' layout */
    double *reg;                          /* device: this step's weight penalty */
    uint32_t *ids;                        /* device: a micro-batch's example ids (dropout) */
    mw_model_ws ws;                       /* device workspace for one micro-batch */
    void *stage;                          /* pinned host: the h_ buffers below */
    float *h_x, *h_prob, *h_loss;
    int32_t *h_labels;
    uint32_t *h_ids;
    double *h_reg;
} gpu_dev;

struct mw_replicas {
    mw_replicas_env env;
    mw_kernels kt;
    int ngpu;
    gpu_dev *gd;     /* ngpu devices (owned) */
    mw_nccl *nccl;   /* gradient all-reduce over every device of the cluster */
    double acc[3];   /* running sums (replicas.h) */
    int reg_pending; /* the penalty downloads of this step land at the all-reduce's wait */
};

static size_t up64(size_t nbytes)
{
    return (nbytes + 63) / 64 * 64;
}

static mw_status dev_open(mw_replicas *r, gpu_dev *g, int ordinal, int max_n)
{
    const mw_model *m = r->env.model;
    const size_t count = m->params.count;
    g->ordinal = ordinal;
    MW_TRY(mw_cuda_ctx_open(&g->k, ordinal));
    MW_TRY(mw_cuda_activate(&g->k)); /* the allocations below land on this device */
    float **arr[5] = {&g->params, &g->grads, &g->m1, &g->m2, &g->m3};
    for (int i = 0; i < 5; i++)
        MW_TRY(mw_cuda_alloc((void **)arr[i], count * sizeof(float)));
    MW_TRY(mw_cuda_zero(g->grads, count * sizeof(float), &g->k));
    MW_TRY(mw_cuda_alloc((void **)&g->reg, sizeof(double)));
    MW_TRY(mw_model_ws_alloc_with(&g->ws, m, max_n, mw_cuda_alloc, mw_cuda_free));
    g->ws.params = g->params;
    if (g->ws.scratch_count > g->k.ws_count)
        MW_TRY(mw_cuda_ws_reserve(&g->k, g->ws.scratch_count));
    const size_t n = (size_t)g->ws.max_n;
    MW_TRY(mw_cuda_alloc((void **)&g->ids, n * sizeof(uint32_t)));
    const size_t in = n * (size_t)m->in_h * m->in_w * m->in_c;
    const size_t o_x = 0, o_lab = o_x + up64(in * sizeof(float));
    const size_t o_ids = o_lab + up64(n * sizeof(int32_t));
    const size_t o_prob = o_ids + up64(n * sizeof(uint32_t));
    const size_t o_loss = o_prob + up64(n * (size_t)m->nclasses * sizeof(float));
    const size_t o_reg = o_loss + up64(n * sizeof(float));
    MW_TRY(mw_cuda_host_alloc(&g->stage, o_reg + up64(sizeof(double))));
    char *b = g->stage;
    g->h_x = (float *)(b + o_x);
    g->h_labels = (int32_t *)(b + o_lab);
    g->h_ids = (uint32_t *)(b + o_ids);
    g->h_prob = (float *)(b + o_prob);
    g->h_loss = (float *)(b + o_loss);
    g->h_reg = (double *)(b + o_reg);
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
    if (!(r->gd = calloc((size_t)ndev, sizeof *r->gd)))
        return mw_err(MW_ENOMEM, "out of memory");
    /* a device runs a replica's whole slice at once: micro-batches are for the CPU's caches */
    const int bpr = env->o->batch_per_replica;
    const int max_n = bpr < GPU_MAX_BATCH ? bpr : GPU_MAX_BATCH;
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

static mw_status gpu_connect(mw_replicas *r)
{
    const mw_replicas_env *e = &r->env;
    /* NCCL over every GPU of the training ranks; agreed inside mw_nccl_open */
    if (e->world * r->ngpu > 1) {
        int ordinals[MAX_GPUS];
        for (int d = 0; d < r->ngpu; d++)
            ordinals[d] = r->gd[d].ordinal;
        MW_TRY(mw_nccl_open(&r->nccl, e->topo->node_comm, e->topo->cross, r->ngpu, ordinals,
                            e->o->collective_timeout));
    }
    if (e->rank == 0) {
        if (r->ngpu == 1)
            mw_log_info("training on CUDA device %d (%s)", r->gd[0].ordinal,
                        mw_cuda_version_string());
        else
            mw_log_info("training on CUDA devices %d-%d as %d replicas (%s)", r->gd[0].ordinal,
                        r->gd[r->ngpu - 1].ordinal, e->o->replicas_per_worker,
                        mw_cuda_version_string());
    }
    return MW_OK;
}

/* Stage n examples of d on the host (ids, or first, first+1, ... when ids is NULL) and
 * enqueue their upload into g's workspace; training: dropout keyed by the examples'
 * global ids. */
static mw_status stage(const mw_replicas *r, gpu_dev *g, const mw_dataset *d, const uint32_t *ids,
                       uint32_t first, int n, int training, uint64_t dseed)
{
    mw_model_ws *ws = &g->ws;
    const mw_model *m = r->env.model;
    const size_t in = (size_t)n * m->in_h * m->in_w * m->in_c;
    for (int j = 0; j < n; j++)
        g->h_ids[j] = ids ? ids[j] : first + (uint32_t)j;
    mw_dataset_batch(d, g->h_x, g->h_labels, g->h_ids, n);
    MW_TRY(mw_cuda_upload(ws->act[0], g->h_x, in * sizeof(float), &g->k));
    MW_TRY(mw_cuda_upload(ws->labels, g->h_labels, (size_t)n * sizeof(int32_t), &g->k));
    ws->training = training;
    ws->dropout_seed = training ? dseed : 0;
    ws->example_ids = NULL;
    if (training) {
        MW_TRY(mw_cuda_upload(g->ids, g->h_ids, (size_t)n * sizeof(uint32_t), &g->k));
        ws->example_ids = g->ids;
    }
    return MW_OK;
}

/* Where a device is in its replicas' slices during run. */
typedef struct {
    int lr, end;   /* current local replica, one past its last */
    long off, cnt; /* the current replica's slice */
    long i;        /* examples of it done */
    int n;         /* examples in flight this round */
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
 * micro-batch per device. base: the example ids the slices index, or NULL for ids equal
 * to positions (evaluation). Training: forward and backward into the devices'
 * gradients, scaled by 1 / gb; otherwise forward only. Adds the summed loss and the
 * correct count into ls and corr. */
static mw_status run(mw_replicas *r, const mw_dataset *data, long total, const uint32_t *base,
                     int training, long gb, uint64_t dseed, double *ls, double *corr)
{
    const int rpw = r->env.o->replicas_per_worker, nrep = r->env.world * rpw;
    const int rpd = rpw / r->ngpu;
    const mw_model *m = r->env.model;
    cursor c[MAX_GPUS];
    for (int d = 0; d < r->ngpu; d++) {
        c[d].lr = d * rpd, c[d].end = (d + 1) * rpd, c[d].i = 0;
        mw_slice(total, nrep, r->env.rank * rpw + c[d].lr, &c[d].off, &c[d].cnt);
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
            MW_TRY(stage(r, g, data, base ? base + q->off + q->i : NULL, (uint32_t)(q->off + q->i),
                         n, training, dseed));
            mw_model_forward(m, &r->kt, &g->k, &g->ws, n);
            if (training)
                mw_model_backward(m, &r->kt, &g->k, &g->ws, g->grads, n, 1.0f / (float)gb);
            MW_TRY(mw_cuda_download(g->h_loss, g->ws.loss, (size_t)n * sizeof(float), &g->k));
            MW_TRY(mw_cuda_download(g->h_prob, g->ws.prob, (size_t)n * m->nclasses * sizeof(float),
                                    &g->k));
            q->n = n;
            q->i += n;
            busy = 1;
        }
        if (!busy)
            return MW_OK;
        /* a failed kernel surfaces here, at the round's wait */
        for (int d = 0; d < r->ngpu; d++) {
            gpu_dev *g = &r->gd[d];
            if (c[d].n == 0)
                continue;
            MW_TRY(mw_cuda_sync(&g->k));
            for (int j = 0; j < c[d].n; j++)
                *ls += g->h_loss[j];
            *corr += mw_model_correct_host(m, g->h_prob, g->h_labels, c[d].n);
        }
    }
}

static mw_status gpu_grads(mw_replicas *r, const mw_dataset *d, const uint32_t *ids, long gb,
                           uint64_t dseed)
{
    const mw_replicas_env *e = &r->env;
    const int rpw = e->o->replicas_per_worker, nrep = e->world * rpw;
    const size_t count = e->model->params.count;
    for (int dv = 0; dv < r->ngpu; dv++)
        MW_TRY(mw_cuda_zero(r->gd[dv].grads, count * sizeof(float), &r->gd[dv].k));
    double ls = 0, corr = 0;
    MW_TRY(run(r, d, gb, ids, 1, gb, dseed, &ls, &corr));
    r->acc[0] += ls / (double)gb;
    r->acc[1] += corr;
    r->acc[2] += (double)mw_rank_examples(gb, e->world, rpw, e->rank);
    /* the penalty scaled by the device's share of the replicas (its replicas / all
     * replicas), as tf.nn.scale_regularization_loss: the sum holds it once */
    const float share = (float)(rpw / r->ngpu) / (float)nrep;
    r->reg_pending = mw_model_has_regularizers(e->model);
    for (int dv = 0; dv < r->ngpu && r->reg_pending; dv++) {
        gpu_dev *g = &r->gd[dv];
        MW_TRY(mw_cuda_zero(g->reg, sizeof(double), &g->k));
        mw_model_regularize(e->model, &r->kt, &g->k, g->params, g->grads, g->reg, share);
        MW_TRY(mw_cuda_download(g->h_reg, g->reg, sizeof(double), &g->k));
    }
    return MW_OK;
}

static mw_status gpu_allreduce(mw_replicas *r, long step)
{
    if (r->nccl) {
        float *bufs[MAX_GPUS];
        void *streams[MAX_GPUS];
        for (int d = 0; d < r->ngpu; d++) {
            bufs[d] = r->gd[d].grads;
            streams[d] = mw_cuda_stream(&r->gd[d].k);
        }
        /* returns with the streams idle: the penalty downloads are done too */
        MW_TRY(mw_nccl_allreduce(r->nccl, bufs, r->env.model->params.count, streams, step));
    } else {
        MW_TRY(sync_all(r));
    }
    for (int d = 0; d < r->ngpu && r->reg_pending; d++)
        r->acc[0] += *r->gd[d].h_reg;
    r->reg_pending = 0;
    return MW_OK;
}

static void gpu_metrics(mw_replicas *r, double sums[3], int reset)
{
    mw_metrics_take(r->acc, sums, reset);
}

static mw_status gpu_update(mw_replicas *r, const mw_optim_hyper *h)
{
    const mw_replicas_env *e = &r->env;
    for (int d = 0; d < r->ngpu; d++) {
        gpu_dev *g = &r->gd[d];
        float *const slots[3] = {g->m1, g->m2, g->m3};
        mw_optimizer_apply(e->o, &r->kt, &g->k, e->model, g->params, slots, g->grads,
                           e->model->params.count, h);
    }
    for (int d = 0; d < r->ngpu; d++)
        MW_TRY(mw_cuda_last_status(&r->gd[d].k));
    return MW_OK;
}

static mw_status gpu_evaluate(mw_replicas *r, const mw_dataset *d, long n, double sums[3])
{
    const mw_replicas_env *e = &r->env;
    double ls = 0, corr = 0;
    MW_TRY(run(r, d, n, NULL, 0, 0, 0, &ls, &corr));
    sums[0] += ls, sums[1] += corr;
    sums[2] += (double)mw_rank_examples(n, e->world, e->o->replicas_per_worker, e->rank);
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
    mw_nccl_close(&r->nccl);
    for (int d = 0; d < r->ngpu; d++) {
        gpu_dev *g = &r->gd[d];
        if (!g->k.dev)
            continue;
        (void)mw_cuda_sync(&g->k);
        (void)mw_cuda_activate(&g->k); /* free on the device that allocated */
        mw_model_ws_free(&g->ws);
        void *dev[] = {g->params, g->grads, g->m1, g->m2, g->m3, g->reg, g->ids};
        for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
            mw_cuda_free(dev[i]);
        mw_cuda_host_free(g->stage);
        mw_cuda_ctx_close(&g->k);
    }
    free(r->gd);
    free(r);
}

static const mw_replicas_ops gpu_ops = {
    .name = "cuda",
    .open = gpu_open,
    .connect = gpu_connect,
    .grads = gpu_grads,
    .allreduce = gpu_allreduce,
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

/* The module's one entry point (worker/device.c looks it up by name). */
const mw_gpu_module *mw_gpu_module_get(void)
{
    return &module;
}
