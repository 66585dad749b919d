/* Keras .weights.h5 through libhdf5; layout in keras_h5.h.
 *
 * Reading: the image is opened in memory (the core driver with a file image, no disk), then
 * each layer of the model with variables (worker/keras/keras_vars.h) looks up its vars group,
 * checks the number of datasets, each dataset's type (32-bit float) and shape, and reads it
 * straight into the arena; last, every layer group of the file must belong to the model.
 * Writing builds the same tree in an in-memory file and hands back its image. */
#include "worker/keras/keras_h5.h"

#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/keras/keras_vars.h"

/* The in-memory files' name: the core driver refuses a file image whose name exists on disk,
 * and nothing can exist under /dev/null. */
#define IMAGE_NAME "/dev/null/mwtrain-weights.h5"

/* Our messages, not HDF5's error stack; and no filter plugin is ever loaded (a dataset's filter
 * id would otherwise pick a shared library from HDF5_PLUGIN_PATH). */
static void quiet(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    H5PLset_loading_state(0);
}

static void close_id(hid_t id, herr_t (*fn)(hid_t))
{
    if (id >= 0)
        fn(id);
}

/* "(3, 3, 1, 32)" */
static void shape_str(char *buf, size_t len, const long long *d, int rank)
{
    size_t n = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < rank && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? ", " : "", d[i]);
    if (n < len)
        snprintf(buf + n, len - n, "%s)", rank == 1 ? "," : "");
}

/* ---- what a weights file may contain: its own groups and datasets, nothing else ----
 *
 * HDF5 can make a file's objects lead elsewhere: an external link opens another file, a soft
 * link chains to any path (an external link included), a dataset's raw data may live in
 * external files of the host (external storage) or in other datasets and files (a virtual
 * dataset), and a filter id may load a plugin library. A .keras archive comes from anywhere
 * and must hold its weights itself, as Keras writes them (hard links, contiguous datasets), so
 * every link the reader follows must be a hard link and every dataset it reads compact,
 * contiguous or chunked (chunks no larger than the dataset) in the file itself, with no filter
 * but shuffle and fletcher32 (which do not change the data's size). Anything else is MW_EDATA
 * naming the object, before HDF5 touches what it names. The link access list refuses external
 * links too, in case a path is ever followed that was not checked. */

static herr_t refuse_elink(const char *parent, const char *file, const char *obj,
                           const char *parent_obj, unsigned *acc, hid_t fapl, void *op)
{
    (void)parent, (void)file, (void)obj, (void)parent_obj, (void)acc, (void)fapl, (void)op;
    return -1;
}

/* The access lists of every group and dataset open: external links fail. */
typedef struct {
    hid_t gapl, dapl;
} access_lists;

static void access_free(access_lists *a)
{
    close_id(a->gapl, H5Pclose);
    close_id(a->dapl, H5Pclose);
}

/* 0 when both lists could be made. */
static int access_make(access_lists *a)
{
    a->gapl = H5Pcreate(H5P_GROUP_ACCESS);
    a->dapl = H5Pcreate(H5P_DATASET_ACCESS);
    return a->gapl >= 0 && a->dapl >= 0 && H5Pset_elink_cb(a->gapl, refuse_elink, NULL) >= 0 &&
                   H5Pset_elink_cb(a->dapl, refuse_elink, NULL) >= 0
               ? 0
               : -1;
}

/* What link `name` of loc is, when it is not a hard link: "an HDF5 external link to
 * 'FILE:/OBJ'", "a soft link to '/PATH'", "a user-defined HDF5 link (type N)". */
static void describe_link(hid_t loc, const char *name, const H5L_info_t *li, char *buf, size_t cap)
{
    char val[512] = "";
    const size_t n = li->u.val_size < sizeof val ? li->u.val_size : sizeof val - 1;
    const int got = n > 0 && H5Lget_val(loc, name, val, sizeof val, H5P_DEFAULT) >= 0;
    val[sizeof val - 1] = '\0';
    if (li->type == H5L_TYPE_SOFT) {
        snprintf(buf, cap, "a soft link to '%s'", got ? val : "?");
    } else if (li->type == H5L_TYPE_EXTERNAL) {
        const char *file = NULL, *obj = NULL;
        unsigned flags = 0;
        if (got && H5Lunpack_elink_val(val, n, &flags, &file, &obj) >= 0 && file && obj)
            snprintf(buf, cap, "an HDF5 external link to '%s:%s'", file, obj);
        else
            snprintf(buf, cap, "an HDF5 external link");
    } else {
        snprintf(buf, cap, "a user-defined HDF5 link (type %d)", (int)li->type);
    }
}

