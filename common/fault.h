/* Test-only fault injection at named points of a run, so the fault tests can stop a rank at
 * the worst moment deterministically instead of racing a `kill -STOP` against the clock:
 *
 *     MW_FAULT=stop:POINT:RANK   that rank stops itself (SIGSTOP) on reaching POINT
 *     MW_FAULT=hold:POINT:RANK   that rank's thread waits there for ever (pause()), its signals
 *                                still taken: what a signal then does is all that happens
 *     MW_FAULT=slow:RANK:MS      that rank sleeps MS milliseconds in every training step
 *                                (mw_fault_slow), a straggler for the epoch line's note
 *     MW_FAULT=wedge:RANK        that rank's first collective wait never returns, as a rank
 *                                blocked inside an MPI call whose peer's node is stopped
 *                                (RANK "all": every rank); cluster/comm.c's backstop ends it
 *
 *     MW_FAULT=status:NAME       the command fails at once (after MPI_Init) with that status
 *                                (MW_EINTERNAL, MW_EMPI, ...): each exit code of the table
 *                                produced through main's own ending, also where no input
 *                                reaches it (tests/check_exit_codes.py)
 *
 *     MW_FAULT=cudnn:WHICH       kernels/cuda/cudnn.cu refuses its own choices when it makes a
 *                                plan: first (a bad algorithm ahead of every pass's candidates),
 *                                filter (every backward-filter candidate), all (every one); the
 *                                fallbacks' test on a device (test_cuda)
 *
 * Points: start (the signal handlers in place, before the flags are parsed and any file is
 * read), temp (a temporary file just created by mw_preempt_temp_create: a checkpoint's or an
 * export's), init (before MPI_Init), setup (before the set-up agreement), restore (before the
 * --resume read and broadcast), bn-sync (before a synchronized BatchNormalization's all-reduce
 * inside a training step), bucket (the overlapped all-reduce's thread, before each bucket:
 * worker/replicas/overlap.c), finish (before the shut-down agreement). RANK is the MPI world
 * rank (before MPI_Init it is read from the launcher's environment). Unset: nothing happens.
 * libc only. */
#ifndef MW_COMMON_FAULT_H
#define MW_COMMON_FAULT_H

#include "common/status.h"

/* rank < 0: take it from the launcher's environment (OMPI_COMM_WORLD_RANK, PMIX_RANK). */
void mw_fault_point(const char *point, int rank);
/* MW_FAULT=slow:RANK:MS and this is RANK: sleep MS milliseconds. The variable is read once. */
void mw_fault_slow(int rank);

/* MW_FAULT=wedge:RANK (or wedge:all) names this process (rank < 0: the launcher's
 * environment): 1, else 0. */
int mw_fault_wedged(int rank);

/* MW_FAULT=status:NAME: that status, its message naming the fault; else MW_OK. */
mw_status mw_fault_status(void);

#endif
