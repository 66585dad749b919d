/* The GPU hierarchical all-reduce with NCCL inside the node and the MPI ring between nodes; see
 * nccl.h. Compiled into the CUDA module with the GPU backend (worker/meson.build) and into the
 * tests that run it against NCCL or its mock; nothing in mwtrain itself calls it.
 *
 * Non-blocking NCCL in brief: any NCCL call may return ncclInProgress, meaning the work is still
 * being set up or enqueued in the background; the communicator's state (ncclCommGetAsyncError)
 * turns ncclSuccess once that is done, and only then is the work on the stream. So every wait
 * here (wait_idle) polls the state of each communicator and then its stream, checks the clock,
 * and on an error or past the timeout aborts the communicators and returns one message. */
#include "cluster/nccl.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "cluster/comm.h"
#include "cluster/nccl_checks.h"
#include "cluster/ring.h"
#include "cluster/topology.h"
#include "common/timeline.h"
#include "common/timer.h"

#define PCI_LEN MW_NCCL_PCI_LEN
/* Across nodes the shards go through the host in pieces of at least PIECE_MIN floats (1 MiB),
 * at most MAX_PIECES of them: the ring sums a piece while the later ones are still being copied
 * down, and a piece's sums go back up while the ring sums the next. */
#define PIECE_MIN ((size_t)1 << 18)
#define MAX_PIECES 16

struct mw_nccl {
    int ndev;                   /* GPUs this process drives */
    int *devices;               /* their CUDA ordinals (owned) */
    int local_rank, local_size; /* in the node communicator */
    int G;                      /* NCCL ranks (GPUs) per node */
    int nnodes;                 /* ranks of the cross communicator */
    ncclConfig_t *cfg;          /* one per device, alive as long as the communicators */
    ncclComm_t *comms;          /* one per device; NULL once aborted or destroyed */
    cudaStream_t *own;          /* the object's streams, one per device */
    cudaStream_t *cur;          /* the streams of the call in progress */
    cudaEvent_t *ev;     /* several nodes: MAX_PIECES per device, piece p's copy down on device d at
                            d x MAX_PIECES + p */
    float *host;         /* pinned staging for my shards (+ the tail on local rank 0), allocated
                            at open for max_count: never inside an all-reduce */
    size_t host_count;   /* its floats */
    size_t max_count;    /* the largest count an all-reduce may be given */
    const char *pending; /* the op of a started all-reduce not waited for yet (a literal) */
    long pending_step;
    mw_ring ring; /* over cross, when nnodes > 1 */
    double timeout;
    long (*progress)(void *ctx); /* mw_nccl_set_progress (NULL: none) */
    void *progress_ctx;
    int failed; /* aborted: every later call fails */
};

/* " at step N", or "" outside a step. */
static const char *at_step(char *buf, size_t len, long step)
{
    buf[0] = '\0';
    if (step >= 0)
        snprintf(buf, len, " at step %ld", step);
    return buf;
}

/* Abort every communicator (this also stops kernels stuck waiting for a dead peer) and mark
 * the object failed. */
static void abort_all(mw_nccl *n)
{
    n->failed = 1;
    for (int d = 0; n->comms && d < n->ndev; d++) {
        if (!n->comms[d])
            continue;
        ncclResult_t r = ncclCommAbort(n->comms[d]);
        n->comms[d] = NULL;
        if (r != ncclSuccess) /* recorded only if nothing came first: the cause matters more */
            mw_err(MW_EDEVICE, "ncclCommAbort on CUDA device %d: %s", n->devices[d],
                   ncclGetErrorString(r));
    }
}

/* Record "<op><at step> on CUDA device D: <detail>", abort, and return s. */
static mw_status fail(mw_nccl *n, mw_status s, const char *op, long step, int d, const char *fmt,
                      ...) __attribute__((format(printf, 6, 7)));
static mw_status fail(mw_nccl *n, mw_status s, const char *op, long step, int d, const char *fmt,
                      ...)
{
    char detail[384], at[48];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    mw_err(s, "%s%s on CUDA device %d: %s", op, at_step(at, sizeof at, step),
           n->devices ? n->devices[d] : d, detail);
    abort_all(n);
    return s;
}

/* A failed NCCL call: its code and NCCL's own last message, which often names the cause. */
static mw_status nccl_fail(mw_nccl *n, const char *op, long step, int d, const char *call,
                           ncclResult_t r)
{
    const char *last = ncclGetLastError(n->comms ? n->comms[d] : NULL);
    int has = last && *last;
    return fail(n, MW_EDEVICE, op, step, d, "%s: %s%s%s%s", call, ncclGetErrorString(r),
                has ? " (" : "", has ? last : "", has ? ")" : "");
}

