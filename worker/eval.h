/* `mwtrain eval` and `mwtrain export`: the commands that restore the latest checkpoint
 * (read on the chief, broadcast) and use its weights without training. */
#ifndef MW_WORKER_EVAL_H
#define MW_WORKER_EVAL_H

#include "cluster/topology.h"
#include "common/status.h"
#include "worker/opts.h"

/* `mwtrain eval`: evaluate the test set, sharded over the ranks; prints on the chief. */
mw_status mw_eval_run(const mw_train_opts *o, const mw_topology *topo);
/* `mwtrain export`: the weights as safetensors, written by the chief. */
mw_status mw_export_run(const mw_train_opts *o, const mw_topology *topo);

#endif
