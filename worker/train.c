/* Training and evaluation loops; see train.h.
 *
 * Replica slices: a global batch of gb examples over R replicas gives replica
 * r the contiguous slice starting at r*base + min(r, rem) of length
 * base + (r < rem), base = gb / R, rem = gb % R: as even as possible, and a
 * replica may get 0 examples and still joins the all-reduce.
 *
 * Threads: a replica's slice is cut again, the same way, among the rank's
 * threads; each thread runs forward and backward on its part with its own
 * workspace and gradient buffer (single-threaded kernels: no barriers inside
 * a step), and the buffers are summed in thread order, so a given layout and
 * thread count is bitwise reproducible. */
#include "worker/train.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cluster/comm.h"
#include "cluster/nccl.h"
#include "common/arena.h"
#include "common/log.h"
#include "common/timer.h"
#include "kernels/cuda/cuda.h"
#include "common/log.h"
#include "common/rng.h"
#include "worker/checkpoint.h"
#include "worker/data.h"
#include "worker/export.h"
#include "worker/keras.h"
#include "worker/model.h"
#include "worker/progress.h"
#include "worker/summary.h"

void mw_train_opts_default(mw_train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->epochs = 10;
    o->batch_per_replica = 64;
    o->replicas_per_worker = 0; /* one per GPU the rank drives; 1 on the CPU */
    o->learning_rate = 1e-3;
    o->optimizer = MW_OPT_ADAM;
    o->momentum = 0.9;
    o->beta1 = 0.9, o->beta2 = 0.999, o->epsilon = 1e-7;
    o->seed = 42;
    o->data_dir = MW_DATA_DEFAULT_DIR;
    o->backend = "cpu";
    o->progress = MW_PROGRESS_AUTO;
    o->progress_interval = 5.0;
    o->allreduce = MW_AR_AUTO;
    o->micro_batch = 16;
    o->checkpoint_dir = "./training_checkpoints";
    o->checkpoint_every_epochs = 2;
    o->keep_checkpoints = 5;
    o->summary_dir = "./logs";
    o->device = "auto";
    o->collective_timeout = 300.0;
}

static void slice(long gb, int nrep, int r, long *off, long *cnt)
{
    long base = gb / nrep, rem = gb % nrep;
    *off = r * base + (r < rem ? r : rem);
    *cnt = base + (r < rem ? 1 : 0);
}

#define MAX_THREADS 256

typedef struct {
    int rank, world, local_size; /* training rank (task order), training ranks, on my node */
    MPI_Comm comm;               /* the training communicator (borrowed) */
    const mw_train_opts *o;
    const mw_topology *topo;
    mw_allreduce ar;
    float *own_grads; /* gradients when not in the all-reduce's shared slot (owned) */
    mw_kernels kt;
    int nthreads;
    mw_kctx k;                    /* whole-rank context (optimizer update) */
    mw_kctx tk[MAX_THREADS];      /* per-thread contexts, nthreads = 1 */
    mw_model_ws ws[MAX_THREADS];  /* per-thread activations */
    float *tgrads[MAX_THREADS];   /* per-thread gradients (thread 0: grads itself) */
    double tsum[MAX_THREADS][4];  /* per-thread loss sum, correct, examples */
    mw_model model;
    mw_arena grads, m1, m2; /* gradient, Adam m (or SGD velocity), Adam v */
    mw_dataset train, test;
    uint32_t *order;
    long adam_t;
    int start_epoch;    /* first epoch to run (0, or from a checkpoint) */
    long start_step;    /* steps of start_epoch already done */
    long global_step;   /* steps done in all */
    long saved_step;    /* global_step of the last checkpoint, -1 when none */
    uint64_t seed;      /* shuffle seed: the flag's, or the checkpoint's */
    mw_summary sum;     /* chief only; the evaluator's own eval summaries */
    int eval_rank;      /* rank of the evaluator task in topo->world, -1 when none */
    void *eval_buf;     /* chief: the checkpoint bytes in flight to the evaluator */
    long eval_hdr[2];   /* chief: checkpoint number (-1: done), bytes */
    MPI_Request eval_req[2];
    const char *model_json;
    /* --device gpu: the CUDA devices this rank drives (see gpu_setup) */
    int gpu;                    /* 1: train and evaluate on gd[0..ngpu) */
    int ngpu;
    struct gpu_dev *gd;         /* ngpu devices (owned) */
    mw_nccl *nccl;              /* gradient all-reduce over every device of the cluster */
    mw_train_opts opts;         /* the caller's, with replicas_per_worker resolved; o points here */
    char *saved_model;          /* without --model: the latest checkpoint's model (owned) */
    void *latest;               /* rank 0: that checkpoint, serialized, until restore takes it */
    size_t latest_len;
} trainer;

