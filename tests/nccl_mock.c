/* The host-only CUDA runtime and NCCL stand-in for tests/test_nccl_mock.c; see nccl_mock.h.
 * Only the calls cluster/nccl.c makes exist here; the test links no CUDA or NCCL library, so a
 * call this file lacks is a link error, not a silent fall-through to the real one.
 *
 * A communicator's ranks may live in several processes (the ranks of a node): the first
 * ncclCommInitRankConfig of a clique in each process splits MPI_COMM_WORLD by the clique's
 * creator (every process of the job takes part, as every one opens its node's communicator at
 * the same time in the tests), and a collective runs, blocking, over that MPI communicator once
 * this process's ranks have all posted it. */
#include "tests/nccl_mock.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "common/timer.h"

#define POLLS 3 /* polls a fresh operation stays in progress */
#define MAX_ALLOCS 256
#define MAX_COMMS 64
#define MAX_OPS 4096

/* A device-to-host copy not done yet: the source as it was when the copy was enqueued (the
 * device's work before it on the stream is done here), written to dst when the copy completes;
 * until then dst holds NaNs, so a host that reads it too early sums garbage. */
typedef struct {
    void *dst, *data;
    size_t nbytes;
    long seq;
} pend_copy;

struct CUstream_st {
    int dev;
    int busy; /* polls left before the stream reads idle */
    pend_copy *pend;
    int npend, cap;
    long seq; /* copies enqueued so far */
};

struct CUevent_st {
    cudaStream_t s; /* NULL: never recorded */
    long seq;       /* the copies before it */
    int polls;      /* queries left before it reads passed */
};

typedef enum { OP_ALLREDUCE, OP_REDUCE_SCATTER, OP_ALL_GATHER, OP_REDUCE, OP_BROADCAST } op_kind;

typedef struct {
    op_kind kind;
    const float *send;
    float *recv;
    size_t count; /* recvcount for reduce-scatter, sendcount for all-gather */
    int root;
    cudaStream_t stream;
} op;

struct ncclComm {
    int clique; /* index into cliques */
    int rank, nranks, dev;
    int polls; /* state reads left in ncclInProgress; -1: forever */
    int ready; /* its set-up was seen complete (state polled to ncclSuccess) */
    int gen;   /* the group of its last collective */
    ncclResult_t async;
    op *ops; /* posted (owned) */
    int nops;
    int dead; /* aborted or destroyed */
};

typedef struct {
    char id[NCCL_UNIQUE_ID_BYTES];
    int nranks;
    struct ncclComm *local[MAX_COMMS]; /* this process's ranks, in rank order */
    int nlocal;
    MPI_Comm mpi; /* the processes holding the clique's ranks, by their first rank */
    int executed;
} clique;

typedef struct {
    char *p;
    size_t nbytes;
    int dev; /* -1: pinned host memory */
} alloc;

static struct {
    int ndev, cur;
    mock_fault fault;
    int fault_at;
    int hang;
    double slow, busy_until; /* mock_slow; every stream busy until then (mw_now) */
    alloc allocs[MAX_ALLOCS];
    int nallocs;
    clique cliques[MAX_COMMS];
    int ncliques;
    int group_depth, group_gen;
    int aborts, destroys, live, collectives, copies, violations;
    int host_allocs, host_frees; /* cudaHostAlloc / cudaFreeHost calls */
    cudaError_t last;            /* for cudaGetLastError */
    unsigned id_counter;
} M;

void mock_reset(int ndev)
{
    for (int i = 0; i < M.nallocs; i++)
        free(M.allocs[i].p);
    for (int c = 0; c < M.ncliques; c++) {
        for (int r = 0; r < M.cliques[c].nlocal; r++) {
            free(M.cliques[c].local[r]->ops);
            free(M.cliques[c].local[r]);
        }
        if (M.cliques[c].mpi != MPI_COMM_NULL)
            MPI_Comm_free(&M.cliques[c].mpi);
    }
    unsigned idc = M.id_counter;
    int violations = M.violations;
    memset(&M, 0, sizeof M);
    M.ndev = ndev;
    M.id_counter = idc;
    M.violations = violations;
}

void mock_inject(mock_fault fault, int at)
{
    M.fault = fault;
    M.fault_at = at;
}

void mock_slow(double seconds)
{
    M.slow = seconds > 0 ? seconds : 0;
}

long mock_progress(void)
{
    const double now = mw_now();
    return (long)(1000.0 * (now < M.busy_until ? now : M.busy_until));
}

