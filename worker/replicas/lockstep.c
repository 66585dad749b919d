/* Synchronized BatchNormalization's lockstep; see lockstep.h. */
#include "worker/replicas/lockstep.h"
#include "worker/model/layers/batchnorm.h"

#include <stdio.h>
#include <string.h>

#include "cluster/comm.h"
#include "common/fault.h"

size_t mw_lockstep_host_count(const mw_model *m, int replicas)
{
    return ((size_t)replicas + 1) * 2 * (size_t)mw_model_sync_channels(m);
}

/* Synchronized layer i (forward, or backward) of every replica: the sums of each, their total
 * in replica order and over the ranks, then each replica's pass through the layer. */
static mw_status sync_layer(const mw_lockstep *ls, int i, int backward, long gb)
{
    const mw_model *m = ls->model;
    const mw_lockstep_ops *ops = ls->ops;
    const int C = m->layers[i].out_c, n = ls->replicas;
    const size_t nb = 2 * (size_t)C * sizeof(double);
    double *tot = ls->host + (size_t)n * 2 * C;
    char what[192];
    snprintf(what, sizeof what, "synchronized BatchNormalization all-reduce (layer '%s', %s)",
             m->layers[i].name, backward ? "backward" : "forward");
    for (int lr = 0; lr < n; lr++) {
        double *host = ls->host + (size_t)lr * 2 * C;
        mw_model_ws *ws;
        const mw_kctx *k;
        float *grads;
        long cnt;
        ops->replica(ls->ctx, lr, &ws, &k, &grads, &cnt);
        if (cnt <= 0) {
            memset(host, 0, nb);
            continue;
        }
        mw_model_sync_sums(m, ls->kt, k, ws, grads, i, (int)cnt, backward,
                           ops->sums(ls->ctx, lr, host));
        if (ops->fetch)
            MW_TRY(ops->fetch(ls->ctx, lr, nb));
    }
    memset(tot, 0, nb);
    for (int lr = 0; lr < n; lr++) {
        double *host = ls->host + (size_t)lr * 2 * C;
        long cnt;
        mw_model_ws *ws;
        const mw_kctx *k;
        float *grads;
        ops->replica(ls->ctx, lr, &ws, &k, &grads, &cnt);
        if (cnt > 0 && ops->wait)
            MW_TRY(ops->wait(ls->ctx, lr, host, nb, what));
        for (int c = 0; c < 2 * C; c++)
            tot[c] += host[c];
    }
    if (ls->world > 1) {
        mw_wait_ctx w = {what, ls->step, ls->timeout};
        mw_fault_point("bn-sync", ls->world_rank);
        MW_TRY(mw_comm_allreduce(&w, tot, 2 * C, MPI_DOUBLE, MPI_SUM, ls->comm));
    }
    for (int lr = 0; lr < n; lr++) {
        mw_model_ws *ws;
        const mw_kctx *k;
        float *grads;
        long cnt;
        ops->replica(ls->ctx, lr, &ws, &k, &grads, &cnt);
        if (cnt <= 0)
            continue;
        const double *at = tot;
        if (ops->put)
            MW_TRY(ops->put(ls->ctx, lr, tot, nb, &at));
        if (backward)
            mw_model_sync_backward(m, ls->kt, k, ws, grads, i, (int)cnt, 1.0f / (float)gb, at, gb);
        else
            mw_model_sync_forward(m, ls->kt, k, ws, i, (int)cnt, at, gb);
    }
    return MW_OK;
}

/* Every replica through layers [from, to) forward, or backward (in reverse). */
static void part(const mw_lockstep *ls, long gb, int from, int to, int backward)
{
    for (int lr = 0; lr < ls->replicas; lr++) {
        mw_model_ws *ws;
        const mw_kctx *k;
        float *grads;
        long cnt;
        ls->ops->replica(ls->ctx, lr, &ws, &k, &grads, &cnt);
        if (cnt <= 0)
            continue;
        if (backward)
            mw_model_backward_part(ls->model, ls->kt, k, ws, grads, (int)cnt, 1.0f / (float)gb,
                                   from, to);
        else
            mw_model_forward_part(ls->model, ls->kt, k, ws, (int)cnt, from, to);
    }
}

mw_status mw_lockstep_step(const mw_lockstep *ls, long gb)
{
    const mw_model *m = ls->model;
    const int L = m->nlayers;
    for (int i = 0, from = 0; i <= L; i++)
        if (i == L || mw_model_is_sync(m, i)) {
            part(ls, gb, from, i, 0);
            if (i < L)
                MW_TRY(sync_layer(ls, i, 0, gb));
            from = i + 1;
        }
    for (int i = L - 1, to = L; i >= -1; i--)
        if (i < 0 || mw_model_is_sync(m, i)) {
            part(ls, gb, i + 1, to, 1);
            if (i >= 0)
                MW_TRY(sync_layer(ls, i, 1, gb));
            to = i;
        }
    return MW_OK;
}