static int cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ---- the GPU path ----
 *
 * A rank drives the devices mw_cuda_select gave it (one per rank, or all of
 * its node's), one CUDA context each, and its replicas_per_worker replicas are
 * dealt out in order: device d runs replicas [d rpd, (d+1) rpd), rpd =
 * replicas per device. Every device holds the whole state (parameters,
 * gradients, optimizer slots) in device arrays of the host arenas' layout; the
 * host arenas stay the source for the initial broadcast and for checkpoints
 * (downloaded from device 0 before a save, uploaded to every device after a
 * restore). A step runs in rounds: each device in turn gets its next
 * micro-batch staged on the host into its pinned buffers, uploaded, and run
 * forward and backward (all enqueued, so the devices work at the same time);
 * then the round's losses and probabilities come back for the metrics. The
 * weight penalty goes into each device's gradients after the backward passes,
 * scaled by its share of the replicas; the gradient sum over every device of
 * the cluster is NCCL (cluster/nccl.h) on the contexts' streams, and every
 * device applies the same optimizer update. */

#define MAX_GPUS 16
#define GPU_MAX_BATCH 1024 /* examples per device micro-batch, at most */

/* One device this rank drives. */
typedef struct gpu_dev {
    int ordinal;                       /* CUDA device number */
    mw_kctx k;                         /* stream, cuBLAS, device scratch */
    float *params, *grads, *m1, *m2;   /* device arrays, the host arenas' layout */
    double *reg;                       /* device: this step's weight penalty */
    uint32_t *ids;                     /* device: a micro-batch's example ids (dropout) */
    mw_model_ws ws;                    /* device workspace for one micro-batch */
    void *stage;                       /* pinned host: the h_ buffers below */
    float *h_x, *h_prob, *h_loss;
    int32_t *h_labels;
    uint32_t *h_ids;
    double *h_reg;
} gpu_dev;

static size_t up64(size_t nbytes)
{
    return (nbytes + 63) / 64 * 64;
}

static mw_status gpu_dev_setup(trainer *t, gpu_dev *g, int ordinal, int max_n)
{
    const size_t count = t->model.params.count;
    const mw_model *m = &t->model;
    g->ordinal = ordinal;
    MW_TRY(mw_cuda_ctx_open(&g->k, ordinal));
    MW_TRY(mw_cuda_activate(&g->k)); /* the allocations below land on this device */
    float **arr[4] = {&g->params, &g->grads, &g->m1, &g->m2};
    for (int i = 0; i < 4; i++)
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

static mw_status gpu_setup(trainer *t, int first_device, int ndev, int max_n)
{
    if (ndev > MAX_GPUS)
        return mw_err(MW_EUNSUPPORTED, "this rank was given %d CUDA devices; a rank drives at "
                      "most %d: run more ranks per node", ndev, MAX_GPUS);
    mw_kernels_init_cuda(&t->kt);
    if (strcmp(t->kt.name, "cuda") != 0)
        return mw_err(MW_EDEVICE, "CUDA device %d: the CUDA kernels are not available",
                      first_device);
    if (!(t->gd = calloc((size_t)ndev, sizeof *t->gd)))
        return mw_err(MW_ENOMEM, "out of memory");
    t->gpu = 1;
    for (int d = 0; d < ndev; d++) {
        t->ngpu = d + 1; /* teardown releases what was opened */
        MW_TRY(gpu_dev_setup(t, &t->gd[d], first_device + d, max_n));
    }
    return MW_OK;
}

static void gpu_teardown(trainer *t)
{
    mw_nccl_close(&t->nccl);
    for (int d = 0; d < t->ngpu; d++) {
        gpu_dev *g = &t->gd[d];
        if (!g->k.dev)
            continue;
        (void)mw_cuda_sync(&g->k);
        (void)mw_cuda_activate(&g->k); /* free on the device that allocated */
        mw_model_ws_free(&g->ws);
        void *dev[] = {g->params, g->grads, g->m1, g->m2, g->reg, g->ids};
        for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
            mw_cuda_free(dev[i]);
        mw_cuda_host_free(g->stage);
        mw_cuda_ctx_close(&g->k);
        memset(g, 0, sizeof *g);
    }
    free(t->gd);
    t->gd = NULL;
    t->ngpu = 0;
}

/* The first failure among the devices' contexts, waiting for each (so no work
 * is left in flight). */
static mw_status gpu_sync_all(trainer *t)
{
    mw_status first = MW_OK;
    for (int d = 0; d < t->ngpu; d++) {
        mw_status rc = mw_cuda_sync(&t->gd[d].k);
        if (first == MW_OK)
            first = rc;
    }
    return first;
}

/* Host arenas -> every device (params; with the optimizer slots unless
 * weights_only), and wait. */
static mw_status gpu_upload_state(trainer *t, int weights_only)
{
    const size_t nb = t->model.params.count * sizeof(float);
    for (int d = 0; d < t->ngpu; d++) {
        gpu_dev *g = &t->gd[d];
        MW_TRY(mw_cuda_upload(g->params, t->model.params.data, nb, &g->k));
        if (!weights_only) {
            MW_TRY(mw_cuda_upload(g->m1, t->m1.data, nb, &g->k));
            MW_TRY(mw_cuda_upload(g->m2, t->m2.data, nb, &g->k));
        }
    }
    return gpu_sync_all(t);
}

/* Device 0 -> host arenas (params and optimizer slots; every device holds the
 * same), and wait. */
static mw_status gpu_download_state(trainer *t)
{
    const size_t nb = t->model.params.count * sizeof(float);
    gpu_dev *g = &t->gd[0];
    MW_TRY(mw_cuda_download(t->model.params.data, g->params, nb, &g->k));
    MW_TRY(mw_cuda_download(t->m1.data, g->m1, nb, &g->k));
    MW_TRY(mw_cuda_download(t->m2.data, g->m2, nb, &g->k));
    return mw_cuda_sync(&g->k);
}

/* Stage n examples of d on the host (ids, or first, first+1, ... when ids is
 * NULL) and enqueue their upload into g's workspace; training: dropout keyed by
 * the examples' global ids. */
static mw_status gpu_stage(const trainer *t, gpu_dev *g, const mw_dataset *d, const uint32_t *ids,
                           uint32_t first, int n, int training, uint64_t dseed)
{
    mw_model_ws *ws = &g->ws;
    const mw_model *m = &t->model;
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

/* Where a device is in its replicas' slices during gpu_run. */
typedef struct {
    int lr, end;   /* current local replica, one past its last */
    long off, cnt; /* the current replica's slice */
    long i;        /* examples of it done */
    int n;         /* examples in flight this round */
} gpu_cursor;

/* This rank's replicas' slices of total examples (replica r of the cluster:
 * slice(total, replicas, r)) on the devices, in rounds of one micro-batch per
 * device. base: the example ids the slices index (t->order + the step's start),
 * or NULL for ids equal to positions (evaluation). Training: forward and
 * backward into the devices' gradients, scaled by 1 / gb; otherwise forward
 * only. Adds the summed loss and the correct count into ls and corr. */
static mw_status gpu_run(trainer *t, const mw_dataset *data, long total, const uint32_t *base,
                         int training, long gb, uint64_t dseed, double *ls, double *corr)
{
    const int rpw = t->o->replicas_per_worker, nrep = t->world * rpw, rpd = rpw / t->ngpu;
    const mw_model *m = &t->model;
    gpu_cursor c[MAX_GPUS];
    for (int d = 0; d < t->ngpu; d++) {
        c[d].lr = d * rpd, c[d].end = (d + 1) * rpd, c[d].i = 0;
        slice(total, nrep, t->rank * rpw + c[d].lr, &c[d].off, &c[d].cnt);
    }
    for (;;) {
        int busy = 0;
        for (int d = 0; d < t->ngpu; d++) {
            gpu_dev *g = &t->gd[d];
            gpu_cursor *q = &c[d];
            while (q->lr < q->end && q->i >= q->cnt)
                if (++q->lr < q->end) {
                    q->i = 0;
                    slice(total, nrep, t->rank * rpw + q->lr, &q->off, &q->cnt);
                }
            q->n = 0;
            if (q->lr >= q->end)
                continue;
            int n = q->cnt - q->i < g->ws.max_n ? (int)(q->cnt - q->i) : g->ws.max_n;
            MW_TRY(gpu_stage(t, g, data, base ? base + q->off + q->i : NULL,
                             (uint32_t)(q->off + q->i), n, training, dseed));
            mw_model_forward(m, &t->kt, &g->k, &g->ws, n);
            if (training)
                mw_model_backward(m, &t->kt, &g->k, &g->ws, g->grads, n, 1.0f / (float)gb);
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
        for (int d = 0; d < t->ngpu; d++) {
            gpu_dev *g = &t->gd[d];
            if (c[d].n == 0)
                continue;
            MW_TRY(mw_cuda_sync(&g->k));
            for (int j = 0; j < c[d].n; j++)
                *ls += g->h_loss[j];
            *corr += mw_model_correct_host(m, g->h_prob, g->h_labels, c[d].n);
        }
    }
}

/* This rank's examples of a total over every replica of the cluster. */
static long rank_examples(const trainer *t, long total)
{
    const int rpw = t->o->replicas_per_worker, nrep = t->world * rpw;
    long sum = 0, off, cnt;
    for (int lr = 0; lr < rpw; lr++) {
        slice(total, nrep, t->rank * rpw + lr, &off, &cnt);
        sum += cnt;
    }
    return sum;
}

static float opt_rate(trainer *t);
static void opt_apply(const trainer *t, const mw_kctx *k, float *p, float *m1, float *m2,
                      const float *g, float rate);

/* One training step on the devices: this rank's replica slices of the global
 * batch (start, gb), the weight penalty, the gradient sum over every device of
 * the cluster, the optimizer on each device. */
static mw_status gpu_step(trainer *t, long start, long gb, uint64_t dseed, double sums[3])
{
    const int rpw = t->o->replicas_per_worker, nrep = t->world * rpw;
    const size_t count = t->model.params.count;
    for (int d = 0; d < t->ngpu; d++)
        MW_TRY(mw_cuda_zero(t->gd[d].grads, count * sizeof(float), &t->gd[d].k));
    double ls = 0, corr = 0;
    MW_TRY(gpu_run(t, &t->train, gb, t->order + start, 1, gb, dseed, &ls, &corr));
    sums[0] += ls / (double)gb;
    sums[1] += corr;
    sums[2] += (double)rank_examples(t, gb);
    /* the penalty scaled by the device's share of the replicas (its replicas /
     * all replicas), as tf.nn.scale_regularization_loss: the sum holds it once */
    const float share = (float)(rpw / t->ngpu) / (float)nrep;
    const int reg = mw_model_has_regularizers(&t->model);
    for (int d = 0; d < t->ngpu && reg; d++) {
        gpu_dev *g = &t->gd[d];
        MW_TRY(mw_cuda_zero(g->reg, sizeof(double), &g->k));
        mw_model_regularize(&t->model, &t->kt, &g->k, g->params, g->grads, g->reg, share);
        MW_TRY(mw_cuda_download(g->h_reg, g->reg, sizeof(double), &g->k));
    }
    if (t->nccl) {
        float *bufs[MAX_GPUS];
        void *streams[MAX_GPUS];
        for (int d = 0; d < t->ngpu; d++) {
            bufs[d] = t->gd[d].grads;
            streams[d] = mw_cuda_stream(&t->gd[d].k);
        }
        /* returns with the streams idle: the penalty downloads are done too */
        MW_TRY(mw_nccl_allreduce(t->nccl, bufs, count, streams, t->global_step));
    } else {
        MW_TRY(gpu_sync_all(t));
    }
    for (int d = 0; d < t->ngpu && reg; d++)
        sums[0] += *t->gd[d].h_reg;
    const float rate = opt_rate(t);
    for (int d = 0; d < t->ngpu; d++) {
        gpu_dev *g = &t->gd[d];
        opt_apply(t, &g->k, g->params, g->m1, g->m2, g->grads, rate);
    }
    for (int d = 0; d < t->ngpu; d++)
        MW_TRY(mw_cuda_last_status(&t->gd[d].k));
    return MW_OK;
}

/* Forward over this rank's share of the first ntest test examples on the
 * devices; adds loss, correct and count into sums. */
static mw_status gpu_evaluate(trainer *t, long ntest, double sums[3])
{
    double ls = 0, corr = 0;
    MW_TRY(gpu_run(t, &t->test, ntest, NULL, 0, 0, 0, &ls, &corr));
    sums[0] += ls, sums[1] += corr, sums[2] += (double)rank_examples(t, ntest);
    return MW_OK;
}

/* The local half of set-up: nothing here talks to other ranks. */
static mw_status setup_local(trainer *t, const mw_train_opts *opts, const mw_topology *topo)
{
    t->opts = *opts;
    mw_train_opts *o = &t->opts;
    t->o = o;
    t->topo = topo;
    t->comm = topo->train;
    t->rank = topo->rank;
    t->world = topo->ntrain;
    t->local_size = topo->local_size > 0 ? topo->local_size : 1;
    t->seed = o->seed;
    t->saved_step = -1;
    t->model_json = "";

    /* --device: gpu (or auto with a device) trains on this rank's share of its
     * node's GPUs; auto without a device trains on the CPU and says why; gpu
     * without one fails */
    int use_gpu = 0, first_dev = 0, ndev = 0;
    char why[512] = "";
    MW_TRY(mw_cuda_select(o->device, topo->local_rank, topo->local_size > 0 ? topo->local_size : 1,
                          &use_gpu, &first_dev, &ndev, why, sizeof why));
    if (t->rank == 0 && why[0])
        mw_log_info("%s", why);
    if (o->export_path)
        use_gpu = 0; /* export reads a checkpoint and writes a file: no device needed */
    /* replicas per worker: by default one per GPU the rank drives (as
     * MirroredStrategy), one on the CPU; on GPUs, an equal number per device */
    if (o->replicas_per_worker <= 0)
        o->replicas_per_worker = use_gpu ? ndev : 1;
    else if (use_gpu && o->replicas_per_worker % ndev != 0)
        return mw_err(MW_EINVAL, "--replicas-per-worker %d: this rank drives %d GPUs (CUDA "
                      "devices %d..%d) and each runs the same number of replicas: give a "
                      "multiple of %d, or leave the flag out for one replica per GPU",
                      o->replicas_per_worker, ndev, first_dev, first_dev + ndev - 1, ndev);
    int threads = o->threads > 0 ? o->threads : cpu_count() / t->local_size;
    if (threads < 1)
        threads = 1;
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    /* more threads than examples per replica would leave threads idle */
    if (threads > o->batch_per_replica)
        threads = o->batch_per_replica;
    if (use_gpu) /* the device runs the micro-batches one after another */
        threads = 1;
    t->nthreads = threads;
    if (strcmp(o->backend, "ref") == 0)
        mw_kernels_init_ref(&t->kt);
    else
        mw_kernels_init_cpu(&t->kt);
    mw_kernels_cpu_set_threads(threads);
    t->k.nthreads = threads;
#ifdef _OPENMP
    omp_set_max_active_levels(1); /* kernels inside a thread's slice stay sequential */
#endif

    /* export needs no data: the model's input is Fashion-MNIST's 28x28x1 */
    int rows = 28, cols = 28;
    if (!o->export_path) {
        MW_TRY(mw_dataset_load_dir(&t->train, &t->test, o->data_dir, 10));
        rows = (int)t->train.rows, cols = (int)t->train.cols;
    }
    const int h = o->export_path ? 0 : rows, w = o->export_path ? 0 : cols;
    if (o->model_path)
        MW_TRY(mw_keras_load_file(&t->model, o->model_path, h, w, o->export_path ? 0 : 1, 10));
    else if (t->saved_model)
        MW_TRY(mw_keras_load(&t->model, t->saved_model, strlen(t->saved_model),
                             "the model saved in the checkpoint", h, w, o->export_path ? 0 : 1,
                             10));
    else
        MW_TRY(mw_model_build_tutorial(&t->model, rows, cols, 1, 10));
    MW_TRY(mw_model_finalize(&t->model, (size_t)t->world * MW_ARENA_ALIGN));
    if (t->model.source) /* the model description travels in every checkpoint */
        t->model_json = t->model.source;
    mw_model_init_params(&t->model, o->seed);
    size_t count = t->model.params.count;
    mw_arena *as[2] = {&t->m1, &t->m2};
    for (int i = 0; i < 2; i++) {
        mw_arena_init(as[i]);
        mw_arena_reserve(as[i], count);
        MW_TRY(mw_arena_alloc(as[i]));
    }
    int per_thread = (o->batch_per_replica + threads - 1) / threads;
    if (per_thread > o->micro_batch)
        per_thread = o->micro_batch;
    for (int i = 0; i < threads; i++) {
        MW_TRY(mw_model_ws_alloc(&t->ws[i], &t->model, per_thread));
        t->tk[i].nthreads = 1;
        t->tk[i].ws = t->ws[i].scratch;
        t->tk[i].ws_count = t->ws[i].scratch_count;
        if (i > 0 && !(t->tgrads[i] = mw_alloc_aligned(count * sizeof(float))))
            return mw_err(MW_ENOMEM, "cannot allocate per-thread gradients");
    }
    t->order = malloc(sizeof *t->order * (t->train.count ? t->train.count : 1));
    if (!t->order)
        return mw_err(MW_ENOMEM, "cannot allocate the epoch order");
    /* a device runs a replica's whole slice at once: micro-batches are for the CPU's caches */
    if (use_gpu)
        MW_TRY(gpu_setup(t, first_dev, ndev,
                         o->batch_per_replica < GPU_MAX_BATCH ? o->batch_per_replica
                                                              : GPU_MAX_BATCH));
    return MW_OK;
}

/* Steps per epoch: from the data set, the same on every rank unless the
 * ranks read different files; agreed below. */
static long steps_per_epoch(const trainer *t)
{
    const long GB = (long)t->o->batch_per_replica * t->world * t->o->replicas_per_worker;
    long steps = ((long)t->train.count + GB - 1) / GB;
    if (t->o->steps_per_epoch > 0 && t->o->steps_per_epoch < steps)
        steps = t->o->steps_per_epoch;
    return steps;
}


/* ---- checkpoints ---- */

static int checkpointing(const mw_train_opts *o)
{
    return o->checkpoint_every_epochs > 0 || o->checkpoint_every_steps > 0;
}

/* mkdir -p */
static mw_status make_dirs(const char *dir, const char *what)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return mw_err(MW_EIO, "%s %s: path too long", what, dir);
    for (char *p = path + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(path, 0777) != 0 && errno != EEXIST)
                return mw_err(MW_EIO, "%s %s: cannot create %s: %s", what, dir, path,
                              strerror(errno));
            *p = c;
            if (!c)
                break;
        }
    }
    return MW_OK;
}

/* The chief checks the checkpoint directory before training, so an
 * unwritable one is an error at start-up instead of after the first epoch. */
static mw_status check_writable(const char *dir)
{
    MW_TRY(make_dirs(dir, "--checkpoint-dir"));
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.mwtrain-probe-%d", dir, (int)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return mw_err(MW_EIO, "--checkpoint-dir %s: not writable: %s", dir, strerror(errno));
    close(fd);
    unlink(probe);
    return MW_OK;
}

static int dir_has_checkpoints(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)))
        found = !strcmp(e->d_name, MW_CKPT_INDEX) || !strncmp(e->d_name, "ckpt-", 5);
    closedir(d);
    return found;
}

