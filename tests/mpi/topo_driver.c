/* Multi-rank test driver for the cluster layer: resolve the topology, check the communicators
 * against the table, and print what `mwtrain cluster` would print.
 *
 *   topo_driver [--tf-config PATH] [--json] [--exit-dir DIR]
 *
 * On success rank 0 prints the table (or JSON) on stdout. On failure rank 0 alone prints
 * "error: MESSAGE" on stderr, and every rank exits with the status's exit code. With
 * --exit-dir (or MW_TEST_EXIT_DIR) each rank writes "CODE PID" to DIR/rank<world rank> just
 * before it exits, so the test scripts can check that every rank ended, and with which code. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "cluster/comm.h"
#include "cluster/topology.h"
#include "cluster/topology_print.h"
#include "common/status.h"

/* The members of comm as renumbered ranks, in comm's order; *n is the size (0 for NULL). */
static void members(MPI_Comm comm, int rank, int *out, int *n)
{
    *n = 0;
    if (comm == MPI_COMM_NULL)
        return;
    MPI_Comm_size(comm, n);
    MPI_Allgather(&rank, 1, MPI_INT, out, 1, MPI_INT, comm);
}

static mw_status compare(const char *what, int rank, const int *got, int ngot, const int *want,
                         int nwant)
{
    if (ngot != nwant)
        return mw_err(MW_EINTERNAL, "rank %d: %s communicator has %d ranks; the table says %d",
                      rank, what, ngot, nwant);
    for (int i = 0; i < ngot; i++)
        if (got[i] != want[i])
            return mw_err(MW_EINTERNAL,
                          "rank %d: %s communicator member %d is rank %d; the "
                          "table says %d",
                          rank, what, i, got[i], want[i]);
    return MW_OK;
}

/* Every rank checks its own fields and its communicators against the shared table. All the
 * collectives run first, unconditionally, so a rank that finds a mismatch cannot leave its
 * peers waiting; the comparisons are local. */
static mw_status check(const mw_topology *t)
{
    int n = t->world_size, me = t->rank, wr = 0, r = -1;
    int ng[4] = {0}, nw[4] = {0};
    int *buf = malloc((size_t)n * 8 * sizeof *buf);
    if (!buf)
        return mw_err(MW_ENOMEM, "out of memory");
    int *got[4], *want[4];
    for (int c = 0; c < 4; c++) {
        got[c] = buf + (size_t)c * n;
        want[c] = buf + (size_t)(4 + c) * n;
    }
    MPI_Comm comms[4] = {t->world, t->train, t->node_comm, t->cross};
    for (int c = 0; c < 4; c++)
        members(comms[c], me, got[c], &ng[c]);
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_rank(t->world, &r);

    for (int i = 0; i < n; i++)
        want[0][nw[0]++] = i;
    if (!t->is_evaluator) {
        for (int i = 0; i < t->ntrain; i++) {
            want[1][nw[1]++] = i;
            if (t->ranks[i].node == t->node)
                want[2][t->ranks[i].local_rank] = i, nw[2]++;
        }
        /* cross-node: one rank per node that has my local rank, in node order */
        for (int node = 0; node < t->nnodes; node++)
            for (int i = 0; i < t->ntrain; i++)
                if (t->ranks[i].node == node && t->ranks[i].local_rank == t->local_rank)
                    want[3][nw[3]++] = i;
    }
    const mw_rank_info *row = &t->ranks[me];
    mw_status rc = MW_OK;
    if (row->world_rank != wr || row->task != me || t->task != me || t->node != row->node ||
        t->local_rank != row->local_rank || t->is_chief != (me == 0) || r != me)
        rc = mw_err(MW_EINTERNAL, "world rank %d: own fields disagree with table row %d", wr, me);
    else if (!t->is_evaluator && nw[2] != t->local_size)
        rc = mw_err(MW_EINTERNAL, "rank %d: local_size %d, table has %d", me, t->local_size, nw[2]);
    static const char *const names[4] = {"world", "training", "node", "cross-node"};
    for (int c = 0; c < 4 && rc == MW_OK; c++)
        rc = compare(names[c], me, got[c], ng[c], want[c], nw[c]);
    free(buf);
    return rc;
}

int main(int argc, char **argv)
{
    const char *path = NULL, *exit_dir = getenv("MW_TEST_EXIT_DIR");
    int json = 0, bad_arg = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--tf-config") == 0 && i + 1 < argc)
            path = argv[++i];
        else if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--exit-dir") == 0 && i + 1 < argc)
            exit_dir = argv[++i];
        else
            bad_arg = 1;
    }
    MPI_Init(&argc, &argv);
    int wr = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);

    mw_topology t;
    mw_topology_init(&t);
    mw_status rc = MW_OK;
    if (bad_arg)
        rc = mw_err(MW_EINVAL, "usage: topo_driver [--tf-config PATH] [--json] [--exit-dir DIR]");
    if (rc == MW_OK)
        rc = mw_topology_resolve(&t, path);
    if (rc == MW_OK)
        rc = mw_agree(MPI_COMM_WORLD, check(&t), NULL);
    if (rc == MW_OK && wr == 0) {
        mw_topology_print(&t, stdout, json, NULL);
        fflush(stdout);
    } else if (rc != MW_OK && wr == 0) {
        fprintf(stderr, "error: %s\n", mw_err_msg());
        fflush(stderr);
    }
    int code = mw_status_exit_code(rc);
    mw_topology_free(&t);
    if (exit_dir) {
        char file[4096];
        snprintf(file, sizeof file, "%s/rank%d", exit_dir, wr);
        FILE *f = fopen(file, "w");
        if (f) {
            fprintf(f, "%d %ld\n", code, (long)getpid());
            fclose(f);
        }
    }
    MPI_Finalize();
    return code;
}
