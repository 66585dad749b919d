/* Helpers of the checkpoint tests (tests/test_checkpoint.c, the file format, and
 * tests/test_checkpoint_dir.c, the directory): paths, listings, and a filled state compared
 * field by field. */
#include "tests/ckpt_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/util.h"

char *mw_test_ckpt_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

void *mw_test_ckpt_read_all(const char *path, size_t *nbytes)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *nbytes = (size_t)n;
    return buf;
}

int mw_test_ckpt_exists(const char *dir, const char *name)
{
    char *p = mw_test_ckpt_join(dir, name);
    int ok = access(p, F_OK) == 0;
    free(p);
    return ok;
}

/* The file names in dir, sorted, joined by spaces (buffer). */
const char *mw_test_ckpt_listing(const char *dir)
{
    static char out[1024];
    char *names[64];
    int n = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && n < 64)
            names[n++] = strdup(e->d_name);
    closedir(d);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (strcmp(names[j], names[i]) < 0) {
                char *t = names[i];
                names[i] = names[j];
                names[j] = t;
            }
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", i ? " " : "", names[i]);
        free(names[i]);
    }
    return out;
}

/* A filled state: nparams values with special bit patterns among them, and its slots. */
void mw_test_ckpt_make_state(mw_ckpt *c, size_t nparams, const char *opt, int nslot_arrays,
                             uint64_t seed)
{
    mw_ckpt_init(c);
    c->model_json = strdup("{\"class_name\": \"Sequential\", \"config\": {\"layers\": []}}");
    snprintf(c->optimizer, sizeof c->optimizer, "%s", opt);
    c->nparams = nparams;
    c->params = malloc((nparams ? nparams : 1) * sizeof(float));
    assert_non_null(c->params);
    mw_test_fill_uniform(c->params, nparams, seed, -1.0f, 1.0f);
    static const uint32_t specials[] = {0x80000000u, 0x7fc00001u, 0x00000001u, 0x7f800000u};
    for (size_t i = 0; i < 4 && i < nparams; i++)
        memcpy(&c->params[i], &specials[i], 4); /* -0, a NaN payload, a denormal, inf */
    float **slots[3] = {&c->slot1, &c->slot2, &c->slot3};
    for (int s = 0; s < nslot_arrays; s++) {
        *slots[s] = malloc((nparams ? nparams : 1) * sizeof(float));
        assert_non_null(*slots[s]);
        mw_test_fill_uniform(*slots[s], nparams, seed + 1 + (uint64_t)s, 0.0f, 1e-3f);
    }
    c->nslots = nslot_arrays ? nparams : 0;
    c->opt_step = 1234;
    c->epoch = 3;
    c->step_in_epoch = 17;
    c->global_step = 3 * 100 + 17;
    c->seed = 0xfedcba9876543210ull;
    c->global_batch = 64;
    c->learning_rate = 1e-3;
}

void mw_test_ckpt_assert_same(const mw_ckpt *a, const mw_ckpt *b)
{
    assert_string_equal(a->model_json ? a->model_json : "", b->model_json);
    assert_int_equal(a->nparams, b->nparams);
    assert_int_equal(a->nslots, b->nslots);
    if (a->nparams)
        assert_memory_equal(a->params, b->params, a->nparams * sizeof(float));
    assert_true((a->slot1 == NULL) == (b->slot1 == NULL));
    assert_true((a->slot2 == NULL) == (b->slot2 == NULL));
    if (a->slot1 && a->nslots)
        assert_memory_equal(a->slot1, b->slot1, a->nslots * sizeof(float));
    if (a->slot2 && a->nslots)
        assert_memory_equal(a->slot2, b->slot2, a->nslots * sizeof(float));
    assert_true((a->slot3 == NULL) == (b->slot3 == NULL));
    if (a->slot3 && a->nslots)
        assert_memory_equal(a->slot3, b->slot3, a->nslots * sizeof(float));
    assert_string_equal(a->optimizer, b->optimizer);
    assert_int_equal(a->opt_step, b->opt_step);
    assert_int_equal(a->epoch, b->epoch);
    assert_int_equal(a->step_in_epoch, b->step_in_epoch);
    assert_int_equal(a->global_step, b->global_step);
    assert_true(a->seed == b->seed);
    assert_int_equal(a->global_batch, b->global_batch);
    assert_int_equal(a->has_loss_scale, b->has_loss_scale);
    if (a->has_loss_scale) {
        assert_true(a->loss_scale == b->loss_scale);
        assert_int_equal(a->loss_scale_steps, b->loss_scale_steps);
    }
    assert_memory_equal(&a->learning_rate, &b->learning_rate, sizeof(double));
}

void mw_test_ckpt_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void mw_test_ckpt_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