/* Broadcast n bytes from rank 0 of comm in pieces MPI's int counts can hold. */
static mw_status bcast_bytes(MPI_Comm comm, const mw_wait_ctx *w, void *buf, size_t n)
{
    for (size_t off = 0; off < n; off += (size_t)1 << 30) {
        size_t k = n - off < ((size_t)1 << 30) ? n - off : ((size_t)1 << 30);
        MW_TRY(mw_comm_bcast(w, (char *)buf + off, (int)k, MPI_BYTE, 0, comm));
    }
    return MW_OK;
}

/* Rank 0: the latest valid checkpoint of dir, serialized into *buf (*n bytes) for
 * the broadcast, and (model non-NULL) its model text into *model (NULL when it
 * names none); logs which one. */
static mw_status read_latest(const char *dir, void **buf, size_t *n, char **model)
{
    mw_ckpt c;
    mw_ckpt_init(&c);
    char *path = NULL;
    mw_status rc = mw_ckpt_load_latest(dir, &c, &path);
    if (rc == MW_OK)
        rc = mw_ckpt_serialize(&c, buf, n);
    if (rc == MW_OK) {
        mw_log_info("restoring %s (epoch %d, step %ld of it, %ld steps in all)", path, c.epoch,
                    c.step_in_epoch, c.global_step);
        if (model && c.model_json && c.model_json[0]) {
            *model = c.model_json;
            c.model_json = NULL;
            mw_log_info("model: the one saved in %s (no --model given)", path);
        }
    }
    free(path);
    mw_ckpt_free(&c);
    return rc;
}

