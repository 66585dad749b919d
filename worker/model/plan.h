/* The execution plan of a model whose layers are all known (plan.c): layer flags that say how
 * the forward and backward run (mw_layer's in_place, round_out, round_grad, fuse_norm,
 * fuse_relu, zero_in; graph.h), never what they compute. */
#ifndef MW_WORKER_MODEL_PLAN_H
#define MW_WORKER_MODEL_PLAN_H

#include "worker/model/graph.h"

/* How many layers read the output of layer idx (-1: the model input). */
int mw_model_consumers(const mw_model *m, int idx);

/* Sets the flags above on every layer of m (mw_model_plan calls it; its policies checked). */
void mw_model_plan_exec(mw_model *m);

#endif
