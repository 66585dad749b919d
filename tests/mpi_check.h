/* Verdicts for the tests that run under mpiexec (test_allreduce, test_nccl, test_nccl_mock):
 * every rank calls mpi_check in the same order; a case passes when it passed on every rank, and
 * every rank gets that verdict, so all take the same branch after it. A failure is printed by
 * rank 0 and by each rank where it failed. */
#ifndef MW_TESTS_MPI_CHECK_H
#define MW_TESTS_MPI_CHECK_H

#include <stddef.h>

/* Collective over MPI_COMM_WORLD: 1 when ok held on every rank. */
int mpi_check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Count a failure seen by every rank (e.g. bad arguments) without a collective. */
void mpi_check_fail(void);
/* Rank 0 prints "N passed, M failed"; returns the failures. */
int mpi_check_report(void);
/* The contribution of replica q (a rank or a GPU) to element i: small integers, so any
 * summation order gives the same float sum. */
float mpi_check_value(int q, size_t i);

#endif