/* Without --model, a checkpoint brings its own model: rank 0 of comm reads the
 * latest checkpoint of the directory (keeping it in t->latest for restore, so
 * the model and the weights come from the same file, read once) and every rank
 * receives its model text into t->saved_model (left NULL when there is no
 * checkpoint yet, or it names no model: then the tutorial CNN). Before
 * setup_local; collective over comm. A directory whose checkpoints are all
 * unreadable is the error the restore would give. */
static mw_status fetch_saved_model(trainer *t, const mw_train_opts *o, MPI_Comm comm)
{
    if (o->model_path)
        return MW_OK;
    int me = 0;
    MW_MPI(MPI_Comm_rank(comm, &me), "checkpoint model");
    long len = 0;
    char *text = NULL;
    mw_status rc = MW_OK;
    if (me == 0 && dir_has_checkpoints(o->checkpoint_dir)) {
        rc = read_latest(o->checkpoint_dir, &t->latest, &t->latest_len, &text);
        len = text ? (long)strlen(text) : 0;
    }
    rc = mw_agree(comm, rc, NULL);
    mw_wait_ctx w = {"broadcast of the checkpoint's model", -1, o->collective_timeout};
    if (rc == MW_OK)
        rc = mw_comm_bcast(&w, &len, 1, MPI_LONG, 0, comm);
    if (rc == MW_OK && len > 0 && me != 0 && !(text = malloc((size_t)len + 1)))
        rc = mw_err(MW_ENOMEM, "checkpoint model of %ld bytes: out of memory", len);
    rc = mw_agree(comm, rc, NULL);
    if (rc == MW_OK)
        rc = bcast_bytes(comm, &w, text, (size_t)len);
    if (rc != MW_OK || len == 0) {
        free(text);
        return rc;
    }
    text[len] = '\0';
    t->saved_model = text;
    return MW_OK;
}

enum { TAG_EVAL_HDR = 71, TAG_EVAL_DATA = 72 };

/* Chief: wait until the evaluator has taken the previous message. */
static mw_status eval_wait(trainer *t)
{
    if (t->eval_req[0] == MPI_REQUEST_NULL && t->eval_req[1] == MPI_REQUEST_NULL)
        return MW_OK;
    mw_wait_ctx w = {"sending a checkpoint to the evaluator", t->global_step,
                     t->o->collective_timeout};
    int peers[2] = {t->eval_rank, t->eval_rank};
    MW_TRY(mw_comm_wait(&w, t->eval_req, 2, peers));
    free(t->eval_buf);
    t->eval_buf = NULL;
    return MW_OK;
}

/* Chief: hand a checkpoint (number >= 1, its bytes; owned from here on) or
 * the end of training (number -1) to the evaluator task, over MPI: the
 * evaluator needs no shared filesystem either. */
static mw_status eval_send(trainer *t, long number, void *bytes, size_t nbytes)
{
    MW_TRY(eval_wait(t));
    if (nbytes > (size_t)INT_MAX) {
        free(bytes);
        return mw_err(MW_EINTERNAL, "checkpoint of %zu bytes: too large to send", nbytes);
    }
    t->eval_buf = bytes;
    t->eval_hdr[0] = number, t->eval_hdr[1] = (long)nbytes;
    MW_MPI(MPI_Isend(t->eval_hdr, 2, MPI_LONG, t->eval_rank, TAG_EVAL_HDR, t->topo->world,
                     &t->eval_req[0]), "sending to the evaluator");
    MW_MPI(MPI_Isend(bytes ? bytes : t->eval_hdr, (int)nbytes, MPI_BYTE, t->eval_rank,
                     TAG_EVAL_DATA, t->topo->world, &t->eval_req[1]), "sending to the evaluator");
    return MW_OK;
}

/* Chief only, no collective: every rank holds the same weights. */
static mw_status save_checkpoint(trainer *t, int epochs_done, long step_in_epoch)
{
    const mw_train_opts *o = t->o;
    const size_t n = t->model.nparams;
    if (t->gpu) /* the device holds the current state */
        MW_TRY(gpu_download_state(t));
    mw_ckpt c;
    mw_ckpt_init(&c);
    mw_status rc = MW_OK;
    c.params = malloc(n * sizeof(float));
    c.slot1 = malloc(n * sizeof(float));
    c.slot2 = o->optimizer == MW_OPT_ADAM ? malloc(n * sizeof(float)) : NULL;
    c.model_json = strdup(t->model_json);
    if (!c.params || !c.slot1 || (o->optimizer == MW_OPT_ADAM && !c.slot2) || !c.model_json) {
        rc = mw_err(MW_ENOMEM, "checkpoint: out of memory");
        goto done;
    }
    c.nparams = c.nslots = n;
    mw_ckpt_pack(&t->model, c.params, t->model.params.data);
    mw_ckpt_pack(&t->model, c.slot1, t->m1.data);
    if (c.slot2)
        mw_ckpt_pack(&t->model, c.slot2, t->m2.data);
    snprintf(c.optimizer, sizeof c.optimizer, "%s", o->optimizer == MW_OPT_ADAM ? "adam" : "sgd");
    c.opt_step = t->adam_t;
    c.epoch = epochs_done;
    c.step_in_epoch = step_in_epoch;
    c.global_step = t->global_step;
    c.seed = t->seed;
    c.global_batch = (long)o->batch_per_replica * o->replicas_per_worker * t->world;
    c.learning_rate = o->learning_rate;
    int number = 0;
    rc = mw_ckpt_save(o->checkpoint_dir, &c, o->keep_checkpoints, &number);
    if (rc == MW_OK) {
        t->saved_step = t->global_step;
        mw_log_info("saved checkpoint %s/ckpt-%d (epoch %d, step %ld)", o->checkpoint_dir, number,
                    epochs_done + (step_in_epoch > 0), t->global_step);
    }
    if (rc == MW_OK && t->eval_rank >= 0) {
        void *bytes = NULL;
        size_t nbytes = 0;
        rc = mw_ckpt_serialize(&c, &bytes, &nbytes);
        if (rc == MW_OK)
            rc = eval_send(t, number, bytes, nbytes);
    }
done:
    mw_ckpt_free(&c);
    return rc;
}

