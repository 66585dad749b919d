/* safetensors export of the parameter arena; format in export.h.
 *
 * Steps: build the header with jansson (insertion order kept, so the names
 * appear in model order), pad it with spaces to a multiple of 8 so the data
 * that follows is aligned, then write header length, header and the tensors
 * to a temp file beside the target, fsync it, rename it over the target and
 * fsync the directory so the rename itself is durable. */
#include "worker/export.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/keras_archive.h"
#include "worker/keras_h5.h"
#include "worker/keras_vars.h"

/* One tensor of the file: a view into params with its Keras name and shape. */
typedef struct {
    char name[80];
    const float *data;
    size_t count;
    int rank;
    json_int_t shape[4];
} tensor;

/* The tensors of layer l (at most MW_KERAS_MAX_VARS) into t, from the Keras variable table
 * (worker/keras_vars.h): <layer>/<variable>. */
static mw_status layer_tensors(const mw_layer *l, const float *params, tensor *t, int *nt,
                               const char *path)
{
    mw_keras_var v[MW_KERAS_MAX_VARS];
    *nt = 0;
    if (mw_keras_layer_vars(l, v, nt) != MW_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", mw_err_msg());
        mw_status s = mw_err_status();
        mw_err_clear();
        return mw_err(s, "export %s: %s", path, msg);
    }
    for (int i = 0; i < *nt; i++) {
        snprintf(t[i].name, sizeof t[i].name, "%s/%s", l->name, v[i].name);
        t[i].data = params + v[i].off;
        t[i].count = v[i].count;
        t[i].rank = v[i].rank;
        for (int d = 0; d < v[i].rank; d++)
            t[i].shape[d] = (json_int_t)v[i].shape[d];
    }
    return MW_OK;
}

static json_t *tensor_entry(const tensor *t, size_t begin)
{
    json_t *shape = json_array();
    for (int d = 0; d < t->rank; d++)
        json_array_append_new(shape, json_integer(t->shape[d]));
    json_t *offsets = json_array();
    json_array_append_new(offsets, json_integer((json_int_t)begin));
    json_array_append_new(offsets, json_integer((json_int_t)(begin + t->count * 4)));
    return json_pack("{s:s, s:o, s:o}", "dtype", "F32", "shape", shape, "data_offsets", offsets);
}

/* The JSON header, space-padded to a multiple of 8 (malloc'ed, *nbytes its length). */
static mw_status build_header(const mw_model *m, const float *params, const char *path, char **out,
                              size_t *nbytes)
{
    json_t *root = json_object();
    json_t *meta = json_pack("{s:s}", "format", "mwtrain");
    if (!root || !meta || json_object_set_new(root, "__metadata__", meta) != 0) {
        json_decref(root);
        return mw_err(MW_ENOMEM, "export %s: out of memory", path);
    }
    mw_status rc = MW_OK;
    size_t offset = 0;
    for (int i = 0; i < m->nlayers && rc == MW_OK; i++) {
        tensor t[MW_KERAS_MAX_VARS];
        int nt;
        rc = layer_tensors(&m->layers[i], params, t, &nt, path);
        for (int j = 0; j < nt && rc == MW_OK; j++) {
            if (json_object_get(root, t[j].name)) {
                rc = mw_err(MW_EMODEL, "export %s: two tensors are named '%s'", path, t[j].name);
                break;
            }
            json_t *e = tensor_entry(&t[j], offset);
            if (!e || json_object_set_new(root, t[j].name, e) != 0)
                rc = mw_err(MW_ENOMEM, "export %s: out of memory", path);
            offset += t[j].count * 4;
        }
    }
    char *text = rc == MW_OK ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (rc != MW_OK)
        return rc;
    if (!text)
        return mw_err(MW_ENOMEM, "export %s: out of memory", path);
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    char *h = realloc(text, padded + 1);
    if (!h) {
        free(text);
        return mw_err(MW_ENOMEM, "export %s: out of memory", path);
    }
    memset(h + len, ' ', padded - len);
    h[padded] = '\0';
    *out = h, *nbytes = padded;
    return MW_OK;
}

