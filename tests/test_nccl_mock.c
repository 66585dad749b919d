/* Suite 'cuda', under mpiexec -n 2, no GPU needed: cluster/nccl.c linked against the host-only
 * CUDA/NCCL stand-in (tests/nccl_mock.h) instead of libcudart and libnccl.
 *
 * What it proves without a device: the non-blocking protocol is followed (config.blocking = 0,
 * state polled to ncclSuccess before the next step, busy streams waited out, no stale
 * cudaErrorNotReady left behind); the shard, tail and staging arithmetic gives the exact sum
 * on one node (ncclAllReduce, 1 and 3 fake GPUs in one process) and across two fake nodes
 * (reduce-scatter, host ring, all-gather; 1, 2 and 3 fake GPUs per rank; counts 0, 1, fewer
 * than the GPUs, 7, a prime, 1M and the largest tail; the callers' streams and the object's
 * own; across nodes the shards staged through the host in pieces, each summed only after its
 * copy down has landed, which the mock enforces: NaNs until then), with every device access
 * inside the right fake device's memory; one communicator over both fake nodes
 * (mw_nccl_open_flat: one ncclAllReduce, no staging) gives the same sums; the overlapped
 * all-reduce's buckets (three ranges enqueued back to back, one wait) give the same sums on one
 * node and are refused across nodes and behind a pending all-reduce; the set-up checks
 * (bad or repeated devices, two ranks on one GPU, unequal ranks of a node, unequal nodes) give
 * one message on every rank; and an asynchronous NCCL error, a stuck collective and a stuck
 * set-up end in MW_EDEVICE / MW_ETIMEOUT with the operation, step and device named, every
 * communicator aborted, and later calls refused.
 * What it cannot prove: that real NCCL and CUDA behave as the stand-in does (tests/test_nccl.c
 * checks that on a machine with GPUs). Prints "N passed, M failed"; exits 1 on any failure. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "cluster/nccl.h"
#include "cluster/topology.h"
#include "common/status.h"
#include "common/timer.h"
#include "tests/mpi_check.h"
#include "tests/nccl_mock.h"

#define MAX_DEV 4
#define FAKE_DEVICES 8 /* per process; a node's ranks use disjoint ones */
#define MAX_COUNT ((size_t)1 << 21)

static int rank, world;

/* This rank's fake GPUs 0..ndev-1: a buffer of MAX_COUNT floats and a stream on each. */
typedef struct {
    int ndev, devs[MAX_DEV];
    float *buf[MAX_DEV];
    void *streams[MAX_DEV];
} gpus;

static void gpus_open(gpus *g, int ndev, int first)
{
    memset(g, 0, sizeof *g);
    g->ndev = ndev;
    for (int d = 0; d < ndev; d++) {
        g->devs[d] = first + d;
        g->buf[d] = mock_dev_alloc(first + d, MAX_COUNT * sizeof(float));
        cudaStream_t s = NULL;
        cudaSetDevice(first + d);
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        g->streams[d] = s;
    }
}

static void gpus_close(gpus *g)
{
    for (int d = 0; d < g->ndev; d++) {
        mock_dev_free(g->buf[d]);
        cudaStreamDestroy(g->streams[d]);
    }
}

/* Fill count floats of each GPU's buffer (this rank's first GPU is number q0 of the cluster),
 * with a guard after them. */
#define GUARD 12345.0f
static void fill(gpus *g, size_t count, int q0)
{
    for (int d = 0; d < g->ndev; d++) {
        for (size_t i = 0; i < count; i++)
            g->buf[d][i] = mpi_check_value(q0 + d, i);
        g->buf[d][count] = GUARD; /* the element after count must stay untouched */
    }
}

/* 1 when every buffer holds the sequential sum over the nq GPUs of the cluster and the guard. */
static int summed(const gpus *g, size_t count, int nq, const char *layout)
{
    for (int d = 0; d < g->ndev; d++)
        for (size_t i = 0; i <= count; i++) {
            float s = 0;
            for (int q = 0; q < nq && i < count; q++)
                s += mpi_check_value(q, i);
            if (g->buf[d][i] != (i < count ? s : GUARD)) {
                fprintf(stderr, "rank %d: %s count %zu: device %d element %zu wrong\n", rank,
                        layout, count, d, i);
                return 0;
            }
        }
    return 1;
}