static mw_status cuda_fail(mw_nccl *n, const char *op, long step, int d, const char *call,
                           cudaError_t e)
{
    return fail(n, MW_EDEVICE, op, step, d, "%s: %s", call, cudaGetErrorString(e));
}

/* ncclInProgress is not a failure in non-blocking mode: wait_idle waits it out. */
static int nccl_ok(ncclResult_t r)
{
    return r == ncclSuccess || r == ncclInProgress;
}

static mw_status set_device(mw_nccl *n, const char *op, long step, int d)
{
    cudaError_t e = cudaSetDevice(n->devices[d]);
    return e == cudaSuccess ? MW_OK : cuda_fail(n, op, step, d, "cudaSetDevice", e);
}

/* A wait that was needed, on the timeline: "wait: <op>". */
static void timeline_wait(const char *op, double since)
{
    char name[MW_TIMELINE_NAME];
    snprintf(name, sizeof name, "wait: %s", op);
    mw_timeline_span(name, "wait", since);
}

static long progress_now(const mw_nccl *n)
{
    return n->progress ? n->progress(n->progress_ctx) : 0;
}

void mw_nccl_set_progress(mw_nccl *n, long (*progress)(void *ctx), void *ctx)
{
    if (n)
        n->progress = progress, n->progress_ctx = ctx;
}

/* Wait until every communicator has finished its background work (state no longer
 * ncclInProgress) and, with streams, every stream of the call is idle (piece < 0) or has passed
 * piece's event. Polls with the timeout, counted from the devices' last progress; any error or
 * the timeout aborts the communicators. */
static mw_status wait_idle(mw_nccl *n, const char *op, long step, int streams, int piece)
{
    const struct timespec nap = {0, 20000}; /* 20 us between polls once the first spins fail */
    const double t0 = mw_now();
    mw_stall st;
    mw_stall_start(&st, progress_now(n));
    const double tl0 = mw_timeline_on ? mw_timeline_now() : 0;
    for (unsigned long spin = 0;; spin++) {
        int busy = -1;
        for (int d = 0; d < n->ndev; d++) {
            ncclResult_t state = ncclSuccess;
            ncclResult_t r = ncclCommGetAsyncError(n->comms[d], &state);
            if (r != ncclSuccess)
                return nccl_fail(n, op, step, d, "ncclCommGetAsyncError", r);
            if (state == ncclInProgress) {
                busy = busy < 0 ? d : busy;
                continue;
            }
            if (state != ncclSuccess)
                return nccl_fail(n, op, step, d, "NCCL reported an asynchronous error", state);
            if (!streams)
                continue;
            MW_TRY(set_device(n, op, step, d));
            cudaError_t e = piece < 0 ? cudaStreamQuery(n->cur[d])
                                      : cudaEventQuery(n->ev[d * MAX_PIECES + piece]);
            if (e == cudaErrorNotReady) {
                /* not an error, but do not leave it behind for a later cudaGetLastError */
                if (cudaPeekAtLastError() == cudaErrorNotReady)
                    (void)cudaGetLastError();
                busy = busy < 0 ? d : busy;
                continue;
            }
            if (e != cudaSuccess)
                return cuda_fail(n, op, step, d, piece < 0 ? "cudaStreamQuery" : "cudaEventQuery",
                                 e);
        }
        if (busy < 0) {
            if (spin > 0 && mw_timeline_on)
                timeline_wait(op, tl0);
            return MW_OK;
        }
        if (spin % 64 != 63)
            continue;
        const double idle = mw_stall_idle(&st, progress_now(n));
        if (n->timeout > 0 && idle > n->timeout) {
            char at[48];
            mw_err(MW_ETIMEOUT,
                   "collective timeout: %s%s waited %.0f s for CUDA device %d, %.0f s since this "
                   "process's GPUs last finished a kernel (--collective-timeout %.0f); a GPU of "
                   "this node or a rank of its NCCL communicator is stopped, dead or unreachable; "
                   "the communicator was aborted",
                   op, at_step(at, sizeof at, step), mw_now() - t0, n->devices[busy], idle,
                   n->timeout);
            abort_all(n);
            return MW_ETIMEOUT;
        }
        if (spin > 4096)
            nanosleep(&nap, NULL);
        else
            sched_yield();
    }
}

/* ---- set-up ------------------------------------------------------------------------------ */

