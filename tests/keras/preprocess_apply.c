/* Applies a Keras model's input pipeline (worker/data/preprocess.h) to raw float32 examples, for
 * the comparison with real Keras in test_preprocess.sh.
 *
 *   preprocess_apply MODEL.json IN.f32 N OUT.f32 [DRAWS]
 *
 * IN holds N examples of the model's input shape (H, W, C), float32, C order; OUT receives N
 * examples of the pipeline's output shape. Without DRAWS the pipeline runs in inference mode;
 * with it in training mode with the random choices forced: DRAWS is text, for each example
 * and each layer one line "flip crop_y crop_x dy dx". Exit 0, or 1 with a message. */
#include <stdio.h>
#include <stdlib.h>

#include "common/status.h"
#include "worker/data/preprocess.h"
#include "worker/keras/keras.h"
#include "worker/model/model.h"

static int die(const char *what)
{
    fprintf(stderr, "preprocess_apply: %s\n", what);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6)
        return die("usage: preprocess_apply MODEL.json IN.f32 N OUT.f32 [DRAWS]");
    mw_model m;
    if (mw_keras_load_file(&m, argv[1], 0, 0, 0, 0) != MW_OK)
        return die(mw_err_msg());
    const mw_preprocess *p = m.pre;
    if (!p)
        return die("the model has no preprocessing layers");
    const int n = atoi(argv[3]), L = mw_preprocess_nlayers(p);
    const size_t in = mw_preprocess_in_count(p), out = mw_preprocess_out_count(p);
    float *x = malloc((size_t)n * in * sizeof *x), *a = malloc(2 * in * sizeof *a);
    float *y = malloc((size_t)n * out * sizeof *y);
    mw_pre_draw *d = calloc((size_t)L, sizeof *d);
    FILE *f = fopen(argv[2], "rb");
    if (!x || !a || !y || !d || !f || fread(x, sizeof *x, (size_t)n * in, f) != (size_t)n * in)
        return die("cannot read the input");
    fclose(f);
    FILE *df = argc == 6 ? fopen(argv[5], "r") : NULL;
    if (argc == 6 && !df)
        return die("cannot open the draws");
    for (int i = 0; i < n; i++) {
        for (int l = 0; df && l < L; l++)
            if (fscanf(df, "%d %d %d %f %f", &d[l].flip, &d[l].crop_y, &d[l].crop_x, &d[l].dy,
                       &d[l].dx) != 5)
                return die("bad draws file");
        for (size_t j = 0; j < in; j++)
            a[j] = x[(size_t)i * in + j];
        mw_preprocess_apply(p, y + (size_t)i * out, a, a + in, df != NULL, d);
    }
    if (df)
        fclose(df);
    f = fopen(argv[4], "wb");
    if (!f || fwrite(y, sizeof *y, (size_t)n * out, f) != (size_t)n * out || fclose(f) != 0)
        return die("cannot write the output");
    free(x), free(a), free(y), free(d);
    mw_model_free(&m);
    return 0;
}
