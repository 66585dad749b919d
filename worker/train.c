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
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cluster/comm.h"
#include "common/arena.h"
#include "common/log.h"
#include "common/timer.h"
#include "worker/data.h"
#include "worker/model.h"
#include "worker/progress.h"

void mw_train_opts_default(mw_train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->epochs = 10;
    o->batch_per_replica = 64;
    o->replicas_per_worker = 1;
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
} trainer;

static int cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* The local half of set-up: nothing here talks to other ranks. */
static mw_status setup_local(trainer *t, const mw_train_opts *o, const mw_topology *topo)
{
    t->o = o;
    t->topo = topo;
    t->comm = topo->train;
    t->rank = topo->rank;
    t->world = topo->ntrain;
    t->local_size = topo->local_size > 0 ? topo->local_size : 1;

    int threads = o->threads > 0 ? o->threads : cpu_count() / t->local_size;
    if (threads < 1)
        threads = 1;
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    /* more threads than examples per replica would leave threads idle */
    if (threads > o->batch_per_replica)
        threads = o->batch_per_replica;
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

    MW_TRY(mw_dataset_load_dir(&t->train, &t->test, o->data_dir, 10));
    MW_TRY(mw_model_build_tutorial(&t->model, (int)t->train.rows, (int)t->train.cols, 1, 10));
    MW_TRY(mw_model_finalize(&t->model, (size_t)t->world * MW_ARENA_ALIGN));
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
    t->order = malloc(sizeof *t->order * t->train.count);
    if (!t->order)
        return mw_err(MW_ENOMEM, "cannot allocate the epoch order");
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

/* The collective half of set-up, entered by every training rank after the
 * local half succeeded everywhere. */
static mw_status setup_collective(trainer *t)
{
    const mw_train_opts *o = t->o;
    const size_t count = t->model.params.count;
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
    /* Every replica starts from the chief's weights. */
    mw_wait_ctx w = {"broadcast of the initial weights", -1, o->collective_timeout};
    MW_TRY(mw_comm_bcast(&w, t->model.params.data, (int)count, MPI_FLOAT, 0, t->comm));
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
    free(t->order);
    mw_dataset_free(&t->train);
    mw_dataset_free(&t->test);
    for (int i = 0; i < MAX_THREADS; i++) {
        mw_model_ws_free(&t->ws[i]);
        if (i > 0)
            free(t->tgrads[i]);
        t->tgrads[i] = NULL;
    }
    mw_allreduce_close(&t->ar);
    free(t->own_grads);
    t->grads.data = NULL;
    mw_arena_free(&t->m1);
    mw_arena_free(&t->m2);
    mw_model_free(&t->model);
}

static void apply_update(trainer *t)
{
    const mw_train_opts *o = t->o;
    size_t count = t->model.params.count;
    if (o->optimizer == MW_OPT_ADAM) {
        t->adam_t++;
        double lr_t = o->learning_rate * sqrt(1.0 - pow(o->beta2, (double)t->adam_t)) /
                      (1.0 - pow(o->beta1, (double)t->adam_t));
        t->kt.adam(&t->k, t->model.params.data, t->m1.data, t->m2.data, t->grads.data, count,
                   (float)lr_t, (float)o->beta1, (float)o->beta2, (float)o->epsilon);
    } else {
        t->kt.sgd(&t->k, t->model.params.data, t->m1.data, t->grads.data, count,
                  (float)o->learning_rate, (float)o->momentum);
    }
}

/* Forward over the test set, sharded over all replicas and then threads;
 * returns the reduced mean loss and accuracy. */
static mw_status evaluate(trainer *t, double *loss, double *acc)
{
    const int rpw = t->o->replicas_per_worker, nrep = t->world * rpw, T = t->nthreads;
    double sums[3] = {0, 0, 0}; /* loss, correct, count */
    for (int lr = 0; lr < rpw; lr++) {
        long off, cnt;
        slice(t->test.count, nrep, t->rank * rpw + lr, &off, &cnt);
#pragma omp parallel num_threads(T)
        {
            int th = 0;
#ifdef _OPENMP
            th = omp_get_thread_num();
#endif
            mw_model_ws *ws = &t->ws[th];
            long toff, tcnt;
            slice(cnt, T, th, &toff, &tcnt);
            uint32_t ids[1024];
            double ls = 0, corr = 0;
            for (long i = 0; i < tcnt; i += ws->max_n) {
                int n = tcnt - i < ws->max_n ? (int)(tcnt - i) : ws->max_n;
                if (n > 1024)
                    n = 1024;
                for (int j = 0; j < n; j++)
                    ids[j] = (uint32_t)(off + toff + i + j);
                mw_dataset_batch(&t->test, ws->act[0], ws->labels, ids, n);
                mw_model_forward(&t->model, &t->kt, &t->tk[th], ws, n);
                for (int j = 0; j < n; j++)
                    ls += ws->loss[j];
                corr += mw_model_correct(&t->model, ws, n);
            }
            t->tsum[th][0] = ls, t->tsum[th][1] = corr, t->tsum[th][2] = (double)tcnt;
        }
        for (int th = 0; th < T; th++)
            for (int j = 0; j < 3; j++)
                sums[j] += t->tsum[th][j];
    }
    mw_wait_ctx w = {"evaluation metrics all-reduce", -1, t->o->collective_timeout};
    MPI_Request req;
    MW_MPI(MPI_Iallreduce(MPI_IN_PLACE, sums, 3, MPI_DOUBLE, MPI_SUM, t->comm, &req), w.op);
    MW_TRY(mw_comm_wait(&w, &req, 1, NULL));
    *loss = sums[2] > 0 ? sums[0] / sums[2] : 0.0;
    *acc = sums[2] > 0 ? sums[1] / sums[2] : 0.0;
    return MW_OK;
}

/* Forward and backward of one replica's slice (ids, cnt examples) of a global
 * batch of gb, split among the threads; adds into the per-thread gradients
 * and the local metric sums. */
static void run_slice(trainer *t, const uint32_t *ids, long cnt, long gb, double sums[3])
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
        double ls = 0, corr = 0;
        /* micro-batches of at most ws->max_n keep the activations in cache */
        for (long i = 0; i < tcnt; i += ws->max_n) {
            int n = tcnt - i < ws->max_n ? (int)(tcnt - i) : ws->max_n;
            mw_dataset_batch(&t->train, ws->act[0], ws->labels, ids + toff + i, n);
            mw_model_forward(&t->model, &t->kt, &t->tk[th], ws, n);
            mw_model_backward(&t->model, &t->kt, &t->tk[th], ws, t->tgrads[th], n,
                              1.0f / (float)gb);
            for (int j = 0; j < n; j++)
                ls += ws->loss[j];
            corr += mw_model_correct(&t->model, ws, n);
        }
        t->tsum[th][0] = ls, t->tsum[th][1] = corr, t->tsum[th][2] = (double)tcnt;
    }
    for (int th = 0; th < T; th++) {
        sums[0] += t->tsum[th][0] / (double)gb;
        sums[1] += t->tsum[th][1];
        sums[2] += t->tsum[th][2];
    }
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