/* Take over a checkpoint's state; every rank runs this on the same bytes. */
static mw_status apply_checkpoint(trainer *t, const mw_ckpt *c, const char *name,
                                  int weights_only)
{
    const mw_train_opts *o = t->o;
    const long gb = (long)o->batch_per_replica * o->replicas_per_worker * t->world;
    if (c->nparams != t->model.nparams)
        return mw_err(MW_ECKPT, "%s holds %zu parameters; the model has %zu (another model?)",
                      name, c->nparams, t->model.nparams);
    if (weights_only) {
        mw_ckpt_unpack(&t->model, t->model.params.data, c->params);
        t->start_epoch = c->epoch;
        t->global_step = c->global_step;
        return t->gpu ? gpu_upload_state(t, 1) : MW_OK;
    }
    const char *opt = o->optimizer == MW_OPT_ADAM ? "adam" : "sgd";
    if (strcmp(c->optimizer, opt) != 0)
        return mw_err(MW_ECKPT, "%s was written with --optimizer %s; this run uses %s", name,
                      c->optimizer, opt);
    if (c->step_in_epoch > 0 && c->global_batch != gb)
        return mw_err(MW_ECKPT,
                      "%s was saved in the middle of an epoch with a global batch of %ld; this "
                      "run's global batch is %ld (batch per replica x replicas): use the same "
                      "global batch, or resume from an epoch-boundary checkpoint",
                      name, c->global_batch, gb);
    if (!c->slot1 || c->nslots != c->nparams || (o->optimizer == MW_OPT_ADAM && !c->slot2))
        return mw_err(MW_ECKPT, "%s has no optimizer state for %s", name, opt);
    mw_ckpt_unpack(&t->model, t->model.params.data, c->params);
    mw_ckpt_unpack(&t->model, t->m1.data, c->slot1);
    if (c->slot2)
        mw_ckpt_unpack(&t->model, t->m2.data, c->slot2);
    t->adam_t = c->opt_step;
    t->start_epoch = c->epoch;
    t->start_step = c->step_in_epoch;
    t->global_step = c->global_step;
    t->saved_step = c->global_step;
    t->seed = c->seed;
    return t->gpu ? gpu_upload_state(t, 0) : MW_OK;
}

/* Restore the latest checkpoint: read on the chief, broadcast, applied by
 * every rank; no shared filesystem needed. required = 0 (train --resume):
 * a directory without any checkpoint starts from scratch; a directory whose
 * checkpoints are all bad is an error either way. Collective over t->comm. */
static mw_status restore(trainer *t, int required, int weights_only, int *restored)
{
    const char *dir = t->o->checkpoint_dir;
    *restored = 0;
    long hdr[2] = {0, 0}; /* bytes, found */
    void *buf = NULL;
    mw_status rc = MW_OK;
    if (t->rank == 0 && t->latest) { /* read already, for its model */
        buf = t->latest;
        hdr[0] = (long)t->latest_len, hdr[1] = 1;
        t->latest = NULL;
    } else if (t->rank == 0) {
        if (!dir_has_checkpoints(dir)) {
            if (required)
                rc = mw_err(MW_ECKPT, "no checkpoint in %s (train with --checkpoint-dir %s "
                            "first)", dir, dir);
            else
                mw_log_info("--resume: no checkpoint in %s yet; starting from scratch", dir);
        } else {
            size_t n = 0;
            rc = read_latest(dir, &buf, &n, NULL);
            hdr[0] = (long)n, hdr[1] = rc == MW_OK;
        }
    }
    rc = mw_agree(t->comm, rc, NULL);
    mw_wait_ctx w = {"checkpoint broadcast", -1, t->o->collective_timeout};
    if (rc == MW_OK)
        rc = mw_comm_bcast(&w, hdr, 2, MPI_LONG, 0, t->comm);
    if (rc != MW_OK || !hdr[1]) {
        free(buf);
        return rc;
    }
    if (t->rank != 0 && !(buf = malloc((size_t)hdr[0])))
        rc = mw_err(MW_ENOMEM, "checkpoint of %ld bytes: out of memory", hdr[0]);
    rc = mw_agree(t->comm, rc, NULL);
    if (rc == MW_OK)
        rc = bcast_bytes(t->comm, &w, buf, (size_t)hdr[0]);
    mw_ckpt c;
    mw_ckpt_init(&c);
    if (rc == MW_OK)
        rc = mw_ckpt_read_buffer(&c, buf, (size_t)hdr[0], "checkpoint");
    if (rc == MW_OK)
        rc = apply_checkpoint(t, &c, "the latest checkpoint", weights_only);
    mw_ckpt_free(&c);
    free(buf);
    rc = mw_agree(t->comm, rc, NULL);
    *restored = rc == MW_OK;
    return rc;
}

/* The smallest and largest of every training rank's v. */
static mw_status int_range(const trainer *t, int v, int *lo, int *hi, const char *what)
{
    int in[2] = {-v, v}, out[2];
    MW_MPI(MPI_Allreduce(in, out, 2, MPI_INT, MPI_MAX, t->comm), what);
    *lo = -out[0], *hi = out[1];
    return MW_OK;
}

/* The collective half of set-up, entered by every training rank after the
 * local half succeeded everywhere. */
static mw_status setup_collective(trainer *t)
{
    const mw_train_opts *o = t->o;
    const size_t count = t->model.params.count;
    /* Every rank on the same kind of device: GPU ranks sum with NCCL, CPU
     * ranks with the host all-reduce, and the two cannot meet. */
    int lo, hi;
    MW_TRY(int_range(t, t->gpu, &lo, &hi, "device agreement"));
    if (lo != hi)
        return mw_err(MW_EDEVICE, "some ranks train on a GPU and others on the CPU (--device "
                      "auto on nodes with and without GPUs): use --device cpu, or GPUs on "
                      "every node");
    /* and the same replicas per rank (one per GPU by default: GPUs per rank may differ) */
    MW_TRY(int_range(t, o->replicas_per_worker, &lo, &hi, "replica agreement"));
    if (lo != hi)
        return mw_err(MW_EINVAL, "ranks run different numbers of replicas (%d to %d): with "
                      "--device gpu a rank runs one per GPU it drives by default, so give every "
                      "rank the same number of GPUs, or set --replicas-per-worker",
                      lo, hi);
    /* Every rank must run the same number of steps, or the all-reduces of the
     * last steps would wait forever. */
    long mine = steps_per_epoch(t);
    long *all = calloc((size_t)t->world, sizeof *all);
    if (!all)
        return mw_err(MW_ENOMEM, "out of memory");
    MW_MPI(MPI_Allgather(&mine, 1, MPI_LONG, all, 1, MPI_LONG, t->comm), "steps agreement");
    for (int r = 1; r < t->world; r++)
        if (all[r] != all[0]) {
            mw_status e = mw_err(MW_EDATA,
                                 "ranks disagree on the steps per epoch: rank 0 has %ld, rank "
                                 "%d has %ld (their training sets differ: check --data-dir on "
                                 "every node)",
                                 all[0], r, all[r]);
            free(all);
            return e;
        }
    free(all);
    if (t->gpu) {
        /* NCCL over every GPU of the training ranks; agreed inside mw_nccl_open */
        if (t->world * t->ngpu > 1) {
            int ordinals[MAX_GPUS];
            for (int d = 0; d < t->ngpu; d++)
                ordinals[d] = t->gd[d].ordinal;
            MW_TRY(mw_nccl_open(&t->nccl, t->topo->node_comm, t->topo->cross, t->ngpu, ordinals,
                                o->collective_timeout));
        }
    } else {
        MW_TRY(mw_allreduce_open(&t->ar, t->comm, t->topo->node_comm, t->topo->cross, count,
                                 o->allreduce, o->collective_timeout));
        /* Keep the gradients in the shared slot when there is one: no copy in. */
        t->tgrads[0] = t->grads.data = mw_allreduce_buffer(&t->ar);
        t->grads.count = count;
        if (!t->grads.data) {
            t->own_grads = mw_alloc_aligned(count * sizeof(float));
            if (!t->own_grads)
                return mw_err(MW_ENOMEM, "cannot allocate the gradients");
            t->tgrads[0] = t->grads.data = t->own_grads;
        }
    }
    /* Every replica starts from the chief's weights. */
    mw_wait_ctx w = {"broadcast of the initial weights", -1, o->collective_timeout};
    MW_TRY(mw_comm_bcast(&w, t->model.params.data, (int)count, MPI_FLOAT, 0, t->comm));
    if (t->gpu) {
        MW_TRY(gpu_upload_state(t, 0));
        if (t->rank == 0) {
            if (t->ngpu == 1)
                mw_log_info("training on CUDA device %d (%s)", t->gd[0].ordinal,
                            mw_cuda_version_string());
            else
                mw_log_info("training on CUDA devices %d-%d as %d replicas (%s)",
                            t->gd[0].ordinal, t->gd[t->ngpu - 1].ordinal,
                            o->replicas_per_worker, mw_cuda_version_string());
            mw_log_info("%d rank(s) on %d node(s) x %d replica(s), global batch %d, %d GPU(s) "
                        "per rank, kernels %s, all-reduce %s, %zu parameters",
                        t->world, t->topo->nnodes, o->replicas_per_worker,
                        o->batch_per_replica * o->replicas_per_worker * t->world, t->ngpu,
                        t->kt.name, t->nccl ? mw_nccl_version_string() : "none (one GPU)",
                        t->model.nparams);
        }
        return MW_OK;
    }
    if (t->rank == 0)
        mw_log_info("%d rank(s) on %d node(s) x %d replica(s), global batch %d, %d thread(s) "
                    "per rank, kernels %s (%s), all-reduce %s, %zu parameters",
                    t->world, t->topo->nnodes, o->replicas_per_worker,
                    o->batch_per_replica * o->replicas_per_worker * t->world, t->nthreads,
                    t->kt.name, mw_kernels_cpu_blas(), mw_ar_algo_name(t->ar.requested),
                    t->model.nparams);
    return MW_OK;
}