/* Link `name` of loc (its path in the file for messages: where) must exist as a hard link.
 * *exists: 0 when there is no such link (not an error here); NULL: missing is an error too. */
static mw_status hard_link(hid_t loc, const char *name, const char *where, const char *origin,
                           int *exists)
{
    if (exists)
        *exists = 0;
    const htri_t e = loc >= 0 ? H5Lexists(loc, name, H5P_DEFAULT) : 0;
    if (e < 0)
        return mw_err(MW_EDATA, "%s: %s cannot be looked up (corrupt file?)", origin, where);
    if (e == 0)
        return exists ? MW_OK : mw_err(MW_EDATA, "%s: %s is missing", origin, where);
    H5L_info_t li;
    if (H5Lget_info(loc, name, &li, H5P_DEFAULT) < 0)
        return mw_err(MW_EDATA, "%s: %s cannot be read (corrupt file?)", origin, where);
    if (li.type != H5L_TYPE_HARD) {
        char what[700];
        describe_link(loc, name, &li, what, sizeof what);
        return mw_err(MW_EDATA,
                      "%s: %s is %s; a .keras archive must hold its weights itself (HDF5 "
                      "links, external storage and virtual datasets are refused)",
                      origin, where, what);
    }
    if (exists)
        *exists = 1;
    return MW_OK;
}

/* Dataset d (where, for messages, names it and the variable) keeps its data in the file, in a
 * layout the reader accepts; rank and dims are its shape. */
static mw_status check_storage(hid_t d, const char *where, const char *origin)
{
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0)
        return mw_err(MW_EDATA, "%s: %s: its storage cannot be read (corrupt file?)", origin,
                      where);
    mw_status rc = MW_OK;
    const H5D_layout_t layout = H5Pget_layout(dcpl);
    const int next = H5Pget_external_count(dcpl);
    const int nfilters = layout == H5D_CHUNKED ? H5Pget_nfilters(dcpl) : 0;
    char name[512] = "";
    off_t offset = 0;
    hsize_t size = 0;
    if (layout == H5D_VIRTUAL) {
        rc = mw_err(MW_EDATA,
                    "%s: %s is a virtual dataset (its data would come from other datasets or "
                    "files); a .keras archive must hold its weights itself",
                    origin, where);
    } else if (next != 0) {
        if (next < 0 || H5Pget_external(dcpl, 0, sizeof name, name, &offset, &size) < 0)
            snprintf(name, sizeof name, "?");
        name[sizeof name - 1] = '\0';
        rc = mw_err(MW_EDATA,
                    "%s: %s keeps its data in the external file '%s' (HDF5 external storage, "
                    "%d file%s); a .keras archive must hold its weights itself",
                    origin, where, name, next, next == 1 ? "" : "s");
    } else if (layout != H5D_COMPACT && layout != H5D_CONTIGUOUS && layout != H5D_CHUNKED) {
        rc = mw_err(MW_EDATA, "%s: %s has an unknown HDF5 storage layout %d (corrupt file?)",
                    origin, where, (int)layout);
    } else if (nfilters < 0) {
        rc = mw_err(MW_EDATA, "%s: %s: its filters cannot be read (corrupt file?)", origin, where);
    }
    for (int i = 0; i < nfilters && rc == MW_OK; i++) {
        unsigned flags = 0, cd[8];
        size_t ncd = 8;
        const H5Z_filter_t f =
            H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cd, sizeof name, name, NULL);
        name[sizeof name - 1] = '\0';
        if (f != H5Z_FILTER_SHUFFLE && f != H5Z_FILTER_FLETCHER32)
            rc = mw_err(MW_EDATA,
                        "%s: %s is stored through the HDF5 filter %d ('%s'); weights are read "
                        "unfiltered, as Keras writes them (h5repack -f NONE rewrites a file "
                        "so), or shuffled with a fletcher32 checksum",
                        origin, where, (int)f, name[0] ? name : "unnamed");
    }
    H5Pclose(dcpl);
    return rc;
}

