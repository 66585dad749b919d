/* Between the model's arrays (its parameter arena, and the gradient and slot arenas of the
 * same layout) and a checkpoint's packed arrays (worker/checkpoint.h), and the values a
 * checkpoint holds checked against the model. */
#ifndef MW_WORKER_CHECKPOINT_PACK_H
#define MW_WORKER_CHECKPOINT_PACK_H

#include "common/status.h"
#include "worker/checkpoint.h"
#include "worker/model/model.h"

/* Whether every value of c's parameters and optimizer slots is finite (c holds m's nparams),
 * which nothing in the format checks: a NaN weight reached the kernels' exp and ended the run
 * as diverged (exit 8). MW_ECKPT "NAME: section params: layer 'L' (Dense) kernel, value I of
 * N, is nan (expected finite weights)" for the first that is not. */
mw_status mw_ckpt_check_finite(const mw_model *m, const mw_ckpt *c, const char *name);

/* Between the model's arena layout (m->params, and the gradient and slot arenas of the same
 * layout) and the packed layout: m->nparams floats, each layer's kernel then bias, in layer
 * order. */
void mw_ckpt_pack(const mw_model *m, float *packed, const float *arena);
void mw_ckpt_unpack(const mw_model *m, float *arena, const float *packed);

#endif
