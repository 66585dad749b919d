/* Tests for worker/checkpoint: bitwise round trips, the directory (numbering, max_to_keep, the
 * index, atomic replacement), one test per kind of bad file with its message checked, the
 * fallback from a corrupt latest checkpoint, and write failures that must leave earlier
 * checkpoints intact. Bad files are built by an independent encoder of docs/checkpoint.md
 * (craft() below), so the tests also check the document. */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "common/status.h"
#include "tests/util.h"
#include "worker/checkpoint.h"
#include "worker/checkpoint_dir.h"
#include "worker/model/model.h"

/* ---- helpers ---- */

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void *read_all(const char *path, size_t *nbytes)
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

static int exists(const char *dir, const char *name)
{
    char *p = join(dir, name);
    int ok = access(p, F_OK) == 0;
    free(p);
    return ok;
}

/* The file names in dir, sorted, joined by spaces (static buffer). */
static const char *listing(const char *dir)
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
static void make_state(mw_ckpt *c, size_t nparams, const char *opt, int nslot_arrays, uint64_t seed)
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

static void assert_same_state(const mw_ckpt *a, const mw_ckpt *b)
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

/* ---- an independent encoder of docs/checkpoint.md, for crafting bad files ---- */

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

typedef struct {
    const char *opt;
    uint64_t nparams, nslots;
    uint32_t arrays;
    int64_t opt_step, epoch, step_in_epoch, global_step;
    uint64_t seed;
    int64_t global_batch;
    double lr;
    uint64_t model_nbytes;
} tmeta;

static tmeta meta_default(void)
{
    return (tmeta){"sgd", 10, 10, 1, 5, 1, 2, 7, 42, 64, 0.01, 2};
}

static void meta_bytes(uint8_t m[104], const tmeta *t)
{
    memset(m, 0, 104);
    memcpy(m, t->opt, strlen(t->opt));
    le64(m + 16, t->nparams);
    le64(m + 24, t->nslots);
    le32(m + 32, t->arrays);
    le64(m + 40, (uint64_t)t->opt_step);
    le64(m + 48, (uint64_t)t->epoch);
    le64(m + 56, (uint64_t)t->step_in_epoch);
    le64(m + 64, (uint64_t)t->global_step);
    le64(m + 72, t->seed);
    le64(m + 80, (uint64_t)t->global_batch);
    uint64_t lr;
    memcpy(&lr, &t->lr, 8);
    le64(m + 88, lr);
    le64(m + 96, t->model_nbytes);
}

typedef struct {
    const char *tag;
    const void *raw;
    size_t nbytes;
    int64_t comp_decl, raw_decl; /* >= 0: write this instead of the true size */
    int bad_crc;
} tsec;

#define SEC(tag, raw, n)                                                                           \
    {                                                                                              \
        (tag), (raw), (n), -1, -1, 0                                                               \
    }

/* A file of the given sections; count < 0 writes the true count. Returns malloc'ed bytes. */
static uint8_t *craft(uint32_t version, int64_t count, const tsec *s, int n, size_t *nbytes)
{
    size_t cap = 16;
    for (int i = 0; i < n; i++)
        cap += 28 + compressBound(s[i].nbytes);
    uint8_t *buf = malloc(cap);
    assert_non_null(buf);
    memcpy(buf, "MWCKPT\0\1", 8);
    le32(buf + 8, version);
    le32(buf + 12, count < 0 ? (uint32_t)n : (uint32_t)count);
    size_t off = 16;
    for (int i = 0; i < n; i++) {
        uint8_t *h = buf + off;
        memset(h, 0, 8);
        memcpy(h, s[i].tag, strlen(s[i].tag));
        uLongf comp = (uLongf)(cap - off - 28);
        static const uint8_t z = 0;
        assert_int_equal(compress2(h + 28, &comp, s[i].raw ? s[i].raw : &z, s[i].nbytes, 6), Z_OK);
        le64(h + 8, s[i].comp_decl >= 0 ? (uint64_t)s[i].comp_decl : comp);
        le64(h + 16, s[i].raw_decl >= 0 ? (uint64_t)s[i].raw_decl : s[i].nbytes);
        uint32_t crc = (uint32_t)crc32(0L, s[i].raw ? s[i].raw : &z, (uInt)s[i].nbytes);
        le32(h + 24, s[i].bad_crc ? crc ^ 1u : crc);
        off += 28 + comp;
    }
    *nbytes = off;
    return buf;
}