/* A chunk is read whole: a chunked dataset's chunks may not hold more than the dataset itself
 * and MW_H5_CHUNK_SLACK (chunks a little wider than the shape are h5py's way for a resizable
 * dataset; a 4 GiB chunk over twelve floats is not). itemsize: bytes per element. */
#define MW_H5_CHUNK_SLACK ((uint64_t)1 << 20)
static mw_status check_chunks(hid_t d, const hsize_t *dims, int rank, size_t itemsize,
                              const char *where, const char *origin)
{
    hid_t dcpl = H5Dget_create_plist(d);
    mw_status rc = MW_OK;
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) {
        hsize_t chunk[H5S_MAX_RANK];
        const int n = H5Pget_chunk(dcpl, H5S_MAX_RANK, chunk);
        uint64_t cb = itemsize, db = itemsize;
        int ok = n == rank;
        for (int k = 0; k < rank && ok; k++) {
            ok = chunk[k] >= 1 && chunk[k] <= ((uint64_t)1 << 32);
            cb *= ok ? chunk[k] : 1;
            db *= dims[k];
            ok = ok && cb <= ((uint64_t)1 << 40);
        }
        if (!ok)
            rc = mw_err(MW_EDATA, "%s: %s has an unreadable chunk shape (corrupt file?)", origin,
                        where);
        else if (cb > db + MW_H5_CHUNK_SLACK)
            rc = mw_err(MW_EDATA,
                        "%s: %s has chunks of %llu bytes, more than the dataset's %llu bytes and "
                        "%llu more (corrupt file?)",
                        origin, where, (unsigned long long)cb, (unsigned long long)db,
                        (unsigned long long)MW_H5_CHUNK_SLACK);
    }
    close_id(dcpl, H5Pclose);
    return rc;
}

/* The vars group of layer `name` of top (-1 when the file has none), every link to it hard. */
static mw_status open_vars(hid_t top, const char *top_name, const char *name,
                           const access_lists *acc, const char *origin, hid_t *out)
{
    *out = -1;
    char where[400];
    snprintf(where, sizeof where, "%s/%s", top_name, name);
    int exists = 0;
    MW_TRY(hard_link(top, name, where, origin, &exists));
    if (!exists)
        return MW_OK;
    hid_t g = H5Gopen2(top, name, acc->gapl);
    if (g < 0)
        return MW_OK; /* not a group: reported as missing weights where they are needed */
    snprintf(where, sizeof where, "%s/%s/vars", top_name, name);
    mw_status rc = hard_link(g, "vars", where, origin, &exists);
    if (rc == MW_OK && exists)
        *out = H5Gopen2(g, "vars", acc->gapl);
    H5Gclose(g);
    return rc;
}

static long long nlinks(hid_t g)
{
    H5G_info_t info;
    if (g < 0 || H5Gget_info(g, &info) < 0)
        return -1;
    return (long long)info.nlinks;
}

