/* Suite 'cuda', under mpiexec: the GPU hierarchical all-reduce (cluster/nccl.h) and its
 * inter-node step, the host ring (cluster/ring.h), against the sequential sum. Values are small
 * integers stored as floats, exact in any summation order, so results compare bitwise.
 *
 *   test_nccl ring   the host ring over MPI, no GPU needed: counts 0, 1, 7, fewer than the
 *                    ranks, a prime, 1M and several windows of segments; a reversed ring and the
 *                    neighbours it names; bitwise repeatability of a non-integer sum.
 *   test_nccl nccl   without a device: mw_nccl_open must fail on every rank with one clear
 *                    message (no hang, in both layouts below); then the reason is printed and
 *                    the test exits 77, which meson reports as SKIP.
 *                    With devices, two layouts from mw_topology_resolve:
 *                      one node (no TF_CONFIG): ncclAllReduce; needs a GPU per rank, else
 *                      mw_nccl_open must refuse ranks sharing a GPU with a clear message;
 *                      two fake nodes (TF_CONFIG hosts node-a, node-b): reduce-scatter, the
 *                      host ring over `cross`, all-gather, with each rank driving its share
 *                      of the GPUs (mw_device_divide);
 *                    counts 0, 1, 7, fewer than the GPUs, a prime, 1M and one with the largest
 *                    tail, with the callers' streams and with the object's own.
 * Prints "N passed, M failed" and exits 1 on any failure. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/nccl.h"
#include "cluster/ring.h"
#include "cluster/topology.h"
#include "common/status.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/runtime.h"
#include "tests/mpi_check.h"
#include "worker/replicas/device.h"

#define MAX_DEV 16
#define MAX_COUNT ((size_t)1 << 21)

static int rank, world;

static float *want_sum(size_t count, int nq)
{
    float *w = malloc((count ? count : 1) * sizeof(float));
    if (!w)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < count; i++) {
        float s = 0;
        for (int q = 0; q < nq; q++)
            s += mpi_check_value(q, i);
        w[i] = s;
    }
    return w;
}

/* 1 when got == want bitwise; else prints the first difference. */
static int same(const float *got, const float *want, size_t count, const char *what)
{
    if (count == 0 || memcmp(got, want, count * sizeof(float)) == 0)
        return 1;
    for (size_t i = 0; i < count; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "rank %d: %s: first difference at [%zu]: got %g want %g\n", rank, what,
                    i, got[i], want[i]);
            break;
        }
    return 0;
}

/* ---- the host ring ----------------------------------------------------------------------- */

static void ring_case(mw_ring *r, size_t count)
{
    float *buf = malloc((count ? count : 1) * sizeof(float)), *want = want_sum(count, r->size);
    for (size_t i = 0; i < count; i++)
        buf[i] = mpi_check_value(r->rank, i);
    mw_err_clear();
    mw_status st = mw_ring_sum(r, buf, count, 3);
    char what[96];
    snprintf(what, sizeof what, "ring of %d, count %zu", r->size, count);
    int ok = st == MW_OK && same(buf, want, count, what);
    mpi_check(ok, "%s: %s %s", what, mw_status_str(st), mw_err_msg());
    free(buf);
    free(want);
}

