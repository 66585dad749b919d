/* The per-replica activation workspace (model_ws.h): one plan of where every buffer sits in a
 * single block (activations, gradients, the rows' buffers, probabilities, losses, targets,
 * sample weights, 16-bit weights, kernel scratch), then the block allocated on the host or by
 * the caller's allocator (a device workspace) and carved into views.
 *
 * Why a file of its own: the workspace reads the finished model (its shapes, targets and
 * policy) and the model calls nothing here, so it sits above model.c; the size it plans is
 * also what worker/memory.c estimates before anything is allocated. */
#include "worker/model/model_ws.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/arena.h"
#include "worker/model/layer.h"
#include "worker/model/model.h"

void mw_model_ws_init(mw_model_ws *ws)
{
    memset(ws, 0, sizeof *ws);
}

void mw_model_ws_free(mw_model_ws *ws)
{
    free(ws->act);
    free(ws->grad);
    free(ws->buf);
    if (ws->block_free)
        ws->block_free(ws->block);
    else
        free(ws->block);
    memset(ws, 0, sizeof *ws);
}

static size_t up64(size_t nbytes)
{
    return (nbytes + 63) / 64 * 64;
}

mw_status mw_model_ws_alloc(mw_model_ws *ws, const mw_model *m, int max_n)
{
    return mw_model_ws_alloc_with(ws, m, max_n, NULL, NULL);
}

/* Where each workspace buffer sits in the one block: byte offsets from its start. */
typedef struct {
    size_t *act, *grad; /* L + 1 each: the input and each layer's output */
    size_t *buf;        /* L: each layer's buffer (its row's buf_bytes; SIZE_MAX: none) */
    size_t prob, loss, y, w, scratch;
    size_t params16;      /* a mixed policy's rounded weights (SIZE_MAX: none) */
    size_t scratch_count; /* floats of conv2d scratch, the most any layer needs */
    size_t nbytes;        /* the block's size */
} ws_plan;

static void plan_free(ws_plan *p)
{
    free(p->act), free(p->grad), free(p->buf);
}

/* Record v at a[i] unless a is NULL (a plan that only counts bytes). */
static void put(size_t *a, int i, size_t v)
{
    if (a)
        a[i] = v;
}

/* Plan offsets in one block: act[0], then each non-aliased output and its gradient, and the
 * layer's buffer, prob, loss, targets, scratch (only when with_scratch: a device
 * block has none). With p's offset tables NULL it only counts: p->nbytes and
 * p->scratch_count are the same either way, so the estimate (mw_model_ws_nbytes) and the
 * allocation cannot drift apart. */
static void plan_ws(ws_plan *p, const mw_model *m, size_t n, int with_scratch)
{
    const int L = m->nlayers;
    size_t off = 0, in0 = n * m->in_h * m->in_w * m->in_c * sizeof(float);
    put(p->act, 0, off), off += up64(in0);
    put(p->grad, 0, off), off += up64(in0);
    size_t scratch = 0;
    for (int i = 0; i < L; i++) {
        const mw_layer *l = &m->layers[i];
        size_t bytes = n * mw_layer_out_count(l) * sizeof(float);
        if (l->in_place) {
            put(p->act, i + 1, p->act ? p->act[l->in[0] + 1] : 0);
            put(p->grad, i + 1, p->grad ? p->grad[l->in[0] + 1] : 0);
        } else {
            put(p->act, i + 1, off), off += up64(bytes);
            put(p->grad, i + 1, off), off += up64(bytes);
        }
        const mw_layer_ops *r = mw_layer_row(l->kind);
        put(p->buf, i, SIZE_MAX);
        if (r->buf_bytes)
            put(p->buf, i, off), off += up64(r->buf_bytes(l, n));
        if (r->scratch) {
            size_t s = r->scratch(l, n);
            scratch = s > scratch ? s : scratch;
        }
    }
    const size_t P = m->positions > 1 ? (size_t)m->positions : 1;
    p->prob = off;
    off += up64(n * P * m->nclasses * sizeof(float));
    p->loss = off; /* the examples' losses, then (a sequence) the positions' */
    off += up64(n * (P > 1 ? 1 + P : 1) * sizeof(float));
    p->y = off;
    off += up64(n * mw_model_target_bytes(m));
    p->w = off; /* a weight per example, or per position (mw_dataset_batch_weights) */
    off += up64(n * P * sizeof(float));
    p->params16 = SIZE_MAX;
    if (mw_model_policy(m) != MW_POLICY_FLOAT32) {
        p->params16 = off;
        off += up64(m->params.count * sizeof(float));
    }
    p->scratch = off;
    if (with_scratch)
        off += up64(scratch * sizeof(float));
    p->scratch_count = scratch;
    p->nbytes = off;
}