/* Variable i of layer l, checked and read into params. */
static mw_status read_var(hid_t vars, const access_lists *acc, int i, const mw_keras_var *v,
                          const mw_layer *l, const char *key, float *params, const char *origin,
                          const char *top)
{
    char ds[16], want[96], got[96], where[640];
    snprintf(ds, sizeof ds, "%d", i);
    shape_str(want, sizeof want, v->shape, v->rank);
    snprintf(where, sizeof where, "layer '%s': %s/%s/vars/%d (%s)", l->name, top, key, i, v->name);
    int exists = 0;
    MW_TRY(hard_link(vars, ds, where, origin, &exists));
    if (!exists)
        return mw_err(MW_EDATA, "%s: layer '%s' (%s): no dataset %s/%s/vars/%d for its %s %s",
                      origin, l->name, l->cls, top, key, i, v->name, want);
    mw_status rc = MW_OK;
    hid_t d = H5Dopen2(vars, ds, acc->dapl), t = -1, sp = -1;
    if (d < 0) {
        rc = mw_err(MW_EDATA, "%s: %s cannot be opened (corrupt file?)", origin, where);
        goto done;
    }
    /* where its data live, before anything (the extent of a virtual one) could reach them */
    MW_TRY_GOTO(check_storage(d, where, origin), rc, done);
    if ((t = H5Dget_type(d)) < 0 || (sp = H5Dget_space(d)) < 0) {
        rc = mw_err(MW_EDATA, "%s: %s cannot be opened (corrupt file?)", origin, where);
        goto done;
    }
    if (v->integer ? H5Tget_class(t) != H5T_INTEGER
                   : H5Tget_class(t) != H5T_FLOAT || H5Tget_size(t) != 4) {
        const H5T_class_t c = H5Tget_class(t);
        rc = mw_err(MW_EDATA, "%s: %s is %s%zu, expected %s", origin, where,
                    c == H5T_FLOAT     ? "float"
                    : c == H5T_INTEGER ? "int"
                                       : "a non-numeric type of size ",
                    8 * H5Tget_size(t), v->integer ? "an integer" : "float32");
        goto done;
    }
    hsize_t dims[H5S_MAX_RANK];
    const int rank = H5Sget_simple_extent_ndims(sp);
    long long gd[H5S_MAX_RANK];
    int same = rank == v->rank;
    if (rank < 0 || rank > H5S_MAX_RANK || H5Sget_simple_extent_dims(sp, dims, NULL) < 0) {
        rc = mw_err(MW_EDATA, "%s: %s has an unreadable shape", origin, where);
        goto done;
    }
    for (int k = 0; k < rank; k++) {
        gd[k] = (long long)dims[k];
        same = same && gd[k] == v->shape[k];
    }
    if (!same) {
        shape_str(got, sizeof got, gd, rank);
        rc = mw_err(MW_EDATA,
                    "%s: layer '%s' (%s): %s/%s/vars/%d (%s) has shape %s, config.json "
                    "makes it %s",
                    origin, l->name, l->cls, top, key, i, v->name, got, want);
        goto done;
    }
    MW_TRY_GOTO(check_chunks(d, dims, rank, sizeof(float), where, origin), rc, done);
    float *tmp = v->swap01 ? malloc(v->count * sizeof *tmp) : NULL; /* Keras' layout */
    if (v->swap01 && !tmp)
        rc = mw_err(MW_ENOMEM, "%s: %s: out of memory to reorder it", origin, where);
    else if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                     tmp ? tmp : params + v->off) < 0)
        rc = mw_err(MW_EDATA, "%s: %s cannot be read (truncated or corrupt file)", origin, where);
    else if (tmp)
        mw_kvar_swap01(tmp, params + v->off, v->shape[0], v->shape[1], v->count);
    free(tmp);
    for (size_t k = 0; rc == MW_OK && k < v->count; k++) /* no weight Keras saves is NaN */
        if (!isfinite(params[v->off + k]))
            rc = mw_err(MW_EDATA, "%s: %s: value %zu of %zu is %g (expected finite weights)",
                        origin, where, k, v->count, (double)params[v->off + k]);
done:
    close_id(sp, H5Sclose);
    close_id(t, H5Tclose);
    close_id(d, H5Dclose);
    return rc;
}

/* Variables v[0..nv), which all live in one vars group: layers/<key>/vars, or
 * layers/<key>/<sub>/vars for a sublayer's (MultiHeadAttention's query_dense, a block's
 * _self_attention_layer/query_dense, ...), each group on the way a hard link. */
static mw_status read_group(hid_t top, const char *top_name, const access_lists *acc,
                            const char *key, const mw_keras_var *v, int nv, float *params,
                            const char *origin)
{
    char path[400], pname[512], comp[400];
    snprintf(path, sizeof path, "%s%s%s", key, v[0].sub[0] ? "/" : "", v[0].sub);
    snprintf(comp, sizeof comp, "%s", path);
    snprintf(pname, sizeof pname, "%s", top_name);
    hid_t parent = top, vars = -1;
    mw_status rc = MW_OK;
    char *name = comp, *slash;
    while (rc == MW_OK && parent >= 0 && (slash = strchr(name, '/'))) { /* the groups above */
        *slash = '\0';
        char where[512];
        int exists = 0;
        snprintf(where, sizeof where, "%.270s/%.230s", pname, name);
        rc = hard_link(parent, name, where, origin, &exists);
        hid_t g = rc == MW_OK && exists ? H5Gopen2(parent, name, acc->gapl) : -1;
        if (rc == MW_OK && exists && g < 0)
            rc = mw_err(MW_EDATA, "%s: %s cannot be opened (corrupt file?)", origin, where);
        if (parent != top)
            H5Gclose(parent);
        parent = g;
        snprintf(pname, sizeof pname, "%s", where);
        name = slash + 1;
    }
    if (rc == MW_OK && parent >= 0)
        rc = open_vars(parent, pname, name, acc, origin, &vars);
    if (parent >= 0 && parent != top)
        H5Gclose(parent);
    const mw_layer *l = v[0].l;
    if (rc == MW_OK && vars < 0)
        rc = mw_err(MW_EDATA, "%s: no weights for layer '%s' (%s): group %s/%s/vars is missing",
                    origin, l->name, l->cls, top_name, path);
    const long long n = rc == MW_OK ? nlinks(vars) : 0;
    if (rc == MW_OK && n != nv)
        rc = mw_err(MW_EDATA,
                    "%s: layer '%s' (%s) has %lld variables in %s/%s/vars; config.json "
                    "gives it %d (%s%s%s)",
                    origin, l->name, l->cls, n, top_name, path, nv, v[0].name, nv > 1 ? ", " : "",
                    nv > 1 ? v[1].name : "");
    for (int i = 0; i < nv && rc == MW_OK; i++)
        rc = read_var(vars, acc, v[i].idx, &v[i], v[i].l, path, params, origin, top_name);
    close_id(vars, H5Gclose);
    return rc;
}

