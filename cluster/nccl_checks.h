/* The checks cluster/nccl.c runs before it opens NCCL (nccl_checks.c), over MPI only: the
 * same outcome on every rank of a node, and of every node. */
#ifndef MW_CLUSTER_NCCL_CHECKS_H
#define MW_CLUSTER_NCCL_CHECKS_H

#include <mpi.h>

#include "common/status.h"

#define MW_NCCL_PCI_LEN 32 /* a PCI bus id, "0000:3b:00.0", and room to spare */

/* The node's checks, the same outcome on every rank of the node: every rank drives the same
 * number of GPUs, and no GPU (by PCI bus id: CUDA_VISIBLE_DEVICES may renumber them per rank)
 * is driven twice. Collective over node. */
mw_status mw_nccl_check_node(MPI_Comm node, int local_size, int ndev, const char *pci);
/* Every node the same number of ranks and GPUs per rank (so the shards of the cross-node rings
 * line up), and no node failed its own checks. Collective over cross: every node's local rank
 * 0 is in the same cross communicator, so with the node agreement that follows every rank of
 * every node learns the outcome. */
mw_status mw_nccl_check_cross(MPI_Comm cross, int nnodes, int local_size, int ndev, mw_status mine);

#endif
