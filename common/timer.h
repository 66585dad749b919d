/* Monotonic wall-clock time in seconds, for progress and throughput, the median of a set of
 * timings, and the stall clock of the waits on a device. */
#ifndef MW_COMMON_TIMER_H
#define MW_COMMON_TIMER_H

double mw_now(void);
/* The median of v[0..n) (the mean of the middle two when n is even; 0 when n < 1). Sorts v. */
double mw_median(double *v, int n);

/* The clock of a wait on something that reports its progress as a count that grows while it
 * works (a GPU's compute stream: kernels finished, kernels/cuda/runtime.h): the seconds since the
 * count last moved, or since the wait began when it has not. A deadline on it ends a wait on a
 * device or peer that does nothing for that long, not one on a step that is long but moving.
 *
 *     mw_stall st;
 *     mw_stall_start(&st, progress());
 *     while (!done())
 *         if (timeout > 0 && mw_stall_idle(&st, progress()) > timeout) -> MW_ETIMEOUT
 */
typedef struct {
    double since; /* when the count last moved (or the wait began) */
    long seen;    /* the count then */
} mw_stall;
void mw_stall_start(mw_stall *s, long progress);
/* The seconds since the count last moved, given its value now (a new value restarts the clock). */
double mw_stall_idle(mw_stall *s, long progress);

#endif
