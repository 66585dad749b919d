/* Test helpers; see util.h. */
#include "tests/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/rng.h"

int mw_test_close_(const float *got, const float *ref, size_t count, float atol, float rtol,
                   const char *what, const char *file, int line)
{
    size_t bad = 0, first = (size_t)-1;
    double maxerr = 0.0;
    for (size_t i = 0; i < count; i++) {
        double err = fabs((double)got[i] - (double)ref[i]);
        if (!(err <= atol + rtol * fabs((double)ref[i]))) { /* NaN counts as bad */
            if (first == (size_t)-1)
                first = i;
            bad++;
        }
        if (err > maxerr || isnan(err))
            maxerr = err;
    }
    if (bad) {
        fprintf(stderr,
                "%s:%d: %s: %zu of %zu values differ; first at [%zu]: got %.9g, want %.9g; "
                "max |err| %.3g (atol %g, rtol %g)\n",
                file, line, what, bad, count, first, got[first], ref[first], maxerr, atol, rtol);
        return 0;
    }
    return 1;
}

const char *mw_test_tmpdir(const char *tag)
{
    static char path[512];
    const char *base = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/mwtest-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(path)) {
        perror("mkdtemp");
        abort();
    }
    return path;
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

char *mw_test_write_file(const char *dir, const char *name, const void *data, size_t nbytes)
{
    char *p = join(dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || (nbytes && fwrite(data, 1, nbytes, f) != nbytes)) {
        perror(p);
        abort();
    }
    fclose(f);
    return p;
}

char *mw_test_write_gz(const char *dir, const char *name, const void *data, size_t nbytes)
{
    char *p = join(dir, name);
    gzFile f = gzopen(p, "wb");
    if (!f || (nbytes && gzwrite(f, data, (unsigned)nbytes) != (int)nbytes)) {
        perror(p);
        abort();
    }
    gzclose(f);
    return p;
}

void mw_test_fill_uniform(float *x, size_t count, uint64_t seed, float lo, float hi)
{
    mw_rng r;
    mw_rng_seed(&r, seed, 7);
    for (size_t i = 0; i < count; i++)
        x[i] = lo + (hi - lo) * mw_rng_uniform(&r);
}

char *mw_test_srcpath(const char *rel)
{
    const char *src = getenv("MW_SRCDIR");
    return join(src && *src ? src : ".", rel);
}

char *mw_test_read_file(const char *path, size_t *nbytes)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            char *p = realloc(buf, cap + 1);
            if (!p) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = p;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (got == 0)
            break;
        n += got;
    }
    fclose(f);
    buf[n] = '\0';
    *nbytes = n;
    return buf;
}