static mw_status comm_place(MPI_Comm comm, int *rank, int *size)
{
    MW_MPI(MPI_Comm_rank(comm, rank), "NCCL set-up: MPI_Comm_rank");
    MW_MPI(MPI_Comm_size(comm, size), "NCCL set-up: MPI_Comm_size");
    return MW_OK;
}

/* This process's own checks: arguments, device ordinals, and each device's PCI bus id (pci:
 * ndev x PCI_LEN bytes). Fills n->devices and the per-device arrays. */
static mw_status check_local(mw_nccl *n, int ndev, const int *devices, char *pci)
{
    if (ndev < 1 || !devices)
        return mw_err(MW_EINVAL,
                      "NCCL set-up, local rank %d: %d CUDA devices given; need at "
                      "least one",
                      n->local_rank, ndev);
    n->ndev = ndev;
    n->devices = calloc((size_t)ndev, sizeof *n->devices);
    n->cfg = calloc((size_t)ndev, sizeof *n->cfg);
    n->comms = calloc((size_t)ndev, sizeof *n->comms);
    n->own = calloc((size_t)ndev, sizeof *n->own);
    n->cur = calloc((size_t)ndev, sizeof *n->cur);
    if (!n->devices || !n->cfg || !n->comms || !n->own || !n->cur)
        return mw_err(MW_ENOMEM, "NCCL set-up: out of memory");
    memcpy(n->devices, devices, (size_t)ndev * sizeof *devices);
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return mw_err(MW_EDEVICE,
                      "NCCL set-up, local rank %d: no usable CUDA device "
                      "(cudaGetDeviceCount: %s)",
                      n->local_rank, cudaGetErrorString(e));
    for (int d = 0; d < ndev; d++) {
        if (devices[d] < 0 || devices[d] >= count)
            return mw_err(MW_EDEVICE,
                          "NCCL set-up, local rank %d: CUDA device %d does not "
                          "exist (%d device%s: 0..%d)",
                          n->local_rank, devices[d], count, count == 1 ? "" : "s", count - 1);
        for (int j = 0; j < d; j++)
            if (devices[j] == devices[d])
                return mw_err(MW_EDEVICE,
                              "NCCL set-up, local rank %d: CUDA device %d is "
                              "listed twice",
                              n->local_rank, devices[d]);
        e = cudaDeviceGetPCIBusId(pci + (size_t)d * PCI_LEN, PCI_LEN, devices[d]);
        if (e != cudaSuccess)
            return mw_err(MW_EDEVICE,
                          "NCCL set-up, local rank %d: CUDA device %d: "
                          "cudaDeviceGetPCIBusId: %s",
                          n->local_rank, devices[d], cudaGetErrorString(e));
        pci[(size_t)d * PCI_LEN + PCI_LEN - 1] = '\0';
    }
    return MW_OK;
}

/* Local rank 0 creates the NCCL id; everyone on the node receives it (or local rank 0's
 * failure) with the timeout. */
static mw_status share_id(mw_nccl *n, MPI_Comm node, ncclUniqueId *id)
{
    struct {
        int ok;
        char msg[200];
        ncclUniqueId id;
    } h;
    memset(&h, 0, sizeof h);
    if (n->local_rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&h.id);
        h.ok = r == ncclSuccess;
        if (!h.ok) {
            const char *last = ncclGetLastError(NULL);
            snprintf(h.msg, sizeof h.msg, "ncclGetUniqueId on local rank 0: %s%s%s%s",
                     ncclGetErrorString(r), last && *last ? " (" : "", last ? last : "",
                     last && *last ? ")" : "");
        }
    }
    if (node != MPI_COMM_NULL && n->local_size > 1) {
        mw_wait_ctx w = {"NCCL set-up (broadcast of the NCCL id over the node)", -1, n->timeout};
        MW_TRY(mw_comm_bcast(&w, &h, (int)sizeof h, MPI_BYTE, 0, node));
    }
    if (!h.ok) {
        h.msg[sizeof h.msg - 1] = '\0';
        return mw_err(MW_EDEVICE,
                      "NCCL set-up: %s; check NCCL_SOCKET_IFNAME and that the "
                      "node's network interface is up",
                      h.msg);
    }
    *id = h.id;
    return MW_OK;
}

/* Join the node's communicator: NCCL rank local rank x ndev + d for device d, non-blocking, in
 * one group when this process drives several GPUs. */
