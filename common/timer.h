/* Monotonic wall-clock time in seconds, for progress and throughput. */
#ifndef MW_COMMON_TIMER_H
#define MW_COMMON_TIMER_H

double mw_now(void);

#endif
