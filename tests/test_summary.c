/* worker/summary and common/crc32c: CRC-32C vectors, then the event file read
 * back by an independent TFRecord + protobuf reader written here (its own
 * bitwise CRC, a generic wire-type decoder), metrics.csv content (never written through a
 * symbolic link or into a FIFO), and the error messages for bad directories and bad rows. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "tests/util.h"
#include "worker/summary.h"

/* ---- the independent reader ---- */

/* CRC-32C bit by bit, straight from the definition. */
static uint32_t crc_bitwise(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    }
    return ~c;
}

static uint32_t masked(const uint8_t *p, size_t n)
{
    uint32_t c = crc_bitwise(p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static uint64_t le(const uint8_t *p, int nbytes)
{
    uint64_t v = 0;
    for (int i = nbytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

typedef struct {
    const uint8_t *data;
    size_t nbytes;
} record;

/* Split a TFRecord stream; returns the record count, or -1 with why set. */
static int read_records(const uint8_t *p, size_t n, record *out, int max, const char **why)
{
    int count = 0;
    size_t pos = 0;
    while (pos < n) {
        if (n - pos < 12)
            return *why = "truncated header", -1;
        uint64_t len = le(p + pos, 8);
        if ((uint32_t)le(p + pos + 8, 4) != masked(p + pos, 8))
            return *why = "length crc mismatch", -1;
        if (len > n - pos - 12 || n - pos - 12 - len < 4)
            return *why = "truncated data", -1;
        const uint8_t *d = p + pos + 12;
        if ((uint32_t)le(d + len, 4) != masked(d, len))
            return *why = "data crc mismatch", -1;
        if (count == max)
            return *why = "too many records", -1;
        out[count].data = d, out[count].nbytes = len;
        count++;
        pos += 12 + len + 4;
    }
    return count;
}

typedef struct {
    int number, wire;
    uint64_t v;       /* varint, fixed64, fixed32 */
    const uint8_t *p; /* length-delimited bytes */
    size_t len;
} pb_field;

static int get_varint(const uint8_t *p, size_t n, size_t *pos, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*pos >= n)
            return -1;
        uint8_t b = p[(*pos)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 0;
    }
    return -1;
}

/* Decode every field of one message by wire type; -1 when malformed. */
static int pb_decode(const uint8_t *p, size_t n, pb_field *f, int max)
{
    size_t pos = 0;
    int count = 0;
    while (pos < n) {
        uint64_t key;
        if (count == max || get_varint(p, n, &pos, &key) != 0)
            return -1;
        pb_field *x = &f[count++];
        memset(x, 0, sizeof *x);
        x->number = (int)(key >> 3), x->wire = (int)(key & 7);
        switch (x->wire) {
        case 0:
            if (get_varint(p, n, &pos, &x->v) != 0)
                return -1;
            break;
        case 1:
        case 5: {
            int w = x->wire == 1 ? 8 : 4;
            if (n - pos < (size_t)w)
                return -1;
            x->v = le(p + pos, w);
            pos += w;
            break;
        }
        case 2:
            if (get_varint(p, n, &pos, &x->v) != 0 || x->v > n - pos)
                return -1;
            x->p = p + pos, x->len = x->v;
            pos += x->len;
            break;
        default:
            return -1;
        }
    }
    return count;
}

/* The one field with this number, checked to have this wire type. */
static const pb_field *field(const pb_field *f, int n, int number, int wire)
{
    const pb_field *hit = NULL;
    for (int i = 0; i < n; i++)
        if (f[i].number == number) {
            assert_null(hit); /* each appears once */
            assert_int_equal(f[i].wire, wire);
            hit = &f[i];
        }
    return hit;
}

static double as_double(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static float as_float(uint64_t bits)
{
    uint32_t b = (uint32_t)bits;
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    uint8_t *p = malloc((size_t)len + 1);
    assert_int_equal(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    p[len] = 0;
    *n = (size_t)len;
    return p;
}

static double now_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- CRC-32C ---- */

static void crc_vectors(void **state)
{
    (void)state;
    uint8_t zeros[32] = {0}, ones[32];
    memset(ones, 0xff, sizeof ones);
    assert_int_equal(mw_crc32c(0, "123456789", 9), 0xe3069283u);
    assert_int_equal(mw_crc32c(0, zeros, 32), 0x8a9136aau);
    assert_int_equal(mw_crc32c(0, ones, 32), 0x62a8ab43u);
    assert_int_equal(mw_crc32c(0, "", 0), 0);
    assert_int_equal(mw_crc32c(0x1234u, NULL, 0), 0x1234u);
    assert_int_equal(mw_crc32c_mask(0), 0xa282ead8u);
    assert_int_equal(mw_crc32c_mask(0x12345678u),
                     ((0x12345678u >> 15) | (0x12345678u << 17)) + 0xa282ead8u);
}

static void crc_chained_and_bitwise(void **state)
{
    (void)state;
    uint8_t buf[1000];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 131 + 7);
    for (size_t n = 0; n <= sizeof buf; n += 37) {
        uint32_t whole = mw_crc32c(0, buf, n);
        assert_int_equal(whole, crc_bitwise(buf, n));
        for (size_t cut = 0; cut <= n; cut += 13)
            assert_int_equal(mw_crc32c(mw_crc32c(0, buf, cut), buf + cut, n - cut), whole);
    }
}

/* ---- event file ---- */

typedef struct {
    const char *tag;
    long step;
    double value;
} scalar;

/* Tags the trainer writes, a long tag (2-byte length varint), a step beyond
 * 32 bits and a negative one, values that are not exact floats. */
static char long_tag[200];
static const scalar scalars[] = {
    {"train/loss", 0, 2.302585},
    {"train/accuracy", 0, 0.1},
    {"test/loss", 1, 0.55},
    {"test/accuracy", 1, 0.8125},
    {"images_per_sec", 938, 12345.678},
    {"learning_rate", 938, 1e-3},
    {long_tag, 5000000000L, -7.25},
    {"train/loss", -1, 0.0},
};
enum { NSCALARS = sizeof scalars / sizeof scalars[0] };

/* Write the scalars to a fresh dir; returns the malloc'ed event file path. */
static char *write_events(const char *dir, double *t0, double *t1)
{
    memset(long_tag, 'x', sizeof long_tag - 1);
    memcpy(long_tag, "long/", 5);
    mw_summary s;
    *t0 = now_real();
    assert_int_equal(mw_summary_open(&s, dir, 0), MW_OK);
    for (int i = 0; i < NSCALARS; i++)
        assert_int_equal(mw_summary_scalar(&s, scalars[i].tag, scalars[i].step, scalars[i].value),
                         MW_OK);
    assert_int_equal(mw_summary_flush(&s), MW_OK);
    char *path = strdup(s.events_path);
    mw_summary_close(&s);
    *t1 = now_real();
    assert_null(s.events);
    return path;
}

static void events_decode(void **state)
{
    const char *dir = *state;
    double t0, t1;
    char *path = write_events(dir, &t0, &t1);

    /* name: <dir>/events.out.tfevents.<seconds>.<hostname> */
    char prefix[600];
    snprintf(prefix, sizeof prefix, "%s/events.out.tfevents.", dir);
    assert_memory_equal(path, prefix, strlen(prefix));
    char *end;
    long secs = strtol(path + strlen(prefix), &end, 10);
    assert_true(secs >= (long)t0 && secs <= (long)t1);
    assert_int_equal(*end, '.');
    assert_true(strlen(end + 1) > 0);

    size_t n;
    uint8_t *bytes = slurp(path, &n);
    record rec[16];
    const char *why = "";
    int nrec = read_records(bytes, n, rec, 16, &why);
    if (nrec < 0)
        fail_msg("%s: %s", path, why);
    assert_int_equal(nrec, 1 + NSCALARS);

    pb_field f[8];
    int nf = pb_decode(rec[0].data, rec[0].nbytes, f, 8);
    assert_int_equal(nf, 2);
    double wt = as_double(field(f, nf, 1, 1)->v);
    assert_true(wt >= t0 - 1e-3 && wt <= t1 + 1e-3);
    const pb_field *ver = field(f, nf, 3, 2);
    assert_non_null(ver);
    assert_int_equal(ver->len, 13);
    assert_memory_equal(ver->p, "brain.Event:2", 13);

    for (int i = 0; i < NSCALARS; i++) {
        nf = pb_decode(rec[1 + i].data, rec[1 + i].nbytes, f, 8);
        assert_int_equal(nf, scalars[i].step == 0 ? 2 : 3); /* proto3: step 0 is left out */
        wt = as_double(field(f, nf, 1, 1)->v);
        assert_true(wt >= t0 - 1e-3 && wt <= t1 + 1e-3);
        const pb_field *step = field(f, nf, 2, 0);
        assert_int_equal(step ? (int64_t)step->v : 0, (int64_t)scalars[i].step);
        const pb_field *sum = field(f, nf, 5, 2);
        assert_non_null(sum);
        pb_field sf[4], vf[4];
        int nsf = pb_decode(sum->p, sum->len, sf, 4);
        assert_int_equal(nsf, 1);
        const pb_field *val = field(sf, nsf, 1, 2);
        int nvf = pb_decode(val->p, val->len, vf, 4);
        assert_int_equal(nvf, 2);
        const pb_field *tag = field(vf, nvf, 1, 2);
        assert_int_equal(tag->len, strlen(scalars[i].tag));
        assert_memory_equal(tag->p, scalars[i].tag, tag->len);
        float got = as_float(field(vf, nvf, 2, 5)->v);
        assert_true(got == (float)scalars[i].value);
    }
    free(bytes);
    free(path);
}

/* The reader's checks fire: one changed byte in a length or in data. */
static void events_corruption_detected(void **state)
{
    const char *dir = *state;
    double t0, t1;
    char *path = write_events(dir, &t0, &t1);
    size_t n;
    uint8_t *bytes = slurp(path, &n);
    record rec[16];
    const char *why = "";
    assert_int_equal(read_records(bytes, n, rec, 16, &why), 1 + NSCALARS);

    size_t second = 12 + rec[0].nbytes + 4; /* start of record 1 */
    bytes[second + 20] ^= 0x01;             /* inside its data */
    assert_int_equal(read_records(bytes, n, rec, 16, &why), -1);
    assert_string_equal(why, "data crc mismatch");
    bytes[second + 20] ^= 0x01;
    bytes[second + 1] ^= 0x40; /* its length */
    assert_int_equal(read_records(bytes, n, rec, 16, &why), -1);
    assert_string_equal(why, "length crc mismatch");
    bytes[second + 1] ^= 0x40;
    assert_int_equal(read_records(bytes, n - 1, rec, 16, &why), -1);
    assert_string_equal(why, "truncated data");
    free(bytes);
    free(path);
}

/* A second writer in the same second gets its own file; the first one stays. */
static void events_two_writers(void **state)
{
    const char *dir = *state;
    mw_summary a, b;
    assert_int_equal(mw_summary_open(&a, dir, 0), MW_OK);
    assert_int_equal(mw_summary_open(&b, dir, 1), MW_OK);
    assert_string_not_equal(a.events_path, b.events_path);
    assert_int_equal(mw_summary_scalar(&a, "a", 1, 1.0), MW_OK);
    assert_int_equal(mw_summary_scalar(&b, "b", 1, 2.0), MW_OK);
    mw_summary_close(&a);
    mw_summary_close(&b);
    mw_summary_close(&b); /* safe twice */
}

/* ---- metrics.csv ---- */

static char *read_text(const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t n;
    return (char *)slurp(path, &n);
}

static void csv_rows(void **state)
{
    const char *d = *state;
    char dir[600];
    snprintf(dir, sizeof dir, "%s/nested/logs", d); /* parents are created */
    const char *names[] = {"train/loss", "train/accuracy", "test/loss", "test/accuracy"};
    const double r0[] = {0.5, 0.8125, 0.4, 0.875}, r1[] = {0.25, 0.9, 1e-7, 1.0};
    mw_summary s;
    assert_int_equal(mw_summary_open(&s, dir, 0), MW_OK);
    assert_int_equal(mw_summary_row(&s, 938, 0, names, r0, 4), MW_OK);
    assert_int_equal(mw_summary_row(&s, 1876, 1, names, r1, 4), MW_OK);
    mw_summary_close(&s);
    char *text = read_text(dir, "metrics.csv");
    assert_string_equal(text, "step,epoch,train/loss,train/accuracy,test/loss,test/accuracy\n"
                              "938,0,0.5,0.8125,0.4,0.875\n"
                              "1876,1,0.25,0.9,1e-07,1\n");
    free(text);

    /* resume: append keeps the rows and writes no second header */
    assert_int_equal(mw_summary_open(&s, dir, 1), MW_OK);
    assert_int_equal(mw_summary_row(&s, 2814, 2, names, r0, 4), MW_OK);
    mw_summary_close(&s);
    text = read_text(dir, "metrics.csv");
    assert_string_equal(text, "step,epoch,train/loss,train/accuracy,test/loss,test/accuracy\n"
                              "938,0,0.5,0.8125,0.4,0.875\n"
                              "1876,1,0.25,0.9,1e-07,1\n"
                              "2814,2,0.5,0.8125,0.4,0.875\n");
    free(text);

    /* a fresh run truncates */
    assert_int_equal(mw_summary_open(&s, dir, 0), MW_OK);
    assert_int_equal(mw_summary_row(&s, 1, 0, names, r1, 1), MW_OK);
    mw_summary_close(&s);
    text = read_text(dir, "metrics.csv");
    assert_string_equal(text, "step,epoch,train/loss\n1,0,0.25\n");
    free(text);
}

static void csv_append_after_partial_row(void **state)
{
    const char *dir = *state;
    const char *old = "step,epoch,x\n1,0,0.5\n2,0,0."; /* killed while writing row 2 */
    free(mw_test_write_file(dir, "metrics.csv", old, strlen(old)));
    const char *names[] = {"x"};
    const double v[] = {3.0};
    mw_summary s;
    assert_int_equal(mw_summary_open(&s, dir, 1), MW_OK);
    assert_int_equal(mw_summary_row(&s, 2, 0, names, v, 1), MW_OK);
    mw_summary_close(&s);
    char *text = read_text(dir, "metrics.csv");
    assert_string_equal(text, "step,epoch,x\n1,0,0.5\n2,0,0.\n2,0,3\n");
    free(text);

    /* killed while writing the header: the file starts again */
    free(mw_test_write_file(dir, "metrics.csv", "step,ep", 7));
    assert_int_equal(mw_summary_open(&s, dir, 1), MW_OK);
    assert_int_equal(mw_summary_row(&s, 5, 1, names, v, 1), MW_OK);
    mw_summary_close(&s);
    text = read_text(dir, "metrics.csv");
    assert_string_equal(text, "step,epoch,x\n5,1,3\n");
    free(text);

    /* an existing header with other columns */
    const char *other[] = {"y"};
    assert_int_equal(mw_summary_open(&s, dir, 1), MW_OK);
    mw_err_clear();
    assert_int_equal(mw_summary_row(&s, 6, 1, other, v, 1), MW_EINVAL);
    char want[1200];
    snprintf(want, sizeof want,
             "summary file %s/metrics.csv: columns 'step,epoch,y' differ from its header "
             "'step,epoch,x'",
             dir);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    mw_summary_close(&s);
}

/* metrics.csv is never written through a symbolic link (its target, anywhere, would be
 * overwritten), as the event file, the lock and the checkpoints are not; a FIFO there is
 * refused without blocking. The link's target is untouched: the same bytes, never opened. */
static void csv_never_through_links(void **state)
{
    const char *dir = *state;
    char outside[600], logs[600], link[700], fifo_dir[600], fifo[700], want[2000];
    snprintf(outside, sizeof outside, "%s/outside.txt", dir);
    free(mw_test_write_file(dir, "outside.txt", "keep me\n", 8));
    snprintf(logs, sizeof logs, "%s/logs", dir);
    snprintf(link, sizeof link, "%s/metrics.csv", logs);
    assert_int_equal(mkdir(logs, 0777), 0);
    assert_int_equal(symlink(outside, link), 0);
    mw_summary s;
    for (int append = 0; append < 2; append++) {
        const int w = mw_test_watch(outside);
        mw_err_clear();
        assert_int_equal(mw_summary_open(&s, logs, append), MW_EIO);
        snprintf(want, sizeof want,
                 "summary file %s: is a symbolic link; expected a regular file (summaries are "
                 "never written through links)",
                 link);
        assert_string_equal(mw_err_msg(), want);
        assert_false(mw_test_watch_events(w) & (IN_OPEN | IN_MODIFY | IN_ATTRIB));
        char *text = read_text(dir, "outside.txt");
        assert_string_equal(text, "keep me\n");
        free(text);
        struct stat st;
        assert_int_equal(lstat(link, &st), 0);
        assert_true(S_ISLNK(st.st_mode));
    }
    snprintf(fifo_dir, sizeof fifo_dir, "%s/fifo", dir);
    snprintf(fifo, sizeof fifo, "%s/metrics.csv", fifo_dir);
    assert_int_equal(mkdir(fifo_dir, 0777), 0);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    mw_err_clear();
    assert_int_equal(mw_summary_open(&s, fifo_dir, 0), MW_EIO);
    snprintf(want, sizeof want, "summary file %s: is a FIFO; expected a regular file", fifo);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
}

/* ---- errors ---- */

static void error_messages(void **state)
{
    const char *d = *state;
    char dir[512], blocker[600], want[2000];
    snprintf(dir, sizeof dir, "%s", d);
    free(mw_test_write_file(dir, "blocker", "x", 1));
    snprintf(blocker, sizeof blocker, "%s/blocker", dir);
    mw_summary s;

    /* a component of the path is a file */
    char sub[800];
    snprintf(sub, sizeof sub, "%s/sub/logs", blocker);
    mw_err_clear();
    assert_int_equal(mw_summary_open(&s, sub, 0), MW_EIO);
    snprintf(want, sizeof want, "summary dir %s: cannot create %s/sub: %s", sub, blocker,
             strerror(ENOTDIR));
    assert_string_equal(mw_err_msg(), want);
    assert_null(s.events);
    assert_null(s.events_path);

    /* the directory itself is a file */
    mw_err_clear();
    assert_int_equal(mw_summary_open(&s, blocker, 0), MW_EIO);
    snprintf(want, sizeof want, "summary dir %s: %s", blocker, strerror(ENOTDIR));
    assert_string_equal(mw_err_msg(), want);

    /* metrics.csv cannot be opened (it is a directory) */
    char csvdir[600];
    snprintf(csvdir, sizeof csvdir, "%s/csv", dir);
    snprintf(sub, sizeof sub, "%s/metrics.csv", csvdir);
    assert_int_equal(mkdir(csvdir, 0777), 0);
    assert_int_equal(mkdir(sub, 0777), 0);
    mw_err_clear();
    assert_int_equal(mw_summary_open(&s, csvdir, 0), MW_EIO);
    snprintf(want, sizeof want, "summary file %s: cannot open: %s", sub, strerror(EISDIR));
    assert_string_equal(mw_err_msg(), want);
    assert_null(s.events);

    mw_err_clear();
    assert_int_equal(mw_summary_open(&s, "", 0), MW_EINVAL);
    assert_string_equal(mw_err_msg(), "summary dir: empty path");

    /* bad rows and tags */
    assert_int_equal(mw_summary_open(&s, dir, 0), MW_OK);
    const char *names[] = {"loss", "acc"}, *bad[] = {"a,b"}, *other[] = {"acc", "loss"};
    const double v[] = {1.0, 2.0};
    mw_err_clear();
    assert_int_equal(mw_summary_row(&s, 1, 0, bad, v, 1), MW_EINVAL);
    snprintf(want, sizeof want,
             "summary file %s/metrics.csv: column name 'a,b' is empty or holds a comma, quote or "
             "line break",
             dir);
    assert_string_equal(mw_err_msg(), want);
    assert_int_equal(mw_summary_row(&s, 1, 0, names, v, 2), MW_OK);
    mw_err_clear();
    assert_int_equal(mw_summary_row(&s, 2, 0, other, v, 2), MW_EINVAL);
    snprintf(want, sizeof want,
             "summary file %s/metrics.csv: columns 'step,epoch,acc,loss' differ from its header "
             "'step,epoch,loss,acc'",
             dir);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    assert_int_equal(mw_summary_scalar(&s, "", 1, 1.0), MW_EINVAL);
    snprintf(want, sizeof want, "summary file %s: empty tag", s.events_path);
    assert_string_equal(mw_err_msg(), want);
    mw_summary_close(&s);

    mw_err_clear();
    assert_int_equal(mw_summary_scalar(&s, "train/loss", 1, 1.0), MW_EINTERNAL);
    assert_string_equal(mw_err_msg(), "summary: scalar 'train/loss' written to a closed writer");
    mw_err_clear();
    assert_int_equal(mw_summary_row(&s, 1, 0, names, v, 2), MW_EINTERNAL);
    assert_string_equal(mw_err_msg(), "summary: CSV row written to a closed writer");
    mw_err_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crc_vectors),
        cmocka_unit_test(crc_chained_and_bitwise),
        mw_test_in_tmpdir(events_decode),
        mw_test_in_tmpdir(events_corruption_detected),
        mw_test_in_tmpdir(events_two_writers),
        mw_test_in_tmpdir(csv_rows),
        mw_test_in_tmpdir(csv_append_after_partial_row),
        mw_test_in_tmpdir(csv_never_through_links),
        mw_test_in_tmpdir(error_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
