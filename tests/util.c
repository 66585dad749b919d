/* Test helpers; see util.h. */
#include "tests/util.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
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

int mw_test_err_matches(const char *who, mw_status rc, mw_status want, const char *const *subs)
{
    const char *msg = mw_err_msg();
    int ok = rc == want;
    for (const char *const *s = subs; *s; s++)
        ok &= strstr(msg, *s) != NULL;
    if (ok)
        return 1;
    if (rc == want)
        fprintf(stderr, "%s: status %s as wanted, but\n  message: \"%s\"", who, mw_status_str(rc),
                msg);
    else
        fprintf(stderr, "%s: got %s, want %s\n  message: \"%s\"", who, mw_status_str(rc),
                mw_status_str(want), msg);
    if (*msg && mw_err_status() != rc) /* the first error wins: it may not be this call's */
        fprintf(stderr, " (recorded with %s)", mw_status_str(mw_err_status()));
    fputc('\n', stderr);
    for (const char *const *s = subs; *s; s++)
        if (!strstr(msg, *s))
            fprintf(stderr, "  lacks:   \"%s\"\n", *s);
    return 0;
}

void mw_test_expect_err_(mw_status rc, mw_status want, const char *const *subs, const char *file,
                         int line)
{
    char who[512];
    snprintf(who, sizeof who, "%s:%d", file, line);
    if (!mw_test_err_matches(who, rc, want, subs))
        _fail(file, line);
}

