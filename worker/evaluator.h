/* The evaluator task and its protocol with the chief.
 *
 * An `evaluator` task in TF_CONFIG is one more rank, the last of topo->world, outside the
 * training communicator: it trains nothing, and evaluates each checkpoint the chief saves.
 * It needs no shared filesystem: the checkpoints come over MPI. Every message below goes
 * over topo->world.
 *
 * Start-up. Every task, trainers and the evaluator alike, takes part in two agreements
 * over topo->world, in this order; both sides call the same function for each, so the
 * sequence lives here and not in a count of mw_agree calls:
 *
 *   1. mw_evaluator_agree_setup: each task's local set-up (data, model, device, the
 *      checkpoint directory). On failure every task returns the lowest failing task's
 *      message. Without an evaluator the trainers still run it (over the trainers).
 *   2. mw_evaluator_agree_start: does training start? The trainers bring the outcome of
 *      their collective set-up, the restore and the summary writer; the evaluator brings
 *      MW_OK. Only with an evaluator, and only after 1 succeeded.
 *
 * Checkpoints. After each save the chief sends, without blocking, a header of two longs
 * {checkpoint number >= 1, nbytes} (tag MW_EV_TAG_HDR), then the serialized checkpoint,
 * nbytes bytes (tag MW_EV_TAG_DATA). Before the next send, and at the end, it waits for the
 * previous one under --collective-timeout, naming the evaluator's rank. The evaluator
 * receives them in order, restores the weights into its own model, evaluates, prints
 *
 *     Evaluator: ckpt-N (epoch E, step S), Test Loss: L, Test Accuracy: A
 *
 * and writes eval/loss and eval/accuracy into <summary-dir>/eval.
 *
 * End. When training has finished, the chief sends the header {-1, 0} and an empty data
 * message; the evaluator logs it and exits 0. When the trainers were preempted (a signal,
 * worker/train.c) and the chief has saved, the header is {-2, 0}: the evaluator ends with
 * MW_EPREEMPTED as they do.
 *
 * The chief's end of the link (mw_evlink, the tags) is in worker/chief.h, with its other duties;
 * the evaluator's end is here.
 *
 * Failure. Nothing is agreed after start: a failure on either side afterwards ends the
 * job (MPI_Abort, through *mid_run). */
#ifndef MW_WORKER_EVALUATOR_H
#define MW_WORKER_EVALUATOR_H

#include <mpi.h>
#include <stddef.h>

#include "cluster/topology.h"
#include "common/status.h"
#include "worker/opts.h"

/* The two start-up agreements (above); every task of topo->world calls both in order. */
mw_status mw_evaluator_agree_setup(const mw_topology *topo, mw_status mine);
mw_status mw_evaluator_agree_start(const mw_topology *topo, mw_status mine);

/* The evaluator task's whole run. *mid_run: a failure after start (the caller aborts). */
mw_status mw_evaluator_run(const mw_train_opts *o, const mw_topology *topo, int *mid_run);

#endif