static mw_status init_comms(mw_nccl *n, ncclUniqueId id)
{
    static const char op[] = "NCCL set-up (communicator)";
    ncclResult_t r;
    int grouped = n->ndev > 1;
    if (grouped && (r = ncclGroupStart()) != ncclSuccess)
        return nccl_fail(n, op, -1, 0, "ncclGroupStart", r);
    ncclResult_t bad = ncclSuccess;
    cudaError_t cbad = cudaSuccess;
    int bad_d = 0;
    for (int d = 0; d < n->ndev && bad == ncclSuccess && cbad == cudaSuccess; d++) {
        bad_d = d;
        cbad = cudaSetDevice(n->devices[d]);
        if (cbad != cudaSuccess)
            break;
        ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
        n->cfg[d] = init;
        n->cfg[d].blocking = 0;
        r = ncclCommInitRankConfig(&n->comms[d], n->G, id, n->local_rank * n->ndev + d, &n->cfg[d]);
        if (!nccl_ok(r))
            bad = r;
    }
    if (grouped) {
        r = ncclGroupEnd();
        if (!nccl_ok(r) && bad == ncclSuccess && cbad == cudaSuccess) {
            bad = r;
            bad_d = 0;
        }
    }
    if (cbad != cudaSuccess)
        return cuda_fail(n, op, -1, bad_d, "cudaSetDevice", cbad);
    if (bad != ncclSuccess)
        return nccl_fail(n, op, -1, bad_d,
                         grouped ? "ncclCommInitRankConfig (grouped)" : "ncclCommInitRankConfig",
                         bad);
    return wait_idle(n, op, -1, 0, -1);
}

/* The pinned staging buffer for all-reduces of up to max_count floats (portable: any of our
 * devices may copy to it), allocated once here: cudaHostAlloc and cudaFreeHost synchronize the
 * device, so inside an all-reduce a dead peer could block them outside the collective timeout.
 * One node: no staging. Several: my ndev shards of max_count / G, and on local rank 0 room for
 * a tail of up to G - 1 floats (a smaller count can have a longer tail). */
static mw_status alloc_host(mw_nccl *n)
{
    if (n->nnodes <= 1 || n->max_count == 0)
        return MW_OK;
    const size_t shard = n->max_count / (size_t)n->G;
    const size_t tail = n->local_rank == 0 ? (size_t)n->G - 1 : 0;
    const size_t count = (size_t)n->ndev * shard + tail;
    if (count == 0)
        return MW_OK;
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, count * sizeof(float), cudaHostAllocPortable);
    if (e != cudaSuccess)
        return fail(n, MW_ENOMEM, "NCCL set-up", -1, 0,
                    "cudaHostAlloc of %zu bytes of pinned memory for the all-reduce "
                    "staging: %s",
                    count * sizeof(float), cudaGetErrorString(e));
    n->host = p;
    n->host_count = count;
    return MW_OK;
}

/* Several nodes: the pieces' events, MAX_PIECES per device. */
static mw_status alloc_events(mw_nccl *n)
{
    if (n->nnodes <= 1)
        return MW_OK;
    if (!(n->ev = calloc((size_t)n->ndev * MAX_PIECES, sizeof *n->ev)))
        return mw_err(MW_ENOMEM, "NCCL set-up: out of memory");
    for (int d = 0; d < n->ndev; d++) {
        MW_TRY(set_device(n, "NCCL set-up", -1, d));
        for (int p = 0; p < MAX_PIECES; p++) {
            cudaError_t e =
                cudaEventCreateWithFlags(&n->ev[d * MAX_PIECES + p], cudaEventDisableTiming);
            if (e != cudaSuccess)
                return cuda_fail(n, "NCCL set-up", -1, d, "cudaEventCreateWithFlags", e);
        }
    }
    return MW_OK;
}

mw_status mw_nccl_open(mw_nccl **out, MPI_Comm node, MPI_Comm cross, int ndev_local,
                       const int *devices, size_t max_count, double timeout)
{
    return mw_nccl_open_flat(out, node, cross, MPI_COMM_NULL, ndev_local, devices, max_count,
                             timeout);
}

