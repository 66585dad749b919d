/* Tests for worker/checkpoint.c, the file format: bitwise round trips, one test per kind of
 * bad file with its message checked, the header-first read, packing and the finite-values
 * check. Bad files are built by an independent encoder of docs/checkpoint.md (craft() below),
 * so the tests also check the document. The directory's tests are test_checkpoint_dir.c. */
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
#include "tests/ckpt_util.h"
#include "tests/util.h"
#include "worker/checkpoint.h"
#include "worker/checkpoint_pack.h"
#include "worker/model/model.h"

/* ---- an independent encoder of docs/checkpoint.md, for crafting bad files ---- */

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
    mw_test_ckpt_le64(m + 16, t->nparams);
    mw_test_ckpt_le64(m + 24, t->nslots);
    mw_test_ckpt_le32(m + 32, t->arrays);
    mw_test_ckpt_le64(m + 40, (uint64_t)t->opt_step);
    mw_test_ckpt_le64(m + 48, (uint64_t)t->epoch);
    mw_test_ckpt_le64(m + 56, (uint64_t)t->step_in_epoch);
    mw_test_ckpt_le64(m + 64, (uint64_t)t->global_step);
    mw_test_ckpt_le64(m + 72, t->seed);
    mw_test_ckpt_le64(m + 80, (uint64_t)t->global_batch);
    uint64_t lr;
    memcpy(&lr, &t->lr, 8);
    mw_test_ckpt_le64(m + 88, lr);
    mw_test_ckpt_le64(m + 96, t->model_nbytes);
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
    mw_test_ckpt_le32(buf + 8, version);
    mw_test_ckpt_le32(buf + 12, count < 0 ? (uint32_t)n : (uint32_t)count);
    size_t off = 16;
    for (int i = 0; i < n; i++) {
        uint8_t *h = buf + off;
        memset(h, 0, 8);
        memcpy(h, s[i].tag, strlen(s[i].tag));
        uLongf comp = (uLongf)(cap - off - 28);
        static const uint8_t z = 0;
        assert_int_equal(compress2(h + 28, &comp, s[i].raw ? s[i].raw : &z, s[i].nbytes, 6), Z_OK);
        mw_test_ckpt_le64(h + 8, s[i].comp_decl >= 0 ? (uint64_t)s[i].comp_decl : comp);
        mw_test_ckpt_le64(h + 16, s[i].raw_decl >= 0 ? (uint64_t)s[i].raw_decl : s[i].nbytes);
        uint32_t crc = (uint32_t)crc32(0L, s[i].raw ? s[i].raw : &z, (uInt)s[i].nbytes);
        mw_test_ckpt_le32(h + 24, s[i].bad_crc ? crc ^ 1u : crc);
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
    mw_test_ckpt_make_state(&a, nparams, opt, arrays, 7 + nparams);
    if (empty_model) {
        free(a.model_json);
        a.model_json = NULL;
    }
    char *path = mw_test_ckpt_join(dir, "one.ckpt");
    assert_int_equal(mw_ckpt_write(&a, path), MW_OK);
    mw_ckpt_init(&b);
    assert_int_equal(mw_ckpt_read(&b, path), MW_OK);
    mw_test_ckpt_assert_same(&a, &b);

    /* serialize gives the file's bytes, and reading them from memory gives the same state */
    void *data;
    size_t n, fn;
    assert_int_equal(mw_ckpt_serialize(&a, &data, &n), MW_OK);
    void *file = mw_test_ckpt_read_all(path, &fn);
    assert_int_equal(n, fn);
    assert_memory_equal(data, file, n);
    mw_ckpt c;
    mw_ckpt_init(&c);
    assert_int_equal(mw_ckpt_read_buffer(&c, data, n, "memory"), MW_OK);
    mw_test_ckpt_assert_same(&a, &c);
    /* reading into a filled struct replaces its contents (no leak under ASan) */
    assert_int_equal(mw_ckpt_read_buffer(&c, data, n, "memory"), MW_OK);
    mw_test_ckpt_assert_same(&a, &c);
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
    assert_string_equal(mw_test_ckpt_listing(dir), "one.ckpt"); /* no temporary files left */
}

/* mixed_float16's loss-scale section: kept through a file at the ends of its ranges, refused
 * when the scale is not a power of 2 a run can hold (2^-24 to 2^127: 5e-324 made 1/S infinite)
 * or its count is outside 0 .. 10^9 - 1 (INT64_MAX overflowed the count's increment), writing
 * and reading alike, and of its fixed size. */
static void test_loss_scale_section(void **state)
{
    const char *dir = *state;
    mw_ckpt a, b;
    mw_test_ckpt_make_state(&a, 40, "adam", 2, 3);
    a.has_loss_scale = 1, a.loss_scale = 0x1p-3, a.loss_scale_steps = 1999;
    char *path = mw_test_ckpt_join(dir, "ls.ckpt");
    assert_int_equal(mw_ckpt_write(&a, path), MW_OK);
    mw_ckpt_init(&b);
    assert_int_equal(mw_ckpt_read(&b, path), MW_OK);
    mw_test_ckpt_assert_same(&a, &b);
    const double ends[][2] = {{0x1p-24, 999999999}, {0x1p127, 0}};
    for (int i = 0; i < 2; i++) {
        a.loss_scale = ends[i][0], a.loss_scale_steps = (long)ends[i][1];
        assert_int_equal(mw_ckpt_write(&a, path), MW_OK);
        assert_int_equal(mw_ckpt_read(&b, path), MW_OK);
        mw_test_ckpt_assert_same(&a, &b);
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
    mw_test_ckpt_make_state(&c, 4, "adam", 1, 1); /* adam needs m and v */
    void *data;
    size_t n;
    expect_err(mw_ckpt_serialize(&c, &data, &n), MW_EINVAL, "optimizer adam with 1 slot(s)");
    mw_err_clear();
    snprintf(c.optimizer, sizeof c.optimizer, "lamb");
    expect_err(mw_ckpt_serialize(&c, &data, &n), MW_EINVAL, "unknown optimizer 'lamb'");
    mw_err_clear();
    mw_ckpt_free(&c);
    mw_test_ckpt_make_state(&c, 4, "rmsprop", 3, 1);
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
    mw_test_ckpt_make_state(&c, 10, "adam", 2, 11);
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
                mw_test_ckpt_assert_same(&orig, &c);
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
    char *p = mw_test_ckpt_join(dir, "absent");
    assert_int_equal(mw_ckpt_read(&c, p), MW_EIO);
    char want[600];
    snprintf(want, sizeof want, "%s: cannot open (No such file or directory)", p);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    free(p);
    expect_err(mw_ckpt_read(&c, dir), MW_EIO, "is a directory (expected a checkpoint file)");
    mw_err_clear();
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
    layers[1].w_count = 4, layers[1].stats_count = 4, layers[1].cls = "BatchNormalization";
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
        mw_test_in_tmpdir(test_roundtrip),    mw_test_in_tmpdir(test_loss_scale_section),
        cmocka_unit_test(test_crafted_valid), cmocka_unit_test(test_write_rejects_bad_state),
        cmocka_unit_test(test_bad_truncated), cmocka_unit_test(test_bad_flipped),
        cmocka_unit_test(test_bad_header),    cmocka_unit_test(test_bad_sizes),
        cmocka_unit_test(test_bad_structure), cmocka_unit_test(test_bad_meta),
        mw_test_in_tmpdir(test_read_errors),  cmocka_unit_test(test_pack_unpack),
        cmocka_unit_test(test_check_finite),  cmocka_unit_test(test_pack_block_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
