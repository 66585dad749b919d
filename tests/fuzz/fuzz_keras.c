/* libFuzzer target for the Keras model reader (worker/keras/keras.c) and the model it builds
 * (worker/model/model.c).
 *
 * Any bytes must either build a model that satisfies the invariants below or fail with
 * MW_EMODEL, MW_EUNSUPPORTED (or MW_ENOMEM) and a message "fuzz.json: ...", leaving the model
 * empty; never crash, leak, overflow or read out of bounds (build with
 * -fsanitize=fuzzer,address,undefined). Each input is read twice: against 28x28x1 data with
 * 10 classes, and with the shapes taken from the file. A small enough model is then finalized,
 * initialized and run forward and backward (training, so Dropout is live) with the reference
 * kernels, and summarized. Run it with tests/fuzz/run.sh. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "kernels/kernels.h"
#include "kernels/ref/table.h"
#include "worker/keras/keras.h"
#include "worker/model/model.h"
#include "worker/model/model_ws.h"
#include "worker/model/summary.h"
#include "worker/model/weights.h"

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_keras: invariant failed: %s\n", what);
        abort();
    }
}

/* Work of one forward in multiply-adds per example, and floats of activations. */
static void cost(const mw_model *m, double *flops, double *acts)
{
    *flops = 0, *acts = (double)m->in_h * m->in_w * m->in_c;
    for (int i = 0; i < m->nlayers; i++) {
        const mw_layer *l = &m->layers[i];
        double out = (double)l->out_h * l->out_w * l->out_c;
        *acts += out;
        if (l->kind == MW_LAYER_CONV2D)
            *flops += out * l->conv.KH * l->conv.KW * l->conv.C;
        else if (l->kind == MW_LAYER_CONV2DT) /* each input pixel times the whole kernel */
            *flops += (double)l->conv.OH * l->conv.OW * (double)l->w_count;
        else if (l->kind == MW_LAYER_DENSE)
            *flops += out * l->in_c;
        else
            *flops += out;
    }
}

static void run_small(mw_model *m)
{
    double flops, acts;
    cost(m, &flops, &acts);
    size_t weights = 0;
    for (int i = 0; i < m->nlayers; i++)
        weights += m->layers[i].w_count + m->layers[i].b_count + m->layers[i].stats_count;
    if (weights > (1u << 16) || flops > 3e5 || acts > 1e5)
        return;
    if (mw_model_finalize(m, 16) != MW_OK)
        return; /* a softmax before the end, or out of memory: the message is the check */
    check(m->nparams == weights && m->params.count % 16 == 0, "parameter arena");
    mw_model_init_params(m, 7);
    mw_model_ws ws;
    mw_model_ws_init(&ws);
    if (mw_model_ws_alloc(&ws, m, 2) != MW_OK) {
        mw_model_ws_free(&ws);
        return;
    }
    mw_kernels kt;
    mw_kernels_init_ref(&kt);
    mw_kctx k = {.nthreads = 1, .ws = ws.scratch, .ws_count = ws.scratch_count};
    size_t in = (size_t)m->in_h * m->in_w * m->in_c;
    for (size_t i = 0; i < 2 * in; i++)
        ws.act[0][i] = (float)(i % 7) / 7.0f;
    memset(ws.y, 0, 2 * mw_model_target_bytes(m)); /* a sequence's labels: one per position */
    ((int32_t *)ws.y)[0] = 0, ((int32_t *)ws.y)[1] = m->nclasses - 1;
    const uint32_t ids[2] = {3, 1u << 31};
    ws.training = 1, ws.dropout_seed = 11, ws.example_ids = ids;
    float *g = calloc(m->params.count ? m->params.count : 1, sizeof(float));
    if (g) {
        mw_model_forward(m, &kt, &k, &ws, 2);
        mw_model_backward(m, &kt, &k, &ws, g, 2, 0.5f);
        (void)mw_model_regularization(m, g, 0.5f);
        double sums[MW_SUMS] = {0};
        mw_model_metrics_add(m, &ws, 2, sums);
        free(g);
    }
    mw_model_ws_free(&ws);
}

static void one(const char *text, size_t size, int h, int w, int c, int nclasses)
{
    static FILE *devnull;
    if (!devnull)
        devnull = fopen("/dev/null", "w");
    mw_model m;
    mw_err_clear();
    mw_status rc = mw_keras_load(&m, text, size, "fuzz.json", h, w, c, nclasses);
    if (rc == MW_OK) {
        check(m.nlayers > 0 && m.layers, "layers");
        check(h == 0 || (m.in_h * m.in_w * m.in_c == h * w * c), "input matches the data");
        const mw_layer *last = &m.layers[m.nlayers - 1];
        /* (None, classes) logits, a sequence's (None, T, classes) or an image's (None, H, W,
         * classes): a loss per example, per position or per pixel (the labels' shape is
         * checked against it when the data is known) */
        check((last->flat && last->out_h == 1 && last->out_w == 1) ||
                  (!last->flat && last->out_h >= 1 && last->out_w >= 1 &&
                   last->out_h * last->out_w > 1),
              "flat, per-position or per-pixel output");
        check(nclasses == 0 || last->out_c == nclasses, "output width");
        for (int i = 0; i < m.nlayers; i++) {
            const mw_layer *l = &m.layers[i];
            check(l->name[0] != '\0' && l->cls != NULL, "named layer");
            check(l->out_h > 0 && l->out_w > 0 && l->out_c > 0, "positive shapes");
            check(l->nin >= 1 && l->in[0] >= -1 && l->in[0] < i, "inputs come earlier");
            if (l->in[0] >= 0) /* the first input's shape is the layer's input shape */
                check(l->in_h == m.layers[l->in[0]].out_h && l->in_w == m.layers[l->in[0]].out_w &&
                          (l->kind == MW_LAYER_CONCAT || l->in_c == m.layers[l->in[0]].out_c),
                      "layers chain");
        }
        check(m.source && m.source_nbytes == size && memcmp(m.source, text, size) == 0,
              "source kept");
        run_small(&m);
        if (devnull)
            mw_model_summary(&m, devnull);
    } else {
        check(rc == MW_EMODEL || rc == MW_EUNSUPPORTED || rc == MW_ENOMEM ||
                  rc == MW_EDATA, /* the data's shape against a model of named inputs */
              "status");
        check(strncmp(mw_err_msg(), "fuzz.json: ", 11) == 0, "message names its origin");
        check(m.nlayers == 0 && m.layers == NULL && m.source == NULL, "failure leaves it empty");
    }
    mw_model_free(&m);
    mw_err_clear();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy with no terminator, so reading past size is caught by ASan. */
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    if (size)
        memcpy(text, data, size);
    one(text, size, 28, 28, 1, 10);
    one(text, size, 0, 0, 0, 0);
    free(text);
    return 0;
}