/* Inside a slow device's busy window (mock_slow). */
static int slow_busy(void)
{
    return M.slow > 0 && mw_now() < M.busy_until;
}

static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mock CUDA/NCCL: misuse: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    M.violations++;
}

void *mock_dev_alloc(int dev, size_t nbytes)
{
    if (dev < 0 || dev >= M.ndev || M.nallocs == MAX_ALLOCS)
        return NULL;
    char *p = calloc(nbytes ? nbytes : 1, 1);
    if (p)
        M.allocs[M.nallocs++] = (alloc){p, nbytes, dev};
    return p;
}

void mock_dev_free(void *p)
{
    for (int i = 0; i < M.nallocs; i++)
        if (M.allocs[i].p == p) {
            free(p);
            M.allocs[i] = M.allocs[--M.nallocs];
            return;
        }
}

/* Does [p, p + nbytes) lie inside one allocation of dev (-1: pinned host memory)? */
static int inside(const void *p, size_t nbytes, int dev)
{
    const char *c = p;
    for (int i = 0; i < M.nallocs; i++)
        if (M.allocs[i].dev == dev && c >= M.allocs[i].p &&
            c + nbytes <= M.allocs[i].p + M.allocs[i].nbytes)
            return 1;
    return 0;
}

int mock_inside(const void *p, size_t nbytes, int dev)
{
    return nbytes == 0 || inside(p, nbytes, dev);
}

int mock_current_device(void)
{
    return M.cur;
}
int mock_aborts(void)
{
    return M.aborts;
}
int mock_destroys(void)
{
    return M.destroys;
}
int mock_live_comms(void)
{
    return M.live;
}
int mock_host_allocs(void)
{
    return M.host_allocs;
}

int mock_host_frees(void)
{
    return M.host_frees;
}

int mock_collectives(void)
{
    return M.collectives;
}
int mock_violations(void)
{
    return M.violations;
}
int mock_pending_error(void)
{
    return (int)M.last;
}

/* ---- the CUDA runtime -------------------------------------------------------------------- */

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = M.ndev;
    return M.ndev > 0 ? cudaSuccess : cudaErrorNoDevice;
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return "no error";
    case cudaErrorNotReady:
        return "device not ready";
    case cudaErrorNoDevice:
        return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
        return "invalid device ordinal";
    case cudaErrorInvalidValue:
        return "invalid argument";
    default:
        return "mock: other CUDA error";
    }
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = M.last;
    M.last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    return M.last;
}

cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= M.ndev)
        return M.last = cudaErrorInvalidDevice;
    M.cur = device;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *pci, int len, int device)
{
    if (device < 0 || device >= M.ndev)
        return M.last = cudaErrorInvalidDevice;
    snprintf(pci, (size_t)len, "0000:%02x:00.0", device + 1);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    (void)flags;
    *s = calloc(1, sizeof **s);
    if (!*s)
        return M.last = cudaErrorMemoryAllocation;
    (*s)->dev = M.cur;
    return cudaSuccess;
}

