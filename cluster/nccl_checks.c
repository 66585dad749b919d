/* The NCCL all-reduce's set-up checks (nccl_checks.h): plain MPI, agreed among the ranks. */
#include "cluster/nccl_checks.h"

#include <stdlib.h>
#include <string.h>

#include "cluster/comm.h"

mw_status mw_nccl_check_node(MPI_Comm node, int local_size, int ndev, const char *pci)
{
    const int L = local_size;
    int *nd = calloc((size_t)L, sizeof *nd);
    if (!nd)
        return mw_err(MW_ENOMEM, "NCCL set-up: out of memory");
    mw_status rc = MW_OK;
    int mpi = MPI_Allgather(&ndev, 1, MPI_INT, nd, 1, MPI_INT, node);
    if (mpi != MPI_SUCCESS) {
        free(nd);
        return mw_mpi_err(mpi, "NCCL set-up: MPI_Allgather");
    }
    for (int i = 1; i < L && rc == MW_OK; i++)
        if (nd[i] != nd[0])
            rc = mw_err(MW_EDEVICE,
                        "NCCL set-up: local rank %d drives %d GPU%s but local rank "
                        "0 drives %d; every rank of a node must drive the same number",
                        i, nd[i], nd[i] == 1 ? "" : "s", nd[0]);
    free(nd);
    if (rc != MW_OK || L == 1)
        return rc;

    size_t per = (size_t)ndev * MW_NCCL_PCI_LEN;
    char *all = calloc((size_t)L, per);
    if (!all)
        return mw_err(MW_ENOMEM, "NCCL set-up: out of memory");
    mpi = MPI_Allgather(pci, (int)per, MPI_CHAR, all, (int)per, MPI_CHAR, node);
    if (mpi != MPI_SUCCESS) {
        free(all);
        return mw_mpi_err(mpi, "NCCL set-up: MPI_Allgather");
    }
    size_t total = (size_t)L * (size_t)ndev;
    for (size_t i = 0; i < total && rc == MW_OK; i++)
        for (size_t j = i + 1; j < total && rc == MW_OK; j++) {
            const char *a = all + i * MW_NCCL_PCI_LEN, *b = all + j * MW_NCCL_PCI_LEN;
            if (*a && strcmp(a, b) == 0)
                rc = mw_err(MW_EDEVICE,
                            "NCCL set-up: local ranks %d and %d both drive the GPU "
                            "at PCI %s; NCCL needs every GPU of a node driven by one rank only: "
                            "start at most as many ranks per node as it has GPUs, or use "
                            "--device cpu",
                            (int)(i / (size_t)ndev), (int)(j / (size_t)ndev), a);
        }
    free(all);
    return rc;
}

mw_status mw_nccl_check_cross(MPI_Comm cross, int nnodes, int local_size, int ndev, mw_status mine)
{
    if (cross == MPI_COMM_NULL || nnodes <= 1)
        return mine;
    int v[5] = {local_size, -local_size, ndev, -ndev, -(mine != MW_OK)}, m[5];
    int mpi = MPI_Allreduce(v, m, 5, MPI_INT, MPI_MIN, cross);
    if (mine != MW_OK)
        return mine;
    if (mpi != MPI_SUCCESS)
        return mw_mpi_err(mpi, "NCCL set-up: MPI_Allreduce");
    if (m[4])
        return mw_err(MW_EDEVICE, "NCCL set-up failed on another node (see its message)");
    if (m[0] != -m[1] || m[2] != -m[3])
        return mw_err(MW_EDEVICE,
                      "NCCL set-up: the nodes differ: %d to %d ranks per node, %d to "
                      "%d GPUs per rank; the hierarchical all-reduce needs the same on every "
                      "node",
                      m[0], -m[1], m[2], -m[3]);
    return MW_OK;
}
