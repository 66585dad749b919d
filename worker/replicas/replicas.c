/* What both replica backends share: the replica slices and the optimizer step (Keras 3's
 * optimizers: the rates once per step, clipping, and the rule over the arenas). Lives in
 * mwtrain itself; the GPU module calls these through the binary's exported symbols. */
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

long mw_rank_examples(long total, int world, int rpw, int rank)
{
    long sum = 0, off, cnt;
    for (int lr = 0; lr < rpw; lr++) {
        mw_slice(total, world * rpw, rank * rpw + lr, &off, &cnt);
        sum += cnt;
    }
    return sum;
}

double mw_optimizer_lr(const mw_train_opts *o, long step)
{
    return mw_schedule_rate(&o->schedule, o->learning_rate, step);
}

void mw_optimizer_hyper(const mw_train_opts *o, long *opt_step, mw_optim_hyper *h)
{
    const double lr = mw_optimizer_lr(o, *opt_step), t = (double)++*opt_step;
    const int adam = o->optimizer == MW_OPT_ADAM || o->optimizer == MW_OPT_ADAMW;
    memset(h, 0, sizeof *h);
    h->lr = (float)lr;
    if (adam) { /* Keras: in float32, local_step = iterations + 1 */
        const float b1p = powf((float)o->beta1, (float)t), b2p = powf((float)o->beta2, (float)t);
        h->lr = (float)lr * sqrtf(1.0f - b2p) / (1.0f - b1p);
    }
    h->weight_decay = (float)o->weight_decay;
    h->decay_lr = (float)lr;
    h->gscale = 1.0f;
    h->clipvalue = (float)o->clipvalue;
    h->one_minus_beta1 = (float)(1.0 - o->beta1), h->one_minus_beta2 = (float)(1.0 - o->beta2);
    h->epsilon = (float)o->epsilon;
    h->momentum = (float)o->momentum;
    h->rho = (float)o->rho;
    h->nesterov = o->nesterov, h->amsgrad = o->amsgrad, h->centered = o->centered;
}

int mw_optimizer_slots(const mw_train_opts *o)
{
    switch (o->optimizer) {
    case MW_OPT_ADAM:
    case MW_OPT_ADAMW:
        return o->amsgrad ? 3 : 2;
    case MW_OPT_RMSPROP:
        return 3;
    default:
        return 1;
    }
}

void mw_optimizer_init_slots(const mw_train_opts *o, float *m1, float *m2, float *m3, size_t count)
{
    memset(m2, 0, count * sizeof *m2);
    memset(m3, 0, count * sizeof *m3);
    if (o->optimizer != MW_OPT_ADAGRAD) {
        memset(m1, 0, count * sizeof *m1);
        return;
    }
    for (size_t i = 0; i < count; i++)
        m1[i] = (float)o->initial_accumulator;
}

/* One rule over [off, off + count) of every array. */
static void rule(const mw_train_opts *o, const mw_kernels *kt, const mw_kctx *k, float *p,
                 float *const s[3], const float *g, size_t off, size_t count,
                 const mw_optim_hyper *h)
{
    float *s1 = s[0] + off, *s2 = s[1] + off, *s3 = s[2] + off;
    switch (o->optimizer) {
    case MW_OPT_ADAM:
    case MW_OPT_ADAMW:
        kt->adam_step(k, p + off, s1, s2, o->amsgrad ? s3 : NULL, g + off, count, h);
        break;
    case MW_OPT_RMSPROP:
        kt->rmsprop_step(k, p + off, s1, o->momentum > 0 ? s2 : NULL, o->centered ? s3 : NULL,
                         g + off, count, h);
        break;
    case MW_OPT_ADAGRAD:
        kt->adagrad_step(k, p + off, s1, NULL, NULL, g + off, count, h);
        break;
    default:
        kt->sgd_step(k, p + off, o->momentum != 0 ? s1 : NULL, NULL, NULL, g + off, count, h);
    }
}

/* Keras' clip_by_norm factor of the gradient g * unscale, times unscale: the gscale that
 * clips it (unscale: 1, or 1 / the loss scale, a power of 2, so both products are exact). */
static float norm_scale(const mw_kernels *kt, const mw_kctx *k, const float *g, size_t count,
                        double clip, float unscale)
{
    double ss;
    kt->sumsq(k, &ss, g, count);
    double norm = sqrt(ss) * unscale;
    return unscale * (float)(clip / (norm > clip ? norm : clip));
}

int mw_grads_finite(const mw_kernels *kt, const mw_kctx *k, const float *g, size_t count)
{
    double ss;
    kt->sumsq(k, &ss, g, count);
    return isfinite(ss);
}

void mw_optimizer_apply(const mw_train_opts *o, const mw_kernels *kt, const mw_kctx *k,
                        const mw_model *m, float *p, float *const s[3], const float *g,
                        size_t count, const mw_optim_hyper *h)
{
    mw_optim_hyper hh = *h;
    if (o->clipnorm > 0) { /* per variable: each layer's kernel and bias */
        for (int i = 0; i < m->nlayers; i++) {
            const mw_layer *L = &m->layers[i];
            size_t offs[2] = {L->w_off, L->b_off}, counts[2] = {L->w_count, L->b_count};
            for (int t = 0; t < 2; t++) {
                if (!counts[t] || (t == 1 && !L->has_bias))
                    continue;
                hh.gscale = norm_scale(kt, k, g + offs[t], counts[t], o->clipnorm, h->gscale);
                rule(o, kt, k, p, s, g, offs[t], counts[t], &hh);
            }
        }
        return;
    }
    if (o->global_clipnorm > 0)
        hh.gscale = norm_scale(kt, k, g, count, o->global_clipnorm, h->gscale);
    rule(o, kt, k, p, s, g, 0, count, &hh);
}

void mw_metrics_take(double acc[3], double sums[3], int reset)
{
    memcpy(sums, acc, 3 * sizeof *acc);
    if (reset)
        memset(acc, 0, 3 * sizeof *acc);
}
