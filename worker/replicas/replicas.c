/* What both replica backends share: the replica slices, thread counts and metrics (the
 * optimizer step is worker/optimizers.h's). Lives in mwtrain itself; the GPU module calls
 * these through the binary's exported symbols. */
#include "worker/replicas/replicas.h"

#include <math.h>
#include <string.h>

void mw_slice(long total, int nrep, int i, long *off, long *cnt)
{
    long base = total / nrep, rem = total % nrep;
    *off = i * base + (i < rem ? i : rem);
    *cnt = base + (i < rem ? 1 : 0);
}

int mw_cpu_threads(int nthreads)
{
    return nthreads < 1 ? 1 : nthreads > MW_CPU_MAX_THREADS ? MW_CPU_MAX_THREADS : nthreads;
}

int mw_cpu_examples_per_thread(const mw_train_opts *o, int threads)
{
    int per_thread = (o->batch_per_replica + threads - 1) / threads;
    return per_thread > o->micro_batch ? o->micro_batch : per_thread;
}

int mw_cpu_grad_arenas(const mw_model *m, int threads)
{
    return mw_model_has_batchnorm(m) ? 1 : threads;
}

long mw_rank_examples(long total, int world, int rpw, int rank)
{
    long sum = 0, off, cnt;
    for (int lr = 0; lr < rpw; lr++) {
        mw_slice(total, world * rpw, rank * rpw + lr, &off, &cnt);
        sum += cnt;
    }
    return sum;
}

void mw_metrics_take(double acc[MW_SUMS], double sums[MW_SUMS], int reset)
{
    memcpy(sums, acc, MW_SUMS * sizeof *acc);
    if (reset)
        memset(acc, 0, MW_SUMS * sizeof *acc);
}