/* Fill, all-reduce, compare with the sequential sum over the nq GPUs of the cluster. */
static void sum_case(mw_nccl *n, gpus *g, size_t count, int own_streams, int q0, int nq,
                     const char *layout)
{
    fill(g, count, q0);
    mw_err_clear();
    mw_status st = mw_nccl_allreduce(n, g->buf, count, own_streams ? NULL : g->streams, 7);
    const int ok = st == MW_OK && mock_pending_error() == 0 && summed(g, count, nq, layout);
    mpi_check(ok, "%s: count %zu (%s streams): %s %s", layout, count,
              own_streams ? "its own" : "the callers'", mw_status_str(st), mw_err_msg());
}

/* The overlapped all-reduce's buckets (one node): three ranges from the end down, enqueued with
 * no wait between them, then one wait: the sequential sums, as one all-reduce gives. A bucket
 * while a whole all-reduce is pending is refused; on several nodes every bucket is, before
 * anything is enqueued. */
static void buckets(mw_nccl *n, gpus *g, int q0, int nq, const char *layout)
{
    const size_t count = 1048579, cut[4] = {0, 5, 700001, count};
    fill(g, count, q0);
    mw_err_clear();
    const int before = mock_collectives();
    mw_status st = MW_OK;
    for (int b = 2; b >= 0 && st == MW_OK; b--)
        st = mw_nccl_allreduce_bucket(n, g->buf, cut[b], cut[b + 1] - cut[b], g->streams, 9);
    if (mw_nccl_nodes(n) > 1) {
        mpi_check(st == MW_EINTERNAL &&
                      strstr(mw_err_msg(), "buckets on 2 nodes (one node only)") &&
                      mock_collectives() == before,
                  "%s: a bucket across nodes: %s %s", layout, mw_status_str(st), mw_err_msg());
        mw_err_clear();
        return;
    }
    if (st == MW_OK)
        st = mw_nccl_wait(n);
    mpi_check(st == MW_OK && mock_collectives() == before + 3 && summed(g, count, nq, layout),
              "%s: 3 buckets: %s %s", layout, mw_status_str(st), mw_err_msg());
    mw_err_clear();
    st = mw_nccl_allreduce_start(n, g->buf, 8, g->streams, 10);
    mw_status st2 = mw_nccl_allreduce_bucket(n, g->buf, 0, 8, g->streams, 10);
    mpi_check(st == MW_OK && st2 == MW_EINTERNAL &&
                  strstr(mw_err_msg(), "the previous one was not waited for"),
              "%s: a bucket behind a pending all-reduce: %s, %s %s", layout, mw_status_str(st),
              mw_status_str(st2), mw_err_msg());
    mw_err_clear();
    mpi_check(mw_nccl_wait(n) == MW_OK, "%s: the pending all-reduce's wait: %s", layout,
              mw_err_msg());
}

static void sums(mw_nccl *n, gpus *g, int q0, int nq, const char *layout)
{
    int G = mw_nccl_node_gpus(n);
    const size_t counts[] = {0,     1,       (size_t)(G > 1 ? G - 1 : 2),       7,
                             65537, 1048576, (size_t)G * 4099 + (size_t)(G - 1)};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++)
        sum_case(n, g, counts[c], 0, q0, nq, layout);
    sum_case(n, g, 1048579, 1, q0, nq, layout);
    sum_case(n, g, MAX_COUNT - 1, 0, q0, nq, layout);
}

/* More than the max_count given at open: refused on every rank before anything is enqueued
 * (the staging was sized for max_count); the sums that follow show the communicator is still
 * usable. */
static void over(mw_nccl *n, gpus *g, const char *layout)
{
    mw_err_clear();
    int before = mock_collectives();
    mw_status st = mw_nccl_allreduce(n, g->buf, MAX_COUNT + 1, g->streams, 3);
    mpi_check(st == MW_EINTERNAL &&
                  strstr(mw_err_msg(), "NCCL all-reduce at step 3: 2097153 floats, more than the "
                                       "2097152 the communicator was opened for") &&
                  mock_collectives() == before,
              "%s: a count over max_count: %s %s", layout, mw_status_str(st), mw_err_msg());
    mw_err_clear();
}

/* A TF_CONFIG file with the ranks on two fake nodes (first half node-a). Malloc'ed path. */
static char *two_node_config(void)
{
    const char *tmp = getenv("TMPDIR");
    char *path = malloc(512);
    snprintf(path, 512, "%s/mw_test_nccl_mock_%d_%d.json", tmp && *tmp ? tmp : "/tmp",
             (int)getpid(), rank);
    FILE *f = fopen(path, "w");
    if (!f)
        MPI_Abort(MPI_COMM_WORLD, 1);
    fprintf(f, "{\"cluster\": {\"worker\": [");
    for (int r = 0; r < world; r++)
        fprintf(f, "%s\"node-%c:%d\"", r ? ", " : "", r < world / 2 ? 'a' : 'b', 2222 + r);
    fprintf(f, "]}, \"task\": {\"type\": \"worker\", \"index\": 0}}\n");
    fclose(f);
    return path;
}