/* The stream's device-to-host copies enqueued before copy number seq are done. */
static void complete(cudaStream_t s, long seq)
{
    int kept = 0;
    for (int i = 0; i < s->npend; i++) {
        pend_copy *c = &s->pend[i];
        if (c->seq < seq) {
            memcpy(c->dst, c->data, c->nbytes);
            free(c->data);
        } else
            s->pend[kept++] = *c;
    }
    s->npend = kept;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    for (int i = 0; i < s->npend; i++) /* dropped: their host memory may be gone already */
        free(s->pend[i].data);
    free(s->pend);
    free(s);
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    (void)flags;
    *e = calloc(1, sizeof **e);
    return *e ? cudaSuccess : (M.last = cudaErrorMemoryAllocation);
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    free(e);
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (s->dev != M.cur)
        violation("cudaEventRecord on a device %d stream with device %d current", s->dev, M.cur);
    e->s = s, e->seq = s->seq, e->polls = POLLS;
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    if (!e->s)
        return cudaSuccess;
    if (M.hang || e->polls > 0 || slow_busy()) {
        if (e->polls > 0)
            e->polls--;
        return M.last = cudaErrorNotReady;
    }
    complete(e->s, e->seq);
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
    if (s->dev != M.cur)
        violation("cudaStreamQuery of a device %d stream with device %d current", s->dev, M.cur);
    if (M.hang || s->busy > 0 || slow_busy()) {
        if (s->busy > 0)
            s->busy--;
        return M.last = cudaErrorNotReady; /* left behind, as some runtimes do */
    }
    complete(s, s->seq);
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t nbytes, unsigned int flags)
{
    if (!(flags & cudaHostAllocPortable))
        violation("pinned memory not portable: only the device current at allocation could use "
                  "it asynchronously");
    *p = NULL;
    M.host_allocs++;
    if (M.nallocs == MAX_ALLOCS)
        return M.last = cudaErrorMemoryAllocation;
    char *c = calloc(nbytes ? nbytes : 1, 1);
    if (!c)
        return M.last = cudaErrorMemoryAllocation;
    M.allocs[M.nallocs++] = (alloc){c, nbytes, -1};
    *p = c;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
    M.host_frees++;
    mock_dev_free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t nbytes, enum cudaMemcpyKind kind,
                            cudaStream_t s)
{
    int to_host = kind == cudaMemcpyDeviceToHost;
    if (kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyHostToDevice)
        violation("cudaMemcpyAsync kind %d", (int)kind);
    const void *dev = to_host ? src : dst, *host = to_host ? dst : src;
    if (!inside(dev, nbytes, s->dev))
        violation("cudaMemcpyAsync: %zu bytes at %p are not device %d memory", nbytes, dev, s->dev);
    if (!inside(host, nbytes, -1))
        violation("cudaMemcpyAsync: %zu bytes at %p are not pinned host memory", nbytes, host);
    for (int c = 0; c < M.ncliques; c++)
        for (int r = 0; r < M.cliques[c].nlocal; r++) {
            const struct ncclComm *m = M.cliques[c].local[r];
            if (!m->dead && m->dev == s->dev && m->nops && m->polls != 0)
                violation("cudaMemcpyAsync on device %d before its NCCL work was seen enqueued "
                          "(state not polled to ncclSuccess): the copy could run first",
                          s->dev);
        }
    if (to_host) { /* done later: at a query that finds the stream or an event after it idle */
        if (s->npend == s->cap) {
            s->cap = s->cap ? 2 * s->cap : 16;
            if (!(s->pend = realloc(s->pend, (size_t)s->cap * sizeof *s->pend)))
                return M.last = cudaErrorMemoryAllocation;
        }
        void *data = malloc(nbytes ? nbytes : 1);
        if (!data)
            return M.last = cudaErrorMemoryAllocation;
        memcpy(data, src, nbytes);
        memset(dst, 0xff, nbytes); /* NaNs */
        s->pend[s->npend++] = (pend_copy){dst, data, nbytes, s->seq++};
    } else {
        complete(s, s->seq); /* in stream order: the device-to-host copies before it first */
        memmove(dst, src, nbytes);
    }
    s->busy = POLLS;
    if (M.fault == MOCK_COPY_HANG && ++M.copies >= M.fault_at)
        M.hang = 1;
    return cudaSuccess;
}

/* ---- NCCL -------------------------------------------------------------------------------- */

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess:
        return "no error";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "mock: other NCCL error";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return M.fault == MOCK_ASYNC_ERROR ? "mock: injected remote error" : "";
}

ncclResult_t ncclGetVersion(int *version)
{
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "mock %d %u", me, ++M.id_counter);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    if (!config || config->blocking != 0)
        violation("ncclCommInitRankConfig without config.blocking = 0");
    if (nranks < 1 || nranks > MAX_COMMS || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    int c = 0;
    while (c < M.ncliques && memcmp(M.cliques[c].id, id.internal, sizeof id.internal))
        c++;
    if (c == M.ncliques) {
        if (M.ncliques == MAX_COMMS)
            return ncclInternalError;
        clique *q = &M.cliques[c];
        memcpy(q->id, id.internal, sizeof id.internal);
        q->nranks = nranks;
        int creator = -1;
        unsigned counter = 0;
        sscanf(id.internal, "mock %d %u", &creator, &counter);
        if (MPI_Comm_split(MPI_COMM_WORLD, creator, rank, &q->mpi) != MPI_SUCCESS)
            return ncclSystemError;
        M.ncliques++;
    }
    clique *q = &M.cliques[c];
    if (q->nranks != nranks || q->nlocal == MAX_COMMS ||
        (q->nlocal && q->local[q->nlocal - 1]->rank != rank - 1)) {
        violation("ncclCommInitRankConfig: rank %d of %d does not fit its clique (%d ranks)", rank,
                  nranks, q->nranks);
        return ncclInvalidUsage;
    }
    for (int r = 0; r < q->nlocal; r++)
        if (q->local[r]->dev == M.cur)
            violation("ncclCommInitRankConfig: ranks %d and %d both on device %d",
                      q->local[r]->rank, rank, M.cur);
    struct ncclComm *m = calloc(1, sizeof *m);
    if (!m || !(m->ops = calloc(MAX_OPS, sizeof *m->ops))) {
        free(m);
        return ncclSystemError;
    }
    m->clique = c;
    m->rank = rank;
    m->nranks = nranks;
    m->dev = M.cur;
    m->polls = M.fault == MOCK_INIT_HANG ? -1 : POLLS;
    q->local[q->nlocal++] = m;
    M.live++;
    *comm = m;
    return ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state)
{
    if (!comm || comm->dead) {
        violation("ncclCommGetAsyncError on a dead communicator");
        return ncclInvalidArgument;
    }
    if (comm->async != ncclSuccess)
        *state = comm->async;
    else if (comm->polls != 0) {
        if (comm->polls > 0)
            comm->polls--;
        *state = ncclInProgress;
    } else {
        *state = ncclSuccess;
        comm->ready = 1;
    }
    return ncclSuccess;
}