static void teardown(trainer *t)
{
    gpu_teardown(t);
    free(t->order);
    mw_dataset_free(&t->train);
    mw_dataset_free(&t->test);
    for (int i = 0; i < MAX_THREADS; i++) {
        mw_model_ws_free(&t->ws[i]);
        if (i > 0)
            free(t->tgrads[i]);
        t->tgrads[i] = NULL;
    }
    mw_summary_close(&t->sum);
    mw_allreduce_close(&t->ar);
    free(t->own_grads);
    t->grads.data = NULL;
    mw_arena_free(&t->m1);
    mw_arena_free(&t->m2);
    mw_model_free(&t->model);
    free(t->saved_model);
    free(t->latest);
    t->saved_model = NULL;
    t->latest = NULL;
}

/* A zeroed trainer whose parts are all in their init state (teardown-safe). */
static trainer *trainer_new(void)
{
    trainer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    mw_dataset_init(&t->train);
    mw_dataset_init(&t->test);
    mw_allreduce_init(&t->ar);
    mw_summary_init(&t->sum);
    for (int i = 0; i < MAX_THREADS; i++)
        mw_model_ws_init(&t->ws[i]);
    t->eval_rank = -1;
    t->eval_req[0] = t->eval_req[1] = MPI_REQUEST_NULL;
    return t;
}

/* The optimizer's rate for the next update (Adam: its bias-corrected lr_t, counting the
 * update); once per step, however many copies of the state apply it. */
static float opt_rate(trainer *t)
{
    const mw_train_opts *o = t->o;
    if (o->optimizer != MW_OPT_ADAM)
        return (float)o->learning_rate;
    t->adam_t++;
    return (float)(o->learning_rate * sqrt(1.0 - pow(o->beta2, (double)t->adam_t)) /
                   (1.0 - pow(o->beta1, (double)t->adam_t)));
}

/* The optimizer on arrays in the memory k's kernels work on. */
static void opt_apply(const trainer *t, const mw_kctx *k, float *p, float *m1, float *m2,
                      const float *g, float rate)
{
    const mw_train_opts *o = t->o;
    size_t count = t->model.params.count;
    if (o->optimizer == MW_OPT_ADAM)
        t->kt.adam(k, p, m1, m2, g, count, rate, (float)o->beta1, (float)o->beta2,
                   (float)o->epsilon);
    else
        t->kt.sgd(k, p, m1, g, count, rate, (float)o->momentum);
}

static void apply_update(trainer *t)
{
    float rate = opt_rate(t);
    opt_apply(t, &t->k, t->model.params.data, t->m1.data, t->m2.data, t->grads.data, rate);
}

/* One replica's slice of cnt examples of data on the CPU, cut again among the
 * threads (each with its own workspace and, training, its own gradients).
 * ids: the slice's example ids, or NULL for first, first+1, ... (evaluation).
 * Training: forward and backward (dropout keyed by the example ids, gradients
 * scaled by 1 / gb) into the per-thread gradients; otherwise forward only.
 * Adds each thread's loss sum / div, correct count and examples into sums. */
static void cpu_run(trainer *t, const mw_dataset *data, const uint32_t *ids, long first,
                    long cnt, int training, long gb, uint64_t dseed, double div, double sums[3])
{
    const int T = t->nthreads;
#pragma omp parallel num_threads(T)
    {
        int th = 0;
#ifdef _OPENMP
        th = omp_get_thread_num();
#endif
        mw_model_ws *ws = &t->ws[th];
        long toff, tcnt;
        slice(cnt, T, th, &toff, &tcnt);
        uint32_t pos[1024]; /* the ids when they are positions */
        double ls = 0, corr = 0;
        /* micro-batches of at most ws->max_n keep the activations in cache */
        for (long i = 0; i < tcnt;) {
            int n = tcnt - i < ws->max_n ? (int)(tcnt - i) : ws->max_n;
            const uint32_t *mb = ids ? ids + toff + i : pos;
            if (!ids) {
                n = n < 1024 ? n : 1024;
                for (int j = 0; j < n; j++)
                    pos[j] = (uint32_t)(first + toff + i + j);
            }
            mw_dataset_batch(data, ws->act[0], ws->labels, mb, n);
            /* Dropout masks are keyed by example id: the same for any layout */
            ws->training = training;
            ws->dropout_seed = training ? dseed : 0;
            ws->example_ids = training ? mb : NULL;
            mw_model_forward(&t->model, &t->kt, &t->tk[th], ws, n);
            if (training)
                mw_model_backward(&t->model, &t->kt, &t->tk[th], ws, t->tgrads[th], n,
                                  1.0f / (float)gb);
            for (int j = 0; j < n; j++)
                ls += ws->loss[j];
            corr += mw_model_correct(&t->model, ws, n);
            i += n;
        }
        t->tsum[th][0] = ls, t->tsum[th][1] = corr, t->tsum[th][2] = (double)tcnt;
    }
    for (int th = 0; th < T; th++) {
        sums[0] += t->tsum[th][0] / div;
        sums[1] += t->tsum[th][1];
        sums[2] += t->tsum[th][2];
    }
}

/* Forward over the test set, sharded over all replicas and then threads;
 * returns the reduced mean loss and accuracy. */
static mw_status evaluate(trainer *t, double *loss, double *acc)
{
    const int rpw = t->o->replicas_per_worker, nrep = t->world * rpw;
    long ntest = t->test.count;
    if (t->o->test_examples > 0 && t->o->test_examples < ntest)
        ntest = t->o->test_examples;
    double sums[3] = {0, 0, 0}; /* loss, correct, count */
    if (t->gpu)
        MW_TRY(gpu_evaluate(t, ntest, sums));
    for (int lr = 0; lr < (t->gpu ? 0 : rpw); lr++) {
        long off, cnt;
        slice(ntest, nrep, t->rank * rpw + lr, &off, &cnt);
        cpu_run(t, &t->test, NULL, off, cnt, 0, 0, 0, 1.0, sums);
    }
    mw_wait_ctx w = {"evaluation metrics all-reduce", -1, t->o->collective_timeout};
    MPI_Request req;
    MW_MPI(MPI_Iallreduce(MPI_IN_PLACE, sums, 3, MPI_DOUBLE, MPI_SUM, t->comm, &req), w.op);
    MW_TRY(mw_comm_wait(&w, &req, 1, NULL));
    *loss = sums[2] > 0 ? sums[0] / sums[2] : 0.0;
    *acc = sums[2] > 0 ? sums[1] / sums[2] : 0.0;
    return MW_OK;
}

