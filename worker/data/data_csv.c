/* The CSV reader (worker/data/data_formats.h): tabular data, a directory with train.csv and
 * test.csv. Each line is one example: its integer label, then its features, separated by
 * commas (the layout of pandas' DataFrame.to_csv(index=False) with the label column first,
 * or numpy.savetxt(delimiter=",")). A first line that is not all numbers is a header and is
 * skipped; empty lines are skipped; CRLF line ends are accepted. Features are float32 (each a
 * finite number), the set's shape (1, 1, features): a Keras model reads it as Input((F,)).
 * Every error names the file, the line and the field. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "common/log.h"
#include "common/sysmem.h"
#include "worker/data/data.h"
#include "worker/data/data_formats.h"

#define CSV_LINE_MAX (1 << 20) /* longest line: 4097 fields of 256 bytes */

/* One parsed line's fields into v (at most cap); the count, or -1 when field k is not a
 * number (*bad = k, *end its text's end). */
static int parse_line(const char *s, const char *eol, double *v, int cap, int *bad,
                      const char **bad_at)
{
    int n = 0;
    for (;;) {
        char *end;
        errno = 0;
        const double x = strtod(s, &end);
        const char *t = end;
        while (t < eol && (*t == ' ' || *t == '\t'))
            t++;
        if (end == s || (t < eol && *t != ',') || n >= cap || errno == ERANGE) {
            *bad = n, *bad_at = s;
            return -1;
        }
        v[n++] = x;
        if (t >= eol)
            return n;
        s = t + 1;
    }
}

/* The field at s, up to its comma or the line's end, quoted for a message. */
static const char *field_text(char *buf, size_t cap, const char *s, const char *eol)
{
    size_t k = 0;
    while (s + k < eol && s[k] != ',' && k < 40)
        k++;
    snprintf(buf, cap, "'%.*s'%s", (int)k, s, s + k < eol && s[k] != ',' ? "..." : "");
    return buf;
}

static int blank(const char *s, const char *eol)
{
    while (s < eol && (*s == ' ' || *s == '\t'))
        s++;
    return s == eol;
}

/* One line's text [s, eol) (NUL at eol: no field reads into the next line), its number. */
typedef mw_status (*csv_line_fn)(void *ctx, int line, const char *s, const char *eol);

/* Each line of path in turn, through a buffer of CSV_LINE_MAX bytes: a file of any size is
 * read in bounded memory. A line's '\n' (and a '\r' before it) is not part of it. */
static mw_status each_line(const char *path, csv_line_fn fn, void *ctx)
{
    FILE *f = NULL;
    size_t nbytes = 0, have = 0;
    MW_TRY(mw_fs_fopen_input(path, "a CSV file", &f, &nbytes));
    char *buf = malloc(CSV_LINE_MAX + 1);
    mw_status rc = buf ? MW_OK : mw_err(MW_ENOMEM, "data %s: out of memory", path);
    int line = 0, eof = 0;
    while (rc == MW_OK && !(eof && have == 0)) {
        const size_t got = eof ? 0 : fread(buf + have, 1, CSV_LINE_MAX - have, f);
        if (got == 0 && ferror(f))
            rc = mw_err(MW_EIO, "data %s: read error: %s", path, strerror(errno));
        eof = eof || got == 0;
        have += got;
        buf[have] = '\0';
        char *s = buf, *end = buf + have, *nl;
        while (rc == MW_OK && s < end && ((nl = memchr(s, '\n', (size_t)(end - s))) || eof)) {
            char *eol = nl ? nl : end;
            const char *next = nl ? nl + 1 : end;
            eol -= eol > s && eol[-1] == '\r';
            *eol = '\0';
            rc = fn(ctx, ++line, s, eol);
            s = (char *)next;
        }
        if (rc == MW_OK && s == buf && have == CSV_LINE_MAX)
            rc = mw_err(MW_EDATA,
                        "data %s: line %d: longer than %d bytes; expected a label and "
                        "at most %u features",
                        path, line + 1, CSV_LINE_MAX, MW_DATA_MAX_CHANNELS);
        have = (size_t)(end - s);
        memmove(buf, s, have);
    }
    free(buf);
    fclose(f);
    return rc;
}

/* What the first pass learns: the examples and fields (a header skipped). */
typedef struct {
    const char *path;
    double *v; /* MW_DATA_MAX_CHANNELS + 1 values */
    int header, fields;
    uint32_t rows;
    mw_dataset *d; /* the second pass: the set to fill, its labels' bound, the largest */
    int limit, classes, *top;
} csv_scan;

/* A line's fields into c->v: their count, or the line's error. */
static mw_status parse_fields(const csv_scan *c, int line, const char *s, const char *eol, int *n)
{
    const int cap = (int)MW_DATA_MAX_CHANNELS + 1;
    int bad;
    const char *at;
    char buf[64];
    *n = parse_line(s, eol, c->v, cap, &bad, &at);
    if (*n < 0 && bad >= cap)
        return mw_err(MW_EDATA,
                      "data %s: line %d: more than %d fields; expected a label and at most %u "
                      "features",
                      c->path, line, cap, MW_DATA_MAX_CHANNELS);
    if (*n < 0)
        return mw_err(MW_EDATA, "data %s: line %d: field %d: found %s; expected a number", c->path,
                      line, bad + 1, field_text(buf, sizeof buf, at, eol));
    if (c->fields && *n != c->fields)
        return mw_err(MW_EDATA,
                      "data %s: line %d: %d fields, but the first example has %d; expected a "
                      "label and the same features on every line",
                      c->path, line, *n, c->fields);
    if (*n < 2)
        return mw_err(MW_EDATA,
                      "data %s: line %d: 1 field; expected a label and at least one feature",
                      c->path, line);
    return MW_OK;
}