/* Run every collective that all of this process's ranks of clique c have posted, together
 * with the clique's other processes (blocking MPI among them). */
static void run_ready(int c)
{
    clique *q = &M.cliques[c];
    for (;;) {
        int k = q->executed, L = q->nlocal;
        for (int r = 0; r < L; r++)
            if (q->local[r]->nops <= k)
                return;
        const op *o0 = &q->local[0]->ops[k];
        for (int r = 1; r < L; r++) {
            const op *o = &q->local[r]->ops[k];
            if (o->kind != o0->kind || o->count != o0->count || o->root != o0->root)
                violation("collective %d: ranks %d and %d posted different operations", k,
                          q->local[0]->rank, q->local[r]->rank);
        }
        size_t n = o0->count, nr = (size_t)q->nranks;
        size_t total = o0->kind == OP_REDUCE_SCATTER || o0->kind == OP_ALL_GATHER ? n * nr : n;
        float *tmp = calloc(total ? total : 1, sizeof(float));
        float *part = calloc(total ? total : 1, sizeof(float));
        switch (o0->kind) {
        case OP_ALLREDUCE:
        case OP_REDUCE_SCATTER:
        case OP_REDUCE:
            for (int r = 0; r < L; r++)
                for (size_t i = 0; i < total; i++)
                    part[i] += q->local[r]->ops[k].send[i];
            MPI_Allreduce(part, tmp, (int)total, MPI_FLOAT, MPI_SUM, q->mpi);
            break;
        case OP_ALL_GATHER: /* ranks are numbered process by process: blocks line up */
            for (int r = 0; r < L; r++)
                memcpy(part + (size_t)r * n, q->local[r]->ops[k].send, n * sizeof(float));
            MPI_Allgather(part, (int)(n * (size_t)L), MPI_FLOAT, tmp, (int)(n * (size_t)L),
                          MPI_FLOAT, q->mpi);
            break;
        case OP_BROADCAST:
            for (int r = 0; r < L; r++)
                if (q->local[r]->rank == o0->root)
                    memcpy(tmp, q->local[r]->ops[k].send, total * sizeof(float));
            MPI_Bcast(tmp, (int)total, MPI_FLOAT, o0->root / L, q->mpi);
            break;
        }
        for (int r = 0; r < L; r++) {
            const op *o = &q->local[r]->ops[k];
            int rk = q->local[r]->rank;
            if (o->kind == OP_REDUCE_SCATTER)
                memcpy(o->recv, tmp + (size_t)rk * n, n * sizeof(float));
            else if (o->kind != OP_REDUCE || rk == o->root)
                memcpy(o->recv, tmp, total * sizeof(float));
            o->stream->busy = POLLS;
        }
        free(tmp);
        free(part);
        q->executed++;
        M.collectives++;
        if (M.slow > 0)
            M.busy_until = mw_now() + M.slow;
        if (M.fault == MOCK_ASYNC_ERROR && M.collectives == M.fault_at)
            for (int r = 0; r < L; r++)
                q->local[r]->async = ncclRemoteError;
        if (M.fault == MOCK_HANG && M.collectives >= M.fault_at)
            M.hang = 1;
    }
}

void (*mock_on_post)(void *stream, const void *send, size_t send_bytes, const void *recv,
                     size_t recv_bytes);

