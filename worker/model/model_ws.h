/* Making the per-replica activation workspace, mw_model_ws (model.h), for a finished model
 * (model_ws.c): one block holding every buffer a forward and backward of up to max_n examples
 * use, on the host or from the caller's allocator (a device workspace); and its size before
 * it is made, for the memory estimate (worker/memory.h). */
#ifndef MW_WORKER_MODEL_WS_H
#define MW_WORKER_MODEL_WS_H

#include <stddef.h>

#include "common/status.h"
#include "worker/model/model.h"

void mw_model_ws_init(mw_model_ws *ws);
mw_status mw_model_ws_alloc(mw_model_ws *ws, const mw_model *m, int max_n);
/* The same layout in memory from alloc_fn / free_fn (e.g. mw_cuda_alloc and
 * mw_cuda_free: a device workspace, whose act/grad/prob/loss/y/... are
 * device pointers). The kernel scratch is not part of it: ws->scratch is NULL
 * and ws->scratch_count says how many floats to give the kernel context
 * (mw_cuda_ws_reserve). The workspace's pointer tables stay on the host. */
mw_status mw_model_ws_alloc_with(mw_model_ws *ws, const mw_model *m, int max_n,
                                 mw_status (*alloc_fn)(void **p, size_t nbytes),
                                 void (*free_fn)(void *p));
void mw_model_ws_free(mw_model_ws *ws);
/* The bytes mw_model_ws_alloc(ws, m, max_n) takes for its block (activations, gradients,
 * argmax and dropout masks, probabilities, losses, targets, kernel scratch), computed from
 * the same plan without allocating: what one workspace costs before it is made. */
size_t mw_model_ws_nbytes(const mw_model *m, int max_n);

#endif
