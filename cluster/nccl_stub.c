/* cluster/nccl.h in a build without CUDA/NCCL (-Dcuda=disabled, or nvcc/cuBLAS/NCCL not found):
 * the same functions, each failing with one clear MW_EDEVICE message, so the worker and the
 * tests need no #ifdef. The trainer never gets this far: mw_cuda_select picks the CPU first. */
#include "cluster/nccl.h"

#define NOT_BUILT "built without CUDA/NCCL (-Dcuda=disabled or nvcc/cuBLAS/NCCL not found)"

mw_status mw_nccl_open(mw_nccl **out, MPI_Comm node, MPI_Comm cross, int ndev_local,
                       const int *devices, double timeout)
{
    (void)node, (void)cross, (void)ndev_local, (void)devices, (void)timeout;
    *out = NULL;
    return mw_err(MW_EDEVICE, "NCCL set-up: " NOT_BUILT);
}

mw_status mw_nccl_allreduce(mw_nccl *n, float **bufs, size_t count, void **streams, long step)
{
    (void)n, (void)bufs, (void)count, (void)streams, (void)step;
    return mw_err(MW_EDEVICE, "NCCL all-reduce: " NOT_BUILT);
}

void mw_nccl_close(mw_nccl **n)
{
    if (n)
        *n = NULL;
}

int mw_nccl_node_gpus(const mw_nccl *n)
{
    (void)n;
    return 0;
}

int mw_nccl_nodes(const mw_nccl *n)
{
    (void)n;
    return 0;
}

const char *mw_nccl_version_string(void)
{
    return "NCCL: not built";
}