static ncclResult_t post(op_kind kind, const void *send, void *recv, size_t count, int root,
                         ncclComm_t comm, cudaStream_t stream)
{
    if (!comm || comm->dead) {
        violation("collective on a dead communicator");
        return ncclInvalidArgument;
    }
    if (!comm->ready)
        violation("collective before the communicator's set-up was seen complete");
    else if (comm->polls != 0 && !(M.group_depth > 0 && comm->gen == M.group_gen))
        violation("collective on rank %d before its previous one was seen enqueued (state not "
                  "polled to ncclSuccess)",
                  comm->rank);
    comm->gen = M.group_gen;
    if (stream->dev != comm->dev)
        violation("collective of a device %d communicator on a device %d stream", comm->dev,
                  stream->dev);
    size_t n = count, nr = comm->nranks;
    size_t sn = kind == OP_REDUCE_SCATTER ? n * nr : n, rn = kind == OP_ALL_GATHER ? n * nr : n;
    if (!inside(send, sn * sizeof(float), comm->dev) ||
        !inside(recv, rn * sizeof(float), comm->dev)) {
        violation("collective %d on rank %d: buffers %p (%zu floats) -> %p (%zu floats) are not "
                  "device %d memory",
                  (int)kind, comm->rank, send, sn, recv, rn, comm->dev);
        return ncclInvalidArgument;
    }
    if (kind == OP_REDUCE_SCATTER && (const float *)recv != (const float *)send &&
        (const float *)recv != (const float *)send + (size_t)comm->rank * n)
        violation("reduce-scatter on rank %d neither in place nor out of place", comm->rank);
    if (comm->nops == MAX_OPS)
        return ncclInternalError;
    if (mock_on_post)
        mock_on_post(stream, send, sn * sizeof(float), recv, rn * sizeof(float));
    complete(stream, stream->seq);
    comm->ops[comm->nops++] = (op){kind, send, recv, count, root, stream};
    comm->polls = 1; /* enqueueing in the background for a moment */
    if (M.group_depth == 0)
        run_ready(comm->clique);
    return ncclSuccess;
}

/* nccl.h declares these two without (void): not prototypes, for -Wmissing-prototypes */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

ncclResult_t ncclGroupStart(void)
{
    if (M.group_depth++ == 0)
        M.group_gen++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (M.group_depth == 0) {
        violation("ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    if (--M.group_depth == 0)
        for (int c = 0; c < M.ncliques; c++)
            run_ready(c);
    return ncclInProgress;
}

static int check_type(ncclDataType_t t, ncclRedOp_t op_, int reduce)
{
    if (t != ncclFloat || (reduce && op_ != ncclSum)) {
        violation("not a float sum");
        return 0;
    }
    return 1;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t o, ncclComm_t comm, cudaStream_t s)
{
    if (!check_type(t, o, 1))
        return ncclInvalidArgument;
    return post(OP_ALLREDUCE, send, recv, count, 0, comm, s);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t,
                               ncclRedOp_t o, ncclComm_t comm, cudaStream_t s)
{
    if (!check_type(t, o, 1))
        return ncclInvalidArgument;
    return post(OP_REDUCE_SCATTER, send, recv, recvcount, 0, comm, s);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t,
                           ncclComm_t comm, cudaStream_t s)
{
    if (!check_type(t, ncclSum, 0))
        return ncclInvalidArgument;
    return post(OP_ALL_GATHER, send, recv, sendcount, 0, comm, s);
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t o,
                        int root, ncclComm_t comm, cudaStream_t s)
{
    if (!check_type(t, o, 1))
        return ncclInvalidArgument;
    return post(OP_REDUCE, send, recv, count, root, comm, s);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root,
                           ncclComm_t comm, cudaStream_t s)
{
    if (!check_type(t, ncclSum, 0))
        return ncclInvalidArgument;
    return post(OP_BROADCAST, send, recv, count, root, comm, s);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    if (!comm || comm->dead)
        return ncclInvalidArgument;
    comm->polls = POLLS;
    return ncclInProgress;
}

static void bury(ncclComm_t comm)
{
    comm->dead = 1;
    M.live--;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm || comm->dead)
        return ncclInvalidArgument;
    if (comm->polls != 0)
        violation("ncclCommDestroy before ncclCommFinalize completed");
    bury(comm);
    M.destroys++;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm || comm->dead)
        return ncclInvalidArgument;
    bury(comm);
    M.aborts++;
    return ncclSuccess;
}
