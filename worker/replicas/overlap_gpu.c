/* The GPU backend's overlapped gradient all-reduce; see overlap_gpu.h. Everything runs on the
 * host thread that enqueues the step: the model's layer hook only enqueues work. */
#include "worker/replicas/overlap_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/runtime.h"
#include "worker/model/weights.h"
#include "worker/replicas/overlap.h"

typedef struct {
    mw_gpu_overlap *o;
    int d;
} hook_ctx;

struct mw_gpu_overlap {
    mw_gpu_overlap_env env;
    mw_kctx **k;
    float **params, **grads;
    double **scratch;
    void **streams; /* the reduce streams */
    hook_ctx *hc;
    int *next;    /* per device: its first bucket not reported this step */
    int *arrived; /* per bucket: devices that reported it */
    mw_bucket *b;
    int nb;
    char *opens;
    int enqueued; /* buckets of this step on the reduce streams */
    long step;
    float reg_scale;
    mw_status st; /* the step's first failure */
    char msg[2048];
};

/* Device d reports bucket i: its regularizer gradients, then the reduce stream's wait; the
 * bucket's all-reduce once every device reported it (buckets complete in order). */
static void report(mw_gpu_overlap *o, int d, int i)
{
    const mw_bucket *bk = &o->b[i];
    const mw_gpu_overlap_env *e = &o->env;
    mw_status st = o->st;
    if (st == MW_OK) {
        mw_model_regularize_part(e->model, e->kt, o->k[d], o->params[d], o->grads[d], o->scratch[d],
                                 o->reg_scale, bk->first, bk->last + 1);
        st = mw_cuda_reduce_after_compute(o->k[d]);
    }
    if (st == MW_OK && ++o->arrived[i] == e->ndev) {
        st = mw_nccl_allreduce_bucket(e->nccl, o->grads, bk->off, bk->end - bk->off, o->streams,
                                      o->step);
        o->enqueued += st == MW_OK;
    }
    if (st != MW_OK && o->st == MW_OK) {
        o->st = st;
        snprintf(o->msg, sizeof o->msg, "%s", mw_err_msg());
    }
}

/* Device d has passed layer `layer`: every bucket down to the one that begins there. */
static void report_down_to(mw_gpu_overlap *o, int d, int layer)
{
    while (o->next[d] < o->nb && o->b[o->next[d]].first >= layer)
        report(o, d, o->next[d]++);
}

static void layer_done(void *ctx, int layer)
{
    hook_ctx *h = ctx;
    if (h->o->opens[layer])
        report_down_to(h->o, h->d, layer);
}

mw_status mw_gpu_overlap_open(mw_gpu_overlap **out, const mw_gpu_overlap_env *env)
{
    mw_gpu_overlap *o = *out = calloc(1, sizeof *o);
    if (!o)
        return mw_err(MW_ENOMEM, "overlapped all-reduce: out of memory");
    o->env = *env;
    const size_t nd = (size_t)env->ndev;
    o->k = calloc(nd, sizeof *o->k);
    o->params = calloc(nd, sizeof *o->params);
    o->grads = calloc(nd, sizeof *o->grads);
    o->scratch = calloc(nd, sizeof *o->scratch);
    o->streams = calloc(nd, sizeof *o->streams);
    o->hc = calloc(nd, sizeof *o->hc);
    o->next = calloc(nd, sizeof *o->next);
    if (!o->k || !o->params || !o->grads || !o->scratch || !o->streams || !o->hc || !o->next)
        return mw_err(MW_ENOMEM, "overlapped all-reduce: out of memory");
    for (int d = 0; d < env->ndev; d++) {
        o->k[d] = env->k[d], o->params[d] = env->params[d], o->grads[d] = env->grads[d];
        o->scratch[d] = env->scratch[d];
        if (!(o->streams[d] = mw_cuda_reduce_stream(env->k[d])))
            return mw_err(MW_EDEVICE, "overlapped all-reduce: device %d has no reduce stream", d);
        o->hc[d] = (hook_ctx){o, d};
    }
    MW_TRY(mw_buckets_plan(env->model, env->bucket_bytes, &o->b, &o->nb, &o->opens));
    if (!(o->arrived = calloc((size_t)o->nb, sizeof *o->arrived)))
        return mw_err(MW_ENOMEM, "overlapped all-reduce: out of memory");
    return MW_OK;
}

int mw_gpu_overlap_buckets(const mw_gpu_overlap *o)
{
    return o->nb;
}

void mw_gpu_overlap_begin(mw_gpu_overlap *o, long step, float reg_scale)
{
    o->step = step, o->reg_scale = reg_scale;
    o->st = MW_OK, o->enqueued = 0;
    memset(o->next, 0, (size_t)o->env.ndev * sizeof *o->next);
    memset(o->arrived, 0, (size_t)o->nb * sizeof *o->arrived);
}

void mw_gpu_overlap_last(mw_gpu_overlap *o, int d, mw_model_ws *ws)
{
    if (!ws) {
        report_down_to(o, d, 0);
        return;
    }
    ws->layer_done = layer_done;
    ws->layer_done_ctx = &o->hc[d];
}

void mw_gpu_overlap_finish(mw_gpu_overlap *o, int d, mw_model_ws *ws)
{
    ws->layer_done = NULL, ws->layer_done_ctx = NULL;
    report_down_to(o, d, 0);
}

mw_status mw_gpu_overlap_end(mw_gpu_overlap *o)
{
    if (o->st != MW_OK)
        return mw_err(o->st, "%s", o->msg);
    if (o->enqueued != o->nb)
        return mw_err(MW_EINTERNAL,
                      "overlapped all-reduce at step %ld: %d of %d buckets enqueued after the "
                      "backward",
                      o->step, o->enqueued, o->nb);
    for (int d = 0; d < o->env.ndev; d++)
        MW_TRY(mw_cuda_compute_after_reduce(o->k[d]));
    return MW_OK;
}

void mw_gpu_overlap_close(mw_gpu_overlap **op)
{
    mw_gpu_overlap *o = *op;
    if (!o)
        return;
    *op = NULL;
    free(o->k);
    free(o->params);
    free(o->grads);
    free(o->scratch);
    free(o->streams);
    free(o->hc);
    free(o->next);
    free(o->arrived);
    free(o->b);
    free(o->opens);
    free(o);
}
