/* The chief's duties: checkpoints (save, and restore on every rank: read on the chief,
 * broadcast, applied everywhere, so no shared filesystem is needed), summaries and the
 * weights dump. Only the chief (rank 0 of the training communicator) touches the disk. */
#ifndef MW_WORKER_CHIEF_H
#define MW_WORKER_CHIEF_H

#include <mpi.h>

#include "cluster/topology.h"
#include "common/status.h"
#include "worker/checkpoint.h"
#include "worker/opts.h"
#include "worker/session.h"
#include "worker/summary.h"

/* Whether o saves checkpoints at all. */
int mw_chief_checkpointing(const mw_train_opts *o);

/* Without --model, a checkpoint brings its own model: rank 0 of comm reads the latest
 * checkpoint of --checkpoint-dir (keeping it in s->latest.bytes for the restore, so the model
 * and the weights come from the same file, read once) and every rank of comm receives its
 * model text into s->latest.model (left NULL when the directory holds no complete
 * checkpoint yet, only leftovers at most, or it names no model: then the tutorial CNN).
 * Before mw_session_open; collective over comm; a directory whose complete checkpoints are
 * all unreadable is the error the restore would give. */
mw_status mw_chief_fetch_model(mw_session *s, const mw_train_opts *o, MPI_Comm comm);

#define MW_CHIEF_LOCK ".mwtrain.lock" /* the lock file in a checkpoint directory */

/* Chief, before training (when it will save checkpoints or resume): the checkpoint directory
 * exists and is writable, so a bad one is an error at start-up instead of after the first
 * epoch, and it is this job's alone: an exclusive flock on DIR/.mwtrain.lock (its text "host
 * pid" names the holder), held until mw_chief_release_dir or the process ends. A directory
 * another job holds is MW_EINVAL "--checkpoint-dir DIR is in use by another job: PID P on host
 * H holds ...". Then the temporary files of interrupted saves are removed (an info line names
 * them; a later --resume with nothing else in the directory mentions them). Not for eval or
 * export: they only read. */
mw_status mw_chief_check_dir(const char *dir);
/* Release the lock mw_chief_check_dir took (no-op when none is held). */
void mw_chief_release_dir(void);

/* The mark a preempted run leaves in its checkpoint directory once the step reached is saved:
 * one line, "preempted after step N (a signal); checkpoint of step N saved". A launcher whose
 * mpirun was signalled itself (and so exits 1 whatever the ranks did) reads it to return 133
 * (deploy/mpirun/run.sh). mw_chief_check_dir removes it: it belongs to the run it ended. */
#define MW_CHIEF_PREEMPTED "preempted"
mw_status mw_chief_mark_preempted(const mw_session *s, int signal_here);

/* Restore the latest checkpoint of --checkpoint-dir over s->comm. required = 0 (train
 * --resume): a directory without any complete checkpoint (empty, or only leftovers such as
 * temporary files, empty files or an index naming nothing usable: a warning names them)
 * starts from scratch; required = 1 (eval, export): that is MW_ECKPT "no usable checkpoint in
 * DIR, only leftovers: ...". A directory whose complete checkpoints are all bad is MW_ECKPT
 * either way. weights_only: parameters and counters (eval, export), not the optimizer. Pushes
 * the state to the backend. Collective, agreed. */
mw_status mw_chief_restore(mw_session *s, int required, int weights_only, int *restored);

/* Chief only, no collective (every rank holds the same weights): save the state after
 * epochs_done epochs and step_in_epoch steps of the next as checkpoint *number; with bytes
 * non-NULL, also return it serialized (owned by the caller: for the evaluator task). */
mw_status mw_chief_save(mw_session *s, int epochs_done, long step_in_epoch, long *number,
                        void **bytes, size_t *nbytes);

/* Chief: the epoch's scalars to TensorBoard and metrics.csv (no-op when sum is closed). */
mw_status mw_chief_summaries(const mw_session *s, mw_summary *sum, int epoch,
                             const mw_epoch_metrics *em);

/* The straggler note of the chief's epoch line, from each rank's median step time without the
 * all-reduce (medians[world], seconds; 0: the rank ran no step): when the slowest rank's is
 * more than MW_STRAGGLER_RATIO times the median rank's (the median of the world medians),
 * buf = ", straggler: rank R's median step (without the all-reduce) X ms, P% slower than the
 * median rank's Y ms", else "". In a synchronous step every rank waits for the slowest in the
 * all-reduce, so only the time before it tells the ranks apart. */
#define MW_STRAGGLER_RATIO 1.2
void mw_chief_straggler_note(char *buf, size_t len, const double *medians, int world);

/* Chief: the parameters tensor by tensor in model order (Keras layouts), without the
 * arena's alignment and shard padding: the same bytes for any layout (--dump-weights). Only
 * into a regular file (or a new one); MW_EIO with the reason (errno) when it cannot be
 * written. */
mw_status mw_chief_dump_weights(mw_session *s, const char *path);

/* The chief's end of the evaluator task's link (the protocol: worker/evaluator.h). */
enum { MW_EV_TAG_HDR = 71, MW_EV_TAG_DATA = 72 };

typedef struct {
    int rank;           /* the evaluator's rank in world; -1 when there is none */
    MPI_Comm world;     /* borrowed */
    double timeout;     /* --collective-timeout */
    void *buf;          /* the checkpoint bytes in flight (owned) */
    long hdr[2];        /* number (-1: done), bytes */
    MPI_Request req[2]; /* header, data */
} mw_evlink;

/* The link of topo (rank -1 without an evaluator task). */
void mw_evlink_init(mw_evlink *l, const mw_topology *topo, double timeout);
/* Hand checkpoint number (>= 1) to the evaluator: bytes (nbytes) are owned from here on,
 * also on failure. Waits for the previous send first. step: for messages. */
mw_status mw_evlink_send(mw_evlink *l, long number, void *bytes, size_t nbytes, long step);
/* Tell the evaluator that training has finished, and wait until it has taken it. */
mw_status mw_evlink_finish(mw_evlink *l, long step);
/* Tell the evaluator that the trainers were preempted and have saved, and wait until it has
 * taken it. */
mw_status mw_evlink_preempted(mw_evlink *l, long step);
/* Release what is in flight (after a failure: the requests stay, the job is aborting). */
void mw_evlink_free(mw_evlink *l);

#endif