static void put_le(unsigned char *p, uint64_t v, int nbytes)
{
    for (int i = 0; i < nbytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Floats as little-endian bytes whatever the host order, in chunks. */
static int write_floats(FILE *f, const float *x, size_t count)
{
    unsigned char buf[4096 * 4];
    while (count) {
        size_t n = count < 4096 ? count : 4096;
        for (size_t i = 0; i < n; i++) {
            uint32_t bits;
            memcpy(&bits, &x[i], 4);
            put_le(buf + 4 * i, bits, 4);
        }
        if (fwrite(buf, 4, n, f) != n)
            return -1;
        x += n, count -= n;
    }
    return 0;
}

static mw_status write_body(FILE *f, const mw_model *m, const float *params, const char *hdr,
                            size_t hdr_nbytes, const char *path)
{
    unsigned char len[8];
    put_le(len, hdr_nbytes, 8);
    if (fwrite(len, 1, 8, f) != 8 || fwrite(hdr, 1, hdr_nbytes, f) != hdr_nbytes)
        return mw_err(MW_EIO, "export %s: write failed: %s", path, strerror(errno));
    for (int i = 0; i < m->nlayers; i++) {
        tensor t[MW_KERAS_MAX_VARS];
        int nt;
        MW_TRY(layer_tensors(&m->layers[i], params, t, &nt, path));
        for (int j = 0; j < nt; j++)
            if (write_floats(f, t[j].data, t[j].count) != 0)
                return mw_err(MW_EIO, "export %s: write failed: %s", path, strerror(errno));
    }
    return MW_OK;
}

/* fsync the directory holding path, so a completed rename survives a crash. */
static mw_status sync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return mw_err(MW_EIO, "export %s: cannot open its directory: %s", path, strerror(errno));
    int bad = fsync(fd) != 0 && errno != EINVAL; /* some filesystems cannot sync a dir */
    int e = errno;
    close(fd);
    if (bad)
        return mw_err(MW_EIO, "export %s: cannot sync its directory: %s", path, strerror(e));
    return MW_OK;
}

mw_status mw_export_safetensors(const mw_model *m, const float *params, const char *path)
{
    if (!m->finalized || !params)
        return mw_err(MW_EINTERNAL, "export %s: the model has no parameters yet", path);
    char *hdr = NULL;
    size_t hdr_nbytes = 0;
    MW_TRY(build_header(m, params, path, &hdr, &hdr_nbytes));

    /* <path>.tmp.<pid>: unique among live writers; one left by a dead process
     * of the same pid is stale and truncated. open (not mkstemp) so the file
     * gets the usual 0666 & ~umask. */
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    if (!tmp) {
        free(hdr);
        return mw_err(MW_ENOMEM, "export %s: out of memory", path);
    }
    snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    mw_status rc = MW_OK;
    FILE *f = NULL;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        rc = mw_err(MW_EIO, "export %s: cannot create a file there: %s", path, strerror(errno));
        goto done;
    }
    if (!(f = fdopen(fd, "wb"))) {
        rc = mw_err(MW_EIO, "export %s: %s", path, strerror(errno));
        close(fd);
        goto fail;
    }
    MW_TRY_GOTO(write_body(f, m, params, hdr, hdr_nbytes, path), rc, fail);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        rc = mw_err(MW_EIO, "export %s: write failed: %s", path, strerror(errno));
        goto fail;
    }
    int closed = fclose(f);
    f = NULL;
    if (closed != 0) {
        rc = mw_err(MW_EIO, "export %s: write failed: %s", path, strerror(errno));
        goto fail;
    }
    if (rename(tmp, path) != 0) {
        rc = mw_err(MW_EIO, "export %s: cannot rename %s over it: %s", path, tmp, strerror(errno));
        goto fail;
    }
    rc = sync_dir(path);
    goto done;
fail:
    if (f)
        fclose(f);
    unlink(tmp);
done:
    free(tmp);
    free(hdr);
    return rc;
}

/* ---- .keras and .weights.h5 (worker/keras_archive.h, worker/keras_h5.h) ---- */

/* tmp (complete) onto the disk, renamed over path, the directory synced; tmp removed on
 * failure. */
static mw_status publish(const char *tmp, const char *path)
{
    int fd = open(tmp, O_RDONLY | O_CLOEXEC);
    mw_status rc = MW_OK;
    if (fd < 0 || fsync(fd) != 0)
        rc = mw_err(MW_EIO, "export %s: cannot sync %s: %s", path, tmp, strerror(errno));
    if (fd >= 0)
        close(fd);
    if (rc == MW_OK && rename(tmp, path) != 0)
        rc = mw_err(MW_EIO, "export %s: cannot rename %s over it: %s", path, tmp, strerror(errno));
    if (rc != MW_OK) {
        unlink(tmp);
        return rc;
    }
    return sync_dir(path);
}

static mw_status write_image(const char *tmp, const void *data, size_t n, const char *path)
{
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return mw_err(MW_EIO, "export %s: cannot create a file there: %s", path, strerror(errno));
    int bad = fwrite(data, 1, n, f) != n;
    bad |= fclose(f) != 0;
    if (bad) {
        unlink(tmp);
        return mw_err(MW_EIO, "export %s: write failed: %s", path, strerror(errno));
    }
    return MW_OK;
}

static mw_status export_other(const mw_model *m, const float *params, int keras,
                              const mw_keras_optimizer *opt, const char *path)
{
    if (!m->finalized || !params)
        return mw_err(MW_EINTERNAL, "export %s: the model has no parameters yet", path);
    char *tmp = malloc(strlen(path) + 32);
    if (!tmp)
        return mw_err(MW_ENOMEM, "export %s: out of memory", path);
    sprintf(tmp, "%s.tmp.%ld", path, (long)getpid()); /* as the safetensors writer's */
    mw_status rc;
    if (keras) {
        rc = mw_keras_archive_write(m, params, opt, tmp);
        if (rc != MW_OK)
            unlink(tmp);
    } else {
        void *img = NULL;
        size_t n = 0;
        rc = mw_keras_h5_write(m, params, opt, &img, &n, path);
        if (rc == MW_OK)
            rc = write_image(tmp, img, n, path);
        free(img);
    }
    if (rc == MW_OK)
        rc = publish(tmp, path);
    free(tmp);
    return rc;
}

mw_status mw_export_file(const mw_model *m, const float *params, const char *format,
                         const mw_keras_optimizer *opt, const char *path)
{
    if (!strcmp(format, "safetensors"))
        return mw_export_safetensors(m, params, path);
    if (!strcmp(format, "keras") || !strcmp(format, "weights-h5"))
        return export_other(m, params, format[0] == 'k', opt, path);
    return mw_err(MW_EINVAL, "export --format %s: expected safetensors, keras or weights-h5",
                  format);
}