static mw_status read_layer(hid_t top, const char *top_name, const access_lists *acc,
                            const mw_model *m, int li, const char *key, float *params,
                            const char *origin)
{
    mw_keras_var v[MW_KERAS_MAX_VARS];
    int nv = 0;
    if (!mw_keras_layer_is_own(&m->layers[li]))
        return MW_OK;
    MW_TRY(mw_keras_vars(m, li, v, &nv));
    for (int i = 0, j; i < nv; i = j) { /* each run of variables of one group */
        for (j = i + 1; j < nv && !strcmp(v[j].sub, v[i].sub); j++)
            ;
        MW_TRY(read_group(top, top_name, acc, key, v + i, j - i, params, origin));
    }
    return MW_OK;
}

/* Every layer group of the file with variables must be a layer of m that has them. */
static mw_status check_extra(hid_t top, const char *top_name, const access_lists *acc,
                             const mw_model *m, const char *keys, const char *origin)
{
    const long long n = nlinks(top);
    for (long long i = 0; i < n; i++) {
        char name[256];
        if (H5Lget_name_by_idx(top, ".", H5_INDEX_NAME, H5_ITER_INC, (hsize_t)i, name, sizeof name,
                               H5P_DEFAULT) < 0)
            return mw_err(MW_EDATA, "%s: the group %s cannot be listed (corrupt file?)", origin,
                          top_name);
        int found = 0;
        for (int j = 0; j < m->nlayers && !found; j++)
            found = mw_keras_layer_is_own(&m->layers[j]) &&
                    !strcmp(keys + (size_t)j * MW_KERAS_KEY_MAX, name);
        if (found)
            continue;
        hid_t vars;
        MW_TRY(open_vars(top, top_name, name, acc, origin, &vars));
        const long long nvars = nlinks(vars);
        close_id(vars, H5Gclose);
        if (nvars > 0)
            return mw_err(MW_EDATA,
                          "%s: weights %s/%s/vars belong to no layer of config.json "
                          "(layers are keyed by class: dense, dense_1, ...)",
                          origin, top_name, name);
    }
    return MW_OK;
}

/* ---- the file image, used in place ----
 *
 * H5Pset_file_image and the core driver each copy an image by default: a weights file would
 * take three times its size in memory. These callbacks hand HDF5 the caller's buffer for every
 * copy instead (the file is opened read-only, so nothing writes to it), as H5LT's
 * H5LT_FILE_IMAGE_DONT_COPY does. */
typedef struct {
    void *buf;
    size_t nbytes;
} image_ref;

static void *image_malloc(size_t size, H5FD_file_image_op_t op, void *udata)
{
    const image_ref *r = udata;
    (void)op;
    return size == r->nbytes ? r->buf : NULL;
}

static void *image_memcpy(void *dest, const void *src, size_t size, H5FD_file_image_op_t op,
                          void *udata)
{
    const image_ref *r = udata;
    (void)op;
    /* every copy is of the buffer onto itself */
    return dest == r->buf && src == r->buf && size == r->nbytes ? dest : NULL;
}

static void *image_realloc(void *ptr, size_t size, H5FD_file_image_op_t op, void *udata)
{
    (void)ptr, (void)size, (void)op, (void)udata;
    return NULL; /* read-only: the image never grows */
}

