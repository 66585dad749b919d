/* Synchronized BatchNormalization's lockstep (worker/model/model.h), written once above both
 * replica backends. A rank's replicas run the parts of the model between synchronized layers
 * one replica after the other; at each synchronized layer every replica's 2 C sums, added in
 * replica order and then over the ranks (an all-reduce under the collective timeout), go
 * back to each replica's pass through the layer; the backward runs the same way in reverse.
 * The backend stages the inputs before and takes the metrics after; in between it gives only
 * its replicas and the memory moves of the sums (the CPU's are host memory: no moves; a GPU
 * downloads, waits and uploads). Lives in mwtrain; the GPU module calls it through the
 * binary's exported symbols. */
#ifndef MW_WORKER_REPLICAS_LOCKSTEP_H
#define MW_WORKER_REPLICAS_LOCKSTEP_H

#include <stddef.h>

#include <mpi.h>

#include "common/status.h"
#include "kernels/kernels.h"
#include "worker/model/model.h"

typedef struct {
    /* Replica lr's workspace (its inputs staged), kernel context, gradient arena, examples. */
    void (*replica)(void *ctx, int lr, mw_model_ws **ws, const mw_kctx **k, float **grads,
                    long *cnt);
    /* Where mw_model_sync_sums writes replica lr's sums: host (2 C doubles of host memory the
     * lockstep adds up), or the replica's own memory, which fetch then starts moving to the
     * host and wait finishes moving into host. fetch and wait NULL: host memory. */
    double *(*sums)(void *ctx, int lr, double *host);
    mw_status (*fetch)(void *ctx, int lr, size_t nbytes);
    mw_status (*wait)(void *ctx, int lr, double *host, size_t nbytes, const char *what);
    /* The total tot (host memory) where replica lr's pass through the layer reads it (*at);
     * NULL: tot itself. */
    mw_status (*put)(void *ctx, int lr, const double *tot, size_t nbytes, const double **at);
} mw_lockstep_ops;

typedef struct {
    const mw_model *model;
    const mw_kernels *kt;
    const mw_lockstep_ops *ops;
    void *ctx;     /* the backend's, handed to ops */
    int replicas;  /* local replicas */
    MPI_Comm comm; /* the ranks' sums: MPI_COMM_NULL or one rank, none */
    int world, world_rank;
    double timeout; /* --collective-timeout */
    long step;      /* for messages */
    double *host;   /* (replicas + 1) x 2 x mw_model_sync_channels doubles (the caller's) */
} mw_lockstep;

/* Doubles of host memory a lockstep of `replicas` replicas needs (mw_lockstep.host). */
size_t mw_lockstep_host_count(const mw_model *m, int replicas);

/* One training pass of the global batch of gb examples (every replica's inputs staged):
 * forward and backward through every layer, gradients scaled by 1 / gb into each replica's
 * arena. */
mw_status mw_lockstep_step(const mw_lockstep *ls, long gb);

#endif