/* The first pass: a header (a first line that is not all numbers), the first example's
 * fields, and the examples counted (every other non-blank line; the second pass checks
 * them). */
static mw_status count_line(void *ctx, int line, const char *s, const char *eol)
{
    csv_scan *c = ctx;
    if (blank(s, eol))
        return MW_OK;
    if (c->rows == 0) {
        int n, bad;
        const char *at;
        if (line == 1 && parse_line(s, eol, c->v, (int)MW_DATA_MAX_CHANNELS + 1, &bad, &at) < 0) {
            c->header = 1;
            return MW_OK;
        }
        MW_TRY(parse_fields(c, line, s, eol, &n));
        c->fields = n;
    }
    if (c->rows == UINT32_MAX)
        return mw_err(MW_EDATA, "data %s: more than %u examples", c->path, UINT32_MAX);
    c->rows++;
    return MW_OK;
}

/* The second pass: each example parsed, checked and stored. */
static mw_status fill_line(void *ctx, int line, const char *s, const char *eol)
{
    csv_scan *c = ctx;
    mw_dataset *d = c->d;
    if (blank(s, eol) || (line == 1 && c->header))
        return MW_OK;
    int n;
    MW_TRY(parse_fields(c, line, s, eol, &n));
    if (c->rows == d->count)
        return mw_err(MW_EDATA, "data %s: line %d: the file grew while it was read", c->path, line);
    const double *v = c->v;
    if (!(v[0] >= 0 && v[0] < c->limit && v[0] == floor(v[0])))
        return mw_err(MW_EDATA, "data %s: line %d: label %g; expected an integer from 0 to %d%s",
                      c->path, line, v[0], c->limit - 1, c->classes > 0 ? " (--classes)" : "");
    float *x = (float *)d->images + (size_t)c->rows * (size_t)(n - 1);
    for (int f = 1; f < n; f++) {
        x[f - 1] = (float)v[f];
        if (!isfinite(x[f - 1]))
            return mw_err(MW_EDATA,
                          "data %s: line %d: field %d: %g is not a finite float32; expected "
                          "finite features",
                          c->path, line, f + 1, v[f]);
    }
    d->labels[c->rows] = (int32_t)v[0];
    *c->top = d->labels[c->rows] > *c->top ? d->labels[c->rows] : *c->top;
    c->rows++;
    return MW_OK;
}

/* Two passes over the file in bounded memory: count, ask the memory check, then fill. */
static mw_status read_set(mw_dataset *d, const char *dir, const char *name, int classes, int *top)
{
    char path[4096];
    MW_TRY(mw_data_join(path, sizeof path, dir, name));
    csv_scan c = {.path = path, .classes = classes, .top = top, .d = d};
    c.limit = classes > 0 ? classes : MW_DATA_MAX_CLASSES;
    c.v = malloc(((size_t)MW_DATA_MAX_CHANNELS + 1) * sizeof *c.v);
    mw_status rc = c.v ? MW_OK : mw_err(MW_ENOMEM, "data %s: out of memory", path);
    if (rc == MW_OK)
        rc = each_line(path, count_line, &c);
    if (rc == MW_OK && c.rows == 0)
        rc = mw_err(MW_EDATA, "data %s: no examples; expected lines of a label and features", path);
    const uint64_t xbytes = (uint64_t)c.rows * (uint64_t)(c.fields - 1) * sizeof(float);
    if (rc == MW_OK)
        rc = mw_sysmem_check_load(xbytes + (uint64_t)c.rows * sizeof(int32_t),
                                  "data %s: its %u examples of %d features take", path, c.rows,
                                  c.fields - 1);
    if (rc == MW_OK) {
        d->images = malloc(xbytes);
        d->labels = malloc((size_t)c.rows * sizeof *d->labels);
        if (!d->images || !d->labels)
            rc = mw_err(MW_ENOMEM, "data %s: cannot allocate %llu bytes", path,
                        (unsigned long long)xbytes);
    }
    if (rc == MW_OK) {
        d->count = c.rows, d->rows = 1, d->cols = 1, d->channels = (uint32_t)(c.fields - 1);
        d->type = MW_IMAGES_F32;
        c.rows = 0;
        rc = each_line(path, fill_line, &c);
    }
    if (rc == MW_OK && c.rows != d->count)
        rc = mw_err(MW_EDATA,
                    "data %s: %u examples, %u when first counted: the file changed "
                    "while it was read",
                    path, c.rows, d->count);
    free(c.v);
    return rc;
}

/* ---- the reader table's row ---- */

static int csv_claims(const char *path, int is_dir, const uint8_t *head, size_t got)
{
    (void)head, (void)got;
    return is_dir && mw_data_has(path, "train.csv");
}

static mw_status csv_read(mw_dataset *train, mw_dataset *test, const char *path,
                          const mw_data_opts *o, int *top, int *own)
{
    (void)own;
    MW_TRY(read_set(train, path, "train.csv", o->classes, top));
    MW_TRY(read_set(test, path, "test.csv", o->classes, top));
    mw_log_debug("data: %u train and %u test examples of %u features from %s", train->count,
                 test->count, train->channels, path);
    return MW_OK;
}

const mw_data_reader mw_reader_csv = {"CSV files", csv_claims, csv_read};
