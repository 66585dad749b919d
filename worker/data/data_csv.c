/* The CSV reader (worker/data/data_csv.h): tabular data, a directory with train.csv and
 * test.csv. Each line is one example: its integer label, then its features, separated by
 * commas (the layout of pandas' DataFrame.to_csv(index=False) with the label column first,
 * or numpy.savetxt(delimiter=",")). A UTF-8 byte order mark is skipped; a first line with a
 * name in it is a header when it has as many fields as the data (measure); empty lines are
 * skipped; LF, CRLF and CR alone end lines. Every field is a number: an empty one is an error,
 * never the next line's first. Features are float32 (each a
 * finite number), the set's shape (1, 1, features): a Keras model reads it as Input((F,)).
 * Every error names the file, the line and the field. */
#include "worker/data/data_csv.h"

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

/* Why a line is not all numbers. */
enum { FIELD_NUMBER, FIELD_EMPTY, FIELD_TEXT };

/* One line's fields: their count (all of them, also past cap) and the first that is not a
 * number. Only ' ' and '\t' pad a field: strtod, left to skip white space itself, would run
 * over the line's end into the next line. */
typedef struct {
    int n;           /* fields */
    int bad;         /* FIELD_NUMBER when all are numbers, else what field bad_k is */
    int bad_k;       /* 0-based */
    const char *at;  /* where field bad_k starts */
    int text_fields; /* fields that are neither numbers nor empty (a header's names) */
} csv_line;

/* Field at s (padding skipped) up to eol: its value into *x; FIELD_NUMBER, FIELD_EMPTY or
 * FIELD_TEXT, *end after it. A number out of double's range is a number (its float32 check
 * names it later): an underflow (1e-320, a denormal or less) reads as what strtod gives. */
static int parse_field(const char *s, const char *eol, double *x, const char **end)
{
    if (s == eol || *s == ',') {
        *end = s;
        return FIELD_EMPTY;
    }
    char *e = (char *)s;
    if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r' && *s != '\v' && *s != '\f')
        *x = strtod(s, &e); /* starts at a non-space: it cannot read past the line's end */
    const char *t = e;
    while (t < eol && (*t == ' ' || *t == '\t'))
        t++;
    const int ok = e != s && e <= eol && (t == eol || *t == ',');
    while (!ok && t < eol && *t != ',')
        t++;
    *end = t;
    return ok ? FIELD_NUMBER : FIELD_TEXT;
}

/* Parse the line [s, eol): values into v (at most cap of them), the rest into *L. A double-
 * quoted field (a header's name holding a comma) runs to its closing quote. */