static mw_status train_epochs(trainer *t, mw_epoch_metrics *last)
{
    const mw_train_opts *o = t->o;
    const int rpw = o->replicas_per_worker, nrep = t->world * rpw;
    const long GB = (long)o->batch_per_replica * nrep, N = t->train.count;
    const long steps = steps_per_epoch(t);
    const size_t count = t->model.params.count;
    mw_progress_state prog;
    long global_step = 0;

    for (int epoch = 0; epoch < o->epochs; epoch++) {
        mw_dataset_epoch_order(t->order, (uint32_t)N, o->seed, epoch);
        double sums[3] = {0, 0, 0}; /* scaled loss, correct, examples (local) */
        double t0 = mw_now(), seen_local = 0;
        if (t->rank == 0)
            mw_progress_begin(&prog, stderr, (int)o->progress, o->progress_interval,
                              epoch + 1, o->epochs, (int)steps);
        for (long s = 0; s < steps; s++) {
            long start = s * GB, gb = N - start < GB ? N - start : GB;
            for (int th = 0; th < t->nthreads; th++)
                memset(t->tgrads[th], 0, count * sizeof(float));
            for (int lr = 0; lr < rpw; lr++) {
                long off, cnt;
                slice(gb, nrep, t->rank * rpw + lr, &off, &cnt);
                run_slice(t, t->order + start + off, cnt, gb, sums);
            }
            reduce_threads(t);
            t->ar.step = global_step++;
            MW_TRY(mw_allreduce_sum(&t->ar, t->grads.data, count));
            apply_update(t);
            seen_local += (double)gb;
            if (t->rank == 0) {
                double el = mw_now() - t0;
                /* local replicas' share, scaled to an estimate of the global step loss */
                double est = sums[0] * nrep / rpw / (double)(s + 1);
                mw_progress_update(&prog, (int)(s + 1), est, el > 0 ? seen_local / el : 0);
            }
        }
        double train_time = mw_now() - t0;
        if (t->rank == 0)
            mw_progress_end(&prog);
        mw_wait_ctx w = {"training metrics all-reduce", global_step, o->collective_timeout};
        MPI_Request req;
        MW_MPI(MPI_Iallreduce(MPI_IN_PLACE, sums, 3, MPI_DOUBLE, MPI_SUM, t->comm, &req), w.op);
        MW_TRY(mw_comm_wait(&w, &req, 1, NULL));
        mw_epoch_metrics em;
        em.train_loss = sums[0] / (double)steps;
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
        }
        if (last)
            *last = em;
    }
    if (o->dump_weights && t->rank == 0)
        MW_TRY(dump_weights(t, o->dump_weights));
    return MW_OK;
}

mw_status mw_train_run(const mw_train_opts *o, const mw_topology *topo, mw_epoch_metrics *last,
                       int *mid_run)
{
    *mid_run = 0;
    /* Every rank sees the same table, so every rank returns this together. */
    if (topo->ntrain != topo->world_size)
        return mw_err(MW_EUNSUPPORTED, "the TF_CONFIG names an evaluator task; the evaluator "
                      "role is not supported yet: remove cluster.evaluator");
    trainer *t = calloc(1, sizeof *t);
    if (!t)
        return mw_err(MW_ENOMEM, "out of memory");
    mw_dataset_init(&t->train);
    mw_dataset_init(&t->test);
    mw_allreduce_init(&t->ar);
    for (int i = 0; i < MAX_THREADS; i++)
        mw_model_ws_init(&t->ws[i]);
    /* Local failures (data, memory) are agreed before the first collective,
     * so a failing rank never leaves the others blocked in it; then the
     * collective set-up, agreed the same way. */
    mw_status rc = mw_agree(topo->train, setup_local(t, o, topo), NULL);
    if (rc == MW_OK)
        rc = mw_agree(topo->train, setup_collective(t), NULL);
    if (rc == MW_OK) {
        rc = train_epochs(t, last);
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