static herr_t image_free(void *ptr, H5FD_file_image_op_t op, void *udata)
{
    (void)op;
    return ptr == ((const image_ref *)udata)->buf ? 0 : -1;
}

static void *udata_copy(void *udata)
{
    return udata;
}

static herr_t udata_free(void *udata)
{
    (void)udata;
    return 0;
}

mw_status mw_keras_h5_read(const mw_model *m, float *params, const void *image, size_t nbytes,
                           const char *origin)
{
    quiet();
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    if (nbytes < 8 || memcmp(image, sig, 8) != 0)
        return mw_err(MW_EDATA, "%s: not an HDF5 file (no HDF5 signature at its start)", origin);
    image_ref ref = {(void *)image, nbytes};
    H5FD_file_image_callbacks_t cb = {image_malloc, image_memcpy, image_realloc, image_free,
                                      udata_copy,   udata_free,   &ref};
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), f = -1, top = -1;
    access_lists acc;
    mw_status rc = MW_OK;
    char *keys = NULL;
    if (access_make(&acc) < 0 || fapl < 0 || H5Pset_fapl_core(fapl, 1 << 16, 0) < 0 ||
        H5Pset_file_image_callbacks(fapl, &cb) < 0 ||
        H5Pset_file_image(fapl, (void *)image, nbytes) < 0) {
        rc = mw_err(MW_ENOMEM, "%s: cannot set up an in-memory HDF5 file", origin);
        goto done;
    }
    if ((f = H5Fopen(IMAGE_NAME, H5F_ACC_RDONLY, fapl)) < 0) {
        rc = mw_err(MW_EDATA, "%s: HDF5 cannot open it (truncated or corrupt file)", origin);
        goto done;
    }
    int keras3 = 0, keras2 = 0;
    MW_TRY_GOTO(hard_link(f, "layers", "layers", origin, &keras3), rc, done);
    if (!keras3)
        MW_TRY_GOTO(hard_link(f, "_layer_checkpoint_dependencies", "_layer_checkpoint_dependencies",
                              origin, &keras2),
                    rc, done);
    const char *top_name = keras2 ? "_layer_checkpoint_dependencies" : "layers";
    top = keras3 || keras2 ? H5Gopen2(f, top_name, acc.gapl) : -1;
    MW_TRY_GOTO(mw_keras_layer_keys(m, &keys), rc, done);
    for (int i = 0; i < m->nlayers && rc == MW_OK; i++)
        rc = read_layer(top, top_name, &acc, m, i, keys + (size_t)i * MW_KERAS_KEY_MAX, params,
                        origin);
    if (rc == MW_OK && top >= 0)
        rc = check_extra(top, top_name, &acc, m, keys, origin);
done:
    free(keys);
    close_id(top, H5Gclose);
    close_id(f, H5Fclose);
    access_free(&acc);
    close_id(fapl, H5Pclose);
    return rc;
}

/* ---- writing ---- */

/* A vars group at parent/name/vars with attribute name=label (h5py's variable-length UTF-8
 * string, as Keras writes it); its id, or -1. */
