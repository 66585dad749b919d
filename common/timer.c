/* CLOCK_MONOTONIC: immune to wall-clock jumps. */
#define _POSIX_C_SOURCE 200809L
#include "common/timer.h"

#include <stdlib.h>
#include <time.h>

double mw_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double mw_median(double *v, int n)
{
    if (n < 1)
        return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void mw_stall_start(mw_stall *s, long progress)
{
    s->since = mw_now();
    s->seen = progress;
}

double mw_stall_idle(mw_stall *s, long progress)
{
    const double now = mw_now();
    if (progress != s->seen) {
        s->seen = progress;
        s->since = now;
    }
    return now - s->since;
}
