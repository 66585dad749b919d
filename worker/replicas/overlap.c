/* The overlapped gradient all-reduce: the buckets, the communication thread and the compute
 * threads' per-layer progress (see overlap.h for why the sums are the serial path's bits).
 *
 * One mutex and one condition variable carry everything: each compute thread's lowest layer
 * whose last backward is done (signalled only at a bucket's first layer), the step's
 * generation, the buckets done and the step's first error. */
#include "worker/replicas/overlap.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fault.h"
#include "common/log.h"
#include "kernels/ref/table.h"
#include "worker/model/weights.h"
#include "worker/replicas/replicas.h"

typedef struct {
    mw_overlap *o;
    int th;
} hook_ctx;

struct mw_overlap {
    mw_overlap_env env;
    mw_bucket *b;
    int nb;
    char *opens; /* per layer: 1 when it is some bucket's first layer */
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done[MW_CPU_MAX_THREADS]; /* per thread: its lowest layer done (nlayers: none) */
    hook_ctx hc[MW_CPU_MAX_THREADS];
    long gen;  /* steps begun */
    int ndone; /* buckets of this step finished (nb: all, or stopped by an error) */
    int quit;
    int busy; /* the thread is inside a bucket (reading and writing the gradients) */
    float reg_scale;
    mw_status st;
    char msg[2048];
};

/* The serial path's work on one bucket: threads summed in order, regularizers, all-reduce. */
static mw_status run_bucket(mw_overlap *o, const mw_bucket *bk)
{
    const mw_overlap_env *e = &o->env;
    float *g = e->grads[0];
    mw_fault_point("bucket", -1); /* MW_FAULT=stop:bucket:RANK: a rank gone mid-step */
    for (size_t i = bk->off; i < bk->end && e->nthreads > 1; i++) {
        float s = g[i];
        for (int th = 1; th < e->nthreads; th++)
            s += e->grads[th][i];
        g[i] = s;
    }
    mw_kernels ref;
    mw_kernels_init_ref(&ref);
    const mw_kctx k = {.nthreads = 1};
    double unused = 0; /* the penalty: the training thread adds it up in layer order */
    mw_model_regularize_part(e->model, &ref, &k, e->model->params.data, g, &unused, o->reg_scale,
                             bk->first, bk->last + 1);
    return mw_allreduce_sum_at(e->ar, g + bk->off, bk->off, bk->end - bk->off,
                               e->model->params.count);
}

/* The slowest thread's lowest layer done: every thread is past the layers from it up. */
static int slowest_done(const mw_overlap *o)
{
    int high = o->done[0];
    for (int th = 1; th < o->env.nthreads; th++)
        high = o->done[th] > high ? o->done[th] : high;
    return high;
}

/* One step's buckets, in order, each once every thread is past its first layer. Called and
 * returns with mu held; 0 when asked to quit. */
static int run_step(mw_overlap *o)
{
    for (int i = 0; i < o->nb; i++) {
        while (!o->quit && slowest_done(o) > o->b[i].first)
            pthread_cond_wait(&o->cv, &o->mu);
        if (o->quit)
            return 0;
        o->busy = 1;
        pthread_mutex_unlock(&o->mu);
        mw_status st = run_bucket(o, &o->b[i]);
        pthread_mutex_lock(&o->mu);
        o->busy = 0;
        o->ndone = i + 1;
        if (st != MW_OK) {
            o->st = st;
            snprintf(o->msg, sizeof o->msg, "%s", mw_err_msg());
            o->ndone = o->nb;
        }
        pthread_cond_broadcast(&o->cv);
        if (st != MW_OK)
            break;
    }
    return 1;
}

static void *comm_main(void *arg)
{
    mw_overlap *o = arg;
    long seen = 0;
    pthread_mutex_lock(&o->mu);
    for (;;) {
        while (!o->quit && o->gen == seen)
            pthread_cond_wait(&o->cv, &o->mu);
        seen = o->gen;
        if (o->quit || !run_step(o))
            break;
    }
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

void mw_overlap_not_used(int rank, const char *why)
{
    if (rank == 0)
        mw_log_warn("--overlap-allreduce on: not used here (%s); the gradients are all-reduced "
                    "after the backward",
                    why);
}

mw_status mw_overlap_open(mw_overlap **out, const mw_overlap_env *env)
{
    mw_overlap *o = *out = calloc(1, sizeof *o);
    if (!o)
        return mw_err(MW_ENOMEM, "overlapped all-reduce: out of memory");
    o->env = *env;
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    MW_TRY(mw_buckets_plan(env->model, env->bucket_bytes, &o->b, &o->nb, &o->opens));
    for (int th = 0; th < env->nthreads; th++)
        o->hc[th] = (hook_ctx){o, th};
    if (pthread_create(&o->thread, NULL, comm_main, o) != 0)
        return mw_err(MW_ENOMEM, "overlapped all-reduce: cannot start its thread");
    o->started = 1;
    return MW_OK;
}

int mw_overlap_buckets(const mw_overlap *o)
{
    return o->nb;
}

void mw_overlap_begin(mw_overlap *o, long step, float reg_scale)
{
    pthread_mutex_lock(&o->mu);
    for (int th = 0; th < o->env.nthreads; th++)
        o->done[th] = o->env.model->nlayers;
    o->ndone = 0;
    o->st = MW_OK;
    o->reg_scale = reg_scale;
    o->env.ar->step = step;
    o->gen++;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

static void mark(mw_overlap *o, int th, int layer)
{
    pthread_mutex_lock(&o->mu);
    o->done[th] = layer;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

static void layer_done(void *ctx, int layer)
{
    hook_ctx *h = ctx;
    if (h->o->opens[layer])
        mark(h->o, h->th, layer);
}

void mw_overlap_last(mw_overlap *o, int th, mw_model_ws *ws)
{
    if (!ws) {
        mark(o, th, 0);
        return;
    }
    ws->layer_done = layer_done;
    ws->layer_done_ctx = &o->hc[th];
}

void mw_overlap_finish(mw_overlap *o, int th, mw_model_ws *ws)
{
    if (ws)
        ws->layer_done = NULL, ws->layer_done_ctx = NULL;
    mark(o, th, 0);
}

mw_status mw_overlap_wait(mw_overlap *o)
{
    pthread_mutex_lock(&o->mu);
    while (o->ndone < o->nb)
        pthread_cond_wait(&o->cv, &o->mu);
    mw_status st = o->st;
    pthread_mutex_unlock(&o->mu);
    return st == MW_OK ? MW_OK : mw_err(st, "%s", o->msg);
}

int mw_overlap_close(mw_overlap **op, int abandoned)
{
    mw_overlap *o = *op;
    if (!o)
        return 1;
    if (o->started) {
        pthread_mutex_lock(&o->mu);
        const int busy = o->busy;
        o->quit = !(abandoned && busy);
        pthread_cond_broadcast(&o->cv);
        pthread_mutex_unlock(&o->mu);
        if (!o->quit)
            return 0;
        pthread_join(o->thread, NULL);
    }
    *op = NULL;
    pthread_mutex_destroy(&o->mu);
    pthread_cond_destroy(&o->cv);
    free(o->b);
    free(o->opens);
    free(o);
    return 1;
}
