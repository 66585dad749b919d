/* safetensors export of the parameter arena; format in export.h.
 *
 * Steps: build the header with jansson (insertion order kept, so the names
 * appear in model order), pad it with spaces to a multiple of 8 so the data
 * that follows is aligned, then write header length, header and the tensors
 * to a temp file beside the target, fsync it, rename it over the target and
 * fsync the directory so the rename itself is durable. The .keras and .weights.h5 images are
 * made in memory and go out the same way. Only a regular file (or nothing) is ever replaced:
 * a FIFO, device node or socket at --output is refused (MW_EINVAL) before anything is
 * written, and again just before the rename; messages name --output, never the temporary. */
#include "worker/keras/export.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/preempt.h"
#include "worker/keras/keras_archive.h"
#include "worker/keras/keras_h5.h"
#include "worker/keras/keras_vars.h"

/* One tensor of the file: a view into params with its Keras name and shape. */
typedef struct {
    char name[MW_KERAS_SUB_MAX + 160];
    const float *data;
    size_t count;
    int swap01; /* data in the arena's order: see mw_keras_var.swap01 */
    int rank;
    json_int_t shape[4];
} tensor;

/* The tensors of Keras layer i of m (at most MW_KERAS_MAX_VARS; none for a layer that is not a
 * Keras layer of its own) into t, from the Keras variable table (worker/keras/keras_vars.h):
 * <layer>/<variable>, a block's part's <block>/<sublayer>/<variable>, Keras' variable paths. */