mw_status mw_nccl_open_flat(mw_nccl **out, MPI_Comm node, MPI_Comm cross, MPI_Comm all,
                            int ndev_local, const int *devices, size_t max_count, double timeout)
{
    *out = NULL;
    mw_nccl *n = calloc(1, sizeof *n);
    if (!n)
        return mw_err(MW_ENOMEM, "NCCL set-up: out of memory");
    mw_ring_init(&n->ring);
    n->timeout = timeout;
    n->max_count = max_count;
    n->local_size = n->nnodes = 1;
    mw_status rc = MW_OK;
    char *pci = calloc(ndev_local > 0 ? (size_t)ndev_local : 1, PCI_LEN);
    if (!pci) {
        rc = mw_err(MW_ENOMEM, "NCCL set-up: out of memory");
        goto fail;
    }
    int cross_rank = 0;
    if (node != MPI_COMM_NULL)
        MW_TRY_GOTO(comm_place(node, &n->local_rank, &n->local_size), rc, fail);
    if (cross != MPI_COMM_NULL)
        MW_TRY_GOTO(comm_place(cross, &cross_rank, &n->nnodes), rc, fail);

    /* 1. Checks, agreed so that every rank of the node returns the same status (and every
     *    node learns of a failed one), before anything waits on a peer. */
    rc = check_local(n, ndev_local, devices, pci);
    if (node != MPI_COMM_NULL)
        rc = mw_agree(node, rc, NULL);
    if (rc == MW_OK && node != MPI_COMM_NULL)
        rc = mw_nccl_check_node(node, n->local_size, ndev_local, pci);
    n->G = n->local_size * (n->ndev > 0 ? n->ndev : 1);
    rc = mw_nccl_check_cross(cross, n->nnodes, n->local_size, n->ndev, rc);
    if (node != MPI_COMM_NULL)
        rc = mw_agree(node, rc, NULL);
    if (rc != MW_OK)
        goto fail;

    /* One communicator over the cluster: its ranks are all's, as if one node. */
    if (all != MPI_COMM_NULL && n->nnodes > 1) {
        MW_TRY_GOTO(comm_place(all, &n->local_rank, &n->local_size), rc, fail);
        n->nnodes = 1, n->G = n->local_size * n->ndev, node = all;
    }
    /* 2. The NCCL id from local rank 0 (of all, when flat), our streams, then the communicator. */
    ncclUniqueId id;
    MW_TRY_GOTO(share_id(n, node, &id), rc, fail);
    for (int d = 0; d < n->ndev; d++) {
        MW_TRY_GOTO(set_device(n, "NCCL set-up", -1, d), rc, fail);
        cudaError_t e = cudaStreamCreateWithFlags(&n->own[d], cudaStreamNonBlocking);
        if (e != cudaSuccess) {
            rc = cuda_fail(n, "NCCL set-up", -1, d, "cudaStreamCreateWithFlags", e);
            goto fail;
        }
    }
    MW_TRY_GOTO(init_comms(n, id), rc, fail);
    MW_TRY_GOTO(alloc_host(n), rc, fail);
    MW_TRY_GOTO(alloc_events(n), rc, fail);

    /* 3. The cross-node ring, when there are other nodes. */
    if (n->nnodes > 1)
        MW_TRY_GOTO(mw_ring_open(&n->ring, cross, "NCCL all-reduce (cross-node ring)", timeout), rc,
                    fail);
    free(pci);
    *out = n;
    return MW_OK;
fail:
    free(pci);
    abort_all(n);
    mw_nccl_close(&n);
    return rc;
}

/* ---- the all-reduce ---------------------------------------------------------------------- */

typedef enum { ENQ_ALLREDUCE, ENQ_SCATTER, ENQ_GATHER } enq_kind;

/* Enqueue one collective step on every device of this process in one NCCL group, then wait
 * until NCCL has put it on the streams (not until it has run); bufs[d] + off each:
 *   ENQ_ALLREDUCE  ncclAllReduce of count floats from off, in place.
 *   ENQ_SCATTER    ncclReduceScatter in place (GPU g keeps shard g, `shard` floats at
 *                  g x shard) and ncclReduce of the `tail` floats after G x shard to GPU 0.
 *   ENQ_GATHER     the inverse: ncclAllGather in place and ncclBroadcast of the tail. */
