/* The .npy reader (worker/data/data_npy.h): the header parser, and a directory of
 * x_train.npy, y_train.npy, x_test.npy, y_test.npy (the arrays' conversion into a data set is
 * data_formats.c's, shared with the other readers).
 *
 * Images are memory-mapped read-only, never copied: ranks on one node share the page cache,
 * and a rank's resident memory holds only the pages of the examples it assembles (MADV_RANDOM:
 * no read-ahead or fault-around of the neighbours). Labels are small: read and converted to
 * int32. */
#include "worker/data/data_npy.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/log.h"
#include "common/mapguard.h"
#include "common/sysmem.h"
#include "worker/data/data_formats.h"

static mw_status hfail(const char *name, const char *field, const char *fmt, const char *got)
{
    return mw_err(MW_EDATA, "%s: npy header field '%s': %s (got %s)", name, field, fmt, got);
}

/* ---- the header dict: {'key': value, ...}, values a string, True/False or a tuple ---- */

typedef struct {
    const char *p, *end;
    const char *name;
} lexer;

static void skip_space(lexer *L)
{
    while (L->p < L->end && (*L->p == ' ' || *L->p == '\t' || *L->p == '\n' || *L->p == '\r'))
        L->p++;
}

static int accept(lexer *L, char c)
{
    skip_space(L);
    if (L->p < L->end && *L->p == c) {
        L->p++;
        return 1;
    }
    return 0;
}

/* A quoted string ('...' or "...") without escapes into out. */
static int read_string(lexer *L, char *out, size_t cap)
{
    skip_space(L);
    if (L->p >= L->end || (*L->p != '\'' && *L->p != '"'))
        return 0;
    char q = *L->p++;
    size_t n = 0;
    while (L->p < L->end && *L->p != q) {
        if (*L->p == '\\' || n + 1 >= cap)
            return 0;
        out[n++] = *L->p++;
    }
    if (L->p >= L->end)
        return 0;
    L->p++;
    out[n] = '\0';
    return 1;
}

/* What is left of the header for messages: at most 40 characters, quoted. */
static const char *rest(const lexer *L, char *buf, size_t cap)
{
    size_t n = (size_t)(L->end - L->p);
    if (n > 40)
        n = 40;
    size_t j = 0;
    buf[j++] = '"';
    for (size_t i = 0; i < n && j + 2 < cap; i++)
        buf[j++] = L->p[i] >= 32 && L->p[i] < 127 ? L->p[i] : '?';
    buf[j++] = '"';
    buf[j] = '\0';
    return buf;
}

static mw_status parse_descr(mw_npy_header *h, lexer *L)
{
    char s[64], why[96];
    if (!read_string(L, h->descr, sizeof h->descr))
        return hfail(L->name, "descr",
                     "expected a type string such as '|u1' or '<f4' (a structured dtype is not "
                     "supported)",
                     rest(L, why, sizeof why));
    snprintf(s, sizeof s, "'%s'", h->descr);
    const char *d = h->descr;
    if (strlen(d) != 3 || !strchr("<>|=", d[0]) || !strchr("uifb", d[1]) || !strchr("1248", d[2]) ||
        (d[1] == 'f' && d[2] != '4' && d[2] != '8') || (d[1] == 'b' && d[2] != '1'))
        return hfail(L->name, "descr",
                     "expected an integer or float type such as '|u1', '<i4', "
                     "'<i8' or '<f4'",
                     s);
    h->kind = d[1];
    h->itemsize = d[2] - '0';
    if (d[0] == '>' && h->itemsize > 1)
        return hfail(L->name, "descr",
                     "big-endian data are not supported; expected '<' "
                     "(little-endian): save with arr.astype(arr.dtype.newbyteorder('<'))",
                     s);
    return MW_OK;
}

static mw_status parse_fortran(lexer *L)
{
    char why[96];
    skip_space(L);
    size_t left = (size_t)(L->end - L->p);
    if (left >= 5 && !memcmp(L->p, "False", 5)) {
        L->p += 5;
        return MW_OK;
    }
    if (left >= 4 && !memcmp(L->p, "True", 4))
        return hfail(L->name, "fortran_order",
                     "expected False: the data must be in C order (save "
                     "np.ascontiguousarray(arr))",
                     "True");
    return hfail(L->name, "fortran_order", "expected False", rest(L, why, sizeof why));
}