/* grads = sum of the per-thread gradients, in thread order. */
static void reduce_threads(trainer *t)
{
    const int T = t->nthreads;
    const size_t count = t->model.params.count;
    if (T == 1)
        return;
    float *g = t->grads.data;
#pragma omp parallel for num_threads(T) schedule(static)
    for (size_t i = 0; i < count; i++) {
        float s = g[i];
        for (int th = 1; th < T; th++)
            s += t->tgrads[th][i];
        g[i] = s;
    }
}

/* The parameters tensor by tensor in model order (Keras layouts), without
 * the arena's alignment and shard padding: the same bytes for any layout. */
static mw_status dump_weights(const trainer *t, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return mw_err(MW_EIO, "--dump-weights %s: cannot open for writing", path);
    size_t want = 0, n = 0;
    for (int i = 0; i < t->model.nlayers; i++) {
        const mw_layer *l = &t->model.layers[i];
        n += fwrite(t->model.params.data + l->w_off, sizeof(float), l->w_count, f);
        n += fwrite(t->model.params.data + l->b_off, sizeof(float), l->b_count, f);
        want += l->w_count + l->b_count;
    }
    if (fclose(f) != 0 || n != want)
        return mw_err(MW_EIO, "--dump-weights %s: write failed", path);
    return MW_OK;
}

/* Chief: the epoch's scalars to TensorBoard and metrics.csv. */
static mw_status write_summaries(trainer *t, int epoch, const mw_epoch_metrics *em)
{
    if (t->rank != 0 || !t->o->summary_dir[0])
        return MW_OK;
    static const char *const names[] = {"train/loss", "train/accuracy", "test/loss",
                                        "test/accuracy", "images_per_sec", "learning_rate"};
    const double v[] = {em->train_loss, em->train_acc, em->test_loss, em->test_acc,
                        em->images_per_sec, t->o->learning_rate};
    for (int i = 0; i < 6; i++)
        MW_TRY(mw_summary_scalar(&t->sum, names[i], t->global_step, v[i]));
    MW_TRY(mw_summary_row(&t->sum, t->global_step, epoch + 1, names, v, 6));
    return mw_summary_flush(&t->sum);
}

static mw_status train_epochs(trainer *t, mw_epoch_metrics *last)
{
    const mw_train_opts *o = t->o;
    const int rpw = o->replicas_per_worker, nrep = t->world * rpw;
    const long GB = (long)o->batch_per_replica * nrep, N = t->train.count;
    const long steps = steps_per_epoch(t);
    const size_t count = t->model.params.count;
    mw_progress_state prog;

    for (int epoch = t->start_epoch; epoch < o->epochs; epoch++) {
        mw_dataset_epoch_order(t->order, (uint32_t)N, t->seed, epoch);
        long first = epoch == t->start_epoch ? t->start_step : 0;
        double sums[3] = {0, 0, 0}; /* scaled loss, correct, examples (local) */
        double t0 = mw_now(), seen_local = 0;
        if (t->rank == 0)
            mw_progress_begin(&prog, stderr, (int)o->progress, o->progress_interval,
                              epoch + 1, o->epochs, (int)steps);
        for (long s = first; s < steps; s++) {
            long start = s * GB, gb = N - start < GB ? N - start : GB;
            const uint64_t dseed = mw_rng_hash(t->seed, 0x64726f70, (uint64_t)t->global_step);
            if (t->gpu) {
                MW_TRY(gpu_step(t, start, gb, dseed, sums));
            } else {
                for (int th = 0; th < t->nthreads; th++)
                    memset(t->tgrads[th], 0, count * sizeof(float));
                for (int lr = 0; lr < rpw; lr++) {
                    long off, cnt;
                    slice(gb, nrep, t->rank * rpw + lr, &off, &cnt);
                    cpu_run(t, &t->train, t->order + start + off, 0, cnt, 1, gb, dseed,
                            (double)gb, sums);
                }
                reduce_threads(t);
                /* regularization scaled by 1/replicas per replica (this rank's share),
                 * as tf.nn.scale_regularization_loss: the SUM holds it once */
                sums[0] +=
                    mw_model_regularization(&t->model, t->grads.data, (float)rpw / (float)nrep);
                t->ar.step = t->global_step;
                MW_TRY(mw_allreduce_sum(&t->ar, t->grads.data, count));
                apply_update(t);
            }
            t->global_step++;
            seen_local += (double)gb;
            if (t->rank == 0) {
                double el = mw_now() - t0;
                /* local replicas' share, scaled to an estimate of the global step loss */
                double est = sums[0] * nrep / rpw / (double)(s + 1 - first);
                mw_progress_update(&prog, (int)(s + 1), est, el > 0 ? seen_local / el : 0);
                if (o->checkpoint_every_steps > 0 && s + 1 < steps &&
                    t->global_step % o->checkpoint_every_steps == 0) {
                    mw_progress_end(&prog);
                    MW_TRY(save_checkpoint(t, epoch, s + 1));
                }
            }
        }
        double train_time = mw_now() - t0;
        if (t->rank == 0)
            mw_progress_end(&prog);
        mw_wait_ctx w = {"training metrics all-reduce", t->global_step, o->collective_timeout};
        MPI_Request req;
        MW_MPI(MPI_Iallreduce(MPI_IN_PLACE, sums, 3, MPI_DOUBLE, MPI_SUM, t->comm, &req), w.op);
        MW_TRY(mw_comm_wait(&w, &req, 1, NULL));
        mw_epoch_metrics em;
        em.train_loss = steps > first ? sums[0] / (double)(steps - first) : 0;
        em.train_acc = sums[2] > 0 ? sums[1] / sums[2] : 0;
        em.seconds = train_time;
        em.images_per_sec = train_time > 0 ? sums[2] / train_time : 0;
        MW_TRY(evaluate(t, &em.test_loss, &em.test_acc));
        if (t->rank == 0) {
            printf("Epoch %d, Loss: %.4f, Accuracy: %.2f, Test Loss: %.4f, Test Accuracy: %.2f, "
                   "Time: %.2f s, Images/s: %.0f\n",
                   epoch + 1, em.train_loss, 100 * em.train_acc, em.test_loss,
                   100 * em.test_acc, em.seconds, em.images_per_sec);
            fflush(stdout);
            MW_TRY(write_summaries(t, epoch, &em));
            /* the tutorial: after epochs 1, 3, 5, ... (zero-based epoch % 2 == 0), and
             * always after the last one, so a finished run can be evaluated and resumed */
            int every = o->checkpoint_every_epochs;
            if (checkpointing(o) && ((every > 0 && epoch % every == 0) || epoch + 1 == o->epochs))
                MW_TRY(save_checkpoint(t, epoch + 1, 0));
        }
        if (last)
            *last = em;
    }
    if (o->dump_weights && t->rank == 0) {
        if (t->gpu)
            MW_TRY(gpu_download_state(t));
        MW_TRY(dump_weights(t, o->dump_weights));
    }
    return MW_OK;
}


/* The evaluator task (TF_CONFIG `evaluator`): outside the training
 * communicator, it receives each checkpoint from the chief, evaluates it on
 * the whole test set (or --test-examples), prints the result and writes eval
 * summaries (<summary-dir>/eval), until the chief says training has finished. */
