/* The Chrome-trace recorder of --timeline; see timeline.h. */
#define _POSIX_C_SOURCE 200809L
#include "common/timeline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/fs.h"

typedef struct {
    double us;       /* timestamp, microseconds */
    long step;       /* args.step */
    const char *cat; /* a literal */
    char ph;         /* 'B' or 'E' */
    char name[MW_TIMELINE_NAME];
} event;

_Thread_local int mw_timeline_on;

static struct {
    FILE *f;
    char *path; /* for messages */
    int pid;
    double shift; /* seconds: realtime - monotonic at open */
    event *ev;
    int n;
    int io_errno; /* the first write failure */
    long step;    /* mw_timeline_step */
} T;

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

mw_status mw_timeline_path(char *out, size_t len, const char *pattern, int rank, int world)
{
    const char *r = strstr(pattern, "%r");
    int n;
    if (r)
        n = snprintf(out, len, "%.*s%d%s", (int)(r - pattern), pattern, rank, r + 2);
    else if (world <= 1)
        n = snprintf(out, len, "%s", pattern);
    else {
        const char *slash = strrchr(pattern, '/'), *base = slash ? slash + 1 : pattern;
        const char *dot = strrchr(base, '.');
        if (!dot || dot == base)
            dot = pattern + strlen(pattern);
        n = snprintf(out, len, "%.*s.rank%d%s", (int)(dot - pattern), pattern, rank, dot);
    }
    if (n < 0 || (size_t)n >= len)
        return mw_err(MW_EINVAL, "--timeline '%s': the path is too long", pattern);
    return MW_OK;
}

/* s as the inside of a JSON string. */
static void put_str(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

static void write_events(void)
{
    for (int i = 0; i < T.n; i++) {
        const event *e = &T.ev[i];
        fputs(",\n{\"name\": \"", T.f);
        put_str(T.f, e->name);
        fprintf(T.f, "\", \"cat\": \"%s\", \"ph\": \"%c\", \"ts\": %.3f, \"pid\": %d, \"tid\": 0",
                e->cat, e->ph, e->us, T.pid);
        fprintf(T.f, ", \"args\": {\"step\": %ld}}", e->step);
    }
    T.n = 0;
    if (fflush(T.f) != 0 && !T.io_errno)
        T.io_errno = errno ? errno : EIO;
}

mw_status mw_timeline_open(const char *path, int pid, const char *name)
{
    if (T.f)
        return mw_err(MW_EINTERNAL, "--timeline %s: a timeline is already open", path);
    memset(&T, 0, sizeof T);
    if (!(T.ev = malloc(MW_TIMELINE_EVENTS * sizeof *T.ev)) || !(T.path = strdup(path))) {
        free(T.ev);
        T.ev = NULL;
        return mw_err(MW_ENOMEM, "--timeline %s: out of memory", path);
    }
    /* only a regular file, never blocking on a FIFO (common/fs.h) */
    int fd = -1;
    const char *kind = NULL;
    int e = mw_fs_open_output_errno(path, &fd, &kind);
    if (!e && !(T.f = fdopen(fd, "w")))
        e = errno, close(fd);
    if (e) {
        free(T.ev);
        free(T.path);
        memset(&T, 0, sizeof T);
        if (kind)
            return mw_err(MW_EIO, "--timeline %s: is %s, not a regular file: not written", path,
                          kind);
        return mw_err(MW_EIO, "--timeline %s: cannot create the file: %s", path, strerror(e));
    }
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    T.shift = (double)rt.tv_sec + 1e-9 * (double)rt.tv_nsec - mono();
    T.pid = pid;
    T.step = -1;
    /* the metadata first: every later event starts with ",\n" */
    fprintf(T.f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    fprintf(T.f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, ", pid);
    fputs("\"args\": {\"name\": \"", T.f);
    put_str(T.f, name);
    fputs("\"}},\n", T.f);
    fprintf(T.f, "{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, ",
            pid);
    fprintf(T.f, "\"args\": {\"sort_index\": %d}}", pid);
    mw_timeline_on = 1;
    return MW_OK;
}

static void record(char ph, const char *name, const char *cat)
{
    if (!T.f)
        return;
    if (T.n == MW_TIMELINE_EVENTS)
        write_events();
    event *e = &T.ev[T.n++];
    e->us = mw_timeline_now();
    e->step = T.step;
    e->cat = cat;
    e->ph = ph;
    snprintf(e->name, sizeof e->name, "%s", name);
}

void mw_timeline_begin(const char *name, const char *cat)
{
    record('B', name, cat);
}

void mw_timeline_end(const char *name, const char *cat)
{
    record('E', name, cat);
}

double mw_timeline_now(void)
{
    return (mono() + T.shift) * 1e6;
}

void mw_timeline_span(const char *name, const char *cat, double since)
{
    if (!T.f)
        return;
    record('B', name, cat);
    T.ev[T.n - 1].us = since;
    record('E', name, cat);
}

void mw_timeline_step(long step)
{
    T.step = step;
}

void mw_timeline_flush(void)
{
    if (T.f)
        write_events();
}

mw_status mw_timeline_close(void)
{
    if (!T.f)
        return MW_OK;
    write_events();
    fputs("\n]}\n", T.f);
    if (fclose(T.f) != 0 && !T.io_errno)
        T.io_errno = errno ? errno : EIO;
    mw_status rc = T.io_errno ? mw_err(MW_EIO, "--timeline %s: writing failed: %s", T.path,
                                       strerror(T.io_errno))
                              : MW_OK;
    free(T.ev);
    free(T.path);
    memset(&T, 0, sizeof T);
    mw_timeline_on = 0;
    return rc;
}
