/* Every all-reduce algorithm against a sequential sum, under mpiexec.
 *
 * Values are small integers stored as floats, so any summation order is
 * exact and results compare with memcmp. Counts: 0, 1, 7, ranks-1, a prime,
 * 1M, and the CNN's padded gradient. The layout comes from the topology
 * (TF_CONFIG or MPI), so the same program covers 1-7 ranks and the fake
 * 2 nodes x 2 ranks. Also: the zero-copy buffer, bitwise repeatability of a
 * non-integer sum, the algorithm parser's message, and (MW_EXPECT_YIELD_AFTER) whether
 * waits give the CPU away: at once when the machine's ranks have fewer CPUs than ranks.
 * Prints "N passed, M failed" and exits non-zero on any failure. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/allreduce.h"
#include "cluster/topology.h"
#include "common/status.h"
#include "tests/mpi_check.h"

static int rank, world;

/* every rank must agree that the case passed */
static void check(int ok, const char *what)
{
    mpi_check(ok, "%s", what);
}

static void run_case(mw_allreduce *ar, mw_ar_algo algo, size_t count, int P, int use_slot)
{
    float *buf = use_slot ? mw_allreduce_buffer(ar) : malloc((count ? count : 1) * sizeof(float));
    float *want = malloc((count ? count : 1) * sizeof(float));
    for (size_t i = 0; i < count; i++) {
        buf[i] = mpi_check_value(ar->rank, i);
        float s = 0;
        for (int r = 0; r < P; r++)
            s += mpi_check_value(r, i);
        want[i] = s;
    }
    mw_err_clear();
    mw_status st = mw_allreduce_sum_with(ar, algo, buf, count);
    char what[160];
    snprintf(what, sizeof what, "%s count %zu%s: status %s %s", mw_ar_algo_name(algo), count,
             use_slot ? " (zero-copy slot)" : "", mw_status_str(st), mw_err_msg());
    int ok = st == MW_OK && (count == 0 || memcmp(buf, want, count * sizeof(float)) == 0);
    if (!ok && st == MW_OK)
        for (size_t i = 0; i < count; i++)
            if (buf[i] != want[i]) {
                fprintf(stderr, "rank %d: %s: first difference at [%zu]: got %g want %g\n", rank,
                        what, i, buf[i], want[i]);
                break;
            }
    check(ok, what);
    if (!use_slot)
        free(buf);
    free(want);
}

/* Non-integer values: the same algorithm twice gives the same bits. */
static void repeatable(mw_allreduce *ar, mw_ar_algo algo, size_t count)
{
    float *a = malloc(count * sizeof(float)), *b = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++)
        a[i] = b[i] = sinf((float)(i * 7 + ar->rank * 13)) * 1e-3f;
    int ok = mw_allreduce_sum_with(ar, algo, a, count) == MW_OK &&
             mw_allreduce_sum_with(ar, algo, b, count) == MW_OK &&
             memcmp(a, b, count * sizeof(float)) == 0;
    char what[96];
    snprintf(what, sizeof what, "%s twice is bitwise equal", mw_ar_algo_name(algo));
    check(ok, what);
    free(a), free(b);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    mw_topology t;
    mw_topology_init(&t);
    if (mw_topology_resolve(&t, NULL) != MW_OK) {
        if (rank == 0)
            fprintf(stderr, "topology: %s\n", mw_err_msg());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const int P = t.ntrain;
    const size_t counts[] = {0, 1, 7, (size_t)(P > 1 ? P - 1 : 0), 65537, 1048576, 121984};
    const size_t maxc = 1048576;
    mw_allreduce ar;
    mw_status st = mw_allreduce_open(&ar, t.train, t.node_comm, t.cross, maxc, MW_AR_AUTO, 60);
    check(st == MW_OK, "open");
    if (st != MW_OK)
        fprintf(stderr, "rank %d: %s\n", rank, mw_err_msg());
    if (rank == 0)
        printf("layout: %d ranks, %d node(s) x %d local; hierarchical %s; waits yield after %lu "
               "polls\n",
               P, ar.nnodes, ar.local_size, ar.hier_ok ? "available" : "unavailable",
               ar.yield_after);
    /* MW_EXPECT_YIELD_AFTER: the launch pinned the ranks (taskset) or left them alone */
    const char *want_yield = getenv("MW_EXPECT_YIELD_AFTER");
    if (want_yield)
        mpi_check(ar.yield_after == strtoul(want_yield, NULL, 10),
                  "waits yield after %lu polls, expected %s", ar.yield_after, want_yield);
    mw_ar_algo algos[] = {MW_AR_RING, MW_AR_MPI, MW_AR_AUTO, MW_AR_HIER, MW_AR_HALVING};
    for (int a = 0; a < (int)(sizeof algos / sizeof *algos); a++) {
        if (algos[a] == MW_AR_HIER && !ar.hier_ok)
            continue;
        for (size_t c = 0; c < sizeof counts / sizeof *counts; c++)
            run_case(&ar, algos[a], counts[c], P, 0);
        repeatable(&ar, algos[a], 100003);
    }
    if (ar.hier_ok) {
        run_case(&ar, MW_AR_HIER, 121984, P, 1);
        run_case(&ar, MW_AR_HIER, 13, P, 1);
    } else {
        /* asking for hierarchical where it cannot run is a clear error */
        mw_err_clear();
        mw_status s = mw_allreduce_sum_with(&ar, MW_AR_HIER, NULL, 0);
        check(P == 1 || (s == MW_ECONFIG && strstr(mw_err_msg(), "same number of ranks")),
              "hierarchical unavailable message");
    }
    mw_ar_algo parsed;
    mw_err_clear();
    check(mw_ar_algo_parse("tree", &parsed) == MW_EINVAL &&
              strstr(mw_err_msg(), "--allreduce 'tree': expected one of auto, ring, "
                                   "hierarchical, mpi, halving-doubling"),
          "parse error message");
    check(mw_ar_algo_parse("hierarchical", &parsed) == MW_OK && parsed == MW_AR_HIER, "parse");
    mw_allreduce_close(&ar);
    mw_topology_free(&t);
    int failed = mpi_check_report();
    MPI_Finalize();
    return failed ? 1 : 0;
}
