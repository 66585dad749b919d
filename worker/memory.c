/* The memory estimate of a run and its check; see memory.h. */
#include "worker/memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "worker/data/stream.h"
#include "worker/model/layers/batchnorm.h"
#include "worker/model/model_ws.h"
#include "worker/replicas/replicas.h"

/* Arenas of the parameter count: params, m1, m2, m3; and while a checkpoint is written its
 * four copies and a serialized buffer about as large. */
#define MODEL_ARENAS 4
#define CHECKPOINT_COPIES 8

/* Encoded images (MW_IMAGES_ENCODED): the tables, and for each thread that decodes (the
 * compute threads and the pool) the largest encoded file read and its resized image; with a
 * pool, its cache of two steps' shares. The pixels of the image being decoded are not counted:
 * they are not known before its header is read (at most the pixel limit, image_decode.h). */
static uint64_t encoded_nbytes(const mw_dataset *d, const mw_train_opts *o, int threads, int on_gpu)
{
    uint64_t largest;
    const uint64_t tables = mw_stream_nbytes(d->stream, &largest);
    const uint64_t image = (uint64_t)d->rows * d->cols * d->channels * sizeof(float);
    const int rpw = o->replicas_per_worker > 0 ? o->replicas_per_worker : 1;
    const int pool = o->decode_threads >= 0 ? o->decode_threads : on_gpu ? 2 * rpw : 0;
    const uint64_t cache = pool ? 2 * (uint64_t)o->batch_per_replica * rpw * image : 0;
    return tables + (uint64_t)(threads + pool) * (largest + image) + cache;
}

/* d as loaded; masked: the model's loss ignores a class or masks padding, so the set gets
 * a factor and a count of valid positions per example (8 bytes) once the model is built. */
static uint64_t dataset_nbytes(const mw_dataset *d, int masked)
{
    if (!d)
        return 0;
    /* memory-mapped images are page cache, shared by the node's ranks and reclaimable */
    const uint64_t images =
        d->map || d->stream ? 0 : (uint64_t)d->count * mw_dataset_image_nbytes(d);
    return images +
           (uint64_t)d->count *
               (mw_dataset_target_nbytes(d) +
                (d->weights ? 4 * (uint64_t)(d->weight_width > 1 ? d->weight_width : 1) : 0) +
                (d->mask_w || masked ? 8 : 0));
}

void mw_memory_estimate_run(mw_memory_estimate *e, const mw_model *m, const mw_dataset *train,
                            const mw_dataset *test, const mw_train_opts *o, int nthreads,
                            int on_gpu)
{
    memset(e, 0, sizeof *e);
    const uint64_t grad_nbytes = (uint64_t)m->params.count * sizeof(float);
    e->threads = on_gpu ? 1 : mw_cpu_threads(nthreads);
    e->per_thread = mw_cpu_examples_per_thread(o, e->threads);
    if (!on_gpu)
        e->activations = (uint64_t)e->threads * mw_model_ws_nbytes(m, e->per_thread);
    if (!on_gpu && mw_model_has_batchnorm(m) && o->batch_per_replica > e->per_thread)
        e->activations += mw_model_ws_nbytes(m, o->batch_per_replica) - /* thread 0: a whole */
                          mw_model_ws_nbytes(m, e->per_thread);         /* slice (replicas_cpu) */
    /* the lockstep replicas' workspaces (replicas_cpu), counted with the conv scratch they do
     * not get: an upper bound */
    if (!on_gpu && mw_model_has_sync(m) && o->replicas_per_worker > 1)
        e->activations +=
            (uint64_t)(o->replicas_per_worker - 1) * mw_model_ws_nbytes(m, o->batch_per_replica);
    e->gradients = (uint64_t)mw_cpu_grad_arenas(m, e->threads) * grad_nbytes;
    e->model = (MODEL_ARENAS + CHECKPOINT_COPIES) * grad_nbytes;
    const int masked = m->loss.has_ignore || m->loss.masked;
    e->data = dataset_nbytes(train, masked) + dataset_nbytes(test, masked) +
              (train ? ((uint64_t)train->count + 1) * sizeof(uint32_t) : 0);
    for (const mw_dataset *d = train; d; d = d == train ? test : NULL)
        if (d->stream)
            e->data += encoded_nbytes(d, o, e->threads, on_gpu);
    e->margin = MW_MEMORY_MARGIN;
    e->total = e->activations + e->gradients + e->model + e->data + e->margin;
}

