/* Recursive halving-doubling over one communicator, one of the all-reduce algorithms
 * (cluster/allreduce.h states the contract and runs it from its table, as it runs
 * cluster/ring.h's ring): log2 P exchanges each way instead of the ring's P - 1, for
 * latency-bound sizes. */
#ifndef MW_CLUSTER_HALVING_H
#define MW_CLUSTER_HALVING_H

#include <stddef.h>

#include <mpi.h>

#include "common/status.h"

/* What a call keeps for the next: the receive buffer. Zeroed is empty. */
typedef struct {
    float *tmp; /* owned, cap floats */
    size_t cap;
} mw_halving;

/* buf = the sum over comm's ranks of buf, in place, each rank adding in the same fixed order
 * (a layout run twice gives bitwise equal sums). Collective over comm; every exchange waits
 * at most timeout seconds, step names the training step in a timeout's message. */
mw_status mw_halving_sum(mw_halving *h, MPI_Comm comm, float *buf, size_t count, long step,
                         double timeout);
/* Frees the buffer; h is empty again. */
void mw_halving_close(mw_halving *h);

#endif