/* One process alone (no node or cross communicator): ncclAllReduce over its fake GPUs. */
static void alone(int ndev)
{
    mock_reset(FAKE_DEVICES);
    gpus g;
    gpus_open(&g, ndev, 0);
    mw_nccl *n = NULL;
    char layout[64];
    snprintf(layout, sizeof layout, "alone, %d GPU(s)", ndev);
    mw_err_clear();
    mw_status st = mw_nccl_open(&n, MPI_COMM_NULL, MPI_COMM_NULL, ndev, g.devs, MAX_COUNT, 30);
    if (mpi_check(st == MW_OK && n && mw_nccl_node_gpus(n) == ndev && mw_nccl_nodes(n) == 1,
                  "%s: open: %s", layout, mw_err_msg())) {
        sums(n, &g, 0, ndev, layout);
        mw_nccl_close(&n);
    }
    mpi_check(n == NULL && mock_live_comms() == 0 && mock_destroys() == ndev && mock_aborts() == 0,
              "%s: closed cleanly (%d destroyed, %d aborted, %d live)", layout, mock_destroys(),
              mock_aborts(), mock_live_comms());
    gpus_close(&g);
}

/* The ranks of a topology, ndev fake GPUs each (disjoint on a node): one node is
 * ncclAllReduce across processes, several nodes the hierarchical path. */
/* all: MPI_COMM_NULL, or one NCCL communicator over every GPU (mw_nccl_open_flat). */
static void layout_sums(const mw_topology *t, int ndev, const char *name, MPI_Comm all)
{
    mock_reset(FAKE_DEVICES);
    gpus g;
    gpus_open(&g, ndev, t->local_rank * ndev);
    mw_nccl *n = NULL;
    char layout[96];
    snprintf(layout, sizeof layout, "%s, %d x %d GPU(s) per node", name, t->local_size, ndev);
    mw_err_clear();
    mw_status st = mw_nccl_open_flat(&n, t->node_comm, t->cross, all, ndev, g.devs, MAX_COUNT, 30);
    const int flat = all != MPI_COMM_NULL;
    if (mpi_check(st == MW_OK && n &&
                      mw_nccl_node_gpus(n) == (flat ? t->ntrain : t->local_size) * ndev &&
                      mw_nccl_nodes(n) == (flat ? 1 : t->nnodes),
                  "%s: open: %s", layout, mw_err_msg())) {
        /* The pinned staging is allocated by the open (several nodes, hierarchical only),
         * once, and no all-reduce allocates or frees pinned memory: both calls synchronize
         * the device. */
        const int want = t->nnodes > 1 && !flat, at_open = mock_host_allocs();
        mpi_check(at_open == want && mock_host_frees() == 0,
                  "%s: open allocated pinned memory %d time(s), want %d", layout, at_open, want);
        over(n, &g, layout);
        sums(n, &g, t->rank * ndev, t->ntrain * ndev, layout);
        buckets(n, &g, t->rank * ndev, t->ntrain * ndev, layout);
        mpi_check(mock_host_allocs() == at_open && mock_host_frees() == 0,
                  "%s: the all-reduces allocated pinned memory %d and freed it %d time(s)", layout,
                  mock_host_allocs() - at_open, mock_host_frees());
        mw_nccl_close(&n);
        mpi_check(mock_host_frees() == want, "%s: close freed the staging %d time(s), want %d",
                  layout, mock_host_frees(), want);
    }
    mpi_check(n == NULL && mock_live_comms() == 0 && mock_destroys() == ndev, "%s: closed cleanly",
              layout);
    gpus_close(&g);
}

/* The progress count of devices that keep finishing work until moving_until (mw_now), then
 * stop: a slow backward before a collective that never completes. */
static double moving_until;
static long moving_progress(void *ctx)
{
    (void)ctx;
    const double now = mw_now();
    return (long)(1000.0 * (now < moving_until ? now : moving_until));
}

/* A fault injected at the same collective on every rank: one message, all aborted. moving > 0:
 * the devices make progress for that many seconds after the all-reduce starts (the timeout, 1 s,
 * counts from then on, so the wait lasts at least moving + 1 s). */