static void parse_line(const char *s, const char *eol, double *v, int cap, csv_line *L)
{
    memset(L, 0, sizeof *L);
    for (;;) {
        while (s < eol && (*s == ' ' || *s == '\t'))
            s++;
        const char *end;
        double x = 0;
        int kind;
        if (s < eol && *s == '"') {
            end = s + 1;
            while (end < eol && !(*end == '"' && (end + 1 == eol || end[1] != '"')))
                end += *end == '"' ? 2 : 1;
            while (end < eol && *end != ',')
                end++;
            kind = FIELD_TEXT;
        } else {
            kind = parse_field(s, eol, &x, &end);
        }
        if (kind == FIELD_NUMBER && L->n < cap)
            v[L->n] = x;
        if (kind != FIELD_NUMBER && !L->bad)
            L->bad = kind, L->bad_k = L->n, L->at = s;
        L->text_fields += kind == FIELD_TEXT;
        L->n++;
        if (end >= eol)
            return;
        s = end + 1;
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

/* The error for line `line` of path, which is not all numbers (L->bad; ftext its field quoted
 * by field_text), with a note. */
static mw_status bad_field(const char *path, int line, const csv_line *L, const char *ftext,
                           const char *note)
{
    if (L->bad == FIELD_EMPTY)
        return mw_err(MW_EDATA,
                      "data %s: line %d: field %d (column %d) is empty; expected a number%s", path,
                      line, L->bad_k + 1, L->bad_k + 1, note);
    return mw_err(MW_EDATA, "data %s: line %d: field %d: found %s; expected a number%s", path, line,
                  L->bad_k + 1, ftext, note);
}

/* The checks of one data line (number line) against the first one (*fields). */
static mw_status check_data_line(const char *path, int line, const csv_line *L, const char *eol,
                                 int cap, int fields)
{
    char buf[64];
    if (L->bad)
        return bad_field(path, line, L, field_text(buf, sizeof buf, L->at, eol), "");
    if (L->n > cap)
        return mw_err(MW_EDATA,
                      "data %s: line %d: %d fields; expected a label and at most %u features", path,
                      line, L->n, MW_DATA_MAX_CHANNELS);
    if (fields && L->n != fields)
        return mw_err(MW_EDATA,
                      "data %s: line %d: %d fields, but the first example has %d; expected "
                      "a label and the same features on every line",
                      path, line, L->n, fields);
    if (L->n < 2)
        return mw_err(MW_EDATA,
                      "data %s: line %d: 1 field; expected a label and at least one feature", path,
                      line);
    return MW_OK;
}

/* The UTF-8 byte order mark some editors and Excel put first. */
static const char BOM[3] = {'\xef', '\xbb', '\xbf'};

/* One line's text [s, eol) (NUL at eol: no field reads into the next line), its number. */
typedef mw_status (*csv_line_fn)(void *ctx, int line, const char *s, const char *eol);

/* The first line end (LF, CR or CRLF) in [s, end), or NULL; *next after it. A CR that ends
 * the buffer before the file's end may be half of a CRLF: NULL, read more. */
static char *find_eol(char *s, char *end, int eof, const char **next)
{
    char *e = s;
    while (e < end && *e != '\n' && *e != '\r')
        e++;
    if (e == end || (*e == '\r' && e + 1 == end && !eof))
        return NULL;
    *next = e + 1 + (*e == '\r' && e + 1 < end && e[1] == '\n');
    return e;
}

/* Each line of path in turn, through a buffer of CSV_LINE_MAX bytes: a file of any size is
 * read in bounded memory. A line's end (LF, CRLF or CR alone) is not part of it; a byte order
 * mark before the first line is skipped. */
static mw_status each_line(const char *path, csv_line_fn fn, void *ctx)
{
    FILE *f = NULL;
    size_t nbytes = 0, have = 0;
    MW_TRY(mw_fs_fopen_input(path, "a CSV file", &f, &nbytes));
    char *buf = malloc(CSV_LINE_MAX + 1);
    mw_status rc = buf ? MW_OK : mw_err(MW_ENOMEM, "data %s: out of memory", path);
    int line = 0, eof = 0, first = 1;
    while (rc == MW_OK && !(eof && have == 0)) {
        const size_t got = eof ? 0 : fread(buf + have, 1, CSV_LINE_MAX - have, f);
        if (got == 0 && ferror(f))
            rc = mw_err(MW_EIO, "data %s: read error: %s", path, strerror(errno));
        eof = eof || got == 0;
        have += got;
        buf[have] = '\0';
        char *s = buf, *end = buf + have, *eol;
        const char *next = end;
        if (first) /* a regular file's first read is whole: a BOM is in it */
            s += have >= 3 && !memcmp(buf, BOM, 3) ? 3 : 0;
        first = 0;
        while (rc == MW_OK && s < end && ((eol = find_eol(s, end, eof, &next)) || eof)) {
            eol = eol ? eol : end;
            next = eol == end ? end : next;
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

/* What the first pass learns: the examples and fields, the header's line (0: none). */
typedef struct {
    const char *path;
    double *v; /* MW_DATA_MAX_CHANNELS + 1 values */
    int header, fields;
    csv_line hdr;       /* the header's fields, until the first example confirms it */
    char hdr_field[64]; /* its first field that is not a number, quoted (field_text) */
    uint32_t rows;
    mw_dataset *d; /* the second pass: the set to fill, its labels' bound, the largest */
    int limit, classes, *top;
} csv_scan;

/* A line's fields into c->v: their count, or the line's error. */
static mw_status parse_fields(const csv_scan *c, int line, const char *s, const char *eol, int *n)
{
    const int cap = (int)MW_DATA_MAX_CHANNELS + 1;
    csv_line L;
    parse_line(s, eol, c->v, cap, &L);
    *n = L.n;
    return check_data_line(c->path, line, &L, eol, cap, c->fields);
}

/* The first pass. The header rule (docs/data.md): the first non-blank line is a header when
 * it has a field that is neither a number nor empty and as many fields as the first example
 * after it. The examples are counted (every other non-blank line; the second pass checks
 * them). */
static mw_status count_line(void *ctx, int line, const char *s, const char *eol)
{
    csv_scan *c = ctx;
    if (blank(s, eol))
        return MW_OK;
    if (c->rows == 0) {
        csv_line L;
        int n;
        parse_line(s, eol, c->v, (int)MW_DATA_MAX_CHANNELS + 1, &L);
        if (L.bad && L.text_fields && !c->header) { /* a header, if the first example agrees */
            c->header = line, c->hdr = L;
            field_text(c->hdr_field, sizeof c->hdr_field, L.at, eol);
            return MW_OK;
        }
        if (c->header && c->hdr.n != L.n) {
            char note[160];
            snprintf(note, sizeof note,
                     " (not a header either: it has %d fields, the first example %d; a header "
                     "names every column)",
                     c->hdr.n, L.n);
            return bad_field(c->path, c->header, &c->hdr, c->hdr_field, note);
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
    if (blank(s, eol) || line == c->header)
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
        rc = mw_err(MW_EDATA, "data %s: no examples%s; expected lines of a label and features",
                    path, c.header ? " after its header line" : "");
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
