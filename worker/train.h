/* The training and evaluation loops of `mwtrain train`.
 *
 * One step: the global batch of step k (the same example ids for any layout)
 * is cut into contiguous per-replica slices; each local replica runs forward
 * and backward on its slice with the loss scaled by 1/|global batch|, adding
 * into one gradient arena; the arena is all-reduced (SUM) across ranks; every
 * rank applies the same optimizer update. Metrics are kept as sums and counts
 * and reduced once per epoch (sums commute with the per-step mean). */
#ifndef MW_WORKER_TRAIN_H
#define MW_WORKER_TRAIN_H

#include <stdint.h>

#include "cluster/topology.h"
#include "common/status.h"
#include "worker/opts.h"
#include "worker/session.h"

/* A training rank's run (the evaluator task runs mw_evaluator_run, worker/evaluator.h, instead:
 * main dispatches the roles). Runs the whole training over the topology's training ranks;
 * prints the
 * per-epoch lines on the chief. Failures before the first step are agreed by
 * every rank (the same status everywhere). A failure inside a step, or any
 * failure with a retryable exit code (a collective timeout, a lost peer, MPI
 * failing), cannot be agreed: *mid_run is set and the caller must abort the job. */
mw_status mw_train_run(const mw_train_opts *o, const mw_topology *topo, mw_epoch_metrics *last,
                       int *mid_run);

#endif