int mw_test_case_check(const char *name, mw_test_case_fn fn, void *ctx, const char *input,
                       size_t nbytes, const char *expected)
{
    mw_err_clear();
    int ok = fn(ctx, name, input, nbytes);
    const char *msg = mw_err_msg();
    if (!ok || !strstr(msg, expected)) {
        fprintf(stderr, "case %s: FAILED\n  want:    \"%s\"\n  got %s: \"%s\"\n", name, expected,
                mw_status_str(mw_err_status()), msg);
        ok = 0;
    }
    mw_err_clear();
    return ok;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of the subdirectories of root, sorted (malloc'ed, as is each name); NULL when
 * root cannot be opened. */
static char **list_subdirs(const char *root, int *count)
{
    DIR *d = opendir(root);
    if (!d)
        return NULL;
    int n = 0, cap = 64;
    char **names = malloc((size_t)cap * sizeof *names);
    struct dirent *e;
    while (names && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", root, e->d_name);
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        if (n == cap) {
            cap *= 2;
            char **p = realloc(names, (size_t)cap * sizeof *names);
            if (!p)
                abort();
            names = p;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (!names)
        abort();
    qsort(names, (size_t)n, sizeof *names, name_cmp);
    *count = n;
    return names;
}

int mw_test_cases(const char *rel, mw_test_case_fn fn, void *ctx)
{
    char *root = mw_test_srcpath(rel);
    int n = 0, bad = 0;
    char **names = list_subdirs(root, &n);
    if (!names)
        fail_msg("table %s: cannot open: %s (is MW_SRCDIR the source root?)", root,
                 strerror(errno));
    for (int i = 0; i < n; i++) {
        char path[4096];
        size_t nin = 0, nexp = 0;
        snprintf(path, sizeof path, "%s/%s/input.json", root, names[i]);
        char *in = mw_test_read_file(path, &nin);
        snprintf(path, sizeof path, "%s/%s/expected", root, names[i]);
        char *exp = mw_test_read_file(path, &nexp);
        while (exp && nexp > 0 && (exp[nexp - 1] == '\n' || exp[nexp - 1] == '\r'))
            exp[--nexp] = '\0';
        if (!in || !exp || nexp == 0) {
            const char *why = !in ? "no input.json" : !exp ? "no expected" : "empty expected";
            fprintf(stderr, "case %s: %s\n", names[i], why);
            bad++;
        } else {
            bad += !mw_test_case_check(names[i], fn, ctx, in, nin, exp);
        }
        free(in);
        free(exp);
        free(names[i]);
    }
    free(names);
    printf("%s: %d cases, %d failed\n", rel, n, bad);
    if (n == 0)
        fail_msg("table %s: no cases", root);
    free(root);
    if (bad)
        fail_msg("%s: %d of %d cases failed (see above)", rel, bad, n);
    return n;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    if (remove(path) != 0) {
        fprintf(stderr, "cannot remove %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int rm_tree(const char *dir)
{
    return nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The directories mw_test_tmpdir made, removed when the test program exits (a failed
 * assertion included: cmocka returns from main). */
enum { MAX_TMPDIRS = 64 };
static char *tmpdirs[MAX_TMPDIRS];
static int n_tmpdirs;
static pid_t tmpdirs_owner; /* a forked child that calls exit() leaves them to its parent */

static void rm_tmpdirs(void)
{
    if (getpid() != tmpdirs_owner)
        return;
    for (int i = 0; i < n_tmpdirs; i++) {
        if (access(tmpdirs[i], F_OK) == 0)
            rm_tree(tmpdirs[i]);
        free(tmpdirs[i]);
    }
    n_tmpdirs = 0;
}

static const char *make_tmpdir(const char *tag)
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

const char *mw_test_tmpdir(const char *tag)
{
    const char *path = make_tmpdir(tag);
    if (n_tmpdirs == MAX_TMPDIRS) {
        fprintf(stderr, "mw_test_tmpdir: more than %d directories\n", MAX_TMPDIRS);
        abort();
    }
    if (n_tmpdirs == 0 && !tmpdirs_owner) {
        tmpdirs_owner = getpid();
        atexit(rm_tmpdirs);
    }
    tmpdirs[n_tmpdirs++] = strdup(path);
    return path;
}

int mw_test_tmpdir_setup(void **state)
{
    *state = strdup(make_tmpdir(program_invocation_short_name));
    mw_err_clear();
    return *state ? 0 : -1;
}

int mw_test_tmpdir_teardown(void **state)
{
    int rc = *state ? rm_tree(*state) : 0;
    free(*state);
    *state = NULL;
    mw_err_clear();
    return rc == 0 ? 0 : -1;
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

int mw_test_contains_(const char *hay, const char *needle, const char *what, const char *file,
                      int line)
{
    if (hay && needle && strstr(hay, needle))
        return 1;
    fprintf(stderr, "%s:%d: %s lacks the text\n  wanted: \"%s\"\n  got:    \"%s\"\n", file, line,
            what, needle ? needle : "(null)", hay ? hay : "(null)");
    return 0;
}

int mw_test_watch(const char *path)
{
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0 || inotify_add_watch(fd, path, IN_ALL_EVENTS) < 0) {
        fprintf(stderr, "cannot watch %s: %s\n", path, strerror(errno));
        fail();
    }
    return fd;
}

unsigned mw_test_watch_events(int fd)
{
    unsigned seen = 0;
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *e = (const struct inotify_event *)p;
            seen |= e->mask;
            p += sizeof *e + e->len;
        }
    close(fd);
    return seen;
}

int mw_test_run_shard(const char *name, const struct CMUnitTest *tests, size_t count, int argc,
                      char **argv)
{
    unsigned k = 1, n = 1;
    char end = 0;
    if (argc > 1 && (sscanf(argv[1], "%u/%u%c", &k, &n, &end) != 2 || k < 1 || k > n)) {
        fprintf(stderr, "%s: '%s': expected a shard K/N with 1 <= K <= N\n", argv[0], argv[1]);
        return 2;
    }
    struct CMUnitTest *part = malloc((count ? count : 1) * sizeof *part);
    if (!part) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }
    size_t m = 0;
    for (size_t i = 0; i < count; i++)
        if (i % n == k - 1)
            part[m++] = tests[i];
    char group[128];
    if (n > 1)
        snprintf(group, sizeof group, "%s %u/%u", name, k, n);
    else
        snprintf(group, sizeof group, "%s", name);
    const int rc = _cmocka_run_group_tests(group, part, m, NULL, NULL);
    free(part);
    return rc;
}
