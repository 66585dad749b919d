/* Topology: which task each MPI rank runs, its node and local rank, the chief, and the
 * communicators the collectives use.
 *
 * Three launch modes resolve to one table, indexed by the renumbered rank (task order):
 *   - MW_TOPO_MPI: no TF_CONFIG on any rank. Every rank is a worker in MPI order (rank 0 is the
 *     chief); nodes come from MPI's shared-memory split; hosts are MPI processor names.
 *   - MW_TOPO_SHARED: every rank has the same TF_CONFIG, `task` field included (mpirun with one
 *     environment). Rank r takes task r in TensorFlow's order; the evaluator is the last rank.
 *   - MW_TOPO_PER_RANK: the ranks' `task` fields differ (one TF_CONFIG per pod). Together they
 *     must name every task exactly once; ranks are renumbered into task order.
 * With a TF_CONFIG, tasks whose hosts are equal (case-insensitive) share a node, which lets
 * tests fake 2 nodes x 2 ranks on one machine (hosts node-a, node-b). The chief is always
 * renumbered rank 0: the chief task, or worker 0 when there is none.
 *
 * Failing fast: every check whose outcome can differ between ranks is agreed with mw_agree
 * before the next collective, so a rank that found an error never leaves another blocked, and
 * every rank returns the same status and message. */
#ifndef MW_CLUSTER_TOPOLOGY_H
#define MW_CLUSTER_TOPOLOGY_H

#include <stddef.h>

#include <mpi.h>

#include "cluster/tfconfig.h"
#include "common/status.h"

typedef enum { MW_TOPO_MPI, MW_TOPO_SHARED, MW_TOPO_PER_RANK } mw_topo_mode;

/* One row of the table. */
typedef struct {
    int world_rank; /* rank in MPI_COMM_WORLD */
    int task;       /* index into the task list (== the renumbered rank) */
    mw_job job;
    int job_index;
    char *host;     /* owned */
    int port;       /* 0 in MW_TOPO_MPI */
    int node;       /* node number: nodes in order of their first rank */
    int local_rank; /* order within the node */
    int is_chief;
} mw_rank_info;

typedef struct {
    mw_topo_mode mode;
    int world_rank, world_size; /* MPI_COMM_WORLD */
    int rank;                   /* renumbered rank: this rank's place in task order */
    int task;                   /* index into the task list (== rank) */
    mw_job job;
    int job_index;
    int is_chief, is_evaluator;
    /* Training ranks only count in nnodes, local_rank and local_size. The evaluator (never on a
     * training communicator) gets the node of its host, a number >= nnodes when no training
     * rank shares it, and local_rank = the training ranks on that node. */
    int node, nnodes, local_rank, local_size;
    int ntrain;          /* training ranks: 0..ntrain-1 */
    mw_rank_info *ranks; /* world_size rows by renumbered rank; owned */
    MPI_Comm world;      /* dup of MPI_COMM_WORLD renumbered into task order */
    MPI_Comm train;      /* training ranks (MPI_COMM_NULL on the evaluator) */
    MPI_Comm node_comm;  /* training ranks on my node, by local rank (NULL on the evaluator) */
    MPI_Comm cross;      /* training ranks with my local rank, one per node, by node (NULL on
                            the evaluator) */
} mw_topology;

void mw_topology_init(mw_topology *t);
/* Frees the table and the communicators; safe on an initialized or half-built topology; call
 * before MPI_Finalize. Leaves t initialized. */
void mw_topology_free(mw_topology *t);

/* Collective over MPI_COMM_WORLD; needs MPI initialized. Reads the TF_CONFIG (from
 * tf_config_path when non-NULL, else the environment), maps ranks to tasks, finds nodes and
 * builds the communicators. Every rank returns the same status; on failure every rank holds
 * the lowest failing rank's message (mw_err_msg), prefixed with "rank N: " when the world has
 * more than one rank and the failure was local to a rank, so main can print it once, and t is
 * left initialized. */
mw_status mw_topology_resolve(mw_topology *t, const char *tf_config_path);

/* "chief + 2 workers + evaluator": the jobs that njob[MW_JOB_COUNT] counts, into buf[n]
 * (cut to fit). */
void mw_topology_jobs(const int *njob, char *buf, size_t n);

/* "one environment" etc.; never NULL. */
const char *mw_topo_mode_name(mw_topo_mode mode);

/* ---- the MPI-free parts, exposed for unit tests ---------------------------------------- */

/* Map ranks to tasks. claims[r] is the task (index into c->tasks) that rank r's `task` field
 * names. When every claim is equal the mode is MW_TOPO_SHARED and rank r takes task r;
 * otherwise MW_TOPO_PER_RANK and each task must be claimed exactly once. Either way world_size
 * must equal c->ntasks. Fills task_of_rank[world_size] and *mode. On a mismatch returns
 * MW_ECONFIG with a message naming the ranks and tasks involved. */
mw_status mw_topology_assign(const mw_tfconfig *c, const int *claims, int world_size,
                             int *task_of_rank, mw_topo_mode *mode);

/* Group n tasks into nodes by host (case-insensitive). The first ntrain are training tasks,
 * the rest (the evaluator) come after them. node[i] numbers nodes by their first task;
 * local_rank[i] is the task's order within its node; *nnodes counts nodes holding a training
 * task (those are numbered 0..*nnodes-1). */
mw_status mw_topology_nodes(const char *const *hosts, int n, int ntrain, int *node, int *local_rank,
                            int *nnodes);

#endif