static mw_status enqueue(mw_nccl *n, const char *op, long step, enq_kind kind, float **bufs,
                         size_t off, size_t count, size_t shard, size_t tail)
{
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess)
        return nccl_fail(n, op, step, 0, "ncclGroupStart", r);
    const char *call = NULL;
    ncclResult_t bad = ncclSuccess;
    cudaError_t cbad = cudaSuccess;
    int bad_d = 0;
    const size_t main_count = (size_t)n->G * shard;
    for (int d = 0; d < n->ndev && !call; d++) {
        bad_d = d;
        if ((cbad = cudaSetDevice(n->devices[d])) != cudaSuccess) {
            call = "cudaSetDevice";
            break;
        }
        float *b = bufs[d] + off;
        size_t g = (size_t)n->local_rank * (size_t)n->ndev + (size_t)d;
        ncclComm_t c = n->comms[d];
        cudaStream_t s = n->cur[d];
        switch (kind) {
        case ENQ_ALLREDUCE:
            if (!nccl_ok(r = ncclAllReduce(b, b, count, ncclFloat, ncclSum, c, s)))
                call = "ncclAllReduce";
            break;
        case ENQ_SCATTER:
            if (shard &&
                !nccl_ok(r = ncclReduceScatter(b, b + g * shard, shard, ncclFloat, ncclSum, c, s)))
                call = "ncclReduceScatter";
            else if (tail && !nccl_ok(r = ncclReduce(b + main_count, b + main_count, tail,
                                                     ncclFloat, ncclSum, 0, c, s)))
                call = "ncclReduce";
            break;
        case ENQ_GATHER:
            if (shard && !nccl_ok(r = ncclAllGather(b + g * shard, b, shard, ncclFloat, c, s)))
                call = "ncclAllGather";
            else if (tail && !nccl_ok(r = ncclBroadcast(b + main_count, b + main_count, tail,
                                                        ncclFloat, 0, c, s)))
                call = "ncclBroadcast";
            break;
        }
        if (call && cbad == cudaSuccess)
            bad = r;
    }
    /* End the group even after a failure, so this thread's NCCL state stays consistent. */
    r = ncclGroupEnd();
    if (cbad != cudaSuccess)
        return cuda_fail(n, op, step, bad_d, call, cbad);
    if (call)
        return nccl_fail(n, op, step, bad_d, call, bad);
    if (!nccl_ok(r))
        return nccl_fail(n, op, step, 0, "ncclGroupEnd", r);
    return wait_idle(n, op, step, 0, -1);
}

/* Enqueue the copies between floats [a, b) of the host staging buffer and my shards (shard
 * g = local rank x ndev + d of device d's buffer, at d x shard in the host buffer), plus the
 * tail on local rank 0's first device (after the shards): down to the host (to_host) or back
 * up; then, going down, mark piece p on every stream. */
static mw_status stage(mw_nccl *n, const char *op, long step, float **bufs, size_t shard,
                       size_t tail, size_t a, size_t b, int to_host, int p)
{
    const size_t main_count = (size_t)n->G * shard, nd = (size_t)n->ndev;
    for (int d = 0; d <= n->ndev; d++) {
        const int dv = d < n->ndev ? d : 0; /* d == ndev: the tail, on device 0 */
        const size_t h0 = (size_t)d * shard, h1 = d < n->ndev ? h0 + shard : nd * shard + tail;
        const size_t lo = a > h0 ? a : h0, hi = b < h1 ? b : h1;
        if ((d == n->ndev && (n->local_rank != 0 || !tail)) || lo >= hi)
            continue;
        MW_TRY(set_device(n, op, step, dv));
        const size_t g = (size_t)n->local_rank * nd + (size_t)d;
        float *dev = (d < n->ndev ? bufs[d] + g * shard : bufs[0] + main_count) + (lo - h0);
        float *host = n->host + lo;
        const size_t nb = (hi - lo) * sizeof(float);
        cudaError_t e = to_host
                            ? cudaMemcpyAsync(host, dev, nb, cudaMemcpyDeviceToHost, n->cur[dv])
                            : cudaMemcpyAsync(dev, host, nb, cudaMemcpyHostToDevice, n->cur[dv]);
        if (e != cudaSuccess)
            return cuda_fail(n, op, step, dv, "cudaMemcpyAsync", e);
    }
    for (int d = 0; d < n->ndev && to_host; d++) {
        MW_TRY(set_device(n, op, step, d));
        cudaError_t e = cudaEventRecord(n->ev[d * MAX_PIECES + p], n->cur[d]);
        if (e != cudaSuccess)
            return cuda_fail(n, op, step, d, "cudaEventRecord", e);
    }
    return MW_OK;
}

/* Piece p's end of K pieces of staged floats (p = K: staged). */
static size_t piece_end(size_t staged, int K, int p)
{
    return staged / (size_t)K * (size_t)p + staged % (size_t)K * (size_t)p / (size_t)K;
}

static const char bucket_op[] = "NCCL all-reduce (a bucket)";

/* The checks before an all-reduce of floats up to end (bucket: one of an overlapped step's),
 * and the streams it runs on. */
