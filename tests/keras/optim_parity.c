/* Test driver for tests/keras/optim_parity.py: runs mwtrain's optimizer code (the config
 * reader, the schedule, mw_optimizer_hyper and mw_optimizer_apply over the kernel table) on
 * gradients the script generated, and compares with what real Keras computed from them.
 *
 * Usage: optim_parity DIR, where DIR holds
 *   config.json   keras.optimizers.serialize(opt)
 *   case.bin      int32 nvars, int32 steps, int32 count[nvars], float32 init[total],
 *                 float32 grads[steps][total], float32 lr[steps] (Keras' rate before each
 *                 step), float32 expected[total] (Keras' weights after the last step)
 * Variables pair up as (kernel, bias) layers, so clipnorm clips each variable alone as Keras
 * does. Prints one line:
 *   weights REL lr REL ref_cpu_bitwise 0|1 max_abs A at I keras X mwtrain Y
 * weights REL: over the variables, the largest max|mwtrain - keras| / max|keras| (relative in
 * the max norm: a weight that ends near zero carries the float32 rounding of 50 steps, a few
 * 1e-7, which Keras itself has against exact arithmetic); lr REL: the largest relative error
 * of the learning rate; A: the largest absolute difference, at element I. Exit 0 when it ran,
 * 1 on a failure to run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "kernels/cpu/table.h"
#include "kernels/kernels.h"
#include "kernels/ref/table.h"
#include "worker/keras/optimizer.h"
#include "worker/replicas/replicas.h"

#define MAXV 16

static int read_all(const char *path, unsigned char **buf, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    *buf = malloc((size_t)len + 1);
    *n = (size_t)len;
    int ok = *buf && fread(*buf, 1, (size_t)len, f) == (size_t)len;
    fclose(f);
    return ok ? 0 : -1;
}

/* The run of one kernel table: final weights into w. */
static void run(const mw_train_opts *o, const mw_kernels *kt, const mw_model *m, float *w,
                const float *init, const float *grads, const float *keras_lr, int steps,
                size_t total, double *lr_rel)
{
    float *s1 = calloc(total, sizeof(float)), *s2 = calloc(total, sizeof(float)),
          *s3 = calloc(total, sizeof(float));
    mw_optimizer_init_slots(o, s1, s2, s3, total);
    memcpy(w, init, total * sizeof(float));
    float *const slots[3] = {s1, s2, s3};
    mw_kctx k = {.nthreads = 2};
    long it = 0;
    *lr_rel = 0.0;
    for (int t = 0; t < steps; t++) {
        double lr = mw_optimizer_lr(o, it), ref = keras_lr[t];
        double e = (lr > ref ? lr - ref : ref - lr) / (ref > 1e-12 ? ref : 1e-12);
        if (e > *lr_rel)
            *lr_rel = e;
        mw_optim_hyper h;
        mw_optimizer_hyper(o, &it, &h);
        mw_optimizer_apply(o, kt, &k, m, w, slots, grads + (size_t)t * total, total, &h);
    }
    free(s1), free(s2), free(s3);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: optim_parity DIR\n");
        return 1;
    }
    char path[4096];
    mw_train_opts o;
    mw_train_opts_default(&o);
    snprintf(path, sizeof path, "%s/config.json", argv[1]);
    if (mw_optimizer_load(&o, path) != MW_OK) {
        fprintf(stderr, "optim_parity: %s\n", mw_err_msg());
        return 1;
    }
    unsigned char *buf;
    size_t n;
    snprintf(path, sizeof path, "%s/case.bin", argv[1]);
    if (read_all(path, &buf, &n) != 0 || n < 8) {
        fprintf(stderr, "optim_parity: cannot read %s\n", path);
        return 1;
    }
    int32_t nv, steps, cnt[MAXV];
    memcpy(&nv, buf, 4);
    memcpy(&steps, buf + 4, 4);
    if (nv < 1 || nv > MAXV || nv % 2 || steps < 1 || n < 8 + 4 * (size_t)nv) {
        fprintf(stderr, "optim_parity: bad header in %s\n", path);
        return 1;
    }
    memcpy(cnt, buf + 8, 4 * (size_t)nv);
    size_t total = 0;
    mw_layer layers[MAXV / 2];
    memset(layers, 0, sizeof layers);
    for (int i = 0; i < nv; i += 2) {
        mw_layer *L = &layers[i / 2];
        L->w_off = total, L->w_count = (size_t)cnt[i];
        L->b_off = total + (size_t)cnt[i], L->b_count = (size_t)cnt[i + 1];
        L->has_bias = 1;
        total += (size_t)cnt[i] + (size_t)cnt[i + 1];
    }
    const size_t want = 8 + 4 * (size_t)nv + 4 * (total * (2 + (size_t)steps) + (size_t)steps);
    if (n != want) {
        fprintf(stderr, "optim_parity: %s is %zu bytes (expected %zu)\n", path, n, want);
        return 1;
    }
    const float *init = (const float *)(buf + 8 + 4 * (size_t)nv);
    const float *grads = init + total, *keras_lr = grads + (size_t)steps * total;
    const float *expected = keras_lr + steps;
    mw_model m;
    memset(&m, 0, sizeof m);
    m.layers = layers, m.nlayers = nv / 2;

    mw_kernels kref, kcpu;
    mw_kernels_init_ref(&kref);
    mw_kernels_init_cpu(&kcpu);
    float *wref = malloc(total * sizeof(float)), *wcpu = malloc(total * sizeof(float));
    double lr_rel, lr_rel2, w_rel = 0.0;
    size_t worst = 0;
    run(&o, &kref, &m, wref, init, grads, keras_lr, steps, total, &lr_rel);
    run(&o, &kcpu, &m, wcpu, init, grads, keras_lr, steps, total, &lr_rel2);
    /* per variable: max |mwtrain - keras| / max |keras| (relative in the max norm) */
    double w_abs = 0.0;
    for (int v = 0, off = 0; v < nv; off += cnt[v], v++) {
        double dmax = 0.0, rmax = 0.0;
        for (size_t i = (size_t)off; i < (size_t)off + (size_t)cnt[v]; i++) {
            double d = fabs((double)wref[i] - expected[i]), a = fabs((double)expected[i]);
            if (d > dmax)
                dmax = d;
            if (d > w_abs)
                w_abs = d, worst = i;
            if (a > rmax)
                rmax = a;
        }
        if (rmax > 0 && dmax / rmax > w_rel)
            w_rel = dmax / rmax;
    }
    printf("weights %.3e lr %.3e ref_cpu_bitwise %d max_abs %.3e at %zu keras %.9g mwtrain "
           "%.9g\n",
           w_rel, lr_rel, memcmp(wref, wcpu, total * sizeof(float)) == 0, w_abs, worst,
           (double)expected[worst], (double)wref[worst]);
    free(wref), free(wcpu), free(buf);
    return 0;
}
