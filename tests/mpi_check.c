/* See mpi_check.h. */
#include "tests/mpi_check.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>

static int passed, failed;

int mpi_check(int ok, const char *fmt, ...)
{
    int all = 0, rank = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all) {
        passed++;
        return 1;
    }
    failed++;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0 || !ok) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "FAIL (rank %d): ", rank);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    return 0;
}

void mpi_check_fail(void)
{
    failed++;
}

int mpi_check_report(void)
{
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("%d passed, %d failed\n", passed, failed);
    return failed;
}

float mpi_check_value(int q, size_t i)
{
    return (float)((q + 1) * (int)(i % 13) - (int)(i % 7));
}