/* The offset tables of a plan; 0 when out of memory. */
static int plan_alloc(ws_plan *p, int L)
{
    memset(p, 0, sizeof *p);
    p->act = calloc((size_t)L + 1, sizeof *p->act);
    p->grad = calloc((size_t)L + 1, sizeof *p->grad);
    p->buf = calloc((size_t)L > 0 ? (size_t)L : 1, sizeof *p->buf);
    if (!p->act || !p->grad || !p->buf) {
        plan_free(p);
        return 0;
    }
    return 1;
}

size_t mw_model_ws_nbytes(const mw_model *m, int max_n)
{
    ws_plan p;
    memset(&p, 0, sizeof p); /* no tables: count only */
    plan_ws(&p, m, (size_t)(max_n > 0 ? max_n : 1), 1);
    return p.nbytes;
}

/* Point ws's buffers into its block as planned. */
static void carve_ws(mw_model_ws *ws, const mw_model *m, const ws_plan *p, int with_scratch)
{
    char *base = ws->block;
    for (int i = 0; i <= m->nlayers; i++) {
        ws->act[i] = (float *)(base + p->act[i]);
        ws->grad[i] = (float *)(base + p->grad[i]);
    }
    for (int i = 0; i < m->nlayers; i++) {
        ws->buf[i] = p->buf[i] == SIZE_MAX ? NULL : base + p->buf[i];
    }
    ws->prob = (float *)(base + p->prob);
    ws->loss = (float *)(base + p->loss);
    ws->y = base + p->y;
    ws->w_buf = (float *)(base + p->w);
    ws->w = NULL;
    ws->params16 = p->params16 == SIZE_MAX ? NULL : (float *)(base + p->params16);
    ws->scratch = with_scratch ? (float *)(base + p->scratch) : NULL;
    ws->scratch_count = p->scratch_count;
}

mw_status mw_model_ws_alloc_with(mw_model_ws *ws, const mw_model *m, int max_n,
                                 mw_status (*alloc_fn)(void **p, size_t nbytes),
                                 void (*free_fn)(void *p))
{
    mw_model_ws_free(ws);
    const int L = m->nlayers;
    const size_t n = (size_t)(max_n > 0 ? max_n : 1);
    ws->max_n = (int)n;
    ws->act = calloc((size_t)L + 1, sizeof *ws->act);
    ws->grad = calloc((size_t)L + 1, sizeof *ws->grad);
    ws->buf = calloc((size_t)L, sizeof *ws->buf);
    if (!ws->act || !ws->grad || !ws->buf)
        goto oom;

    ws_plan plan;
    if (!plan_alloc(&plan, L))
        goto oom;
    plan_ws(&plan, m, n, !alloc_fn);
    if (alloc_fn) {
        void *blk = NULL;
        mw_status rc = alloc_fn(&blk, plan.nbytes);
        if (rc != MW_OK) {
            plan_free(&plan);
            mw_model_ws_free(ws);
            return rc;
        }
        ws->block = blk;
        ws->block_free = free_fn;
    } else {
        ws->block = mw_alloc_aligned(plan.nbytes);
    }
    if (!ws->block) {
        plan_free(&plan);
        goto oom;
    }
    carve_ws(ws, m, &plan, !alloc_fn);
    ws->nbytes = plan.nbytes;
    plan_free(&plan);
    return MW_OK;
oom:
    mw_model_ws_free(ws);
    return mw_err(MW_ENOMEM, "model workspace for batch %zu: out of memory", n);
}
