/* The CSV reader (worker/data/data_formats.h): tabular data, a directory with train.csv and
 * test.csv. Each line is one example: its integer label, then its features, separated by
 * commas (the layout of pandas' DataFrame.to_csv(index=False) with the label column first,
 * or numpy.savetxt(delimiter=",")). A UTF-8 byte order mark is skipped; a first line with a
 * name in it is a header when it has as many fields as the data (measure); empty lines are
 * skipped; LF, CRLF and CR alone end lines. Every field is a number: an empty one is an error,
 * never the next line's first. Features are float32 (each a
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

#define CSV_MAX_BYTES (UINT64_C(1) << 32) /* largest CSV file read */

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

/* The end of the line starting at s: its line end (LF, CRLF or CR alone) or the text's end;
 * *next is where the next line starts. */
static const char *line_end(const char *s, const char *text_end, const char **next)
{
    const char *e = s;
    while (e < text_end && *e != '\n' && *e != '\r')
        e++;
    *next = e == text_end ? e : e + 1 + (*e == '\r' && e + 1 < text_end && e[1] == '\n');
    return e;
}

static int blank(const char *s, const char *eol)
{
    while (s < eol && (*s == ' ' || *s == '\t'))
        s++;
    return s == eol;
}

/* The error for line `line` of path, which is not all numbers (L->bad), with a note. */
static mw_status bad_field(const char *path, int line, const csv_line *L, const char *eol,
                           const char *note)
{
    char buf[64];
    if (L->bad == FIELD_EMPTY)
        return mw_err(MW_EDATA,
                      "data %s: line %d: field %d (column %d) is empty; expected a number%s", path,
                      line, L->bad_k + 1, L->bad_k + 1, note);
    return mw_err(MW_EDATA, "data %s: line %d: field %d: found %s; expected a number%s", path, line,
                  L->bad_k + 1, field_text(buf, sizeof buf, L->at, eol), note);
}

/* Whether line 1 (hdr, of hdr_n fields) is a header, seen from the first data line L: the
 * same field count. An error for line hdr_line otherwise. */
static mw_status check_header(const char *path, int hdr_line, const csv_line *hdr,
                              const char *hdr_eol, const csv_line *L)
{
    if (hdr->n == L->n)
        return MW_OK;
    char note[160];
    snprintf(note, sizeof note,
             " (not a header either: it has %d fields, the first example %d; a header names "
             "every column)",
             hdr->n, L->n);
    return bad_field(path, hdr_line, hdr, hdr_eol, note);
}

