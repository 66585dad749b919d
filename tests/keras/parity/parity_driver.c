/* The mwtrain side of the Keras parity test (parity.py makes the other side).
 *
 *   parity_driver DIR [ref|cpu]
 *
 * DIR holds what parity.py wrote with Keras: model.json (model.to_json()), params.f32 (the
 * model's weights in model.weights order, float32, packed: the arena's tensor order, see
 * worker/model/model.h, without the arena's alignment gaps),
 * x.f32 (N examples) and y.i32 (N labels, or N x H x W for a model whose output is an image:
 * a class per pixel, the loss their mean). The driver loads the model through the Keras
 * reader, runs one training-mode forward and backward over the N examples (loss scaled by
 * 1/N: the mean, as Keras), folds the batch statistics into BatchNormalization's moving
 * ones, and writes DIR/out_logits.f32 (N x positions x classes), out_loss.f64 (the mean loss),
 * out_grads.f32 (the gradient arena) and out_params.f32 (the parameters after the
 * moving-statistics update; the optimizer is not run). Dropout's rate is set to 0 on both
 * sides: its masks come from different generators (mwtrain keys them by example id). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/table.h"
#include "kernels/kernels.h"
#include "kernels/ref/table.h"
#include "worker/keras/keras.h"
#include "worker/model/layers/batchnorm.h"
#include "worker/model/model.h"
#include "worker/model/model_ws.h"

static long read_file(const char *dir, const char *name, void *buf, size_t nbytes)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "parity_driver: cannot open %s\n", path);
        return -1;
    }
    size_t n = buf ? fread(buf, 1, nbytes, f) : 0;
    if (!buf) {
        fseek(f, 0, SEEK_END);
        n = (size_t)ftell(f);
    }
    fclose(f);
    return (long)n;
}

static int write_file(const char *dir, const char *name, const void *buf, size_t nbytes)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, nbytes, f) != nbytes) {
        fprintf(stderr, "parity_driver: cannot write %s\n", path);
        if (f)
            fclose(f);
        return 1;
    }
    return fclose(f) != 0;
}

/* Copy between the packed Keras order (kernel or gamma, bias or beta, moving mean and
 * variance, layer by layer) and the arena: to_arena 1 scatters packed into arena. */
static size_t pack(const mw_model *m, float *arena, float *packed, int to_arena)
{
    size_t off = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        const size_t at[3] = {l->w_off, l->b_off, l->stats_off},
                     n[3] = {l->w_count, l->b_count, l->stats_count};
        for (int t = 0; t < 3; t++) {
            if (to_arena)
                memcpy(arena + at[t], packed + off, n[t] * sizeof(float));
            else
                memcpy(packed + off, arena + at[t], n[t] * sizeof(float));
            off += n[t];
        }
    }
    return off;
}

static int write_packed(const char *dir, const char *name, const mw_model *m, float *arena)
{
    float *p = malloc(m->nparams * sizeof(float) + 1);
    int rc = !p || write_file(dir, name, p, pack(m, arena, p, 0) * sizeof(float));
    free(p);
    return rc;
}

static int run(const char *dir, const char *backend, mw_model *m, mw_model_ws *ws, float **grads)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/model.json", dir);
    if (mw_keras_load_file(m, path, 0, 0, 0, 0) != MW_OK || mw_model_finalize(m, 1) != MW_OK) {
        fprintf(stderr, "parity_driver: %s\n", mw_err_msg());
        return 1;
    }
    float *packed = malloc(m->nparams * sizeof(float) + 4);
    long pn = packed ? read_file(dir, "params.f32", packed, m->nparams * sizeof(float) + 1) : -1;
    if (pn == (long)(m->nparams * sizeof(float)))
        pack(m, m->params.data, packed, 1);
    free(packed);
    if (pn != (long)(m->nparams * sizeof(float))) {
        fprintf(stderr, "parity_driver: params.f32 has %ld bytes; the model wants %zu floats\n", pn,
                m->nparams);
        return 1;
    }
    const size_t per = (size_t)m->in_h * m->in_w * m->in_c;
    const long P = m->positions > 1 ? m->positions : 1; /* labels per example */
    long yn = read_file(dir, "y.i32", NULL, 0);
    const int n = (int)(yn / 4 / P);
    if (yn <= 0 || yn % (4 * P) || mw_model_ws_alloc(ws, m, n) != MW_OK ||
        read_file(dir, "x.f32", ws->act[0], (size_t)n * per * 4) != (long)((size_t)n * per * 4) ||
        read_file(dir, "y.i32", ws->y, (size_t)yn) != yn) {
        fprintf(stderr, "parity_driver: bad batch files in %s (%s)\n", dir, mw_err_msg());
        return 1;
    }
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].kind == MW_LAYER_DROPOUT)
            m->layers[i].rate = 0.0f;
    mw_kernels kt;
    if (!strcmp(backend, "ref"))
        mw_kernels_init_ref(&kt);
    else
        mw_kernels_init_cpu(&kt);
    mw_kctx k = {.nthreads = 1, .ws = ws->scratch, .ws_count = ws->scratch_count};
    *grads = calloc(m->params.count, sizeof **grads);
    if (!*grads)
        return 1;
    ws->training = 1;
    mw_model_forward(m, &kt, &k, ws, n);
    mw_model_backward(m, &kt, &k, ws, *grads, n, 1.0f / (float)n);
    double loss = 0.0;
    for (int i = 0; i < n; i++)
        loss += ws->loss[i];
    loss /= n;
    int rc = write_file(dir, "out_logits.f32", ws->act[m->nlayers],
                        (size_t)n * P * m->nclasses * sizeof(float)) ||
             write_file(dir, "out_loss.f64", &loss, sizeof loss) ||
             write_packed(dir, "out_grads.f32", m, *grads);
    mw_model_update_stats(m, &kt, &k, m->params.data, *grads);
    return rc || write_packed(dir, "out_params.f32", m, m->params.data);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: parity_driver DIR [ref|cpu]\n");
        return 2;
    }
    mw_model m;
    mw_model_ws ws;
    float *grads = NULL;
    mw_model_init(&m, 0, 0, 0);
    mw_model_ws_init(&ws);
    int rc = run(argv[1], argc > 2 ? argv[2] : "cpu", &m, &ws, &grads);
    free(grads);
    mw_model_ws_free(&ws);
    mw_model_free(&m);
    return rc;
}