static hid_t make_vars(hid_t parent, const char *name, const char *label)
{
    /* a nested sublayer's path (a ViTEncoder's encoder_layers/vi_t_encoder_block/mha): the
     * groups above it are made too */
    hid_t lcpl = name ? H5Pcreate(H5P_LINK_CREATE) : -1;
    hid_t g = lcpl >= 0 && H5Pset_create_intermediate_group(lcpl, 1) >= 0
                  ? H5Gcreate2(parent, name, lcpl, H5P_DEFAULT, H5P_DEFAULT)
                  : -1;
    close_id(lcpl, H5Pclose);
    hid_t where = name ? g : parent;
    if (name && g < 0)
        return -1;
    hid_t v = H5Gcreate2(where, "vars", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    close_id(g, H5Gclose);
    if (v < 0)
        return -1;
    hid_t st = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), a = -1;
    int ok = st >= 0 && sp >= 0 && H5Tset_size(st, H5T_VARIABLE) >= 0 &&
             H5Tset_cset(st, H5T_CSET_UTF8) >= 0 &&
             (a = H5Acreate2(v, "name", st, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0 &&
             H5Awrite(a, st, &label) >= 0;
    close_id(a, H5Aclose);
    close_id(sp, H5Sclose);
    close_id(st, H5Tclose);
    if (!ok) {
        H5Gclose(v);
        return -1;
    }
    return v;
}

/* dataset vars/<i> of the given type, shape and data. */
static int put(hid_t vars, int i, hid_t file_type, hid_t mem_type, int rank, const long long *shape,
               const void *data)
{
    char ds[16];
    snprintf(ds, sizeof ds, "%d", i);
    hsize_t dims[4];
    for (int d = 0; d < rank; d++)
        dims[d] = (hsize_t)shape[d];
    hid_t sp = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t d =
        sp >= 0 ? H5Dcreate2(vars, ds, file_type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1;
    int ok = d >= 0 && H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
    close_id(d, H5Dclose);
    close_id(sp, H5Sclose);
    return ok;
}

/* Variable v of the arena arena into dataset i of vars in Keras' layout (reordered through a
 * copy for swap01); 1 when written. */
static int put_var(hid_t vars, int i, hid_t file_type, const mw_keras_var *v, const float *arena)
{
    float *tmp = v->swap01 ? malloc(v->count * sizeof *tmp) : NULL;
    if (v->swap01 && !tmp)
        return 0;
    if (tmp)
        mw_kvar_swap01(arena + v->off, tmp, v->shape[1], v->shape[0], v->count);
    const int ok =
        put(vars, i, file_type, H5T_NATIVE_FLOAT, v->rank, v->shape, tmp ? tmp : arena + v->off);
    free(tmp);
    return ok;
}

/* /optimizer/vars: see mw_keras_optimizer. 1 when written. */
static int write_optimizer(hid_t f, const mw_model *m, const mw_keras_optimizer *o)
{
    hid_t opt = H5Gcreate2(f, "optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t ov = opt >= 0 ? make_vars(opt, NULL, o->name) : -1;
    const int iterations = (int)o->iterations;
    const float lr = (float)o->learning_rate;
    int ok = ov >= 0 && put(ov, 0, H5T_STD_I32LE, H5T_NATIVE_INT, 0, NULL, &iterations) &&
             put(ov, 1, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 0, NULL, &lr);
    int next = 2;
    for (int i = 0; i < m->nlayers && ok && o->slot1; i++) {
        mw_keras_var v[MW_KERAS_MAX_VARS];
        int nv = 0;
        if (!mw_keras_layer_is_own(&m->layers[i]) || mw_keras_vars(m, i, v, &nv) != MW_OK)
            continue; /* the weights' loop has reported a table error already */
        for (int j = 0; j < nv && ok; j++) {
            if (!v[j].trainable)
                continue;
            ok = put_var(ov, next++, H5T_IEEE_F32LE, &v[j], o->slot1);
            if (ok && o->slot2)
                ok = put_var(ov, next++, H5T_IEEE_F32LE, &v[j], o->slot2);
        }
    }
    close_id(ov, H5Gclose);
    close_id(opt, H5Gclose);
    return ok;
}

/* Each nested model's groups, as Keras writes a container's: layers/<path>/vars (no variables,
 * named by the model) and layers/<path>/layers, which holds its layers' groups. */
static mw_status write_nests(hid_t layers, const mw_model *m, const char *origin)
{
    for (int k = 0; k < m->nnests; k++) { /* each after the model it is in */
        const mw_nest *nt = &m->nests[k];
        char sub[sizeof nt->path + 8];
        snprintf(sub, sizeof sub, "%s/layers", nt->path);
        hid_t v = make_vars(layers, nt->path, nt->name), g = -1;
        const int ok =
            v >= 0 && (g = H5Gcreate2(layers, sub, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) >= 0;
        close_id(v, H5Gclose);
        close_id(g, H5Gclose);
        if (!ok)
            return mw_err(MW_EINTERNAL, "%s: HDF5 cannot create layers/%s", origin, sub);
    }
    return MW_OK;
}

static mw_status write_tree(hid_t f, const mw_model *m, const float *params,
                            const mw_keras_optimizer *o, const char *origin)
{
    hid_t layers = H5Gcreate2(f, "layers", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (layers < 0)
        return mw_err(MW_EINTERNAL, "%s: HDF5 cannot create /layers", origin);
    char *keys = NULL;
    char(*subs)[MW_KERAS_SUB_MAX] = malloc(MW_KERAS_MAX_VARS * sizeof *subs);
    mw_status rc = subs ? write_nests(layers, m, origin)
                        : mw_err(MW_ENOMEM, "%s: out of memory for the sublayers' names", origin);
    if (rc == MW_OK)
        rc = mw_keras_layer_keys(m, &keys);
    for (int i = 0; i < m->nlayers && rc == MW_OK; i++) {
        const mw_layer *l = &m->layers[i];
        if (!mw_keras_layer_is_own(l))
            continue;
        mw_keras_var v[MW_KERAS_MAX_VARS];
        int nv = 0;
        if ((rc = mw_keras_vars(m, i, v, &nv)) != MW_OK)
            break;
        const char *key = keys + (size_t)i * MW_KERAS_KEY_MAX;
        const char *kname = l->block ? l->block_name : l->name;
        hid_t vars = make_vars(layers, key, kname);
        if (vars < 0)
            rc = mw_err(MW_EINTERNAL, "%s: HDF5 cannot create layers/%s/vars", origin, key);
        close_id(vars, H5Gclose);
        /* its sublayers' groups (with or without variables), then each variable in its own */
        const int ns = mw_keras_layer_subs(m, i, subs, MW_KERAS_MAX_VARS);
        hid_t kg = ns && rc == MW_OK ? H5Gopen2(layers, key, H5P_DEFAULT) : -1;
        for (int s = 0; s < ns && rc == MW_OK; s++) {
            hid_t sv = kg >= 0 ? make_vars(kg, subs[s], kname) : -1;
            if (sv < 0)
                rc = mw_err(MW_EINTERNAL, "%s: HDF5 cannot create layers/%s/%s/vars", origin, key,
                            subs[s]);
            close_id(sv, H5Gclose);
        }
        for (int j = 0; j < nv && rc == MW_OK; j++) {
            char path[400];
            snprintf(path, sizeof path, "%s%s%s/vars", key, v[j].sub[0] ? "/" : "", v[j].sub);
            hid_t g = H5Gopen2(layers, path, H5P_DEFAULT);
            if (g < 0 ||
                !put_var(g, v[j].idx, v[j].integer ? H5T_STD_I32LE : H5T_IEEE_F32LE, &v[j], params))
                rc = mw_err(MW_EINTERNAL, "%s: HDF5 cannot write layers/%s/%d", origin, path,
                            v[j].idx);
            close_id(g, H5Gclose);
        }
        close_id(kg, H5Gclose);
    }
    free(keys);
    free(subs);
    H5Gclose(layers);
    if (rc != MW_OK)
        return rc;
    hid_t root = write_optimizer(f, m, o) ? make_vars(f, NULL, m->name) : -1;
    close_id(root, H5Gclose);
    if (root < 0)
        return mw_err(MW_EINTERNAL, "%s: HDF5 cannot write /optimizer or /vars", origin);
    return MW_OK;
}

mw_status mw_keras_h5_write(const mw_model *m, const float *params, const mw_keras_optimizer *opt,
                            void **image, size_t *nbytes, const char *origin)
{
    quiet();
    *image = NULL, *nbytes = 0;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), f = -1;
    mw_status rc = MW_OK;
    if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 20, 0) < 0 ||
        (f = H5Fcreate(IMAGE_NAME, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)) < 0) {
        rc = mw_err(MW_EINTERNAL, "%s: HDF5 cannot create an in-memory file", origin);
        goto done;
    }
    MW_TRY_GOTO(write_tree(f, m, params, opt, origin), rc, done);
    if (H5Fflush(f, H5F_SCOPE_GLOBAL) < 0) {
        rc = mw_err(MW_EINTERNAL, "%s: HDF5 cannot flush the in-memory file", origin);
        goto done;
    }
    ssize_t n = H5Fget_file_image(f, NULL, 0);
    void *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (!buf) {
        rc = mw_err(n > 0 ? MW_ENOMEM : MW_EINTERNAL, "%s: cannot take the HDF5 image", origin);
        goto done;
    }
    if (H5Fget_file_image(f, buf, (size_t)n) != n) {
        free(buf);
        rc = mw_err(MW_EINTERNAL, "%s: cannot take the HDF5 image", origin);
        goto done;
    }
    *image = buf, *nbytes = (size_t)n;
done:
    close_id(f, H5Fclose);
    close_id(fapl, H5Pclose);
    return rc;
}