/* The checks of one data line (number line) against the first one (*fields). */
static mw_status check_data_line(const char *path, int line, const csv_line *L, const char *eol,
                                 int cap, int fields)
{
    if (L->bad)
        return bad_field(path, line, L, eol, "");
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

/* The UTF-8 byte order mark some editors and Excel put first: skipped. */
static size_t bom_bytes(const char *text, size_t nbytes)
{
    return nbytes >= 3 && !memcmp(text, "\xef\xbb\xbf", 3) ? 3 : 0;
}

/* Count the examples and fields of text. The header rule (docs/data.md): the first non-blank
 * line is a header when it has a field that is neither a number nor empty and as many fields
 * as the first example after it; *skip is where the data start, *skip_lines the lines before
 * them. */
static mw_status measure(const char *path, const char *text, size_t nbytes, double *v, int cap,
                         size_t *skip, int *skip_lines, uint32_t *rows, int *fields)
{
    const char *end = text + nbytes, *next, *hdr_eol = NULL;
    *skip = bom_bytes(text, nbytes), *skip_lines = 0, *rows = 0, *fields = 0;
    int line = 0, hdr_line = 0;
    csv_line L, hdr;
    for (const char *s = text + *skip; s < end; s = next) {
        const char *eol = line_end(s, end, &next);
        line++;
        if (blank(s, eol))
            continue;
        parse_line(s, eol, v, cap, &L);
        if (L.bad && L.text_fields && !hdr_line && *rows == 0) { /* a header, if the data agree */
            hdr = L, hdr_line = line, hdr_eol = eol;
            *skip = (size_t)(next - text), *skip_lines = line;
            continue;
        }
        if (hdr_line && *rows == 0)
            MW_TRY(check_header(path, hdr_line, &hdr, hdr_eol, &L));
        MW_TRY(check_data_line(path, line, &L, eol, cap, *fields));
        if (*rows == UINT32_MAX)
            return mw_err(MW_EDATA, "data %s: more than %u examples", path, UINT32_MAX);
        *fields = L.n;
        (*rows)++;
    }
    if (*rows == 0)
        return mw_err(MW_EDATA, "data %s: no examples%s; expected lines of a label and features",
                      path, hdr_line ? " after its header line" : "");
    return MW_OK;
}

/* Fill d from the measured text, whose first line is line + 1 of the file. */
static mw_status fill(mw_dataset *d, const char *path, const char *text, size_t nbytes, double *v,
                      int fields, int line, int classes, int *top)
{
    const char *end = text + nbytes, *next;
    const int limit = classes > 0 ? classes : MW_DATA_MAX_CLASSES;
    float *x = (float *)d->images;
    csv_line L;
    uint32_t i = 0;
    for (const char *s = text; s < end && i < d->count; s = next) {
        const char *eol = line_end(s, end, &next);
        line++;
        if (blank(s, eol))
            continue;
        parse_line(s, eol, v, fields, &L); /* measured: every line parses */
        if (!(v[0] >= 0 && v[0] < limit && v[0] == floor(v[0])))
            return mw_err(MW_EDATA,
                          "data %s: line %d: label %g; expected an integer from 0 to %d%s", path,
                          line, v[0], limit - 1, classes > 0 ? " (--classes)" : "");
        for (int f = 1; f < fields; f++) {
            const float xf = (float)v[f];
            if (!isfinite(xf))
                return mw_err(MW_EDATA,
                              "data %s: line %d: field %d: %g is not a finite float32; expected "
                              "finite features",
                              path, line, f + 1, v[f]);
            x[(size_t)i * (size_t)(fields - 1) + (size_t)(f - 1)] = xf;
        }
        d->labels[i] = (int32_t)v[0];
        *top = d->labels[i] > *top ? d->labels[i] : *top;
        i++;
    }
    return MW_OK;
}

static mw_status read_set(mw_dataset *d, const char *dir, const char *name, int classes, int *top)
{
    char path[4096];
    MW_TRY(mw_data_join(path, sizeof path, dir, name));
    char *text = NULL;
    size_t nbytes = 0;
    MW_TRY(mw_fs_read_input(path, "a CSV file", (size_t)CSV_MAX_BYTES, MW_EDATA, &text, &nbytes));
    const int cap = (int)MW_DATA_MAX_CHANNELS + 1;
    double *v = malloc((size_t)cap * sizeof *v);
    mw_status rc = v ? MW_OK : mw_err(MW_ENOMEM, "data %s: out of memory", path);
    size_t skip = 0;
    uint32_t rows = 0;
    int fields = 0, skip_lines = 0;
    if (rc == MW_OK)
        rc = measure(path, text, nbytes, v, cap, &skip, &skip_lines, &rows, &fields);
    const uint64_t xbytes = (uint64_t)rows * (uint64_t)(fields - 1) * sizeof(float);
    if (rc == MW_OK)
        rc = mw_sysmem_check_load(xbytes + (uint64_t)rows * sizeof(int32_t),
                                  "data %s: its examples take", path);
    if (rc == MW_OK) {
        d->images = malloc(xbytes);
        d->labels = malloc((size_t)rows * sizeof *d->labels);
        if (!d->images || !d->labels)
            rc = mw_err(MW_ENOMEM, "data %s: cannot allocate %llu bytes", path,
                        (unsigned long long)xbytes);
    }
    if (rc == MW_OK) {
        d->count = rows, d->rows = 1, d->cols = 1, d->channels = (uint32_t)(fields - 1);
        d->type = MW_IMAGES_F32;
        rc = fill(d, path, text + skip, nbytes - skip, v, fields, skip_lines, classes, top);
    }
    free(v);
    free(text);
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