static void run_ring(void)
{
    mw_ring r;
    mw_status st = mw_ring_open(&r, MPI_COMM_WORLD, "test ring", 60);
    mpi_check(st == MW_OK, "ring open: %s", mw_err_msg());
    mpi_check(r.left_peer == (rank - 1 + world) % world && r.right_peer == (rank + 1) % world,
              "ring neighbours: left %d right %d", r.left_peer, r.right_peer);
    mpi_check(strstr(r.recv_op, "test ring, receiving from node") != NULL, "ring op: %s",
              r.recv_op);
    const size_t counts[] = {0,
                             1,
                             7,
                             (size_t)(world - 1),
                             65537,
                             1048576,
                             (size_t)world * 40 * 32768 + 3 /* several windows per step */};
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++)
        ring_case(&r, counts[c]);

    /* Non-integer values: the same ring twice gives the same bits. */
    size_t n = 100003;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] = sinf((float)(i * 7 + (size_t)rank * 13)) * 1e-3f;
    int ok = mw_ring_sum(&r, a, n, -1) == MW_OK && mw_ring_sum(&r, b, n, -1) == MW_OK &&
             memcmp(a, b, n * sizeof(float)) == 0;
    mpi_check(ok, "ring twice is bitwise equal");
    free(a);
    free(b);
    mw_ring_close(&r);

    /* A ring in another order names other neighbours. */
    MPI_Comm rev;
    MPI_Comm_split(MPI_COMM_WORLD, 0, world - rank, &rev);
    st = mw_ring_open(&r, rev, "reversed ring", 60);
    mpi_check(st == MW_OK && r.left_peer == (rank + 1) % world &&
                  r.right_peer == (rank - 1 + world) % world,
              "reversed ring neighbours: left %d right %d", r.left_peer, r.right_peer);
    ring_case(&r, 1048577);
    mw_ring_close(&r);
    MPI_Comm_free(&rev);

    /* No communicator: a ring of one leaves the buffer alone. */
    st = mw_ring_open(&r, MPI_COMM_NULL, "no ring", 60);
    float one[3] = {1, 2, 3};
    mpi_check(st == MW_OK && r.size == 1 && mw_ring_sum(&r, one, 3, 0) == MW_OK && one[0] == 1 &&
                  one[2] == 3,
              "ring of one");
    mw_ring_close(&r);
}

/* ---- NCCL -------------------------------------------------------------------------------- */

/* This rank's GPUs: a context (stream) and a buffer of MAX_COUNT floats on each. */
typedef struct {
    int ndev;
    mw_kctx k[MAX_DEV];
    float *buf[MAX_DEV];
    void *streams[MAX_DEV];
} gpus;

static void gpus_close(gpus *g)
{
    for (int d = 0; d < g->ndev; d++) {
        mw_cuda_free(g->buf[d]);
        mw_cuda_ctx_close(&g->k[d]);
    }
    memset(g, 0, sizeof *g);
}

static mw_status gpus_open(gpus *g, int first, int ndev)
{
    memset(g, 0, sizeof *g);
    if (ndev > MAX_DEV)
        return mw_err(MW_EINVAL, "test: at most %d devices per rank", MAX_DEV);
    for (int d = 0; d < ndev; d++) {
        g->ndev = d + 1;
        MW_TRY(mw_cuda_ctx_open(&g->k[d], first + d)); /* leaves its device current */
        MW_TRY(mw_cuda_alloc((void **)&g->buf[d], MAX_COUNT * sizeof(float)));
        g->streams[d] = mw_cuda_stream(&g->k[d]);
    }
    return MW_OK;
}

/* Upload every replica's values, all-reduce, download and compare with the sequential sum.
 * q0: the global index of my first GPU; nq: GPUs in the cluster. */
static void nccl_case(mw_nccl *n, gpus *g, size_t count, int own_streams, int q0, int nq,
                      const char *layout)
{
    float *h = malloc((count ? count : 1) * sizeof(float)), *want = want_sum(count, nq);
    int ok = 1;
    mw_err_clear();
    mw_status st = MW_OK;
    for (int d = 0; d < g->ndev && st == MW_OK; d++) {
        for (size_t i = 0; i < count; i++)
            h[i] = mpi_check_value(q0 + d, i);
        st = mw_cuda_upload(g->buf[d], h, count * sizeof(float), &g->k[d]);
        if (st == MW_OK)
            st = mw_cuda_sync(&g->k[d]); /* h is refilled next */
    }
    if (st == MW_OK)
        st = mw_nccl_allreduce(n, g->buf, count, own_streams ? NULL : g->streams, 7);
    char what[160];
    snprintf(what, sizeof what, "%s: count %zu (%s streams)", layout, count,
             own_streams ? "its own" : "the callers'");
    for (int d = 0; d < g->ndev && st == MW_OK; d++) {
        st = mw_cuda_download(h, g->buf[d], count * sizeof(float), &g->k[d]);
        if (st == MW_OK)
            st = mw_cuda_sync(&g->k[d]);
        if (st == MW_OK)
            ok &= same(h, want, count, what);
    }
    mpi_check(ok && st == MW_OK, "%s: %s %s", what, mw_status_str(st), mw_err_msg());
    free(h);
    free(want);
}

