/* Which GPUs a rank drives (--device auto|cpu|gpu): the division of a node's GPUs among its
 * ranks and the decision with its one log line. Plain C, compiled in every build: only the
 * probe (mw_cuda_probe, in runtime.cu or stub.c) differs, so the decision and its messages are
 * tested the same way with and without CUDA, and without a device (mw_cuda_select_with). */
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/cuda.h"

int mw_cuda_divide(int local_rank, int local_size, int count, int *first, int *n)
{
    if (local_size <= count) {
        int per = count / local_size;
        *first = local_rank * per;
        *n = per;
        return 1;
    }
    *first = local_rank % count;
    *n = 1;
    /* ranks r with r % count == *first among 0..local_size-1 */
    return (local_size - 1 - *first) / count + 1;
}

/* "CUDA device 3" or "CUDA devices 0-3". */
static void device_range(char *buf, size_t len, int first, int n)
{
    if (n == 1)
        snprintf(buf, len, "CUDA device %d", first);
    else
        snprintf(buf, len, "CUDA devices %d-%d", first, first + n - 1);
}

mw_status mw_cuda_select_with(const char *mode, int count, const char *reason, int local_rank,
                              int local_size, int *use_gpu, int *first_device, int *ndevices,
                              char *why, size_t why_len)
{
    char scratch[8];
    if (!why || why_len == 0) {
        why = scratch;
        why_len = sizeof scratch;
    }
    why[0] = '\0';
    *use_gpu = *first_device = *ndevices = 0;
    if (!mode)
        mode = "auto";
    int want_gpu = !strcmp(mode, "gpu");
    if (strcmp(mode, "auto") && strcmp(mode, "cpu") && !want_gpu)
        return mw_err(MW_EINVAL, "--device '%s': expected one of auto, cpu, gpu", mode);
    if (local_size < 1 || local_rank < 0 || local_rank >= local_size)
        return mw_err(MW_EINVAL, "device selection: local rank %d of %d ranks on the node",
                      local_rank, local_size);
    if (!strcmp(mode, "cpu")) {
        snprintf(why, why_len, "--device cpu: training on the CPU");
        return MW_OK;
    }
    if (!reason || !*reason)
        reason = count < 0 ? "built without CUDA" : "cudaGetDeviceCount found 0 devices";
    if (count <= 0) {
        if (want_gpu)
            return mw_err(MW_EDEVICE, "--device gpu: no CUDA device is available (%s)", reason);
        if (count < 0)
            snprintf(why, why_len, "%s: training on the CPU", reason);
        else
            snprintf(why, why_len, "no CUDA device (%s): training on the CPU", reason);
        return MW_OK;
    }

    int first = 0, n = 0;
    mw_cuda_divide(local_rank, local_size, count, &first, &n);
    *use_gpu = 1;
    *first_device = first;
    *ndevices = n;
    char mine[48];
    device_range(mine, sizeof mine, first, n);
    if (local_size > count) {
        /* Either each rank was given its own GPU (per-rank CUDA_VISIBLE_DEVICES, as srun
         * --gpus-per-task does: every rank sees one device 0) or ranks really share GPUs.
         * Only the PCI bus ids tell, and cluster/nccl.c compares them across the node and
         * refuses a shared GPU; this line says both. */
        snprintf(why, why_len,
                 "local rank %d of %d sees %d CUDA device%s for %d ranks and drives %s: right "
                 "when each rank was given its own GPU (per-rank CUDA_VISIBLE_DEVICES, as srun "
                 "--gpus-per-task does); ranks sharing one GPU are refused when NCCL starts, so "
                 "then start at most %d rank%s per node", local_rank, local_size, count,
                 count == 1 ? "" : "s", local_size, mine, count, count == 1 ? "" : "s");
    } else if (count % local_size) {
        int idle = count % local_size;
        snprintf(why, why_len,
                 "warning: local rank %d of %d drives %s; the node's %d CUDA devices do not "
                 "divide among %d ranks, so %d stay%s idle", local_rank, local_size, mine, count,
                 local_size, idle, idle == 1 ? "s" : "");
    } else {
        snprintf(why, why_len, "local rank %d of %d drives %s (of %d on the node)", local_rank,
                 local_size, mine, count);
    }
    return MW_OK;
}

mw_status mw_cuda_select(const char *mode, int local_rank, int local_size, int *use_gpu,
                         int *first_device, int *ndevices, char *why, size_t why_len)
{
    char reason[256] = "";
    int count = 0;
    /* "cpu" never touches the CUDA runtime (no driver start-up, nothing to fail). */
    if (!mode || strcmp(mode, "cpu"))
        count = mw_cuda_probe(reason, sizeof reason);
    return mw_cuda_select_with(mode, count, reason, local_rank, local_size, use_gpu,
                               first_device, ndevices, why, why_len);
}