static mw_status parse_shape(mw_npy_header *h, lexer *L)
{
    char why[96];
    if (!accept(L, '('))
        return hfail(L->name, "shape", "expected a tuple such as (60000, 28, 28)",
                     rest(L, why, sizeof why));
    h->ndim = 0;
    while (!accept(L, ')')) {
        skip_space(L);
        if (L->p >= L->end || *L->p < '0' || *L->p > '9')
            return hfail(L->name, "shape", "expected non-negative integer sizes",
                         rest(L, why, sizeof why));
        if (h->ndim == MW_NPY_MAX_DIMS) {
            snprintf(why, sizeof why, "more than %d", MW_NPY_MAX_DIMS);
            return hfail(L->name, "shape", "too many dimensions", why);
        }
        uint64_t v = 0;
        while (L->p < L->end && *L->p >= '0' && *L->p <= '9') {
            if (v > (UINT64_C(1) << 48))
                return hfail(L->name, "shape", "a size is too large", rest(L, why, sizeof why));
            v = v * 10 + (uint64_t)(*L->p++ - '0');
        }
        if (L->p < L->end && *L->p == 'L') /* Python 2's long suffix */
            L->p++;
        h->shape[h->ndim++] = v;
        if (!accept(L, ',')) {
            if (!accept(L, ')'))
                return hfail(L->name, "shape", "expected ',' or ')' in the tuple",
                             rest(L, why, sizeof why));
            if (h->ndim == 1) { /* Python's (N) is the number N: numpy.load refuses it */
                snprintf(why, sizeof why, "(%llu), the integer %llu", (unsigned long long)v,
                         (unsigned long long)v);
                return hfail(L->name, "shape", "expected a tuple; a 1-D shape is written (N,)",
                             why);
            }
            break;
        }
    }
    return MW_OK;
}

static mw_status parse_dict(mw_npy_header *h, lexer *L)
{
    char key[32], why[96];
    int seen[3] = {0, 0, 0};
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    if (!accept(L, '{'))
        return mw_err(MW_EDATA, "%s: npy header: expected a Python dict starting with '{' (got %s)",
                      L->name, rest(L, why, sizeof why));
    while (!accept(L, '}')) {
        if (!read_string(L, key, sizeof key))
            return mw_err(MW_EDATA, "%s: npy header: expected a quoted key (got %s)", L->name,
                          rest(L, why, sizeof why));
        int k = 0;
        while (k < 3 && strcmp(key, keys[k]) != 0)
            k++;
        if (k == 3)
            return mw_err(MW_EDATA,
                          "%s: npy header: unexpected key '%s'; expected only 'descr', "
                          "'fortran_order' and 'shape'",
                          L->name, key);
        if (seen[k]++)
            return mw_err(MW_EDATA, "%s: npy header: key '%s' appears twice", L->name, key);
        if (!accept(L, ':'))
            return mw_err(MW_EDATA, "%s: npy header: expected ':' after '%s' (got %s)", L->name,
                          key, rest(L, why, sizeof why));
        MW_TRY(k == 0 ? parse_descr(h, L) : k == 1 ? parse_fortran(L) : parse_shape(h, L));
        if (!accept(L, ',')) {
            if (!accept(L, '}'))
                return mw_err(MW_EDATA, "%s: npy header: expected ',' or '}' after '%s' (got %s)",
                              L->name, key, rest(L, why, sizeof why));
            break;
        }
    }
    for (int k = 0; k < 3; k++)
        if (!seen[k])
            return mw_err(MW_EDATA, "%s: npy header: key '%s' is missing", L->name, keys[k]);
    skip_space(L);
    if (L->p != L->end)
        return mw_err(MW_EDATA, "%s: npy header: unexpected text after the dict (got %s)", L->name,
                      rest(L, why, sizeof why));
    return MW_OK;
}

