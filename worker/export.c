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

/* One tensor of the file: a view into params with its Keras name and shape. */
typedef struct {
    char name[80];
    const float *data;
    size_t count;
    int rank;
    json_int_t shape[4];
} tensor;

/* BatchNormalization's tensors under Keras' names: gamma (when scale), beta (when
 * center), moving_mean, moving_variance, each of shape (C). */
static void bn_tensors(const mw_layer *l, const float *params, tensor *t, int *nt)
{
    const char *names[4] = {"gamma", "beta", "moving_mean", "moving_variance"};
    const size_t off[4] = {l->w_off, l->b_off, l->s_off, l->s_off + (size_t)l->out_c};
    const size_t count[4] = {l->w_count, l->b_count, (size_t)l->out_c, (size_t)l->out_c};
    for (int i = 0; i < 4; i++) {
        if (!count[i])
            continue;
        tensor *x = &t[(*nt)++];
        snprintf(x->name, sizeof x->name, "%s/%s", l->name, names[i]);
        x->data = params + off[i];
        x->count = count[i];
        x->rank = 1;
        x->shape[0] = l->out_c;
    }
}

/* The tensors of layer l (0 to 4) into t; MW_EINTERNAL when the model's
 * counts disagree with the shapes (a bug, not bad input). */
static mw_status layer_tensors(const mw_layer *l, const float *params, tensor *t, int *nt,
                               const char *path)
{
    *nt = 0;
    if (l->kind == MW_LAYER_BATCHNORM) {
        bn_tensors(l, params, t, nt);
        return MW_OK;
    }
    if (l->kind != MW_LAYER_CONV2D && l->kind != MW_LAYER_DENSE) {
        if (l->w_count || l->b_count) /* a new layer kind must get its names and shapes here */
            return mw_err(MW_EUNSUPPORTED,
                          "export %s: layer '%s' has parameters of a kind "
                          "the exporter does not know",
                          path, l->name);
        return MW_OK;
    }
    tensor *k = &t[(*nt)++];
    snprintf(k->name, sizeof k->name, "%s/kernel", l->name);
    k->data = params + l->w_off;
    k->count = l->w_count;
    if (l->kind == MW_LAYER_CONV2D) {
        k->rank = 4;
        k->shape[0] = l->conv.KH, k->shape[1] = l->conv.KW;
        k->shape[2] = l->conv.C, k->shape[3] = l->conv.O;
    } else {
        k->rank = 2;
        k->shape[0] = (json_int_t)l->in_h * l->in_w * l->in_c, k->shape[1] = l->out_c;
    }
    if (l->has_bias) {
        tensor *b = &t[(*nt)++];
        snprintf(b->name, sizeof b->name, "%s/bias", l->name);
        b->data = params + l->b_off;
        b->count = l->b_count;
        b->rank = 1;
        b->shape[0] = l->out_c;
    }
    for (int i = 0; i < *nt; i++) {
        json_int_t n = 1;
        for (int d = 0; d < t[i].rank; d++)
            n *= t[i].shape[d];
        if ((size_t)n != t[i].count)
            return mw_err(MW_EINTERNAL, "export %s: tensor %s holds %zu values, its shape %lld",
                          path, t[i].name, t[i].count, (long long)n);
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
        tensor t[4];
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
        tensor t[4];
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