/* A TF_CONFIG file faking two nodes: the first half of the ranks on node-a, the rest on
 * node-b. Returns the malloc'ed path. */
static char *two_node_config(void)
{
    const char *tmp = getenv("TMPDIR");
    char *path = malloc(512);
    snprintf(path, 512, "%s/mw_test_nccl_%d_%d.json", tmp && *tmp ? tmp : "/tmp", (int)getpid(),
             rank);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "rank %d: cannot write %s\n", rank, path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fprintf(f, "{\"cluster\": {\"worker\": [");
    for (int r = 0; r < world; r++)
        fprintf(f, "%s\"node-%c:%d\"", r ? ", " : "", r < world / 2 ? 'a' : 'b', 2222 + r);
    fprintf(f, "]}, \"task\": {\"type\": \"worker\", \"index\": 0}}\n");
    fclose(f);
    return path;
}

static int resolve(mw_topology *t, const char *path, const char *layout)
{
    mw_status st = mw_topology_resolve(t, path);
    return mpi_check(st == MW_OK, "%s: topology: %s", layout, mw_err_msg());
}

/* Without a device (or CUDA): mw_nccl_open fails on every rank with one message, no hang. */
static void no_device(const char *path, const char *layout)
{
    mw_topology t;
    if (!resolve(&t, path, layout))
        return;
    int dev = 0;
    mw_nccl *n = (mw_nccl *)&dev; /* must come back NULL */
    mw_err_clear();
    mw_status st = mw_nccl_open(&n, t.node_comm, t.cross, 1, &dev, MAX_COUNT, 30);
    const char *msg = mw_err_msg();
    int ok = st == MW_EDEVICE && n == NULL &&
             (strstr(msg, "no usable CUDA device") || strstr(msg, "built without CUDA/NCCL"));
    mpi_check(ok, "%s: mw_nccl_open without a device: %s %s", layout, mw_status_str(st), msg);
    if (rank == 0)
        printf("%s, no device: mw_nccl_open: %s\n", layout, msg);
    mw_nccl_close(&n);
    mw_err_clear();
    float *none[1] = {NULL};
    mpi_check(mw_nccl_allreduce(NULL, none, 1, NULL, 0) != MW_OK, "all-reduce on a NULL object");
    mw_err_clear();
    mw_topology_free(&t);
}