static mw_status begin(mw_nccl *n, size_t end, void **streams, long step, int bucket)
{
    char at[48];
    if (!n)
        return mw_err(MW_EINTERNAL, "NCCL all-reduce: the NCCL communicator is not open");
    if (n->failed)
        return mw_err(MW_EDEVICE,
                      "NCCL all-reduce%s: the NCCL communicator was aborted after "
                      "an earlier failure",
                      at_step(at, sizeof at, step));
    if (n->pending && !(bucket && n->pending == bucket_op))
        return mw_err(MW_EINTERNAL, "NCCL all-reduce%s: the previous one was not waited for",
                      at_step(at, sizeof at, step));
    if (bucket && n->nnodes > 1)
        return mw_err(MW_EINTERNAL, "NCCL all-reduce%s: buckets on %d nodes (one node only)",
                      at_step(at, sizeof at, step), n->nnodes);
    if (end > n->max_count)
        return mw_err(MW_EINTERNAL,
                      "NCCL all-reduce%s: %s%zu floats, more than the %zu the communicator "
                      "was opened for",
                      at_step(at, sizeof at, step), bucket ? "a bucket ending at " : "", end,
                      n->max_count);
    for (int d = 0; d < n->ndev; d++)
        n->cur[d] = streams ? (cudaStream_t)streams[d] : n->own[d];
    return MW_OK;
}

mw_status mw_nccl_allreduce_bucket(mw_nccl *n, float **bufs, size_t off, size_t count,
                                   void **streams, long step)
{
    MW_TRY(begin(n, off + count, streams, step, 1));
    if (count == 0)
        return MW_OK;
    MW_TL_BEGIN("all-reduce (NCCL bucket)", "allreduce");
    MW_TRY(enqueue(n, bucket_op, step, ENQ_ALLREDUCE, bufs, off, count, 0, 0));
    MW_TL_END("all-reduce (NCCL bucket)", "allreduce");
    n->pending = bucket_op, n->pending_step = step;
    return MW_OK;
}

mw_status mw_nccl_allreduce_start(mw_nccl *n, float **bufs, size_t count, void **streams, long step)
{
    MW_TRY(begin(n, count, streams, step, 0));
    if (count == 0)
        return MW_OK;

    if (n->nnodes == 1) {
        static const char op[] = "NCCL all-reduce";
        MW_TL_BEGIN("all-reduce (NCCL)", "allreduce");
        MW_TRY(enqueue(n, op, step, ENQ_ALLREDUCE, bufs, 0, count, 0, 0));
        MW_TL_END("all-reduce (NCCL)", "allreduce");
        n->pending = op, n->pending_step = step;
        return MW_OK;
    }

    /* Several nodes: shard g of count / G on GPU g of each node, the rest (the tail, fewer than
     * G floats) on GPU 0; this process stages its ndev shards (+ the tail on local rank 0),
     * which are contiguous in the host buffer and the same length on every node. */
    const size_t shard = count / (size_t)n->G, tail = count % (size_t)n->G;
    const size_t staged = (size_t)n->ndev * shard + (n->local_rank == 0 ? tail : 0);
    MW_TL_BEGIN("all-reduce (NCCL intra-node reduce-scatter)", "allreduce");
    if (n->G > 1)
        MW_TRY(enqueue(n, "NCCL all-reduce (reduce-scatter inside the node)", step, ENQ_SCATTER,
                       bufs, 0, count, shard, tail));
    if (staged > n->host_count)
        return mw_err(MW_EINTERNAL, "NCCL all-reduce: %zu floats to stage, %zu allocated", staged,
                      n->host_count);
    /* down in pieces, each marked; then per piece: its wait, its ring, its copy back up */
    int K = staged ? (int)((staged + PIECE_MIN - 1) / PIECE_MIN) : 0;
    K = K > MAX_PIECES ? MAX_PIECES : K;
    static const char down[] = "NCCL all-reduce (copy of the shards to the host)";
    for (int p = 0; p < K; p++)
        MW_TRY(stage(n, down, step, bufs, shard, tail, piece_end(staged, K, p),
                     piece_end(staged, K, p + 1), 1, p));
    MW_TL_END("all-reduce (NCCL intra-node reduce-scatter)", "allreduce");
    /* Every rank runs its ring, even with nothing staged: the ring returns at once then, on
     * every rank of it alike (same local rank, so same length and pieces). Each piece's sums
     * are the whole buffer's, bit for bit (mw_ring_sum_part). */
    MW_TL_BEGIN("all-reduce (inter-node ring)", "allreduce");
    mw_status rc = K ? MW_OK : mw_ring_sum(&n->ring, n->host, 0, step);
    for (int p = 0; p < K && rc == MW_OK; p++) {
        const size_t a = piece_end(staged, K, p), b = piece_end(staged, K, p + 1);
        MW_TRY(wait_idle(n, down, step, 1, p));
        rc = mw_ring_sum_part(&n->ring, n->host + a, a, b - a, staged, step);
        if (rc == MW_OK)
            MW_TRY(stage(n, "NCCL all-reduce (copy of the sums to the devices)", step, bufs, shard,
                         tail, a, b, 0, p));
    }
    MW_TL_END("all-reduce (inter-node ring)", "allreduce");
    if (rc != MW_OK) {
        abort_all(n); /* the peers' NCCL work will not be matched any more */
        return rc;
    }
    MW_TL_BEGIN("all-reduce (NCCL intra-node all-gather)", "allreduce");
    static const char gather[] = "NCCL all-reduce (all-gather inside the node)";
    if (n->G > 1)
        MW_TRY(enqueue(n, gather, step, ENQ_GATHER, bufs, 0, count, shard, tail));
    MW_TL_END("all-reduce (NCCL intra-node all-gather)", "allreduce");
    n->pending = gather, n->pending_step = step;
    return MW_OK;
}

