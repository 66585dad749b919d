/* The CSV reader (worker/data/data_csv.h): tabular data, a directory with train.csv and
 * test.csv. Each line is one example: its integer label, then its features, separated by
 * commas (the layout of pandas' DataFrame.to_csv(index=False) with the label column first,
 * or numpy.savetxt(delimiter=",")). A first line that is not all numbers is a header and is
 * skipped; empty lines are skipped; CRLF line ends are accepted. Features are float32 (each a
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

#define CSV_MAX_BYTES (UINT64_C(1) << 32) /* largest CSV file read */

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

/* The end of the line starting at s: its '\n' (or the text's end), less a '\r'. */
static const char *line_end(const char *s, const char *text_end, const char **next)
{
    const char *nl = memchr(s, '\n', (size_t)(text_end - s));
    *next = nl ? nl + 1 : text_end;
    const char *eol = nl ? nl : text_end;
    return eol > s && eol[-1] == '\r' ? eol - 1 : eol;
}

static int blank(const char *s, const char *eol)
{
    while (s < eol && (*s == ' ' || *s == '\t'))
        s++;
    return s == eol;
}

/* Count the examples and fields of text (the header skipped): *skip is where the data start. */
static mw_status measure(const char *path, const char *text, size_t nbytes, double *v, int cap,
                         size_t *skip, uint32_t *rows, int *fields)
{
    const char *end = text + nbytes, *next;
    *skip = 0, *rows = 0, *fields = 0;
    int line = 0, bad;
    const char *at;
    char buf[64];
    for (const char *s = text; s < end; s = next) {
        const char *eol = line_end(s, end, &next);
        line++;
        if (blank(s, eol))
            continue;
        const int n = parse_line(s, eol, v, cap, &bad, &at);
        if (n < 0 && line == 1 && *rows == 0) { /* a header */
            *skip = (size_t)(next - text);
            continue;
        }
        if (n < 0 && bad >= cap)
            return mw_err(MW_EDATA,
                          "data %s: line %d: more than %d fields; expected a label and "
                          "at most %u features",
                          path, line, cap, MW_DATA_MAX_CHANNELS);
        if (n < 0)
            return mw_err(MW_EDATA, "data %s: line %d: field %d: found %s; expected a number", path,
                          line, bad + 1, field_text(buf, sizeof buf, at, eol));
        if (*fields && n != *fields)
            return mw_err(MW_EDATA,
                          "data %s: line %d: %d fields, but the first example has %d; expected "
                          "a label and the same features on every line",
                          path, line, n, *fields);
        if (n < 2)
            return mw_err(MW_EDATA,
                          "data %s: line %d: 1 field; expected a label and at least one feature",
                          path, line);
        if (*rows == UINT32_MAX)
            return mw_err(MW_EDATA, "data %s: more than %u examples", path, UINT32_MAX);
        *fields = n;
        (*rows)++;
    }
    if (*rows == 0)
        return mw_err(MW_EDATA, "data %s: no examples; expected lines of a label and features",
                      path);
    return MW_OK;
}

/* Fill d from the measured text. */
static mw_status fill(mw_dataset *d, const char *path, const char *text, size_t nbytes, double *v,
                      int fields, int classes, int *top)
{
    const char *end = text + nbytes, *next, *at;
    const int limit = classes > 0 ? classes : MW_DATA_MAX_CLASSES;
    float *x = (float *)d->images;
    int line = 0, bad;
    uint32_t i = 0;
    for (const char *s = text; s < end && i < d->count; s = next) {
        const char *eol = line_end(s, end, &next);
        line++;
        if (blank(s, eol))
            continue;
        parse_line(s, eol, v, fields, &bad, &at); /* measured: every line parses */
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
    int fields = 0;
    if (rc == MW_OK)
        rc = measure(path, text, nbytes, v, cap, &skip, &rows, &fields);
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
        rc = fill(d, path, text + skip, nbytes - skip, v, fields, classes, top);
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