static void with_devices(const char *path, const char *layout, int ndevices)
{
    mw_topology t;
    if (!resolve(&t, path, layout))
        return;
    int first = 0, nd = 0;
    mw_status st;
    char reason[256] = "";
    int count = mw_cuda_probe(reason, sizeof reason);
    mpi_check(count >= 1, "%s: mw_cuda_probe: %s", layout, reason);
    mw_device_divide(t.local_rank, t.local_size, count, &first, &nd);
    if (rank == 0)
        printf("%s: local rank %d of %d drives CUDA devices %d+%d\n", layout, t.local_rank,
               t.local_size, first, nd);
    int shared = t.local_size > ndevices, any_shared = 0;
    MPI_Allreduce(&shared, &any_shared, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    mw_nccl *n = NULL;
    if (any_shared) {
        /* Ranks sharing a GPU: NCCL cannot run; the open must say so on every rank. */
        mw_err_clear();
        st = mw_nccl_open(&n, t.node_comm, t.cross, 1, &first, MAX_COUNT, 60);
        int ok = st == MW_EDEVICE && n == NULL && strstr(mw_err_msg(), "both drive the GPU");
        mpi_check(ok, "%s: shared GPUs refused: %s %s", layout, mw_status_str(st), mw_err_msg());
        if (rank == 0)
            printf("%s: %d ranks per node on %d GPU(s): not run (NCCL needs a GPU per rank); "
                   "the refusal: %s\n",
                   layout, t.local_size, ndevices, mw_err_msg());
        mw_nccl_close(&n);
        mw_topology_free(&t);
        return;
    }

    gpus g;
    int devs[MAX_DEV];
    for (int d = 0; d < nd && d < MAX_DEV; d++)
        devs[d] = first + d;
    mw_err_clear();
    st = gpus_open(&g, first, nd);
    int ok = mpi_check(st == MW_OK, "%s: device contexts: %s", layout, mw_err_msg());
    if (ok) {
        st = mw_nccl_open(&n, t.node_comm, t.cross, nd, devs, MAX_COUNT, 60);
        ok = mpi_check(st == MW_OK && n, "%s: mw_nccl_open: %s %s", layout, mw_status_str(st),
                       mw_err_msg());
    }
    if (ok) {
        int G = mw_nccl_node_gpus(n);
        mpi_check(G == t.local_size * nd && mw_nccl_nodes(n) == t.nnodes,
                  "%s: %d GPUs per node, %d nodes", layout, G, mw_nccl_nodes(n));
        if (rank == 0)
            printf("%s: %d node(s) x %d rank(s) x %d GPU(s), %s\n", layout, t.nnodes, t.local_size,
                   nd, mw_nccl_version_string());
        const int nq = t.ntrain * nd, q0 = t.rank * nd;
        const size_t counts[] = {0,
                                 1,
                                 7,
                                 (size_t)(G > 1 ? G - 1 : 2),
                                 65537,
                                 1048576,
                                 (size_t)G * 4099 + (size_t)(G - 1) /* the largest tail */};
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++)
            nccl_case(n, &g, counts[c], 0, q0, nq, layout);
        nccl_case(n, &g, 1048579, 1, q0, nq, layout);
        nccl_case(n, &g, MAX_COUNT, 0, q0, nq, layout);
        mw_nccl_close(&n);
        mpi_check(n == NULL, "%s: close", layout);
    }
    gpus_close(&g);
    mw_topology_free(&t);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    const char *mode = argc > 1 ? argv[1] : "nccl";
    unsetenv("TF_CONFIG"); /* the layouts come from here only */
    int rc = 0;

    if (!strcmp(mode, "ring")) {
        run_ring();
    } else if (!strcmp(mode, "nccl")) {
        char reason[256] = "";
        int count = mw_cuda_probe(reason, sizeof reason), least = 0;
        MPI_Allreduce(&count, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        char *two = world % 2 == 0 ? two_node_config() : NULL;
        if (least <= 0) {
            no_device(NULL, "one node");
            if (two)
                no_device(two, "two fake nodes");
            if (rank == 0)
                printf("SKIP: %s%s%s; the NCCL all-reduce needs a CUDA device on every rank "
                       "(checked only that mw_nccl_open fails cleanly without one)\n",
                       least < 0 ? "" : "no CUDA device (", *reason ? reason : "not on every rank",
                       least < 0 ? "" : ")");
            rc = 77;
        } else {
            with_devices(NULL, "one node", least);
            if (two)
                with_devices(two, "two fake nodes", least);
        }
        if (two) {
            remove(two);
            free(two);
        }
    } else {
        if (rank == 0)
            fprintf(stderr, "usage: test_nccl ring|nccl\n");
        mpi_check_fail();
    }
    int failed = mpi_check_report();
    MPI_Finalize();
    return failed ? 1 : rc;
}