mw_status mw_nccl_wait(mw_nccl *n)
{
    if (!n || !n->pending)
        return MW_OK;
    const char *op = n->pending;
    n->pending = NULL;
    if (n->failed)
        return mw_err(MW_EDEVICE, "%s: the NCCL communicator was aborted after an earlier failure",
                      op);
    return wait_idle(n, op, n->pending_step, 1, -1);
}

mw_status mw_nccl_allreduce(mw_nccl *n, float **bufs, size_t count, void **streams, long step)
{
    MW_TRY(mw_nccl_allreduce_start(n, bufs, count, streams, step));
    return mw_nccl_wait(n);
}

/* ---- the rest ---------------------------------------------------------------------------- */

void mw_nccl_close(mw_nccl **pn)
{
    mw_nccl *n = pn ? *pn : NULL;
    if (!n)
        return;
    *pn = NULL;
    static const char op[] = "NCCL shutdown";
    /* Finalize (flushes, and waits for the peers under the timeout), then destroy; any
     * failure on the way aborts instead. */
    for (int d = 0; d < n->ndev && n->comms && !n->failed; d++) {
        ncclResult_t r = ncclCommFinalize(n->comms[d]);
        if (!nccl_ok(r))
            nccl_fail(n, op, -1, d, "ncclCommFinalize", r);
    }
    if (n->comms && !n->failed && wait_idle(n, op, -1, 0, -1) == MW_OK) {
        for (int d = 0; d < n->ndev; d++) {
            ncclResult_t r = ncclCommDestroy(n->comms[d]);
            n->comms[d] = NULL;
            if (r != ncclSuccess)
                mw_err(MW_EDEVICE, "%s on CUDA device %d: ncclCommDestroy: %s", op, n->devices[d],
                       ncclGetErrorString(r));
        }
    }
    abort_all(n); /* whatever is left after a failure */
    for (int d = 0; n->own && d < n->ndev; d++) {
        const char *call = "cudaSetDevice";
        cudaError_t e = cudaSetDevice(n->devices[d]);
        for (int p = 0; n->ev && p < MAX_PIECES && e == cudaSuccess; p++)
            if (n->ev[d * MAX_PIECES + p])
                call = "cudaEventDestroy", e = cudaEventDestroy(n->ev[d * MAX_PIECES + p]);
        if (e == cudaSuccess && n->own[d])
            call = "cudaStreamDestroy", e = cudaStreamDestroy(n->own[d]);
        if (e != cudaSuccess)
            mw_err(MW_EDEVICE, "%s on CUDA device %d: %s: %s", op, n->devices[d], call,
                   cudaGetErrorString(e));
    }
    if (n->host) {
        cudaError_t e = cudaFreeHost(n->host);
        if (e != cudaSuccess)
            mw_err(MW_EDEVICE, "%s: cudaFreeHost: %s", op, cudaGetErrorString(e));
    }
    mw_ring_close(&n->ring);
    free(n->devices);
    free(n->cfg);
    free(n->comms);
    free(n->own);
    free(n->ev);
    free(n->cur);
    free(n);
}

int mw_nccl_node_gpus(const mw_nccl *n)
{
    return n ? n->G : 0;
}

int mw_nccl_nodes(const mw_nccl *n)
{
    return n ? n->nnodes : 0;
}

const char *mw_nccl_version_string(void)
{
    static char buf[64];
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) {
        snprintf(buf, sizeof buf, "NCCL %d.%d.%d (headers; ncclGetVersion failed)", NCCL_MAJOR,
                 NCCL_MINOR, NCCL_PATCH);
        return buf;
    }
    /* NCCL_VERSION(X, Y, Z): X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z after. */
    if (v >= 10000)
        snprintf(buf, sizeof buf, "NCCL %d.%d.%d", v / 10000, v % 10000 / 100, v % 100);
    else
        snprintf(buf, sizeof buf, "NCCL %d.%d.%d", v / 1000, v % 1000 / 100, v % 100);
    return buf;
}
