/* Summary writer: TFRecord-framed tensorflow.Event protos and a CSV. See summary.h.
 *
 * The protobuf messages, with the fields we write (proto3 wire format):
 *   Event   { double wall_time = 1;  int64 step = 2;  string file_version = 3;
 *             Summary summary = 5; }
 *   Summary { repeated Value value = 1; }
 *   Value   { string tag = 1;  float simple_value = 2; }
 * A field starts with the varint key (number << 3 | wire type): wire type 0
 * varint, 1 fixed64 (little-endian), 2 length-delimited (varint length, then
 * bytes), 5 fixed32. */
#include "worker/summary.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/fs.h"

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_FIXED32 = 5 };

/* ---- protobuf encoding into a caller-sized buffer ---- */

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80)
        v >>= 7, n++;
    return n;
}

static unsigned char *put_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

static unsigned char *put_le(unsigned char *p, uint64_t v, int nbytes)
{
    for (int i = 0; i < nbytes; i++)
        *p++ = (unsigned char)(v >> (8 * i));
    return p;
}

static unsigned char *put_key(unsigned char *p, int field, int wire)
{
    return put_varint(p, (uint64_t)(field << 3 | wire));
}

static unsigned char *put_bytes(unsigned char *p, int field, const void *data, size_t nbytes)
{
    p = put_key(p, field, WT_LEN);
    p = put_varint(p, nbytes);
    memcpy(p, data, nbytes);
    return p + nbytes;
}

static unsigned char *put_double(unsigned char *p, int field, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return put_le(put_key(p, field, WT_FIXED64), bits, 8);
}

static unsigned char *put_float(unsigned char *p, int field, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return put_le(put_key(p, field, WT_FIXED32), bits, 4);
}

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- files ---- */

/* Write one TFRecord around data. The record goes out in one fwrite, so a
 * reader never sees a header without its data unless the disk fails. */
static mw_status write_record(mw_summary *s, const unsigned char *data, size_t nbytes)
{
    unsigned char *rec = malloc(nbytes + 16);
    if (!rec)
        return mw_err(MW_ENOMEM, "summary file %s: out of memory", s->events_path);
    put_le(rec, nbytes, 8);
    put_le(rec + 8, mw_crc32c_mask(mw_crc32c(0, rec, 8)), 4);
    memcpy(rec + 12, data, nbytes);
    put_le(rec + 12 + nbytes, mw_crc32c_mask(mw_crc32c(0, data, nbytes)), 4);
    size_t wrote = fwrite(rec, 1, nbytes + 16, s->events);
    int e = errno;
    free(rec);
    if (wrote != nbytes + 16)
        return mw_err(MW_EIO, "summary file %s: write failed: %s", s->events_path, strerror(e));
    return MW_OK;
}

/* Create events.out.tfevents.<seconds>.<hostname>; when two writers start in
 * the same second on one host, the later one gets a ".<n>" suffix. */
static mw_status open_events(mw_summary *s, const char *dir)
{
    char host[256] = "localhost";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    char name[320];
    long now = (long)time(NULL);
    for (int n = 0; n < 1000; n++) {
        if (n == 0)
            snprintf(name, sizeof name, "events.out.tfevents.%ld.%s", now, host);
        else
            snprintf(name, sizeof name, "events.out.tfevents.%ld.%s.%d", now, host, n);
        free(s->events_path);
        s->events_path = mw_fs_join_alloc(dir, name);
        if (!s->events_path)
            return mw_err(MW_ENOMEM, "summary dir %s: out of memory", dir);
        int fd = open(s->events_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno == EEXIST)
            continue;
        if (fd < 0 || !(s->events = fdopen(fd, "wb"))) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            return mw_err(MW_EIO, "summary file %s: cannot create: %s", s->events_path,
                          strerror(e));
        }
        return MW_OK;
    }
    return mw_err(MW_EIO, "summary dir %s: too many event files named %s.*", dir, name);
}

/* Open metrics.csv; when appending to a non-empty file, remember its header
 * line so later rows can be checked against it. */
