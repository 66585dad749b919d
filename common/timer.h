/* Monotonic wall-clock time in seconds, for progress and throughput, and the median of a set
 * of timings. */
#ifndef MW_COMMON_TIMER_H
#define MW_COMMON_TIMER_H

double mw_now(void);
/* The median of v[0..n) (the mean of the middle two when n is even; 0 when n < 1). Sorts v. */
double mw_median(double *v, int n);

#endif