void mw_memory_estimate_export(mw_memory_estimate *e, const mw_model *m)
{
    memset(e, 0, sizeof *e);
    e->model = (MODEL_ARENAS + CHECKPOINT_COPIES) * (uint64_t)m->params.count * sizeof(float);
    e->margin = MW_MEMORY_MARGIN;
    e->total = e->model + e->margin;
}

int mw_memory_check_enabled(void)
{
    return mw_sysmem_check_enabled();
}

/* "activations 3.7 GiB for 2 threads x 4096 examples, gradients ..., libraries 64.0 MiB" */
static void breakdown(const mw_memory_estimate *e, char *buf, size_t nbytes)
{
    char a[32], g[32], m[32], d[32], l[32], act[96];
    if (e->activations)
        snprintf(act, sizeof act, "activations %s for %d thread%s x %d examples, ",
                 mw_sysmem_bytes_str(a, sizeof a, e->activations), e->threads,
                 e->threads == 1 ? "" : "s", e->per_thread);
    else
        act[0] = '\0';
    snprintf(buf, nbytes,
             "%sgradients %s, parameters and optimizer state %s, data %s, libraries %s", act,
             mw_sysmem_bytes_str(g, sizeof g, e->gradients),
             mw_sysmem_bytes_str(m, sizeof m, e->model), mw_sysmem_bytes_str(d, sizeof d, e->data),
             mw_sysmem_bytes_str(l, sizeof l, e->margin));
}

/* "; shared by 4 ranks on this node: 2.0 GiB each", or "" for one rank. */
static void share(const mw_sysmem *mem, int local_ranks, char *buf, size_t nbytes)
{
    char b[32];
    if (local_ranks > 1)
        snprintf(buf, nbytes, "; shared by %d ranks on this node: %s each", local_ranks,
                 mw_sysmem_bytes_str(b, sizeof b, mem->available / (uint64_t)local_ranks));
    else
        buf[0] = '\0';
}

mw_status mw_memory_check(const mw_memory_estimate *e, const mw_sysmem *mem, int local_ranks,
                          const mw_train_opts *o)
{
    if (local_ranks < 1)
        local_ranks = 1;
    if (mem->source == MW_SYSMEM_NONE || e->total <= mem->available / (uint64_t)local_ranks)
        return MW_OK;
    char tot[32], av[32], src[512], parts[512], sh[96], flags[160];
    share(mem, local_ranks, sh, sizeof sh);
    breakdown(e, parts, sizeof parts);
    const uint64_t model = e->model + e->gradients;
    if (model >= e->activations && model >= e->data)
        snprintf(flags, sizeof flags,
                 "use a smaller model (its parameters, gradients and optimizer state take the "
                 "most; `mwtrain summary` counts them)");
    else if (e->data >= e->activations)
        snprintf(flags, sizeof flags, "use a smaller data set (its arrays take the most)");
    else if (e->activations && e->threads > 1)
        snprintf(flags, sizeof flags,
                 "lower --micro-batch (now %d, the examples a thread holds), "
                 "--batch-per-replica (now %d) or --threads (now %d)",
                 o->micro_batch, o->batch_per_replica, e->threads);
    else
        snprintf(flags, sizeof flags,
                 "lower --micro-batch (now %d, the examples a thread holds) or "
                 "--batch-per-replica (now %d)",
                 o->micro_batch, o->batch_per_replica);
    return mw_err(MW_ENOMEM,
                  "this run needs about %s of memory on this rank, more than the %s it may use "
                  "(%s%s): %s; %s, or set MW_MEMORY_CHECK=off to skip this check",
                  mw_sysmem_bytes_str(tot, sizeof tot, e->total),
                  mw_sysmem_bytes_str(av, sizeof av, mem->available / (uint64_t)local_ranks),
                  mw_sysmem_describe(mem, src, sizeof src), sh, parts, flags);
}

const char *mw_memory_describe(const mw_memory_estimate *e, const mw_sysmem *mem, int local_ranks,
                               char *buf, size_t nbytes)
{
    if (local_ranks < 1)
        local_ranks = 1;
    char tot[32], av[32], src[512], parts[512], sh[96];
    share(mem, local_ranks, sh, sizeof sh);
    breakdown(e, parts, sizeof parts);
    snprintf(buf, nbytes, "memory: about %s per rank (%s); %s available to it (%s%s)",
             mw_sysmem_bytes_str(tot, sizeof tot, e->total), parts,
             mw_sysmem_bytes_str(av, sizeof av, mem->available / (uint64_t)local_ranks),
             mw_sysmem_describe(mem, src, sizeof src), sh);
    return buf;
}
