/* Internals shared by the fast CPU path's kernels (the matrix product is gemm.h). */
#ifndef MW_KERNELS_CPU_CPU_H
#define MW_KERNELS_CPU_CPU_H

#include "kernels/kernels.h"

/* Threads a kernel may use: the context's, at least 1. Called inside an
 * outer parallel region (batch-split training), OpenMP runs it on one. */
#define MW_NT(k) ((k)->nthreads > 0 ? (k)->nthreads : 1)

#endif