static void fault(const mw_topology *t, mock_fault kind, int at, int ndev, const char *layout,
                  mw_status want, const char *want_msg, double moving)
{
    mock_reset(FAKE_DEVICES);
    mock_inject(kind, at);
    gpus g;
    gpus_open(&g, ndev, t ? t->local_rank * ndev : 0);
    mw_nccl *n = NULL;
    MPI_Comm node = t ? t->node_comm : MPI_COMM_NULL, cross = t ? t->cross : MPI_COMM_NULL;
    mw_err_clear();
    mw_status st = mw_nccl_open(&n, node, cross, ndev, g.devs, MAX_COUNT, 1.0);
    if (kind == MOCK_INIT_HANG) {
        int ok = st == want && n == NULL && strstr(mw_err_msg(), want_msg) &&
                 mock_aborts() == ndev && mock_live_comms() == 0;
        mpi_check(ok, "%s: %s %s (%d aborted)", layout, mw_status_str(st), mw_err_msg(),
                  mock_aborts());
        if (rank == 0)
            printf("%s: %s\n", layout, mw_err_msg());
        gpus_close(&g);
        return;
    }
    if (!mpi_check(st == MW_OK, "%s: open: %s", layout, mw_err_msg())) {
        gpus_close(&g);
        return;
    }
    for (int d = 0; d < ndev; d++)
        for (size_t i = 0; i < 1000; i++)
            g.buf[d][i] = 1;
    mw_err_clear();
    if (moving > 0)
        mw_nccl_set_progress(n, moving_progress, NULL);
    const double t0 = mw_now();
    moving_until = t0 + moving;
    st = mw_nccl_allreduce(n, g.buf, 1000, g.streams, 7);
    const double took = mw_now() - t0;
    int ok = st == want && strstr(mw_err_msg(), want_msg) && mock_aborts() == ndev &&
             mock_live_comms() == 0 && took >= moving;
    mpi_check(ok, "%s: %s %s (%d aborted, after %.2f s)", layout, mw_status_str(st), mw_err_msg(),
              mock_aborts(), took);
    if (rank == 0)
        printf("%s: %s\n", layout, mw_err_msg());
    mw_err_clear();
    st = mw_nccl_allreduce(n, g.buf, 1000, g.streams, 8);
    mpi_check(st == MW_EDEVICE && strstr(mw_err_msg(), "NCCL all-reduce at step 8: the NCCL "
                                                       "communicator was aborted after an earlier "
                                                       "failure"),
              "%s: later call: %s", layout, mw_err_msg());
    mw_nccl_close(&n);
    mpi_check(n == NULL && mock_live_comms() == 0 && mock_destroys() == 0, "%s: close", layout);
    gpus_close(&g);
}

