/* Writes a summary event file or a safetensors export for the Python readers
 * (tests/summary_read.py, tests/export_read.py) and prints what they should
 * print: the written file's path on the first line, then one line per scalar
 * ("tag step value") or per tensor ("name [shape] sum").
 *
 * Usage: format_writer summary|export DIR */
#include <stdio.h>
#include <string.h>

#include "worker/keras/export.h"
#include "worker/keras/keras.h"
#include "worker/model/model.h"
#include "worker/model/weights.h"
#include "worker/summary.h"

static int fail(void)
{
    fprintf(stderr, "format_writer: %s\n", mw_err_msg());
    return 1;
}

static int write_summary(const char *dir)
{
    static const char *tags[] = {"train/loss",    "train/accuracy", "test/loss",
                                 "test/accuracy", "images_per_sec", "learning_rate"};
    static const long steps[] = {0, 1, 938, 1876, 5000000000L, -3};
    mw_summary s;
    if (mw_summary_open(&s, dir, 0) != MW_OK)
        return fail();
    printf("%s\n", s.events_path);
    for (int i = 0; i < 6; i++)
        for (int t = 0; t < 6; t++) {
            double v = (t + 1) * 0.1 + i * 1.5 - 2.0;
            if (mw_summary_scalar(&s, tags[t], steps[i], v) != MW_OK)
                return mw_summary_close(&s), fail();
            printf("%s %ld %.9g\n", tags[t], steps[i], (double)(float)v);
        }
    mw_status rc = mw_summary_flush(&s);
    mw_summary_close(&s);
    return rc == MW_OK ? 0 : fail();
}

static int write_export(const char *dir)
{
    /* the tutorial CNN's tensors in Keras' names and layouts, in model order */
    static const char *names[] = {"conv2d/kernel",  "conv2d/bias",  "conv2d_1/kernel",
                                  "conv2d_1/bias",  "dense/kernel", "dense/bias",
                                  "dense_1/kernel", "dense_1/bias"};
    static const char *shapes[] = {"3,3,1,32", "32", "3,3,32,64", "64",
                                   "1600,64",  "64", "64,10",     "10"};
    mw_model m;
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (mw_keras_build_tutorial(&m, 28, 28, 1, 10) != MW_OK || mw_model_finalize(&m, 64) != MW_OK)
        return mw_model_free(&m), fail();
    mw_model_init_params(&m, 77);
    for (int i = 0; i < m.nlayers; i++) /* nonzero biases, so their sums mean something */
        for (size_t k = 0; k < m.layers[i].b_count; k++)
            m.params.data[m.layers[i].b_off + k] = 0.01f * (float)(k + i);
    if (mw_export_safetensors(&m, m.params.data, path) != MW_OK)
        return mw_model_free(&m), fail();
    printf("%s\n", path);
    int t = 0;
    for (int i = 0; i < m.nlayers; i++) {
        const mw_layer *l = &m.layers[i];
        for (int part = 0; part < 2; part++) {
            size_t off = part ? l->b_off : l->w_off, count = part ? l->b_count : l->w_count;
            if (!count)
                continue;
            double sum = 0;
            for (size_t k = 0; k < count; k++)
                sum += m.params.data[off + k];
            printf("%s [%s] %.9g\n", names[t], shapes[t], sum);
            t++;
        }
    }
    mw_model_free(&m);
    return t == 8 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "summary") == 0)
        return write_summary(argv[2]);
    if (argc == 3 && strcmp(argv[1], "export") == 0)
        return write_export(argv[2]);
    fprintf(stderr, "usage: format_writer summary|export DIR\n");
    return 2;
}