static mw_status run_evaluator(const mw_train_opts *o, const mw_topology *topo, int *mid_run)
{
    trainer *t = trainer_new();
    if (!t)
        return mw_err(MW_ENOMEM, "out of memory");
    /* --resume without --model: the checkpoint's model, on every task (the evaluator too) */
    mw_status rc = o->resume ? fetch_saved_model(t, o, topo->world) : MW_OK;
    if (rc == MW_OK)
        rc = setup_local(t, o, topo);
    /* evaluation here is a world of one */
    t->comm = MPI_COMM_SELF, t->rank = 0, t->world = 1;
    char dir[4200] = "";
    if (rc == MW_OK && o->summary_dir[0]) {
        snprintf(dir, sizeof dir, "%s/eval", o->summary_dir);
        rc = mw_summary_open(&t->sum, dir, o->resume);
    }
    rc = mw_agree(topo->world, rc, NULL); /* the trainers' set-up agreement */
    if (rc == MW_OK)
        rc = mw_agree(topo->world, MW_OK, NULL); /* does training start? */
    if (rc == MW_OK)
        mw_log_info("evaluator: waiting for checkpoints from the chief (evaluating on %s)",
                    t->gpu ? "the GPU" : "the CPU");
    while (rc == MW_OK) {
        long hdr[2];
        MPI_Status st;
        MW_TRY_GOTO(MPI_Recv(hdr, 2, MPI_LONG, 0, TAG_EVAL_HDR, topo->world, &st) == MPI_SUCCESS
                        ? MW_OK
                        : mw_err(MW_EMPI, "evaluator: receiving from the chief failed"),
                    rc, failed);
        char *buf = malloc(hdr[1] > 0 ? (size_t)hdr[1] : 1);
        if (!buf) {
            rc = mw_err(MW_ENOMEM, "evaluator: out of memory");
            goto failed;
        }
        if (MPI_Recv(buf, (int)hdr[1], MPI_BYTE, 0, TAG_EVAL_DATA, topo->world, &st) !=
            MPI_SUCCESS) {
            free(buf);
            rc = mw_err(MW_EMPI, "evaluator: receiving from the chief failed");
            goto failed;
        }
        if (hdr[0] < 0) {
            free(buf);
            mw_log_info("evaluator: training has finished");
            break;
        }
        char name[64];
        snprintf(name, sizeof name, "ckpt-%ld", hdr[0]);
        mw_ckpt c;
        mw_ckpt_init(&c);
        rc = mw_ckpt_read_buffer(&c, buf, (size_t)hdr[1], name);
        free(buf);
        if (rc == MW_OK)
            rc = apply_checkpoint(t, &c, name, 1);
        mw_ckpt_free(&c);
        double loss = 0, acc = 0;
        if (rc == MW_OK)
            rc = evaluate(t, &loss, &acc);
        if (rc != MW_OK)
            goto failed;
        printf("Evaluator: %s (epoch %d, step %ld), Test Loss: %.4f, Test Accuracy: %.2f\n",
               name, t->start_epoch, t->global_step, loss, 100 * acc);
        fflush(stdout);
        if (dir[0]) {
            static const char *const names[] = {"eval/loss", "eval/accuracy"};
            const double v[] = {loss, acc};
            for (int i = 0; i < 2 && rc == MW_OK; i++)
                rc = mw_summary_scalar(&t->sum, names[i], t->global_step, v[i]);
            if (rc == MW_OK)
                rc = mw_summary_row(&t->sum, t->global_step, t->start_epoch, names, v, 2);
            if (rc == MW_OK)
                rc = mw_summary_flush(&t->sum);
            if (rc != MW_OK)
                goto failed;
        }
    }
    teardown(t);
    free(t);
    return rc;
failed:
    *mid_run = 1; /* the trainers are past their agreements: end the job */
    return rc;
}

mw_status mw_train_run(const mw_train_opts *o, const mw_topology *topo, mw_epoch_metrics *last,
                       int *mid_run)
{
    *mid_run = 0;
    if (topo->is_evaluator)
        return run_evaluator(o, topo, mid_run);
    const int has_eval = topo->ntrain < topo->world_size;
    trainer *t = trainer_new();
    if (!t)
        return mw_err(MW_ENOMEM, "out of memory");
    /* Local failures (data, memory) are agreed before the first collective,
     * so a failing rank never leaves the others blocked in it; then the
     * collective set-up, agreed the same way. */
    t->eval_rank = has_eval ? topo->ntrain : -1;
    /* --resume without --model: the checkpoint's model, on every task (the evaluator too) */
    mw_status rc = o->resume ? fetch_saved_model(t, o, topo->world) : MW_OK;
    if (rc == MW_OK)
        rc = setup_local(t, o, topo);
    if (rc == MW_OK && t->rank == 0 && (checkpointing(o) || o->resume))
        rc = check_writable(o->checkpoint_dir);
    /* over the world: an evaluator task agrees on its own set-up too */
    rc = mw_agree(topo->world, rc, NULL);
    const int set_up = rc == MW_OK;
    if (rc == MW_OK)
        rc = mw_agree(topo->train, setup_collective(t), NULL);
    int restored = 0;
    if (rc == MW_OK && o->resume)
        rc = restore(t, 0, 0, &restored);
    if (rc == MW_OK) { /* every rank agrees on the chief's summary writer */
        mw_status mine = MW_OK;
        if (t->rank == 0 && o->summary_dir[0])
            mine = mw_summary_open(&t->sum, o->summary_dir, restored);
        rc = mw_agree(topo->train, mine, NULL);
    }
    if (has_eval && set_up) /* tell the evaluator whether training starts */
        rc = mw_agree(topo->world, rc, NULL);
    if (rc == MW_OK && restored && t->start_epoch >= o->epochs && t->rank == 0)
        mw_log_info("the checkpoint is at epoch %d of %d: nothing left to train", t->start_epoch,
                    o->epochs);
    if (rc == MW_OK) {
        rc = train_epochs(t, last);
        if (rc == MW_OK && t->rank == 0 && has_eval) {
            rc = eval_send(t, -1, NULL, 0); /* training has finished */
            if (rc == MW_OK)
                rc = eval_wait(t);
        }
        *mid_run = rc != MW_OK;
        /* Freeing the shared window is collective: with a peer gone it would
         * block. The caller aborts the job right away; leave it all. */
        if (*mid_run)
            return rc;
    }
    teardown(t);
    free(t);
    return rc;
}

/* Set-up shared by eval and export: data, model and the restored weights. */
static mw_status open_restored(trainer *t, const mw_train_opts *o, const mw_topology *topo)
{
    if (topo->ntrain != topo->world_size)
        return mw_err(MW_EUNSUPPORTED, "eval and export run on training tasks only; remove "
                      "cluster.evaluator from the TF_CONFIG");
    MW_TRY(fetch_saved_model(t, o, topo->train));
    MW_TRY(mw_agree(topo->train, setup_local(t, o, topo), NULL));
    int restored = 0;
    return restore(t, 1, 1, &restored);
}

mw_status mw_eval_run(const mw_train_opts *o, const mw_topology *topo)
{
    trainer *t = trainer_new();
    if (!t)
        return mw_err(MW_ENOMEM, "out of memory");
    mw_status rc = open_restored(t, o, topo);
    double loss = 0, acc = 0;
    if (rc == MW_OK)
        rc = mw_agree(topo->train, evaluate(t, &loss, &acc), NULL);
    if (rc == MW_OK && t->rank == 0) {
        printf("Restored the checkpoint of epoch %d (step %ld) from %s\n", t->start_epoch,
               t->global_step, o->checkpoint_dir);
        printf("Test Loss: %.4f, Test Accuracy: %.2f\n", loss, 100 * acc);
        if (t->world == 1)
            printf("Accuracy after restoring the saved model without strategy: %.2f\n",
                   100 * acc);
        fflush(stdout);
    }
    teardown(t);
    free(t);
    return rc;
}

mw_status mw_export_run(const mw_train_opts *o, const mw_topology *topo)
{
    trainer *t = trainer_new();
    if (!t)
        return mw_err(MW_ENOMEM, "out of memory");
    mw_status rc = open_restored(t, o, topo);
    if (rc == MW_OK) {
        mw_status mine = MW_OK;
        if (t->rank == 0) {
            mine = mw_export_safetensors(&t->model, t->model.params.data, o->export_path);
            if (mine == MW_OK)
                printf("Exported %zu parameters (epoch %d, step %ld) to %s\n", t->model.nparams,
                       t->start_epoch, t->global_step, o->export_path);
        }
        rc = mw_agree(topo->train, mine, NULL);
    }
    teardown(t);
    free(t);
    return rc;
}