/* Set-up checks that fail before NCCL is touched: the same status and message everywhere. */
static void refused(MPI_Comm node, MPI_Comm cross, int ndev, const int *devs, const char *layout,
                    const char *want_msg)
{
    mock_reset(FAKE_DEVICES);
    mw_nccl *n = (mw_nccl *)&n;
    mw_err_clear();
    mw_status st = mw_nccl_open(&n, node, cross, ndev, devs, MAX_COUNT, 30);
    int ok =
        st == MW_EDEVICE && n == NULL && strstr(mw_err_msg(), want_msg) && mock_live_comms() == 0;
    mpi_check(ok, "%s: %s %s", layout, mw_status_str(st), mw_err_msg());
    if (rank == 0)
        printf("%s: %s\n", layout, mw_err_msg());
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    unsetenv("TF_CONFIG");
    mock_reset(FAKE_DEVICES);
    if (rank == 0)
        printf("%s (the stand-in)\n", mw_nccl_version_string());

    /* One process, its own node. */
    alone(1);
    alone(3);
    fault(NULL, MOCK_HANG, 1, 2, "alone, stuck all-reduce", MW_ETIMEOUT,
          "collective timeout: NCCL all-reduce at step 7 waited 1 s for CUDA device 0, 1 s since "
          "this process's GPUs last finished a kernel (--collective-timeout 1)",
          0);
    /* the devices busy for 2 s before the stuck collective: the 1 s deadline counts from then */
    fault(NULL, MOCK_HANG, 1, 2, "alone, stuck all-reduce after a slow backward", MW_ETIMEOUT,
          "collective timeout: NCCL all-reduce at step 7 waited 3 s for CUDA device 0, 1 s since "
          "this process's GPUs last finished a kernel (--collective-timeout 1)",
          2.0);
    fault(NULL, MOCK_ASYNC_ERROR, 1, 2, "alone, asynchronous error", MW_EDEVICE,
          "NCCL all-reduce at step 7 on CUDA device 0: NCCL reported an asynchronous error: "
          "remote process exited or there was a network error (mock: injected remote error)",
          0);
    fault(NULL, MOCK_INIT_HANG, 0, 2, "alone, stuck set-up", MW_ETIMEOUT,
          "collective timeout: NCCL set-up (communicator) waited 1 s for CUDA device 0", 0);
    int bad[2] = {9, 1}, twice[2] = {1, 1};
    refused(MPI_COMM_NULL, MPI_COMM_NULL, 1, bad, "alone, no such device",
            "NCCL set-up, local rank 0: CUDA device 9 does not exist (8 devices: 0..7)");
    refused(MPI_COMM_NULL, MPI_COMM_NULL, 2, twice, "alone, a device twice",
            "NCCL set-up, local rank 0: CUDA device 1 is listed twice");

    /* All ranks on one node (no TF_CONFIG): the checks among the node's ranks. */
    mw_topology t;
    if (world > 1 &&
        mpi_check(mw_topology_resolve(&t, NULL) == MW_OK, "topology: %s", mw_err_msg())) {
        for (int ndev = 1; ndev * t.local_size <= FAKE_DEVICES && ndev <= 2; ndev++)
            layout_sums(&t, ndev, "one node", MPI_COMM_NULL);
        int zero = 0, mine[2] = {2 * rank, 2 * rank + 1};
        refused(t.node_comm, t.cross, 1, &zero, "one node, every rank on GPU 0",
                "NCCL set-up: local ranks 0 and 1 both drive the GPU at PCI 0000:01:00.0");
        refused(t.node_comm, t.cross, rank ? 2 : 1, mine, "one node, unequal ranks",
                "NCCL set-up: local rank 1 drives 2 GPUs but local rank 0 drives 1");
        int bad_here = rank == world - 1 ? 9 : rank;
        refused(t.node_comm, t.cross, 1, &bad_here, "one node, a bad device on the last rank",
                "does not exist");
        mw_topology_free(&t);
    }

    /* Two fake nodes. */
    char *two = world % 2 == 0 ? two_node_config() : NULL;
    if (two && mpi_check(mw_topology_resolve(&t, two) == MW_OK, "two fake nodes: topology: %s",
                         mw_err_msg())) {
        for (int ndev = 1; ndev <= 3 && ndev * t.local_size <= FAKE_DEVICES; ndev++)
            layout_sums(&t, ndev, "two fake nodes", MPI_COMM_NULL);
        /* one NCCL communicator over both nodes: ncclAllReduce, buckets allowed */
        for (int ndev = 1; ndev <= 2; ndev++)
            layout_sums(&t, ndev, "two fake nodes, one communicator", MPI_COMM_WORLD);
        int nd = rank < world / 2 ? 1 : 2, devs[2] = {t.local_rank * nd, t.local_rank * nd + 1};
        refused(t.node_comm, t.cross, nd, devs, "two fake nodes, unequal GPUs",
                "NCCL set-up: the nodes differ");
        if (world == 2) {
            int d = rank ? 11 : 0;
            refused(t.node_comm, t.cross, 1, &d, "two fake nodes, a bad device on one",
                    rank ? "does not exist" : "NCCL set-up failed on another node");
        }
        fault(&t, MOCK_ASYNC_ERROR, 1, 3, "two fake nodes, asynchronous error", MW_EDEVICE,
              "NCCL all-reduce (reduce-scatter inside the node) at step 7 on CUDA device ", 0);
        fault(&t, MOCK_HANG, 2, 2, "two fake nodes, stuck all-gather", MW_ETIMEOUT,
              "collective timeout: NCCL all-reduce (all-gather inside the node) at step 7", 0);
        fault(&t, MOCK_COPY_HANG, 1, 1, "two fake nodes, stuck copy", MW_ETIMEOUT,
              "collective timeout: NCCL all-reduce (copy of the shards to the host) at step 7", 0);
        mw_topology_free(&t);
    }
    if (two) {
        remove(two);
        free(two);
    }
    mpi_check(mock_violations() == 0, "the stand-in found %d misuse(s) (printed above)",
              mock_violations());
    int failed = mpi_check_report();
    MPI_Finalize();
    return failed ? 1 : 0;
}
