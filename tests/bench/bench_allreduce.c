/* All-reduce bus bandwidth: every algorithm and MPI_Allreduce side by side on
 * the same buffers, from the CNN's gradient (488 KB) to 64 MB.
 *
 *   mpiexec -n N bench_allreduce [max_mb=64] [reps=20]
 *
 * Bus bandwidth = 2 (n-1)/n x bytes / time (NCCL's definition: comparable
 * across rank counts). Each size runs the algorithms in turn, round after
 * round, and reports the median time of each; the ratio column is against
 * MPI_Allreduce. Results are checked against the sequential sum first.
 * "hier zero-copy" is the hierarchical path on a buffer that lives in the
 * shared window (mw_allreduce_buffer), as the trainer keeps its gradients.
 * Then the latency-bound sizes (4 B to 64 KiB): the median time of MPI_Allreduce, the ring
 * and halving-doubling (auto's choice below 64 KiB), and the ratios to MPI_Allreduce. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/allreduce.h"
#include "cluster/topology.h"
#include "common/timer.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Small buffers: median microseconds of MPI_Allreduce, ring and halving-doubling. */
static void latency(mw_allreduce *ar, float *buf, int rank, int world, int reps)
{
    const mw_ar_algo algos[3] = {MW_AR_MPI, MW_AR_RING, MW_AR_HALVING};
    const size_t sizes[] = {1, 16, 256, 1024, 4096, 16383};
    double *t = malloc(sizeof(double) * 3 * (size_t)reps);
    if (rank == 0)
        printf("\nsmall buffers, %d ranks: median us (ratio: MPI_Allreduce's time / this one's)\n"
               "%10s %14s %22s %22s\n",
               world, "bytes", "MPI_Allreduce", "ring", "halving-doubling");
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes && sizes[si] <= ar->max_count; si++) {
        const size_t count = sizes[si];
        for (int r = 0; r < reps; r++)
            for (int a = 0; a < 3; a++) {
                for (size_t i = 0; i < count; i++)
                    buf[i] = (float)(rank + 1);
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = mw_now();
                mw_allreduce_sum_with(ar, algos[a], buf, count);
                double dt = mw_now() - t0;
                MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                t[a * reps + r] = dt;
                if (buf[count - 1] != (float)(world * (world + 1) / 2)) {
                    fprintf(stderr, "algorithm %d gave a wrong sum\n", a);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            }
        if (rank == 0) {
            double med[3];
            for (int a = 0; a < 3; a++) {
                qsort(t + a * reps, (size_t)reps, sizeof(double), cmp);
                med[a] = t[a * reps + reps / 2];
            }
            printf("%10zu %14.1f %14.1f (%5.2fx) %14.1f (%5.2fx)\n", count * 4, med[0] * 1e6,
                   med[1] * 1e6, med[0] / med[1], med[2] * 1e6, med[0] / med[2]);
        }
    }
    free(t);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    double max_mb = argc > 1 ? atof(argv[1]) : 64;
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    mw_topology t;
    mw_topology_init(&t);
    if (mw_topology_resolve(&t, NULL) != MW_OK) {
        fprintf(stderr, "%s\n", mw_err_msg());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    size_t maxc = (size_t)(max_mb * 1024 * 1024 / 4);
    mw_allreduce ar;
    if (mw_allreduce_open(&ar, t.train, t.node_comm, t.cross, maxc, MW_AR_AUTO, 120) != MW_OK) {
        fprintf(stderr, "%s\n", mw_err_msg());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    mw_ar_algo algos[4] = {MW_AR_MPI, MW_AR_RING, MW_AR_HIER, MW_AR_HIER};
    const char *names[4] = {"MPI_Allreduce", "ring", "hierarchical", "hier zero-copy"};
    int nalg = ar.hier_ok ? 4 : 2;
    float *slot = mw_allreduce_buffer(&ar);
    float *buf = malloc(maxc * sizeof(float));
    double *times = malloc(sizeof(double) * 4 * (size_t)reps);
    if (rank == 0) {
        printf("all-reduce bus bandwidth, %d ranks (%d node(s) x %d), median of %d; GB/s and "
               "ratio to MPI_Allreduce\n",
               world, ar.nnodes, ar.local_size, reps);
        printf("%10s %12s", "bytes", "MPI_Allreduce");
        for (int a = 1; a < nalg; a++)
            printf(" %20s", names[a]);
        printf("\n");
    }
    const size_t sizes[] = {121984, 262144, 1048576, 4194304, 16777216};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t count = sizes[si];
        if (count > maxc)
            break;
        /* correctness first: integer-valued sums are exact */
        for (int a = 0; a < nalg; a++) {
            float *b = a == 3 ? slot : buf;
            for (size_t i = 0; i < count; i++)
                b[i] = (float)((rank + 1) * (int)(i % 5));
            mw_allreduce_sum_with(&ar, algos[a], b, count);
            float want1 = (float)(world * (world + 1) / 2);
            for (size_t i = 0; i < count; i++)
                if (b[i] != want1 * (float)(i % 5)) {
                    fprintf(stderr, "%s gave a wrong sum at [%zu]\n", names[a], i);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
        }
        for (int r = 0; r < reps; r++)
            for (int a = 0; a < nalg; a++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = mw_now();
                mw_allreduce_sum_with(&ar, algos[a], a == 3 ? slot : buf, count);
                double dt = mw_now() - t0;
                MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                times[a * reps + r] = dt;
            }
        if (rank == 0) {
            double bytes = (double)count * 4, factor = 2.0 * (world - 1) / world, med[4];
            for (int a = 0; a < nalg; a++) {
                qsort(times + a * reps, (size_t)reps, sizeof(double), cmp);
                med[a] = times[a * reps + reps / 2];
            }
            printf("%10.0f %12.2f", bytes, factor * bytes / med[0] / 1e9);
            for (int a = 1; a < nalg; a++)
                printf("   %8.2f (%5.2fx)", factor * bytes / med[a] / 1e9, med[0] / med[a]);
            printf("\n");
        }
    }
    latency(&ar, buf, rank, world, reps < 200 ? 200 : reps);
    free(buf), free(times);
    mw_allreduce_close(&ar);
    mw_topology_free(&t);
    MPI_Finalize();
    return 0;
}
