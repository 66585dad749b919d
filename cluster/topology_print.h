/* Printing the topology table (cluster/topology.h): the rows `mwtrain cluster` shows, as an
 * aligned text table or as one JSON object for scripts. */
#ifndef MW_CLUSTER_TOPOLOGY_PRINT_H
#define MW_CLUSTER_TOPOLOGY_PRINT_H

#include <stdio.h>

#include "cluster/topology.h"

/* Print the table (rank, world rank, task, host, node, local rank, role, and with devices a
 * device column) under a one-line summary (whose node count includes an evaluator's own
 * node), or with json != 0 one JSON object ("nnodes" there is the field: training nodes; with
 * devices a "device" field per rank). devices: NULL, or world_size strings indexed by rank,
 * each what that rank trains on ("cpu", "cuda:0", "cuda:0-3"). Any rank can print; main
 * prints on rank 0. */
void mw_topology_print(const mw_topology *t, FILE *f, int json, const char *const *devices);

#endif