static mw_status open_csv(mw_summary *s, const char *dir, int append)
{
    s->csv_path = mw_fs_join_alloc(dir, "metrics.csv");
    if (!s->csv_path)
        return mw_err(MW_ENOMEM, "summary dir %s: out of memory", dir);
    /* as the lock, the checkpoints and the event file: never through a symbolic link (its
     * target would be overwritten), never blocking, only a regular file, truncated (a new
     * run) only once that is known */
    const int fd = open(s->csv_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
    struct stat st = {0};
    if (fd < 0 && errno == ELOOP)
        return mw_err(MW_EIO,
                      "summary file %s: is a symbolic link; expected a regular file (summaries "
                      "are never written through links)",
                      s->csv_path);
    if (fd < 0)
        return mw_err(MW_EIO, "summary file %s: cannot open: %s", s->csv_path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return mw_err(MW_EIO, "summary file %s: is %s; expected a regular file", s->csv_path,
                      mw_fs_kind(st.st_mode));
    }
    const int fl = fcntl(fd, F_GETFL);
    if ((!append && ftruncate(fd, 0) != 0) || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0 ||
        !(s->csv = fdopen(fd, append ? "a+" : "w"))) {
        const int e = errno;
        close(fd);
        return mw_err(MW_EIO, "summary file %s: cannot open: %s", s->csv_path, strerror(e));
    }
    if (!append)
        return MW_OK;
    char *line = NULL;
    size_t cap = 0;
    rewind(s->csv);
    ssize_t len = getline(&line, &cap, s->csv);
    if (len > 0 && line[len - 1] == '\n') {
        line[len - 1] = '\0';
        s->csv_header = line;
        line = NULL;
    }
    free(line);
    if (ferror(s->csv))
        return mw_err(MW_EIO, "summary file %s: read failed: %s", s->csv_path, strerror(errno));
    /* killed while writing the header: no row is there, start the file again */
    if (len > 0 && !s->csv_header && ftruncate(fileno(s->csv), 0) != 0)
        return mw_err(MW_EIO, "summary file %s: cannot truncate: %s", s->csv_path, strerror(errno));
    /* a run killed mid-row leaves no final newline: end that row first */
    int last = fseek(s->csv, -1, SEEK_END) == 0 ? fgetc(s->csv) : '\n';
    fseek(s->csv, 0, SEEK_END); /* C wants a seek between reading and writing */
    if (last != '\n' && last != EOF && fputc('\n', s->csv) == EOF)
        return mw_err(MW_EIO, "summary file %s: write failed: %s", s->csv_path, strerror(errno));
    return MW_OK;
}

void mw_summary_init(mw_summary *s)
{
    memset(s, 0, sizeof *s);
}

mw_status mw_summary_open(mw_summary *s, const char *dir, int append)
{
    mw_summary_init(s);
    mw_status rc;
    if (!dir || !*dir)
        return mw_err(MW_EINVAL, "summary dir: empty path");
    MW_TRY_GOTO(mw_fs_mkdir_p(dir, "summary dir"), rc, fail);
    MW_TRY_GOTO(open_events(s, dir), rc, fail);
    MW_TRY_GOTO(open_csv(s, dir, append), rc, fail);

    static const char version[] = "brain.Event:2";
    unsigned char buf[64], *p = buf;
    p = put_double(p, 1, wall_time());
    p = put_bytes(p, 3, version, sizeof version - 1);
    MW_TRY_GOTO(write_record(s, buf, (size_t)(p - buf)), rc, fail);
    MW_TRY_GOTO(mw_summary_flush(s), rc, fail);
    return MW_OK;
fail:
    mw_summary_close(s);
    return rc;
}

mw_status mw_summary_scalar(mw_summary *s, const char *tag, long step, double value)
{
    if (!s->events)
        return mw_err(MW_EINTERNAL, "summary: scalar '%s' written to a closed writer", tag);
    size_t tlen = strlen(tag);
    if (tlen == 0)
        return mw_err(MW_EINVAL, "summary file %s: empty tag", s->events_path);
    /* sizes inside out: Value, then Summary holding it */
    size_t value_n = 1 + varint_size(tlen) + tlen + 1 + 4;
    size_t summary_n = 1 + varint_size(value_n) + value_n;
    size_t cap = 9 + 1 + 10 + 1 + varint_size(summary_n) + summary_n;
    unsigned char *buf = malloc(cap), *p = buf;
    if (!buf)
        return mw_err(MW_ENOMEM, "summary file %s: out of memory", s->events_path);
    p = put_double(p, 1, wall_time());
    if (step != 0) /* proto3 leaves out a default scalar; simple_value is in a oneof, kept */
        p = put_varint(put_key(p, 2, WT_VARINT), (uint64_t)(int64_t)step);
    p = put_varint(put_key(p, 5, WT_LEN), summary_n);
    p = put_varint(put_key(p, 1, WT_LEN), value_n);
    p = put_bytes(p, 1, tag, tlen);
    p = put_float(p, 2, (float)value);
    mw_status rc = write_record(s, buf, (size_t)(p - buf));
    free(buf);
    return rc;
}

/* "step,epoch,name1,...": the header this row's names give; NULL on OOM. */
static char *header_for(const char *const *names, int n)
{
    size_t len = sizeof "step,epoch";
    for (int i = 0; i < n; i++)
        len += strlen(names[i]) + 1;
    char *h = malloc(len), *p = h;
    if (!h)
        return NULL;
    p += sprintf(p, "step,epoch");
    for (int i = 0; i < n; i++)
        p += sprintf(p, ",%s", names[i]);
    return h;
}

mw_status mw_summary_row(mw_summary *s, long step, int epoch, const char *const *names,
                         const double *values, int n)
{
    if (!s->csv)
        return mw_err(MW_EINTERNAL, "summary: CSV row written to a closed writer");
    for (int i = 0; i < n; i++)
        if (!names[i][0] || strpbrk(names[i], ",\"\r\n"))
            return mw_err(MW_EINVAL,
                          "summary file %s: column name '%s' is empty or holds a comma, quote "
                          "or line break",
                          s->csv_path, names[i]);
    char *h = header_for(names, n);
    if (!h)
        return mw_err(MW_ENOMEM, "summary file %s: out of memory", s->csv_path);
    if (!s->csv_header) {
        if (fprintf(s->csv, "%s\n", h) < 0) {
            free(h);
            return mw_err(MW_EIO, "summary file %s: write failed: %s", s->csv_path,
                          strerror(errno));
        }
        s->csv_header = h;
    } else {
        mw_status rc = MW_OK;
        if (strcmp(h, s->csv_header) != 0)
            rc = mw_err(MW_EINVAL, "summary file %s: columns '%s' differ from its header '%s'",
                        s->csv_path, h, s->csv_header);
        free(h);
        if (rc != MW_OK)
            return rc;
    }
    int bad = fprintf(s->csv, "%ld,%d", step, epoch) < 0;
    for (int i = 0; i < n && !bad; i++)
        bad = fprintf(s->csv, ",%.9g", values[i]) < 0;
    if (bad || fputc('\n', s->csv) == EOF)
        return mw_err(MW_EIO, "summary file %s: write failed: %s", s->csv_path, strerror(errno));
    return MW_OK;
}

mw_status mw_summary_flush(mw_summary *s)
{
    if (s->events && fflush(s->events) != 0)
        return mw_err(MW_EIO, "summary file %s: write failed: %s", s->events_path, strerror(errno));
    if (s->csv && fflush(s->csv) != 0)
        return mw_err(MW_EIO, "summary file %s: write failed: %s", s->csv_path, strerror(errno));
    return MW_OK;
}

void mw_summary_close(mw_summary *s)
{
    if (s->events)
        fclose(s->events);
    if (s->csv)
        fclose(s->csv);
    free(s->events_path);
    free(s->csv_path);
    free(s->csv_header);
    mw_summary_init(s);
}
