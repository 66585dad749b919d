/* Waiting on MPI requests with a deadline, so no rank sits blocked forever.
 *
 * Every wait in the collectives goes through mw_comm_wait: it polls the
 * requests and, past the collective timeout, records an MW_ETIMEOUT message
 * naming the operation, the step and the peer being waited for. The caller
 * returns the status up to main, which aborts the job (a peer that stopped
 * cannot join an agreement) with the retryable exit code. */
#ifndef MW_CLUSTER_COMM_H
#define MW_CLUSTER_COMM_H

#include <mpi.h>

#include "common/status.h"

typedef struct {
    const char *op; /* "ring all-reduce", ... */
    long step;      /* training step, -1 when not in a step */
    double timeout; /* seconds; <= 0: wait forever */
} mw_wait_ctx;

/* Wait for all n requests. peer_of(i) for the message: the rank request i
 * waits on (peers[i]), or -1. On timeout the requests stay pending. */
mw_status mw_comm_wait(const mw_wait_ctx *w, MPI_Request *reqs, int n, const int *peers);

/* MPI_Bcast from root with the timeout of w. */
mw_status mw_comm_bcast(const mw_wait_ctx *w, void *buf, int count, MPI_Datatype type, int root,
                        MPI_Comm comm);

/* Polls before a wait starts yielding the core (default 4096; the
 * all-reduce lowers it when a node has more ranks than cores). */
void mw_comm_set_yield_after(unsigned long polls);

/* Turn an MPI error code into MW_EMPI with the MPI error string. */
mw_status mw_mpi_err(int code, const char *what);

/* Agree on a status. Collective over comm: every rank sends its status and message to rank 0,
 * which finds the lowest rank whose `local` is not MW_OK and sends that rank's status and message
 * (mw_err_msg, or its status description when none was recorded) back. Every rank then holds
 * that message as its recorded error and returns that status (MW_OK when every rank passed
 * MW_OK). Returning the failing rank's own status keeps the exit code and the message
 * consistent: a configuration error on rank 0 is not turned into a retryable code by a timeout
 * elsewhere. *first_rank (may be NULL) is the lowest failing rank, or -1.
 * Every wait is polled against mw_comm_timeout(): rank 0 names the rank that did not arrive
 * ("collective timeout: agreement waited 10 s for rank 2"); the other ranks wait longer for
 * rank 0, so its message is the one that ends the job. A timeout is MW_ETIMEOUT, not agreed:
 * the caller ends the job. */
mw_status mw_agree(MPI_Comm comm, mw_status local, int *first_rank);

/* The smallest and largest of every rank's v over comm (one polled all-reduce). */
mw_status mw_agree_range(MPI_Comm comm, int v, int *lo, int *hi, const char *what);

/* The deadline, in seconds, of every wait outside a training step: agreements, set-up
 * collectives, restore, shut-down (--collective-timeout; <= 0 waits forever). */
void mw_comm_set_timeout(double seconds);
double mw_comm_timeout(void);

/* The collectives of set-up as non-blocking calls polled with mw_comm_wait (in place for
 * the all-reduce; count elements per rank for the gathers). */
mw_status mw_comm_allreduce(const mw_wait_ctx *w, void *buf, int count, MPI_Datatype type,
                            MPI_Op op, MPI_Comm comm);
mw_status mw_comm_allgather(const mw_wait_ctx *w, const void *mine, void *all, int count,
                            MPI_Datatype type, MPI_Comm comm);
mw_status mw_comm_gather(const mw_wait_ctx *w, const void *mine, void *all, int count,
                         MPI_Datatype type, int root, MPI_Comm comm);
mw_status mw_comm_barrier(const mw_wait_ctx *w, MPI_Comm comm);

/* The tag of agreement messages (no other message uses it). */
#define MW_TAG_AGREE 0x6d77

#define MW_MPI(call, what)                                                                         \
    do {                                                                                           \
        int mw_mpi_rc_ = (call);                                                                   \
        if (mw_mpi_rc_ != MPI_SUCCESS)                                                             \
            return mw_mpi_err(mw_mpi_rc_, what);                                                   \
    } while (0)

#endif
