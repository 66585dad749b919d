/* BatchNormalization's helper shared by its twins (the entries bn_* of kernels/kernel_list.h
 * are the contract): the statistics of synchronized BatchNormalization from the sums summed
 * over the replicas. */
#ifndef MW_KERNELS_BATCHNORM_H
#define MW_KERNELS_BATCHNORM_H

#include "kernels/kernels.h"

/* The synchronized statistics from the summed sums s over M rows (host arrays; the CUDA twin
 * has its own kernel): mean, biased variance (never below 0), 1 / sqrt(var + eps). */
void mw_bn_sync_stats(float *mean, float *var, float *invstd, const double *s, double M, int C,
                      float eps);

#endif