mw_status mw_npy_parse_header(mw_npy_header *h, const uint8_t *buf, size_t avail,
                              uint64_t file_nbytes, const char *name)
{
    memset(h, 0, sizeof *h);
    if (avail < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return mw_err(MW_EDATA, "%s: npy magic: expected the 6 bytes \\x93NUMPY at the start (%s)",
                      name, avail < 10 ? "the file is shorter than 10 bytes" : "not a .npy file");
    if (buf[6] < 1 || buf[6] > 3 || buf[7] != 0)
        return mw_err(MW_EDATA, "%s: npy version %u.%u: expected 1.0, 2.0 or 3.0", name, buf[6],
                      buf[7]);
    size_t pre = buf[6] == 1 ? 10 : 12;
    if (avail < pre)
        return mw_err(MW_EDATA, "%s: npy header_len: the file ends after %zu bytes, expected %zu",
                      name, avail, pre);
    uint64_t hlen = buf[6] == 1 ? (uint64_t)buf[8] | (uint64_t)buf[9] << 8
                                : (uint64_t)buf[8] | (uint64_t)buf[9] << 8 |
                                      (uint64_t)buf[10] << 16 | (uint64_t)buf[11] << 24;
    if (hlen > MW_NPY_MAX_HEADER || pre + hlen > avail)
        return mw_err(MW_EDATA,
                      "%s: npy header_len %llu: the header would end at byte %llu, but only %zu "
                      "bytes are there (at most %u accepted)",
                      name, (unsigned long long)hlen, (unsigned long long)(pre + hlen), avail,
                      MW_NPY_MAX_HEADER);
    lexer L = {(const char *)buf + pre, (const char *)buf + pre + hlen, name};
    MW_TRY(parse_dict(h, &L));
    h->data_offset = pre + (size_t)hlen;
    uint64_t count = 1;
    for (int i = 0; i < h->ndim; i++) {
        if (h->shape[i] && count > (UINT64_C(1) << 56) / h->shape[i])
            return mw_err(MW_EDATA, "%s: npy header field 'shape': too many elements", name);
        count *= h->shape[i];
    }
    h->count = count;
    uint64_t want = count * (uint64_t)h->itemsize;
    if (file_nbytes < h->data_offset || file_nbytes - h->data_offset != want)
        return mw_err(
            MW_EDATA,
            "%s: npy header field 'shape': %llu elements of '%s' need %llu data bytes "
            "after the %zu-byte header, but the file has %llu (%s)",
            name, (unsigned long long)count, h->descr, (unsigned long long)want, h->data_offset,
            (unsigned long long)(file_nbytes > h->data_offset ? file_nbytes - h->data_offset : 0),
            file_nbytes - h->data_offset < want ? "truncated" : "extra bytes at the end");
    return MW_OK;
}

/* ---- a directory of .npy files ---- */

/* Open path, parse its header; images (map_images) are mapped, labels read onto the heap. */
static mw_status load_npy(mw_npy_array *a, const char *path, int map_images)
{
    snprintf(a->name, sizeof a->name, "%s", path);
    int fd;
    size_t file_nbytes;
    MW_TRY(mw_fs_open_input(path, "a .npy file", &fd, &file_nbytes));
    mw_status rc = MW_OK;
    uint8_t *hdr = NULL;
    size_t avail = file_nbytes < MW_NPY_MAX_HEADER + 12 ? file_nbytes : MW_NPY_MAX_HEADER + 12;
    hdr = malloc(avail ? avail : 1);
    if (!hdr) {
        rc = mw_err(MW_ENOMEM, "out of memory");
        goto done;
    }
    if (pread(fd, hdr, avail, 0) != (ssize_t)avail) {
        rc = mw_err(MW_EIO, "%s: read error: %s", path, strerror(errno));
        goto done;
    }
    MW_TRY_GOTO(mw_npy_parse_header(&a->h, hdr, avail, (uint64_t)file_nbytes, path), rc, done);
    if (map_images) {
        void *p = mmap(NULL, file_nbytes, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            rc = mw_err(MW_EIO, "%s: cannot map %zu bytes: %s", path, file_nbytes, strerror(errno));
            goto done;
        }
        madvise(p, file_nbytes, MADV_RANDOM);
        mw_mapguard_add(p, file_nbytes, path); /* a file that shrinks: exit 3, named */
        a->map = p;
        a->map_nbytes = file_nbytes;
        a->data = (uint8_t *)p + a->h.data_offset;
    } else {
        uint64_t nbytes = a->h.count * (uint64_t)a->h.itemsize;
        if (nbytes > MW_DATA_MAX_NBYTES) {
            rc = mw_err(MW_EDATA, "%s: %llu data bytes, more than the limit %llu", path,
                        (unsigned long long)nbytes, (unsigned long long)MW_DATA_MAX_NBYTES);
            goto done;
        }
        MW_TRY_GOTO(mw_sysmem_check_load(nbytes, "%s: its data take", path), rc, done);
        a->heap = malloc(nbytes ? (size_t)nbytes : 1);
        if (!a->heap) {
            rc = mw_err(MW_ENOMEM, "%s: cannot allocate %llu bytes", path,
                        (unsigned long long)nbytes);
            goto done;
        }
        a->data = a->heap;
        size_t got = 0;
        while (got < nbytes) {
            ssize_t r =
                pread(fd, a->data + got, (size_t)nbytes - got, (off_t)(a->h.data_offset + got));
            if (r <= 0) {
                rc = mw_err(MW_EIO, "%s: read error: %s", path, r ? strerror(errno) : "short");
                goto done;
            }
            got += (size_t)r;
        }
    }
done:
    free(hdr);
    close(fd);
    return rc;
}

static mw_status load_pair(mw_dataset *d, const char *dir, const char *xname, const char *yname,
                           int classes, int *max_label)
{
    char xp[4096], yp[4096];
    MW_TRY(mw_data_join(xp, sizeof xp, dir, xname));
    MW_TRY(mw_data_join(yp, sizeof yp, dir, yname));
    mw_npy_array x, y;
    mw_npy_array_init(&x);
    mw_npy_array_init(&y);
    mw_status rc = MW_OK;
    MW_TRY_GOTO(load_npy(&x, xp, 1), rc, done);
    MW_TRY_GOTO(load_npy(&y, yp, 0), rc, done);
    MW_TRY_GOTO(mw_data_from_arrays(d, &x, &y, classes, max_label), rc, done);
done:
    mw_npy_array_free(&x);
    mw_npy_array_free(&y);
    return rc;
}

/* The optional sample weights of d, dir/name, when the file exists. */
static mw_status load_weights(mw_dataset *d, const char *dir, const char *name)
{
    if (!mw_data_has(dir, name))
        return MW_OK;
    char wp[4096];
    MW_TRY(mw_data_join(wp, sizeof wp, dir, name));
    mw_npy_array w;
    mw_npy_array_init(&w);
    mw_status rc = load_npy(&w, wp, 0);
    if (rc == MW_OK)
        rc = mw_data_take_weights(d, &w);
    mw_npy_array_free(&w);
    return rc;
}

mw_status mw_data_read_npy_dir(mw_dataset *train, mw_dataset *test, const char *dir, int classes,
                               int *max_label)
{
    int m1 = -1, m2 = -1;
    MW_TRY(load_pair(train, dir, "x_train.npy", "y_train.npy", classes, &m1));
    MW_TRY(load_pair(test, dir, "x_test.npy", "y_test.npy", classes, &m2));
    MW_TRY(load_weights(train, dir, "sample_weight_train.npy"));
    MW_TRY(load_weights(test, dir, "sample_weight_test.npy"));
    *max_label = m1 > m2 ? m1 : m2;
    mw_log_debug("data: %u train and %u test images of %ux%ux%u (%s, memory-mapped) from %s",
                 train->count, test->count, train->rows, train->cols, train->channels,
                 train->type == MW_IMAGES_F32 ? "float32" : "uint8", dir);
    return MW_OK;
}

/* ---- the reader table's rows ---- */

static int dir_claims(const char *path, int is_dir, const uint8_t *head, size_t got)
{
    (void)head, (void)got;
    return is_dir && mw_data_has(path, "x_train.npy");
}

static mw_status dir_read(mw_dataset *train, mw_dataset *test, const char *path,
                          const mw_data_opts *o, int *top, int *own)
{
    (void)own;
    return mw_data_read_npy_dir(train, test, path, o->classes, top);
}

/* A single .npy file: recognised so that the message can say what to give instead. */
static int file_claims(const char *path, int is_dir, const uint8_t *head, size_t got)
{
    (void)path;
    return !is_dir && got >= 6 && !memcmp(head, "\x93NUMPY", 6);
}

static mw_status file_read(mw_dataset *train, mw_dataset *test, const char *path,
                           const mw_data_opts *o, int *top, int *own)
{
    (void)train, (void)test, (void)o, (void)top, (void)own;
    return mw_err(MW_EDATA,
                  "data %s: a single .npy array; give the directory that holds x_train.npy, "
                  "y_train.npy, x_test.npy and y_test.npy, or one .npz",
                  path);
}

const mw_data_reader mw_reader_npy_dir = {"a directory of .npy files", dir_claims, dir_read};
const mw_data_reader mw_reader_npy_file = {"a .npy file", file_claims, file_read};
