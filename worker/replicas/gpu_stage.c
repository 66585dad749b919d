/* The GPU backend's batch staging (gpu_stage.h). docs/gpus.md, "How a step runs on the GPUs",
 * tells the order of the slots, the marks and the prefetch. */
#include "worker/replicas/gpu_stage.h"

#include "common/timeline.h"
#include "kernels/cuda/runtime.h"

mw_status mw_gpu_stage(const mw_replicas *r, gpu_dev *g, const mw_dataset *d, const uint32_t *ids,
                       uint32_t first, int n, int training, uint64_t dseed)
{
    mw_model_ws *ws = &g->ws;
    const mw_model *m = r->env.model;
    const size_t in = (size_t)n * m->in_h * m->in_w * m->in_c;
    const size_t P = m->positions > 1 ? (size_t)m->positions : 1; /* loss weights per example */
    const int s = g->slot = (int)(g->round++ % 2);
    MW_TRY(mw_cuda_wait_copy_mark(&g->k, s, r->env.o->collective_timeout, "GPU staging"));
    MW_TL_BEGIN("data", "data");
    for (int j = 0; j < n; j++)
        g->h_ids[s][j] = ids ? ids[j] : first + (uint32_t)j;
    mw_dataset_batch(d, g->h_x[s], g->h_y[s], g->h_ids[s], n);
    MW_TL_END("data", "data");
    MW_TRY(mw_cuda_copy_after(&g->k, s));
    MW_TRY(mw_cuda_upload_copy(g->d_x[s], g->h_x[s], in * sizeof(float), &g->k));
    MW_TRY(
        mw_cuda_upload_copy(g->d_y[s], g->h_y[s], (size_t)n * mw_dataset_target_nbytes(d), &g->k));
    const int weighted = mw_dataset_batch_weights(d, g->h_w[s], g->h_ids[s], n) != NULL;
    if (weighted)
        MW_TRY(mw_cuda_upload_copy(g->d_w[s], g->h_w[s], (size_t)n * P * sizeof(float), &g->k));
    if (training)
        MW_TRY(mw_cuda_upload_copy(g->d_ids[s], g->h_ids[s], (size_t)n * sizeof(uint32_t), &g->k));
    MW_TRY(mw_cuda_copy_mark(&g->k, s));
    MW_TRY(mw_cuda_compute_after(&g->k, s));
    /* the input is copied (layers may alias it); targets and ids are read where they landed */
    MW_TRY(mw_cuda_copy(ws->act[0], g->d_x[s], in * sizeof(float), &g->k));
    ws->y = g->d_y[s];
    ws->w = weighted ? g->d_w[s] : NULL;
    ws->training = training;
    ws->dropout_seed = training ? dseed : 0;
    ws->example_ids = training ? g->d_ids[s] : NULL;
    return MW_OK;
}

mw_status mw_gpu_done_with(gpu_dev *g)
{
    return mw_cuda_mark(&g->k, g->slot);
}

/* Device d's first micro-batch of a step of total examples, as run's cursor finds it: the start
 * of the first of its replicas' slices that has examples, at most a workspace's worth; *n = 0
 * when the device has none. */
static void first_batch(const mw_replicas *r, int d, long total, long *off, int *n)
{
    const int rpw = r->env.o->replicas_per_worker, nrep = r->env.world * rpw;
    const int rpd = rpw / r->ngpu, max_n = r->gd[d].ws.max_n;
    *n = 0;
    for (int lr = d * rpd; lr < (d + 1) * rpd; lr++) {
        long cnt;
        mw_slice(total, nrep, r->env.rank * rpw + lr, off, &cnt);
        if (cnt > 0) {
            *n = cnt < max_n ? (int)cnt : max_n;
            return;
        }
    }
}

int mw_gpu_take_next(mw_replicas *r, const mw_dataset *d, const uint32_t *ids, long gb,
                     uint64_t dseed)
{
    const int hit = r->next.state == 2 && ids && r->next.d == d && r->next.ids == ids &&
                    r->next.gb == gb && r->next.dseed == dseed;
    r->next.state = 0;
    return hit;
}

mw_status mw_gpu_stage_next(mw_replicas *r)
{
    if (r->next.state != 1)
        return MW_OK;
    r->next.state = 0; /* unless it is all staged */
    for (int d = 0; d < r->ngpu; d++) {
        gpu_dev *g = &r->gd[d];
        long off;
        first_batch(r, d, r->next.gb, &off, &g->pre_n);
        if (g->pre_n > 0)
            MW_TRY(mw_gpu_stage(r, g, r->next.d, r->next.ids + off, (uint32_t)off, g->pre_n, 1,
                                r->next.dseed));
    }
    r->next.state = 2;
    return MW_OK;
}

mw_status mw_gpu_stage_first(const mw_replicas *r, gpu_dev *g, int pre, const mw_dataset *data,
                             const uint32_t *ids, uint32_t first, int n, int training,
                             uint64_t dseed)
{
    if (!pre || g->pre_n == 0)
        return mw_gpu_stage(r, g, data, ids, first, n, training, dseed);
    if (g->pre_n != n)
        return mw_err(MW_EINTERNAL,
                      "CUDA device %d: %d examples were prefetched, the step "
                      "begins with %d",
                      g->ordinal, g->pre_n, n);
    return MW_OK;
}