static mw_status layer_tensors(const mw_model *m, int i, const float *params, tensor *t, int *nt,
                               const char *path)
{
    mw_keras_var v[MW_KERAS_MAX_VARS];
    *nt = 0;
    if (!mw_keras_layer_is_own(&m->layers[i]))
        return MW_OK;
    if (mw_keras_vars(m, i, v, nt) != MW_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", mw_err_msg());
        mw_status s = mw_err_status();
        mw_err_clear();
        return mw_err(s, "export %s: %s", path, msg);
    }
    for (int j = 0; j < *nt; j++) {
        snprintf(t[j].name, sizeof t[j].name, "%s/%s", v[j].l->name, v[j].name);
        t[j].data = params + v[j].off;
        t[j].count = v[j].count;
        t[j].swap01 = v[j].swap01;
        t[j].rank = v[j].rank;
        for (int d = 0; d < v[j].rank; d++)
            t[j].shape[d] = (json_int_t)v[j].shape[d];
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
        rc = layer_tensors(m, i, params, t, &nt, path);
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

/* t's floats in Keras' layout (a swap01 tensor reordered through a copy). */
static mw_status write_tensor(FILE *f, const tensor *t, const char *path)
{
    float *tmp = t->swap01 ? malloc(t->count * sizeof *tmp) : NULL;
    if (t->swap01 && !tmp)
        return mw_err(MW_ENOMEM, "export %s: out of memory to reorder %s", path, t->name);
    if (tmp)
        mw_kvar_swap01(t->data, tmp, (long long)t->shape[1], (long long)t->shape[0], t->count);
    const int rc = write_floats(f, tmp ? tmp : t->data, t->count);
    free(tmp);
    if (rc != 0)
        return mw_err(MW_EIO, "export %s: cannot write it: %s (nothing was replaced)", path,
                      strerror(errno));
    return MW_OK;
}

static mw_status write_body(FILE *f, const mw_model *m, const float *params, const char *hdr,
                            size_t hdr_nbytes, const char *path)
{
    unsigned char len[8];
    put_le(len, hdr_nbytes, 8);
    if (fwrite(len, 1, 8, f) != 8 || fwrite(hdr, 1, hdr_nbytes, f) != hdr_nbytes)
        return mw_err(MW_EIO, "export %s: cannot write it: %s (nothing was replaced)", path,
                      strerror(errno));
    for (int i = 0; i < m->nlayers; i++) {
        tensor t[MW_KERAS_MAX_VARS];
        int nt;
        MW_TRY(layer_tensors(m, i, params, t, &nt, path));
        for (int j = 0; j < nt; j++)
            MW_TRY(write_tensor(f, &t[j], path));
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

/* What is at path may be replaced only when it is a regular file (or nothing): a FIFO, a
 * device node (--output /dev/null, as root, would replace the system's) or a socket never is.
 * MW_EINVAL (exit 2, a bad --output) otherwise. */
static mw_status check_target(const char *path)
{
    const char *kind = mw_fs_output_kind(path);
    if (kind)
        return mw_err(MW_EINVAL,
                      "export --output %s: is %s; expected a regular file or a new name (only "
                      "a regular file is ever replaced)",
                      path, kind);
    return MW_OK;
}

/* The temporary file beside path, <path>.tmp.<pid>, created new (a leftover of a dead process
 * with the same pid, or a link planted there, is removed first: nothing is written through it)
 * with the usual 0666 & ~umask. *tmp is malloc'ed; messages name path, never the temporary. */
static mw_status create_tmp(const char *path, char **tmp, int *fd)
{
    *fd = -1;
    const size_t tlen = strlen(path) + 32;
    if (!(*tmp = malloc(tlen)))
        return mw_err(MW_ENOMEM, "export %s: out of memory", path);
    snprintf(*tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    unlink(*tmp);
    *fd = mw_preempt_temp_create(*tmp, O_WRONLY | O_NOFOLLOW, 0666); /* a signal removes it */
    if (*fd < 0)
        return mw_err(MW_EIO, "export %s: cannot create a file beside it: %s", path,
                      strerror(errno));
    return MW_OK;
}

/* tmp (written, its descriptor fd still open) onto the disk and renamed over path, the
 * directory synced; tmp removed on failure. Every message names path and the reason. */
static mw_status publish(const char *tmp, int fd, const char *path)
{
    mw_status rc = MW_OK;
    if (fsync(fd) != 0)
        rc = mw_err(MW_EIO, "export %s: cannot write it: %s (nothing was replaced)", path,
                    strerror(errno));
    if (close(fd) != 0 && rc == MW_OK)
        rc = mw_err(MW_EIO, "export %s: cannot write it: %s (nothing was replaced)", path,
                    strerror(errno));
    if (rc == MW_OK)
        rc = check_target(path); /* again: it may have been replaced since the start */
    if (rc == MW_OK && rename(tmp, path) != 0)
        rc = mw_err(MW_EIO, "export %s: cannot rename the finished file over it: %s", path,
                    strerror(errno));
    if (rc != MW_OK) {
        unlink(tmp);
        return rc;
    }
    return sync_dir(path);
}

/* All of data into fd; 0 or an errno (ENOSPC for a write that made no progress). */
static int write_all(int fd, const void *data, size_t n)
{
    const unsigned char *p = data;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : ENOSPC;
        p += w, n -= (size_t)w;
    }
    return 0;
}

mw_status mw_export_safetensors(const mw_model *m, const float *params, const char *path)
{
    if (!m->finalized || !params)
        return mw_err(MW_EINTERNAL, "export %s: the model has no parameters yet", path);
    MW_TRY(check_target(path));
    char *hdr = NULL;
    size_t hdr_nbytes = 0;
    MW_TRY(build_header(m, params, path, &hdr, &hdr_nbytes));
    char *tmp = NULL;
    int fd = -1;
    mw_status rc = create_tmp(path, &tmp, &fd);
    FILE *f = NULL;
    if (rc == MW_OK && !(f = fdopen(dup(fd), "wb")))
        rc = mw_err(MW_EIO, "export %s: %s", path, strerror(errno));
    if (rc == MW_OK)
        rc = write_body(f, m, params, hdr, hdr_nbytes, path);
    if (f && fclose(f) != 0 && rc == MW_OK)
        rc = mw_err(MW_EIO, "export %s: cannot write it: %s (nothing was replaced)", path,
                    strerror(errno));
    if (rc == MW_OK) {
        rc = publish(tmp, fd, path); /* closes fd */
    } else if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    mw_preempt_temp_done(tmp); /* renamed or removed by now */
    free(tmp);
    free(hdr);
    return rc;
}

/* ---- .keras and .weights.h5 (worker/keras/keras_archive.h, worker/keras/keras_h5.h) ---- */

static mw_status export_other(const mw_model *m, const float *params, int keras,
                              const mw_keras_optimizer *opt, const char *path)
{
    if (!m->finalized || !params)
        return mw_err(MW_EINTERNAL, "export %s: the model has no parameters yet", path);
    MW_TRY(check_target(path));
    void *img = NULL;
    size_t n = 0;
    if (keras)
        MW_TRY(mw_keras_archive_image(m, params, opt, path, &img, &n));
    else
        MW_TRY(mw_keras_h5_write(m, params, opt, &img, &n, path));
    char *tmp = NULL;
    int fd = -1;
    mw_status rc = create_tmp(path, &tmp, &fd);
    if (rc == MW_OK) {
        const int e = write_all(fd, img, n);
        if (e) {
            rc = mw_err(MW_EIO, "export %s: cannot write it: %s (nothing was replaced)", path,
                        strerror(e));
            close(fd);
            unlink(tmp);
        } else {
            rc = publish(tmp, fd, path); /* closes fd */
        }
    }
    mw_preempt_temp_done(tmp); /* renamed or removed by now */
    free(tmp);
    free(img);
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