static const float P10[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
static const float V10[10] = {0.5f, 0, 0, 0, 0, 0, 0, 0, 0, -0.5f};

/* Read crafted bytes, expecting MW_ECKPT with each needle in the message and c untouched. */
static void expect_bad(const uint8_t *buf, size_t nbytes, const char *needle1, const char *needle2)
{
    mw_ckpt c;
    mw_ckpt_init(&c);
    mw_err_clear();
    expect_err(mw_ckpt_read_buffer(&c, buf, nbytes, "crafted.ckpt"), MW_ECKPT,
               "crafted.ckpt: ", needle1, needle2 ? needle2 : "");
    assert_null(c.params);
    assert_null(c.model_json);
    mw_err_clear();
}

/* ---- round trips ---- */

static void roundtrip_one(const char *dir, size_t nparams, const char *opt, int arrays,
                          int empty_model)
{
    mw_ckpt a, b;
    make_state(&a, nparams, opt, arrays, 7 + nparams);
    if (empty_model) {
        free(a.model_json);
        a.model_json = NULL;
    }
    char *path = join(dir, "one.ckpt");
    assert_int_equal(mw_ckpt_write(&a, path), MW_OK);
    mw_ckpt_init(&b);
    assert_int_equal(mw_ckpt_read(&b, path), MW_OK);
    assert_same_state(&a, &b);

    /* serialize gives the file's bytes, and reading them from memory gives the same state */
    void *data;
    size_t n, fn;
    assert_int_equal(mw_ckpt_serialize(&a, &data, &n), MW_OK);
    void *file = read_all(path, &fn);
    assert_int_equal(n, fn);
    assert_memory_equal(data, file, n);
    mw_ckpt c;
    mw_ckpt_init(&c);
    assert_int_equal(mw_ckpt_read_buffer(&c, data, n, "memory"), MW_OK);
    assert_same_state(&a, &c);
    /* reading into a filled struct replaces its contents (no leak under ASan) */
    assert_int_equal(mw_ckpt_read_buffer(&c, data, n, "memory"), MW_OK);
    assert_same_state(&a, &c);
    free(data);
    free(file);
    free(path);
    mw_ckpt_free(&a);
    mw_ckpt_free(&b);
    mw_ckpt_free(&c);
    mw_ckpt_free(&c); /* free twice is safe: free leaves it initialized */
}

static void test_roundtrip(void **state)
{
    const char *dir = *state;
    roundtrip_one(dir, 1000, "adam", 2, 0);
    roundtrip_one(dir, 37, "sgd", 1, 0);
    roundtrip_one(dir, 5, "sgd", 0, 1);
    roundtrip_one(dir, 0, "adam", 2, 1);
    roundtrip_one(dir, 100000, "adam", 2, 0);
    /* Keras' other optimizers and the third slot (amsgrad, centered RMSprop) */
    roundtrip_one(dir, 333, "adam", 3, 0);
    roundtrip_one(dir, 333, "adamw", 3, 0);
    roundtrip_one(dir, 50, "rmsprop", 3, 0);
    roundtrip_one(dir, 50, "rmsprop", 1, 0);
    roundtrip_one(dir, 7, "adagrad", 1, 0);
    assert_string_equal(listing(dir), "one.ckpt"); /* no temporary files left */
}

/* mixed_float16's loss-scale section: kept through a file at the ends of its ranges, refused
 * when the scale is not a power of 2 a run can hold (2^-24 to 2^127: 5e-324 made 1/S infinite)
 * or its count is outside 0 .. 10^9 - 1 (INT64_MAX overflowed the count's increment), writing
 * and reading alike, and of its fixed size. */
static void test_loss_scale_section(void **state)
{
    const char *dir = *state;
    mw_ckpt a, b;
    make_state(&a, 40, "adam", 2, 3);
    a.has_loss_scale = 1, a.loss_scale = 0x1p-3, a.loss_scale_steps = 1999;
    char *path = join(dir, "ls.ckpt");
    assert_int_equal(mw_ckpt_write(&a, path), MW_OK);
    mw_ckpt_init(&b);
    assert_int_equal(mw_ckpt_read(&b, path), MW_OK);
    assert_same_state(&a, &b);
    const double ends[][2] = {{0x1p-24, 999999999}, {0x1p127, 0}};
    for (int i = 0; i < 2; i++) {
        a.loss_scale = ends[i][0], a.loss_scale_steps = (long)ends[i][1];
        assert_int_equal(mw_ckpt_write(&a, path), MW_OK);
        assert_int_equal(mw_ckpt_read(&b, path), MW_OK);
        assert_same_state(&a, &b);
    }
    mw_ckpt_free(&b);
    void *data;
    size_t n;
    a.loss_scale = 3.0;
    expect_err(mw_ckpt_serialize(&a, &data, &n), MW_EINVAL,
               "checkpoint: lscale: loss scale 3 (expected a power of 2 from 2^-24 to 2^127)");
    mw_err_clear();
    a.loss_scale = 1024.0, a.loss_scale_steps = -1;
    expect_err(mw_ckpt_serialize(&a, &data, &n), MW_EINVAL,
               "checkpoint: lscale: finite steps -1 (expected 0 to 999999999)");
    mw_ckpt_free(&a);
    free(path);

    tmeta t = meta_default();
    uint8_t m[104];
    meta_bytes(m, &t);
    static const struct {
        double scale;
        int64_t steps;
        int nbytes;
        const char *want;
    } bad[] = {
        {0.0, 0, 16, "lscale: loss scale 0 (expected a power of 2 from 2^-24 to 2^127)"},
        {-4.0, 0, 16, "lscale: loss scale -4 (expected a power of 2 from 2^-24 to 2^127)"},
        {INFINITY, 0, 16, "lscale: loss scale inf (expected a power of 2 from 2^-24 to 2^127)"},
        {NAN, 0, 16, "lscale: loss scale nan (expected a power of 2"},
        {1000.0, 0, 16, "lscale: loss scale 1000 (expected a power of 2 from 2^-24 to 2^127)"},
        {5e-324, 0, 16, "lscale: loss scale 4.94066e-324 (expected a power of 2 from 2^-24"},
        {0x1p-25, 0, 16, "lscale: loss scale 2.98023e-08 (expected a power of 2 from 2^-24"},
        {0x1p128, 0, 16, "lscale: loss scale 3.40282e+38 (expected a power of 2 from 2^-24"},
        {1024.0, -2, 16, "lscale: finite steps -2 (expected 0 to 999999999)"},
        {1024.0, INT64_MAX, 16, "lscale: finite steps 9223372036854775807 (expected 0 to"},
        {1024.0, 1000000000, 16, "lscale: finite steps 1000000000 (expected 0 to 999999999)"},
        {1024.0, 0, 12, "section lscale holds 12 bytes (expected 16 from the meta section)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint8_t ls[16];
        memcpy(ls, &bad[i].scale, 8);
        memcpy(ls + 8, &bad[i].steps, 8);
        tsec s[] = {SEC("meta", m, 104), SEC("model", "{}", 2), SEC("params", P10, 40),
                    SEC("slot1", V10, 40), SEC("lscale", ls, bad[i].nbytes)};
        size_t nb;
        uint8_t *buf = craft(1, -1, s, 5, &nb);
        expect_bad(buf, nb, bad[i].want, NULL);
        free(buf);
    }
}

/* The tests' own encoder writes a file the reader accepts: the document and code agree. */
static void test_crafted_valid(void **state)
{
    (void)state;
    tmeta t = meta_default();
    uint8_t m[104];
    meta_bytes(m, &t);
    tsec s[] = {SEC("meta", m, 104), SEC("model", "{}", 2), SEC("params", P10, 40),
                SEC("slot1", V10, 40)};
    size_t n;
    uint8_t *buf = craft(1, -1, s, 4, &n);
    mw_ckpt c;
    mw_ckpt_init(&c);
    assert_int_equal(mw_ckpt_read_buffer(&c, buf, n, "crafted"), MW_OK);
    assert_string_equal(c.model_json, "{}");
    assert_string_equal(c.optimizer, "sgd");
    assert_memory_equal(c.params, P10, 40);
    assert_memory_equal(c.slot1, V10, 40);
    assert_null(c.slot2);
    assert_int_equal(c.nparams, 10);
    assert_int_equal(c.opt_step, 5);
    assert_int_equal(c.epoch, 1);
    assert_int_equal(c.step_in_epoch, 2);
    assert_int_equal(c.global_step, 7);
    assert_int_equal(c.seed, 42);
    assert_int_equal(c.global_batch, 64);
    assert_true(c.learning_rate == 0.01);
    /* sections after meta may come in any order */
    tsec r[] = {SEC("meta", m, 104), SEC("slot1", V10, 40), SEC("params", P10, 40),
                SEC("model", "{}", 2)};
    free(buf);
    buf = craft(1, -1, r, 4, &n);
    assert_int_equal(mw_ckpt_read_buffer(&c, buf, n, "crafted"), MW_OK);
    assert_memory_equal(c.params, P10, 40);
    free(buf);
    mw_ckpt_free(&c);
}

static void test_write_rejects_bad_state(void **state)
{
    (void)state;
    mw_ckpt c;
    make_state(&c, 4, "adam", 1, 1); /* adam needs m and v */
    void *data;
    size_t n;
    expect_err(mw_ckpt_serialize(&c, &data, &n), MW_EINVAL, "optimizer adam with 1 slot(s)");
    mw_err_clear();
    snprintf(c.optimizer, sizeof c.optimizer, "lamb");
    expect_err(mw_ckpt_serialize(&c, &data, &n), MW_EINVAL, "unknown optimizer 'lamb'");
    mw_err_clear();
    mw_ckpt_free(&c);
    make_state(&c, 4, "rmsprop", 3, 1);
    float *s2 = c.slot2;
    c.slot2 = NULL; /* slot3 needs slot2 */
    expect_err(mw_ckpt_serialize(&c, &data, &n), MW_EINVAL, "optimizer slot3 without slot2");
    mw_err_clear();
    c.slot2 = s2;
    snprintf(c.optimizer, sizeof c.optimizer, "sgd");
    free(c.slot3), free(c.slot2);
    c.slot3 = c.slot2 = NULL;
    c.global_batch = 0;
    expect_err(mw_ckpt_serialize(&c, &data, &n), MW_EINVAL, "global batch 0");
    mw_err_clear();
    mw_ckpt_free(&c);
}

/* ---- the directory ---- */

static void test_save_keep(void **state)
{
    const char *dir = *state;
    char *sub = join(dir, "a/b/training_checkpoints"); /* created with its parents */
    mw_ckpt c;
    make_state(&c, 50, "adam", 2, 3);
    for (int i = 1; i <= 7; i++) {
        c.global_step = i;
        c.step_in_epoch = 0;
        int n = -1;
        assert_int_equal(mw_ckpt_save(sub, &c, 3, &n), MW_OK);
        assert_int_equal(n, i);
    }
    assert_string_equal(listing(sub), "checkpoint ckpt-5 ckpt-6 ckpt-7");
    char *ip = join(sub, "checkpoint");
    size_t n;
    char *text = read_all(ip, &n);
    const char *want = "model_checkpoint_path: \"ckpt-7\"\n"
                       "all_model_checkpoint_paths: \"ckpt-5\"\n"
                       "all_model_checkpoint_paths: \"ckpt-6\"\n"
                       "all_model_checkpoint_paths: \"ckpt-7\"\n";
    assert_int_equal(n, strlen(want));
    assert_memory_equal(text, want, n);

    mw_ckpt r;
    mw_ckpt_init(&r);
    char *used = NULL;
    assert_int_equal(mw_ckpt_load_latest(sub, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-7");
    assert_int_equal(r.global_step, 7);
    assert_same_state(&c, &r);

    /* keep <= 0 keeps everything */
    int num;
    assert_int_equal(mw_ckpt_save(sub, &c, 0, &num), MW_OK);
    assert_int_equal(mw_ckpt_save(sub, &c, -1, &num), MW_OK);
    assert_int_equal(num, 9);
    assert_string_equal(listing(sub), "checkpoint ckpt-5 ckpt-6 ckpt-7 ckpt-8 ckpt-9");
    free(text);
    free(ip);
    free(used);
    free(sub);
    mw_ckpt_free(&c);
    mw_ckpt_free(&r);
}

/* Numbering continues above both the index and the files (an index can lag behind). */
static void test_save_numbering(void **state)
{
    const char *dir = *state;
    mw_ckpt c;
    make_state(&c, 8, "sgd", 1, 4);
    char *p = join(dir, "ckpt-41");
    assert_int_equal(mw_ckpt_write(&c, p), MW_OK);
    free(p);
    int n;
    assert_int_equal(mw_ckpt_save(dir, &c, 5, &n), MW_OK);
    assert_int_equal(n, 42);
    const char *idx = "model_checkpoint_path: \"ckpt-50\"\n"
                      "all_model_checkpoint_paths: \"ckpt-50\"\n"
                      "all_model_checkpoint_timestamps: 1700000000.5\n";
    free(mw_test_write_file(dir, "checkpoint", idx, strlen(idx)));
    assert_int_equal(mw_ckpt_save(dir, &c, 5, &n), MW_OK);
    assert_int_equal(n, 51);
    mw_ckpt_free(&c);
}

static void test_load_empty_and_missing(void **state)
{
    const char *dir = *state;
    mw_ckpt c;
    mw_ckpt_init(&c);
    char *used = (char *)"unchanged";
    assert_int_equal(mw_ckpt_load_latest(dir, &c, &used), MW_ECKPT);
    assert_null(used);
    char want[600];
    snprintf(want, sizeof want, "no checkpoint in %s", dir);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();

    char *missing = join(dir, "nope");
    assert_int_equal(mw_ckpt_load_latest(missing, &c, NULL), MW_ECKPT);
    snprintf(want, sizeof want, "no checkpoint in %s (the directory does not exist)", missing);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    free(missing);
}

static void flip_byte(const char *dir, const char *name, long at)
{
    char *p = join(dir, name);
    size_t n;
    uint8_t *b = read_all(p, &n);
    size_t i = at >= 0 ? (size_t)at : n + (size_t)at;
    assert_true(i < n);
    b[i] ^= 0x40;
    free(mw_test_write_file(dir, name, b, n));
    free(b);
    free(p);
}

static void truncate_to(const char *dir, const char *name, size_t nbytes)
{
    char *p = join(dir, name);
    assert_int_equal(truncate(p, (off_t)nbytes), 0);
    free(p);
}

static void test_load_falls_back(void **state)
{
    const char *dir = *state;
    mw_ckpt c, r;
    make_state(&c, 300, "adam", 2, 5);
    c.step_in_epoch = 0;
    for (int i = 1; i <= 3; i++) {
        c.global_step = 10 * i;
        assert_int_equal(mw_ckpt_save(dir, &c, 5, NULL), MW_OK);
    }
    flip_byte(dir, "ckpt-3", -10); /* inside the last section's payload */
    mw_ckpt_init(&r);
    char *used = NULL;
    assert_int_equal(mw_ckpt_load_latest(dir, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-2");
    assert_int_equal(r.global_step, 20);
    free(used);

    truncate_to(dir, "ckpt-2", 30);
    assert_int_equal(mw_ckpt_load_latest(dir, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1");
    assert_int_equal(r.global_step, 10);
    free(used);

    /* without the index the files themselves are found, highest first */
    char *ip = join(dir, "checkpoint");
    assert_int_equal(unlink(ip), 0);
    free(ip);
    assert_int_equal(mw_ckpt_load_latest(dir, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1");
    free(used);

    /* all bad: one error listing each one tried, newest first, with its reason */
    flip_byte(dir, "ckpt-1", 0);
    mw_ckpt_free(&r);
    make_state(&r, 3, "sgd", 0, 9); /* a failed load leaves the caller's state alone */
    mw_status rc = mw_ckpt_load_latest(dir, &r, &used);
    char want[800];
    snprintf(want, sizeof want,
             "no valid checkpoint in %s (tried: ckpt-3 (bad compressed data in section slot2 (",
             dir);
    expect_err(rc, MW_ECKPT, want,
               "), ckpt-2 (truncated: section 1 of 5 starts at byte 16 but the file ends at "
               "30 (expected a 28-byte section header)), ckpt-1 (",
               "), ckpt-1 (not a checkpoint: bad magic");
    assert_null(used);
    assert_int_equal(r.nparams, 3);
    mw_err_clear();
    mw_ckpt_free(&c);
    mw_ckpt_free(&r);
}

/* An index naming a file that is gone, or an unparsable index, does not stop the search. */
static void test_load_bad_index(void **state)
{
    const char *dir = *state;
    mw_ckpt c, r;
    make_state(&c, 20, "sgd", 1, 6);
    assert_int_equal(mw_ckpt_save(dir, &c, 5, NULL), MW_OK);
    const char *idx = "model_checkpoint_path: \"ckpt-9\"\n"
                      "all_model_checkpoint_paths: \"ckpt-9\"\n";
    free(mw_test_write_file(dir, "checkpoint", idx, strlen(idx)));
    mw_ckpt_init(&r);
    char *used = NULL;
    assert_int_equal(mw_ckpt_load_latest(dir, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1");
    free(used);
    const char *junk = "model_checkpoint_path ckpt-1\n";
    free(mw_test_write_file(dir, "checkpoint", junk, strlen(junk)));
    assert_int_equal(mw_ckpt_load_latest(dir, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1");
    free(used);
    mw_ckpt_free(&c);
    mw_ckpt_free(&r);
}

/* Snapshot of a directory's files (names and contents) to prove a failed save changed nothing. */
static char *snapshot(const char *dir)
{
    char *out = strdup(listing(dir));
    char names[1024];
    snprintf(names, sizeof names, "%s", out);
    for (char *tok = strtok(names, " "); tok; tok = strtok(NULL, " ")) {
        char *p = join(dir, tok);
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
        if (S_ISREG(st.st_mode)) {
            size_t n;
            uint8_t *b = read_all(p, &n);
            char line[64];
            snprintf(line, sizeof line, " %s:%zu:%08lx", tok, n, crc32(0L, b, (uInt)n));
            out = realloc(out, strlen(out) + strlen(line) + 1);
            strcat(out, line);
            free(b);
        }
        free(p);
    }
    return out;
}

static void test_save_unwritable(void **state)
{
    const char *dir = *state;
    mw_ckpt c;
    make_state(&c, 2000, "adam", 2, 8);

    /* a directory that cannot exist: under a regular file (chmod would not stop root) */
    free(mw_test_write_file(dir, "file", "x", 1));
    char *bad_dir = join(dir, "file/ckpts");
    assert_int_equal(mw_ckpt_save(bad_dir, &c, 5, NULL), MW_EIO);
    char want[600];
    snprintf(want, sizeof want, "checkpoint directory %s: cannot create it (Not a directory)",
             bad_dir);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    free(bad_dir);

    char *ck = join(dir, "ck");
    assert_int_equal(mw_ckpt_save(ck, &c, 5, NULL), MW_OK);
    assert_int_equal(mw_ckpt_save(ck, &c, 5, NULL), MW_OK);
    char *before = snapshot(ck);

    /* the checkpoint's temporary file cannot be created */
    char tmp[64];
    snprintf(tmp, sizeof tmp, "ckpt-3.tmp-%ld", (long)getpid());
    char *blocker = join(ck, tmp);
    assert_int_equal(mkdir(blocker, 0755), 0);
    assert_int_equal(mw_ckpt_save(ck, &c, 1, NULL), MW_EIO);
    snprintf(want, sizeof want, "checkpoint directory %s: cannot create ckpt-3 (File exists)", ck);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    assert_int_equal(rmdir(blocker), 0);
    free(blocker);
    char *after = snapshot(ck);
    assert_string_equal(before, after);
    free(after);

    /* a full disk, simulated with a file-size limit: the write fails part-way */
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 4096;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    mw_status rc = mw_ckpt_save(ck, &c, 1, NULL);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);
    assert_int_equal(rc, MW_EIO);
    snprintf(want, sizeof want, "checkpoint directory %s: cannot write ckpt-3 (File too large)",
             ck);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    after = snapshot(ck);
    assert_string_equal(before, after);
    free(after);

    /* the index cannot be replaced: the old index stays, nothing is deleted, and the new
     * checkpoint, although complete, is not listed */
    snprintf(tmp, sizeof tmp, "checkpoint.tmp-%ld", (long)getpid());
    blocker = join(ck, tmp);
    assert_int_equal(mkdir(blocker, 0755), 0);
    expect_err(mw_ckpt_save(ck, &c, 1, NULL), MW_EIO,
               "cannot create the index 'checkpoint' (File exists); ckpt-3 was written");
    mw_err_clear();
    assert_int_equal(rmdir(blocker), 0);
    free(blocker);
    assert_true(exists(ck, "ckpt-3"));
    char *p3 = join(ck, "ckpt-3");
    assert_int_equal(unlink(p3), 0); /* set aside, so the rest must equal the snapshot */
    after = snapshot(ck);
    assert_string_equal(before, after);
    free(after);
    assert_int_equal(mw_ckpt_save(ck, &c, 1, NULL), MW_OK); /* and a later save works */
    assert_string_equal(listing(ck), "checkpoint ckpt-3");
    assert_int_equal(unlink(p3), 0);
    free(p3);

    /* loading follows the index first, so a checkpoint left unlisted by such a failure is only
     * a fallback */
    char *ip = join(ck, "checkpoint");
    assert_int_equal(unlink(ip), 0);
    free(ip);
    const char *idx = "model_checkpoint_path: \"ckpt-1\"\n";
    free(mw_test_write_file(ck, "checkpoint", idx, strlen(idx)));
    for (int i = 1; i <= 2; i++) {
        char name[32];
        snprintf(name, sizeof name, "ckpt-%d", i);
        char *pi = join(ck, name);
        c.global_step = i;
        c.step_in_epoch = 0;
        assert_int_equal(mw_ckpt_write(&c, pi), MW_OK);
        free(pi);
    }
    mw_ckpt r;
    mw_ckpt_init(&r);
    char *used;
    assert_int_equal(mw_ckpt_load_latest(ck, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1"); /* the index decides, even with ckpt-2 there */
    assert_int_equal(r.global_step, 1);
    free(used);

    free(before);
    free(ck);
    mw_ckpt_free(&c);
    mw_ckpt_free(&r);
}

/* ---- bad files ---- */

/* A valid adam file's bytes and where its sections' payloads start. */
typedef struct {
    uint8_t *buf;
    size_t nbytes;
    size_t hdr[5], payload[5], comp[5];
    int nsec;
} good_file;

static good_file good_adam(void)
{
    mw_ckpt c;
    make_state(&c, 10, "adam", 2, 11);
    good_file g;
    memset(&g, 0, sizeof g);
    void *data;
    assert_int_equal(mw_ckpt_serialize(&c, &data, &g.nbytes), MW_OK);
    g.buf = data;
    size_t off = 16;
    while (off < g.nbytes) {
        g.hdr[g.nsec] = off;
        uint64_t comp = 0;
        for (int i = 7; i >= 0; i--)
            comp = comp << 8 | g.buf[off + 8 + i];
        g.comp[g.nsec] = (size_t)comp;
        g.payload[g.nsec] = off + 28;
        off += 28 + comp;
        g.nsec++;
    }
    assert_int_equal(off, g.nbytes);
    assert_int_equal(g.nsec, 5);
    mw_ckpt_free(&c);
    return g;
}

static void test_bad_truncated(void **state)
{
    (void)state;
    good_file g = good_adam();
    static const char *names[] = {"meta", "model", "params", "slot1", "slot2"};
    expect_bad(g.buf, 0, "file is 0 bytes, shorter than the 16-byte header", NULL);
    expect_bad(g.buf, 9, "file is 9 bytes, shorter than the 16-byte header", NULL);
    expect_bad(g.buf, 16, "truncated: section 1 of 5 starts at byte 16", NULL);
    for (int s = 0; s < 5; s++) {
        char want[64];
        /* inside the section header, then inside the payload, then one byte short */
        snprintf(want, sizeof want, "truncated: section %d of 5", s + 1);
        expect_bad(g.buf, g.hdr[s] + 10, want, NULL);
        snprintf(want, sizeof want, "truncated in section %s", names[s]);
        expect_bad(g.buf, g.payload[s] + g.comp[s] / 2, want, NULL);
        expect_bad(g.buf, g.payload[s] + g.comp[s] - 1, want, NULL);
    }
    free(g.buf);
}

/* A flipped byte in any section's payload is caught with the section named, or (deflate can
 * copy a run of zeros from another distance) it decodes to exactly the original state. */
static void test_bad_flipped(void **state)
{
    (void)state;
    good_file g = good_adam();
    static const char *names[] = {"meta", "model", "params", "slot1", "slot2"};
    mw_ckpt orig, c;
    mw_ckpt_init(&orig);
    mw_ckpt_init(&c);
    assert_int_equal(mw_ckpt_read_buffer(&orig, g.buf, g.nbytes, "orig"), MW_OK);
    int caught = 0, harmless = 0;
    for (int s = 0; s < 5; s++) {
        char want[64];
        snprintf(want, sizeof want, "in section %s (", names[s]);
        for (size_t i = 0; i < g.comp[s]; i++) {
            g.buf[g.payload[s] + i] ^= 0x10;
            mw_err_clear();
            mw_status rc = mw_ckpt_read_buffer(&c, g.buf, g.nbytes, "flipped.ckpt");
            if (rc == MW_OK) {
                assert_same_state(&orig, &c);
                harmless++;
            } else {
                expect_err(rc, MW_ECKPT, "flipped.ckpt: bad ", want);
                caught++;
            }
            g.buf[g.payload[s] + i] ^= 0x10;
        }
        /* the stored CRC */
        g.buf[g.hdr[s] + 24] ^= 0x01;
        snprintf(want, sizeof want, "bad CRC in section %s (computed 0x", names[s]);
        expect_bad(g.buf, g.nbytes, want, NULL);
        g.buf[g.hdr[s] + 24] ^= 0x01;
    }
    assert_true(caught > 10 * harmless);
    mw_err_clear();
    mw_ckpt_free(&orig);
    mw_ckpt_free(&c);
    free(g.buf);
}

static void test_bad_header(void **state)
{
    (void)state;
    good_file g = good_adam();
    g.buf[3] = 'X';
    expect_bad(g.buf, g.nbytes, "not a checkpoint: bad magic (expected \"MWCKPT\\0\\1\")", NULL);
    g.buf[3] = 'K';
    g.buf[8] = 2;
    expect_bad(g.buf, g.nbytes, "unsupported format version 2 (expected 1)", NULL);
    g.buf[8] = 1;
    g.buf[12] = 17;
    expect_bad(g.buf, g.nbytes, "section count 17 is out of range (expected 3 to 16)", NULL);
    g.buf[12] = 0;
    expect_bad(g.buf, g.nbytes, "section count 0 is out of range", NULL);
    g.buf[12] = 0xff, g.buf[15] = 0xff;
    expect_bad(g.buf, g.nbytes, "section count 4278190335 is out of range", NULL);
    g.buf[12] = 5, g.buf[15] = 0;
    g.buf[12] = 4; /* a section less than the file holds */
    expect_bad(g.buf, g.nbytes, "trailing bytes after the last section", NULL);
    g.buf[12] = 6; /* one more than the file holds */
    expect_bad(g.buf, g.nbytes, "truncated: section 6 of 6", NULL);
    g.buf[12] = 5;

    uint8_t *more = malloc(g.nbytes + 3);
    memcpy(more, g.buf, g.nbytes);
    memcpy(more + g.nbytes, "abc", 3);
    expect_bad(more, g.nbytes + 3,
               "3 trailing bytes after the last section (expected the file "
               "to end at byte",
               NULL);
    free(more);
    free(g.buf);
}

static void test_bad_sizes(void **state)
{
    (void)state;
    tmeta t = meta_default();
    uint8_t m[104];
    meta_bytes(m, &t);
    size_t n;
    uint8_t *buf;

    /* a raw size of 2^40: rejected before any allocation (ASan would abort on the malloc) */
    tsec huge[] = {SEC("meta", m, 104), SEC("model", "{}", 2), SEC("params", P10, 40),
                   SEC("slot1", V10, 40)};
    huge[2].raw_decl = (int64_t)1 << 40;
    buf = craft(1, -1, huge, 4, &n);
    expect_bad(buf, n, "section params claims 1099511627776 bytes (expected at most 1 GiB)", NULL);
    free(buf);
    huge[2].raw_decl = -1;
    huge[2].comp_decl = (int64_t)1 << 40;
    buf = craft(1, -1, huge, 4, &n);
    expect_bad(buf, n, "section params: 1099511627776 compressed bytes cannot hold 40 raw", NULL);
    free(buf);
    /* a plausible compressed size (within compressBound) that runs past the end */
    huge[2].comp_decl = (int64_t)compressBound(40);
    buf = craft(1, 3, huge, 3, &n);
    char want[96];
    snprintf(want, sizeof want, "truncated in section params: %lu compressed bytes",
             compressBound(40));
    expect_bad(buf, n, want, NULL);
    free(buf);

    /* meta claiming 2^40 parameters, and a 1 GiB section from a few bytes */
    tmeta big = t;
    big.nparams = big.nslots = (uint64_t)1 << 40;
    meta_bytes(m, &big);
    tsec s1[] = {SEC("meta", m, 104), SEC("model", "{}", 2), SEC("params", P10, 40),
                 SEC("slot1", V10, 40)};
    buf = craft(1, -1, s1, 4, &n);
    expect_bad(buf, n, "meta lists 1099511627776 parameters", "expected at most 268435456");
    free(buf);
    big.nparams = big.nslots = (uint64_t)1 << 28;
    meta_bytes(m, &big);
    s1[2].raw_decl = (int64_t)1 << 30;
    buf = craft(1, -1, s1, 4, &n);
    expect_bad(buf, n, "compressed bytes cannot hold 1073741824 raw bytes", NULL);
    free(buf);

    /* sizes that disagree with the meta record */
    meta_bytes(m, &t);
    tsec s2[] = {SEC("meta", m, 104), SEC("model", "{}", 2), SEC("params", P10, 36),
                 SEC("slot1", V10, 40)};
    buf = craft(1, -1, s2, 4, &n);
    expect_bad(buf, n, "section params holds 36 bytes (expected 40 from the meta section)", NULL);
    free(buf);
    tsec s3[] = {SEC("meta", m, 104), SEC("model", "{}x", 3), SEC("params", P10, 40),
                 SEC("slot1", V10, 40)};
    buf = craft(1, -1, s3, 4, &n);
    expect_bad(buf, n, "section model holds 3 bytes (expected 2", NULL);
    free(buf);
    tsec s4[] = {SEC("meta", m, 100), SEC("model", "{}", 2), SEC("params", P10, 40),
                 SEC("slot1", V10, 40)};
    buf = craft(1, -1, s4, 4, &n);
    expect_bad(buf, n, "section meta holds 100 bytes (expected 104", NULL);
    free(buf);
    /* a stream that inflates to more than declared */
    float p11[11] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    tsec s5[] = {SEC("meta", m, 104), SEC("model", "{}", 2), SEC("params", p11, 44),
                 SEC("slot1", V10, 40)};
    s5[2].raw_decl = 40;
    buf = craft(1, -1, s5, 4, &n);
    expect_bad(buf, n, "bad compressed data in section params (inflates to more than declared",
               NULL);
    free(buf);
}

static void test_bad_structure(void **state)
{
    (void)state;
    tmeta t = meta_default();
    uint8_t m[104];
    meta_bytes(m, &t);
    size_t n;
    uint8_t *buf;

    tsec miss[] = {SEC("meta", m, 104), SEC("params", P10, 40), SEC("slot1", V10, 40)};
    buf = craft(1, -1, miss, 3, &n);
    expect_bad(buf, n, "missing section model", NULL);
    free(buf);
    tsec miss2[] = {SEC("meta", m, 104), SEC("model", "{}", 2), SEC("slot1", V10, 40)};
    buf = craft(1, -1, miss2, 3, &n);
    expect_bad(buf, n, "missing section params", NULL);
    free(buf);
    tsec miss3[] = {SEC("meta", m, 104), SEC("model", "{}", 2), SEC("params", P10, 40)};
    buf = craft(1, -1, miss3, 3, &n);
    expect_bad(buf, n, "missing section slot1", NULL);
    free(buf);
    tsec dup[] = {SEC("meta", m, 104), SEC("model", "{}", 2), SEC("params", P10, 40),
                  SEC("params", P10, 40), SEC("slot1", V10, 40)};
    buf = craft(1, -1, dup, 5, &n);
    expect_bad(buf, n, "duplicate section params", NULL);
    free(buf);
    tsec extra[] = {SEC("meta", m, 104), SEC("model", "{}", 2), SEC("params", P10, 40),
                    SEC("slot1", V10, 40), SEC("slot2", V10, 40)};
    buf = craft(1, -1, extra, 5, &n);
    expect_bad(buf, n, "unexpected section slot2 (meta lists 1 optimizer slot(s))", NULL);
    free(buf);
    tsec unknown[] = {SEC("meta", m, 104), SEC("model", "{}", 2), SEC("params", P10, 40),
                      SEC("slot1", V10, 40), SEC("xtra\x01", V10, 40)};
    buf = craft(1, -1, unknown, 5, &n);
    expect_bad(buf, n, "unknown section tag 'xtra?'", "(expected meta, model, params");
    free(buf);
    tsec late[] = {SEC("model", "{}", 2), SEC("meta", m, 104), SEC("params", P10, 40),
                   SEC("slot1", V10, 40)};
    buf = craft(1, -1, late, 4, &n);
    expect_bad(buf, n, "first section is model (expected meta)", NULL);
    free(buf);
    tsec nul[] = {SEC("meta", m, 104), SEC("model", "{\0", 2), SEC("params", P10, 40),
                  SEC("slot1", V10, 40)};
    buf = craft(1, -1, nul, 4, &n);
    expect_bad(buf, n, "model description has a NUL byte at offset 1 (expected JSON text)", NULL);
    free(buf);
}

static void test_bad_meta(void **state)
{
    (void)state;
    struct {
        tmeta t;
        const char *want;
    } cases[] = {
        {{"lbfgs", 10, 10, 1, 5, 1, 2, 7, 42, 64, 0.01, 2},
         "unknown optimizer 'lbfgs' (expected adam, sgd, adamw, rmsprop, adagrad or adamax)"},
        {{"adam", 10, 10, 1, 5, 1, 2, 7, 42, 64, 0.01, 2},
         "optimizer adam with 1 slot(s) (expected 2 or 3: m, v and with amsgrad vhat)"},
        {{"sgd", 10, 10, 4, 5, 1, 2, 7, 42, 64, 0.01, 2}, "meta lists 4 optimizer slots"},
        {{"sgd", 10, 10, 3, 5, 1, 2, 7, 42, 64, 0.01, 2},
         "optimizer sgd with 3 slot(s) (expected 0 or 1: the momentum)"},
        {{"adagrad", 10, 10, 2, 5, 1, 2, 7, 42, 64, 0.01, 2},
         "optimizer adagrad with 2 slot(s) (expected 1: the accumulator)"},
        {{"rmsprop", 10, 0, 0, 5, 1, 2, 7, 42, 64, 0.01, 2},
         "optimizer rmsprop with 0 slot(s) (expected 1 to 3: velocity, momentum, average "
         "gradient)"},
        {{"sgd", 10, 9, 1, 5, 1, 2, 7, 42, 64, 0.01, 2},
         "9 floats per optimizer slot (expected 10: one per parameter)"},
        {{"sgd", 10, 10, 1, -5, 1, 2, 7, 42, 64, 0.01, 2}, "negative counter"},
        {{"sgd", 10, 10, 1, 5, (int64_t)1 << 40, 2, 7, 42, 64, 0.01, 2},
         "meta epoch 1099511627776 is out of range"},
        {{"sgd", 10, 10, 1, 5, 1, 9, 7, 42, 64, 0.01, 2},
         "step in epoch 9 is beyond the global step 7"},
        {{"sgd", 10, 10, 1, 5, 1, 2, 7, 42, 0, 0.01, 2}, "global batch 0 (expected >= 1)"},
        {{"sgd", 10, 10, 1, 5, 1, 2, 7, 42, 64, -1.0, 2}, "learning rate -1"},
        {{"sgd", 10, 10, 1, 5, 1, 2, 7, 42, 64, 0.01, (uint64_t)1 << 31},
         "model description of 2147483648 bytes"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t m[104];
        meta_bytes(m, &cases[i].t);
        tsec s[] = {SEC("meta", m, 104), SEC("model", "{}", 2), SEC("params", P10, 40),
                    SEC("slot1", V10, 40)};
        size_t n;
        uint8_t *buf = craft(1, -1, s, 4, &n);
        expect_bad(buf, n, cases[i].want, NULL);
        free(buf);
    }
    /* an optimizer name without a terminating NUL */
    tmeta t = meta_default();
    uint8_t m[104];
    meta_bytes(m, &t);
    memset(m, 'a', 16);
    tsec s[] = {SEC("meta", m, 104), SEC("model", "{}", 2), SEC("params", P10, 40),
                SEC("slot1", V10, 40)};
    size_t n;
    uint8_t *buf = craft(1, -1, s, 4, &n);
    expect_bad(buf, n, "unknown optimizer 'aaaaaaaaaaaaaaaa'", NULL);
    free(buf);
}

static void test_read_errors(void **state)
{
    const char *dir = *state;
    mw_ckpt c;
    mw_ckpt_init(&c);
    char *p = join(dir, "absent");
    assert_int_equal(mw_ckpt_read(&c, p), MW_EIO);
    char want[600];
    snprintf(want, sizeof want, "%s: cannot open (No such file or directory)", p);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    free(p);
    expect_err(mw_ckpt_read(&c, dir), MW_EIO, "is a directory (expected a checkpoint file)");
    mw_err_clear();
}

/* ---- header first, files that are not checkpoints, the index's reach ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long maxrss_kb(void)
{
    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_maxrss;
}

/* The header and section table are checked against the file's size before the body is read: a
 * 5 GiB sparse file with a valid 16-byte header is rejected at once, without its memory. */
static void test_read_header_first(void **state)
{
    const char *dir = *state;
    mw_ckpt c, r;
    make_state(&c, 300, "adam", 2, 12);
    char *good = join(dir, "good");
    assert_int_equal(mw_ckpt_write(&c, good), MW_OK);
    size_t n;
    uint8_t *bytes = read_all(good, &n);
    free(mw_test_write_file(dir, "sparse", bytes, 16));
    char *sparse = join(dir, "sparse");
    if (truncate(sparse, (off_t)5 << 30) != 0)
        skip(); /* a file system without 5 GiB files */
    mw_ckpt_init(&r);
    long rss0 = maxrss_kb();
    double t0 = now_s();
    expect_err(mw_ckpt_read(&r, sparse), MW_ECKPT, sparse,
               ": file is 5368709120 bytes but its header and sections declare 156 (5368708964 "
               "trailing bytes after the last section; expected the file to end at byte 156)");
    mw_err_clear();
    double dt = now_s() - t0;
    long grew_kb = maxrss_kb() - rss0;
    if (dt > 1.0 || grew_kb > 64 * 1024)
        fail_msg("rejecting the sparse file took %.2f s and %ld KiB more memory", dt, grew_kb);
    assert_null(r.params);

    /* a valid file with bytes after it: both sizes named, by the path */
    uint8_t *more = malloc(n + 3);
    memcpy(more, bytes, n);
    memcpy(more + n, "abc", 3);
    char *p = mw_test_write_file(dir, "trailing", more, n + 3);
    char want[200];
    snprintf(want, sizeof want, ": file is %zu bytes but its header and sections declare %zu (3 ",
             n + 3, n);
    expect_err(mw_ckpt_read(&r, p), MW_ECKPT, p, want);
    mw_err_clear();
    free(p);

    /* a section that runs past the end: the file's size and at least what is declared */
    size_t comp1 = 0; /* meta's compressed size */
    for (int i = 7; i >= 0; i--)
        comp1 = comp1 << 8 | bytes[16 + 8 + i];
    size_t cut = 16 + 28 + comp1 + 28 + 2; /* two bytes into the model section's payload */
    p = mw_test_write_file(dir, "short", bytes, cut);
    snprintf(want, sizeof want, "(the file is %zu bytes; its sections declare at least ", cut);
    expect_err(mw_ckpt_read(&r, p), MW_ECKPT, p, ": truncated in section model: ", want);
    mw_err_clear();
    /* a compressed size of 2^40 in a small file */
    memcpy(more, bytes, n);
    le64(more + 16 + 8, (uint64_t)1 << 40);
    free(mw_test_write_file(dir, "short", more, n));
    snprintf(want, sizeof want,
             "truncated in section meta: 1099511627776 compressed bytes at "
             "byte 44 but only %zu left (the file is %zu bytes; its sections "
             "declare at least 1099511627820)",
             n - 44, n);
    expect_err(mw_ckpt_read(&r, p), MW_ECKPT, p, want);
    mw_err_clear();
    free(p);
    free(more);

    /* the whole file as the newest checkpoint of a directory: skipped for the previous one */
    char *ck = join(dir, "ck");
    assert_int_equal(mw_ckpt_save(ck, &c, 5, NULL), MW_OK);
    char *three = join(ck, "ckpt-3");
    assert_int_equal(rename(sparse, three), 0);
    char *used = NULL;
    assert_int_equal(mw_ckpt_load_latest(ck, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1");
    free(used);
    free(three);
    free(ck);
    free(bytes);
    free(sparse);
    free(good);
    mw_ckpt_free(&c);
    mw_ckpt_free(&r);
}

/* FIFOs, devices and symbolic links are never read: no read blocks and no link is followed. */
static void test_read_special(void **state)
{
    const char *dir = *state;
    alarm(60); /* a blocked open would hang the test: end it instead */
    mw_ckpt c, r;
    make_state(&c, 30, "sgd", 1, 13);
    mw_ckpt_init(&r);
    assert_int_equal(mw_ckpt_save(dir, &c, 5, NULL), MW_OK);
    char *fifo = join(dir, "ckpt-9"), *link = join(dir, "ckpt-8");
    assert_int_equal(mkfifo(fifo, 0644), 0);
    expect_err(mw_ckpt_read(&r, fifo), MW_EIO, fifo, ": is a FIFO (expected a checkpoint file)");
    mw_err_clear();
    assert_int_equal(symlink("ckpt-1", link), 0);
    expect_err(mw_ckpt_read(&r, link), MW_EIO, link,
               ": is a symbolic link (expected a regular file: checkpoints are never read "
               "through links)");
    mw_err_clear();
    expect_err(mw_ckpt_read(&r, "/dev/null"), MW_EIO,
               "/dev/null: is a character device (expected a checkpoint file)");
    mw_err_clear();

    /* the index names the FIFO: skipped (so is the link), the real one is used */
    const char *idx = "model_checkpoint_path: \"ckpt-9\"\n"
                      "all_model_checkpoint_paths: \"ckpt-1\"\n"
                      "all_model_checkpoint_paths: \"ckpt-8\"\n"
                      "all_model_checkpoint_paths: \"ckpt-9\"\n";
    free(mw_test_write_file(dir, "checkpoint", idx, strlen(idx)));
    char *used = NULL;
    assert_int_equal(mw_ckpt_load_latest(dir, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1");
    assert_same_state(&c, &r);
    free(used);
    /* the index itself as a FIFO: the ckpt-N files are found */
    char *ip = join(dir, "checkpoint");
    assert_int_equal(unlink(ip), 0);
    assert_int_equal(mkfifo(ip, 0644), 0);
    assert_int_equal(mw_ckpt_load_latest(dir, &r, &used), MW_OK);
    expect_contains(used, "/ckpt-1");
    free(used);
    alarm(0);
    free(ip);
    free(fifo);
    free(link);
    mw_ckpt_free(&c);
    mw_ckpt_free(&r);
}

/* Index entries name files inside the directory; others are never opened, and do not count
 * for the next number either. */
static void test_index_outside(void **state)
{
    const char *dir = *state;
    mw_ckpt c, other, r;
    make_state(&c, 25, "sgd", 1, 14);
    make_state(&other, 25, "sgd", 1, 15);
    c.step_in_epoch = other.step_in_epoch = 0;
    c.global_step = 1;
    other.global_step = 7;
    char *ck = join(dir, "ck"), *elsewhere = join(dir, "elsewhere");
    assert_int_equal(mw_ckpt_save(ck, &c, 5, NULL), MW_OK);
    assert_int_equal(mw_ckpt_save(elsewhere, &other, 5, NULL), MW_OK); /* its ckpt-1 */
    char idx[1200];
    snprintf(idx, sizeof idx,
             "model_checkpoint_path: \"../elsewhere/ckpt-1\"\n"
             "all_model_checkpoint_paths: \"%s/ckpt-1\"\n"
             "all_model_checkpoint_paths: \"sub/ckpt-8\"\n"
             "all_model_checkpoint_paths: \"..\"\n"
             "all_model_checkpoint_paths: \"ckpt-1\"\n"
             "all_model_checkpoint_paths: \"../elsewhere/ckpt-1\"\n",
             elsewhere);
    free(mw_test_write_file(ck, "checkpoint", idx, strlen(idx)));
    char *used = NULL;
    mw_ckpt_init(&r);
    assert_int_equal(mw_ckpt_load_latest(ck, &r, &used), MW_OK);
    expect_contains(used, "ck/ckpt-1");
    assert_int_equal(r.global_step, 1); /* not the other run's 7 */
    free(used);

    mw_ckpt_survey sv;
    assert_int_equal(mw_ckpt_survey_dir(ck, &sv), MW_OK);
    assert_int_equal(sv.complete, 1);
    expect_contains(sv.debris, "checkpoint (index entry ../elsewhere/ckpt-1: outside the "
                               "directory)");
    expect_contains(sv.debris, "checkpoint (index entry sub/ckpt-8: outside");
    expect_contains(sv.debris, "checkpoint (index entry ..: outside");

    /* only the index's entries named outside: nothing to try */
    char *one = join(ck, "ckpt-1");
    assert_int_equal(unlink(one), 0);
    assert_int_equal(mw_ckpt_survey_dir(ck, &sv), MW_OK);
    assert_int_equal(sv.complete, 0);
    expect_err(mw_ckpt_load_latest(ck, &r, &used), MW_ECKPT, "no valid checkpoint in ", "ckpt-1");
    mw_err_clear();
    int num = 0;
    assert_int_equal(mw_ckpt_save(ck, &c, 5, &num), MW_OK);
    assert_int_equal(num, 2); /* 1 + the highest of the directory's own */
    free(one);
    free(ck);
    free(elsewhere);
    mw_ckpt_free(&c);
    mw_ckpt_free(&other);
    mw_ckpt_free(&r);
}

/* What a directory holds besides checkpoints: the leftovers of crashed saves are named, never
 * counted, and the temporary files among them can be removed. */
static void test_survey_and_temps(void **state)
{
    const char *dir = *state;
    mw_ckpt_survey sv;
    char *missing = join(dir, "missing");
    assert_int_equal(mw_ckpt_survey_dir(missing, &sv), MW_OK);
    assert_int_equal(sv.complete, 0);
    assert_string_equal(sv.debris, "");
    free(missing);
    assert_int_equal(mw_ckpt_survey_dir(dir, &sv), MW_OK);
    assert_string_equal(sv.debris, "");

    free(mw_test_write_file(dir, "ckpt-1.tmp-1", "partial", 7));
    assert_int_equal(mw_ckpt_survey_dir(dir, &sv), MW_OK);
    assert_int_equal(sv.complete, 0);
    assert_string_equal(sv.debris, "ckpt-1.tmp-1 (temporary file)");

    free(mw_test_write_file(dir, "ckpt-2", "", 0));
    free(mw_test_write_file(dir, "checkpoint.tmp-77", "x", 1));
    free(mw_test_write_file(dir, "notes.tmp-1", "mine", 4)); /* not a name mwtrain writes */
    free(mw_test_write_file(dir, "ckpt-1.tmp-x", "mine", 4));
    char *fifo = join(dir, "ckpt-3"), *sub = join(dir, "ckpt-4"),
         *tmpdir = join(dir, "ckpt-5.tmp-9");
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(mkdir(sub, 0755), 0);
    assert_int_equal(mkdir(tmpdir, 0755), 0);
    const char *idx = "model_checkpoint_path: \"ckpt-9\"\n"
                      "all_model_checkpoint_paths: \"ckpt-2\"\n";
    free(mw_test_write_file(dir, "checkpoint", idx, strlen(idx)));
    assert_int_equal(mw_ckpt_survey_dir(dir, &sv), MW_OK);
    assert_int_equal(sv.complete, 0);
    static const char *const parts[] = {
        "ckpt-1.tmp-1 (temporary file)", "checkpoint.tmp-77 (temporary file)",
        "ckpt-2 (an empty file)",        "ckpt-3 (a FIFO)",
        "ckpt-4 (a directory)",          "checkpoint (index entry ckpt-9: missing)"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (!strstr(sv.debris, parts[i]))
            fail_msg("survey: '%s' lacks '%s'", sv.debris, parts[i]);
    assert_null(strstr(sv.debris, "notes"));
    assert_null(strstr(sv.debris, "tmp-x"));
    assert_null(strstr(sv.debris, "ckpt-2 (index")); /* described once, as a file */

    /* only regular temporary files of mwtrain's own names go */
    char removed[128];
    assert_int_equal(mw_ckpt_remove_temps(dir, removed, sizeof removed), 2);
    assert_true(strstr(removed, "ckpt-1.tmp-1") && strstr(removed, "checkpoint.tmp-77"));
    assert_string_equal(listing(dir), "checkpoint ckpt-1.tmp-x ckpt-2 ckpt-3 ckpt-4 ckpt-5.tmp-9 "
                                      "notes.tmp-1");
    assert_int_equal(mw_ckpt_remove_temps(dir, removed, sizeof removed), 0);
    assert_string_equal(removed, "");

    /* a real checkpoint, or a link named like one, counts */
    mw_ckpt c;
    make_state(&c, 5, "sgd", 0, 16);
    char *six = join(dir, "ckpt-6");
    assert_int_equal(mw_ckpt_write(&c, six), MW_OK);
    assert_int_equal(mw_ckpt_survey_dir(dir, &sv), MW_OK);
    assert_int_equal(sv.complete, 1);
    char *seven = join(dir, "ckpt-7");
    assert_int_equal(symlink("ckpt-6", seven), 0);
    assert_int_equal(mw_ckpt_survey_dir(dir, &sv), MW_OK);
    assert_int_equal(sv.complete, 2);
    free(seven);
    free(six);
    free(fifo);
    free(sub);
    free(tmpdir);
    mw_ckpt_free(&c);
}

/* ---- packing ---- */

static void test_pack_unpack(void **state)
{
    (void)state;
    /* A model as finalize lays it out: views on 16-float boundaries, padding between and after
     * them (built by hand: only the layer table matters here). */
    mw_layer layers[3];
    memset(layers, 0, sizeof layers);
    layers[0].w_off = 0, layers[0].w_count = 27, layers[0].b_off = 32, layers[0].b_count = 3;
    layers[2].w_off = 48, layers[2].w_count = 50, layers[2].b_off = 112, layers[2].b_count = 5;
    mw_model m;
    memset(&m, 0, sizeof m);
    m.layers = layers;
    m.nlayers = 3;
    m.nparams = 27 + 3 + 50 + 5;
    int order[3];
    mw_model_weight_order(&m, order);
    m.worder = order;
    float arena[144], back[144], packed[85];
    for (int i = 0; i < 144; i++)
        arena[i] = (float)i;
    mw_ckpt_pack(&m, packed, arena);
    for (int i = 0; i < 27; i++)
        assert_true(packed[i] == (float)i);
    for (int i = 0; i < 3; i++)
        assert_true(packed[27 + i] == (float)(32 + i));
    for (int i = 0; i < 50; i++)
        assert_true(packed[30 + i] == (float)(48 + i));
    for (int i = 0; i < 5; i++)
        assert_true(packed[80 + i] == (float)(112 + i));
    memset(back, 0, sizeof back);
    mw_ckpt_unpack(&m, back, packed);
    for (int i = 0; i < 144; i++) {
        int real = i < 27 || (i >= 32 && i < 35) || (i >= 48 && i < 98) || (i >= 112 && i < 117);
        assert_true(back[i] == (real ? (float)i : 0.0f)); /* padding untouched */
    }
}

/* Weights and optimizer state that are not finite are refused with the section, the layer and
 * the variable (nothing in the format checks them: a NaN reached the kernels' exp and ended the
 * run as diverged); all finite passes (the control). */
static void test_check_finite(void **state)
{
    (void)state;
    mw_layer layers[2];
    memset(layers, 0, sizeof layers);
    layers[0].w_count = 6, layers[0].b_count = 2, layers[0].cls = "Dense";
    layers[1].w_count = 4, layers[1].s_count = 4, layers[1].cls = "BatchNormalization";
    snprintf(layers[0].name, sizeof layers[0].name, "dense");
    snprintf(layers[1].name, sizeof layers[1].name, "bn");
    mw_model m;
    memset(&m, 0, sizeof m);
    m.layers = layers, m.nlayers = 2, m.nparams = 16;
    int order[2];
    mw_model_weight_order(&m, order);
    m.worder = order;
    float p[16], s1[16];
    for (int i = 0; i < 16; i++)
        p[i] = s1[i] = 0.5f;
    mw_ckpt c;
    mw_ckpt_init(&c);
    c.params = p, c.nparams = 16;
    assert_int_equal(mw_ckpt_check_finite(&m, &c, "d/ckpt-3"), MW_OK);
    p[7] = NAN;
    expect_err(mw_ckpt_check_finite(&m, &c, "d/ckpt-3"), MW_ECKPT,
               "d/ckpt-3: section params: layer 'dense' (Dense) bias, value 1 of 2, is nan "
               "(expected finite weights)");
    mw_err_clear();
    p[7] = 0.5f, p[13] = INFINITY;
    expect_err(mw_ckpt_check_finite(&m, &c, "d/ckpt-3"), MW_ECKPT,
               "section params: layer 'bn' (BatchNormalization) moving statistics, value 1 of 4, "
               "is inf");
    mw_err_clear();
    p[13] = 0.5f, s1[0] = -NAN;
    c.slot1 = s1, c.nslots = 16;
    expect_err(mw_ckpt_check_finite(&m, &c, "d/ckpt-3"), MW_ECKPT,
               "section slot1: layer 'dense' (Dense) kernel, value 0 of 6, is ",
               "(expected finite optimizer state)");
    mw_err_clear();
}

/* A KerasHub block's parts pack in Keras' order of its weights (part_rank), not the model's:
 * layers 0 to 2 one block, layer 0's weights last (a post-norm encoder's final LayerNorm). */
static void test_pack_block_order(void **state)
{
    (void)state;
    mw_layer layers[4];
    memset(layers, 0, sizeof layers);
    layers[0].w_off = 0, layers[0].w_count = 4;
    layers[2].w_off = 16, layers[2].w_count = 3, layers[2].b_off = 32, layers[2].b_count = 2;
    layers[3].w_off = 48, layers[3].w_count = 1;
    for (int i = 0; i < 3; i++)
        layers[i].block = 1, layers[i].block_first = i == 0;
    layers[0].part_rank = 2, layers[2].part_rank = 1;
    mw_model m;
    memset(&m, 0, sizeof m);
    m.layers = layers;
    m.nlayers = 4;
    int order[4];
    mw_model_weight_order(&m, order);
    assert_int_equal(order[0], 1); /* rank 0: the part without weights */
    assert_int_equal(order[1], 2);
    assert_int_equal(order[2], 0);
    assert_int_equal(order[3], 3); /* the next layer after the whole block */
    m.worder = order;
    float arena[64], packed[10], back[64];
    for (int i = 0; i < 64; i++)
        arena[i] = (float)i;
    mw_ckpt_pack(&m, packed, arena);
    const float want[10] = {16, 17, 18, 32, 33, 0, 1, 2, 3, 48};
    for (int i = 0; i < 10; i++)
        assert_true(packed[i] == want[i]);
    memset(back, 0, sizeof back);
    mw_ckpt_unpack(&m, back, packed);
    for (int i = 0; i < 10; i++)
        assert_true(back[(int)want[i]] == want[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        mw_test_in_tmpdir(test_roundtrip),
        mw_test_in_tmpdir(test_loss_scale_section),
        cmocka_unit_test(test_crafted_valid),
        cmocka_unit_test(test_write_rejects_bad_state),
        mw_test_in_tmpdir(test_save_keep),
        mw_test_in_tmpdir(test_save_numbering),
        mw_test_in_tmpdir(test_load_empty_and_missing),
        mw_test_in_tmpdir(test_load_falls_back),
        mw_test_in_tmpdir(test_load_bad_index),
        mw_test_in_tmpdir(test_save_unwritable),
        cmocka_unit_test(test_bad_truncated),
        cmocka_unit_test(test_bad_flipped),
        cmocka_unit_test(test_bad_header),
        cmocka_unit_test(test_bad_sizes),
        cmocka_unit_test(test_bad_structure),
        cmocka_unit_test(test_bad_meta),
        mw_test_in_tmpdir(test_read_errors),
        mw_test_in_tmpdir(test_read_header_first),
        mw_test_in_tmpdir(test_read_special),
        mw_test_in_tmpdir(test_index_outside),
        mw_test_in_tmpdir(test_survey_and_temps),
        cmocka_unit_test(test_pack_unpack),
        cmocka_unit_test(test_check_finite),
        cmocka_unit_test(test_pack_block_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
