/* Keras .weights.h5 through libhdf5; layout in keras_h5.h.
 *
 * Reading: the image is opened in memory (the core driver with a file image, no disk), then
 * each layer of the model with variables (worker/keras_vars.h) looks up its vars group,
 * checks the number of datasets, each dataset's type (32-bit float) and shape, and reads it
 * straight into the arena; last, every layer group of the file must belong to the model.
 * Writing builds the same tree in an in-memory file and hands back its image. */
#include "worker/keras_h5.h"

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/keras_vars.h"

/* The in-memory files' name: the core driver refuses a file image whose name exists on disk,
 * and nothing can exist under /dev/null. */
#define IMAGE_NAME "/dev/null/mwtrain-weights.h5"

static void quiet(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our messages, not HDF5's error stack */
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

/* 1 when path (relative to loc, one level) exists as a link, 0 when not or on error. */
static int has(hid_t loc, const char *name)
{
    return H5Lexists(loc, name, H5P_DEFAULT) > 0;
}

/* The vars group of layer `name` (or -1 when the file has none). */
static hid_t open_vars(hid_t top, const char *name)
{
    if (top < 0 || !has(top, name))
        return -1;
    hid_t g = H5Gopen2(top, name, H5P_DEFAULT);
    if (g < 0)
        return -1;
    hid_t v = has(g, "vars") ? H5Gopen2(g, "vars", H5P_DEFAULT) : -1;
    H5Gclose(g);
    return v;
}

static long long nlinks(hid_t g)
{
    H5G_info_t info;
    if (g < 0 || H5Gget_info(g, &info) < 0)
        return -1;
    return (long long)info.nlinks;
}

/* Variable i of layer l, checked and read into params. */
static mw_status read_var(hid_t vars, int i, const mw_keras_var *v, const mw_layer *l,
                          const char *key, float *params, const char *origin, const char *top)
{
    char ds[16], want[96], got[96];
    snprintf(ds, sizeof ds, "%d", i);
    shape_str(want, sizeof want, v->shape, v->rank);
    if (!has(vars, ds))
        return mw_err(MW_EDATA, "%s: layer '%s' (%s): no dataset %s/%s/vars/%d for its %s %s",
                      origin, l->name, l->cls, top, key, i, v->name, want);
    mw_status rc = MW_OK;
    hid_t d = H5Dopen2(vars, ds, H5P_DEFAULT), t = -1, sp = -1;
    if (d < 0 || (t = H5Dget_type(d)) < 0 || (sp = H5Dget_space(d)) < 0) {
        rc = mw_err(MW_EDATA, "%s: layer '%s': %s/%s/vars/%d (%s) cannot be opened (corrupt file?)",
                    origin, l->name, top, key, i, v->name);
        goto done;
    }
    if (H5Tget_class(t) != H5T_FLOAT || H5Tget_size(t) != 4) {
        const H5T_class_t c = H5Tget_class(t);
        rc = mw_err(MW_EDATA, "%s: layer '%s': %s/%s/vars/%d (%s) is %s%zu, expected float32",
                    origin, l->name, top, key, i, v->name,
                    c == H5T_FLOAT     ? "float"
                    : c == H5T_INTEGER ? "int"
                                       : "a non-numeric type of size ",
                    8 * H5Tget_size(t));
        goto done;
    }
    hsize_t dims[8];
    const int rank = H5Sget_simple_extent_ndims(sp);
    long long gd[8];
    int same = rank == v->rank;
    if (rank < 0 || rank > 8 || H5Sget_simple_extent_dims(sp, dims, NULL) < 0) {
        rc = mw_err(MW_EDATA, "%s: layer '%s': %s/%s/vars/%d (%s) has an unreadable shape", origin,
                    l->name, top, key, i, v->name);
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
    if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, params + v->off) < 0)
        rc = mw_err(MW_EDATA,
                    "%s: layer '%s': %s/%s/vars/%d (%s) cannot be read (truncated or "
                    "corrupt file)",
                    origin, l->name, top, key, i, v->name);
done:
    close_id(sp, H5Sclose);
    close_id(t, H5Tclose);
    close_id(d, H5Dclose);
    return rc;
}

static mw_status read_layer(hid_t top, const char *top_name, const mw_model *m, int li,
                            float *params, const char *origin)
{
    const mw_layer *l = &m->layers[li];
    mw_keras_var v[MW_KERAS_MAX_VARS];
    int nv = 0;
    MW_TRY(mw_keras_layer_vars(l, v, &nv));
    if (nv == 0 || !mw_keras_layer_is_own(l))
        return MW_OK;
    char key[160];
    mw_keras_layer_key(m, li, key, sizeof key);
    hid_t vars = open_vars(top, key);
    if (vars < 0)
        return mw_err(MW_EDATA, "%s: no weights for layer '%s' (%s): group %s/%s/vars is missing",
                      origin, l->name, l->cls, top_name, key);
    mw_status rc = MW_OK;
    const long long n = nlinks(vars);
    if (n != nv)
        rc = mw_err(MW_EDATA,
                    "%s: layer '%s' (%s) has %lld variables in %s/%s/vars; config.json "
                    "gives it %d (%s%s%s)",
                    origin, l->name, l->cls, n, top_name, key, nv, v[0].name, nv > 1 ? ", " : "",
                    nv > 1 ? v[1].name : "");
    for (int i = 0; i < nv && rc == MW_OK; i++)
        rc = read_var(vars, i, &v[i], l, key, params, origin, top_name);
    H5Gclose(vars);
    return rc;
}

/* Every layer group of the file with variables must be a layer of m that has them. */
static mw_status check_extra(hid_t top, const char *top_name, const mw_model *m, const char *origin)
{
    const long long n = nlinks(top);
    for (long long i = 0; i < n; i++) {
        char name[256];
        if (H5Lget_name_by_idx(top, ".", H5_INDEX_NAME, H5_ITER_INC, (hsize_t)i, name, sizeof name,
                               H5P_DEFAULT) < 0)
            return mw_err(MW_EDATA, "%s: the group %s cannot be listed (corrupt file?)", origin,
                          top_name);
        int found = 0;
        for (int j = 0; j < m->nlayers && !found; j++) {
            char key[160];
            mw_keras_layer_key(m, j, key, sizeof key);
            found = mw_keras_layer_is_own(&m->layers[j]) && !strcmp(key, name);
        }
        if (found)
            continue;
        hid_t vars = open_vars(top, name);
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

mw_status mw_keras_h5_read(const mw_model *m, float *params, const void *image, size_t nbytes,
                           const char *origin)
{
    quiet();
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    if (nbytes < 8 || memcmp(image, sig, 8) != 0)
        return mw_err(MW_EDATA, "%s: not an HDF5 file (no HDF5 signature at its start)", origin);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), f = -1, top = -1;
    mw_status rc = MW_OK;
    if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 16, 0) < 0 ||
        H5Pset_file_image(fapl, (void *)image, nbytes) < 0) {
        rc = mw_err(MW_ENOMEM, "%s: cannot set up an in-memory HDF5 file", origin);
        goto done;
    }
    if ((f = H5Fopen(IMAGE_NAME, H5F_ACC_RDONLY, fapl)) < 0) {
        rc = mw_err(MW_EDATA, "%s: HDF5 cannot open it (truncated or corrupt file)", origin);
        goto done;
    }
    const char *top_name = has(f, "layers") ? "layers"
                           : has(f, "_layer_checkpoint_dependencies")
                               ? "_layer_checkpoint_dependencies"
                               : "layers";
    top = has(f, top_name) ? H5Gopen2(f, top_name, H5P_DEFAULT) : -1;
    for (int i = 0; i < m->nlayers && rc == MW_OK; i++)
        rc = read_layer(top, top_name, m, i, params, origin);
    if (rc == MW_OK && top >= 0)
        rc = check_extra(top, top_name, m, origin);
done:
    close_id(top, H5Gclose);
    close_id(f, H5Fclose);
    close_id(fapl, H5Pclose);
    return rc;
}

/* ---- writing ---- */

/* A vars group at parent/name/vars with attribute name=label (h5py's variable-length UTF-8
 * string, as Keras writes it); its id, or -1. */
static hid_t make_vars(hid_t parent, const char *name, const char *label)
{
    hid_t g = name ? H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1;
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
        if (!mw_keras_layer_is_own(&m->layers[i]) ||
            mw_keras_layer_vars(&m->layers[i], v, &nv) != MW_OK)
            continue; /* the weights' loop has reported a table error already */
        for (int j = 0; j < nv && ok; j++) {
            if (!v[j].trainable)
                continue;
            ok = put(ov, next++, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, v[j].rank, v[j].shape,
                     o->slot1 + v[j].off);
            if (ok && o->slot2)
                ok = put(ov, next++, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, v[j].rank, v[j].shape,
                         o->slot2 + v[j].off);
        }
    }
    close_id(ov, H5Gclose);
    close_id(opt, H5Gclose);
    return ok;
}

static mw_status write_tree(hid_t f, const mw_model *m, const float *params,
                            const mw_keras_optimizer *o, const char *origin)
{
    hid_t layers = H5Gcreate2(f, "layers", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (layers < 0)
        return mw_err(MW_EINTERNAL, "%s: HDF5 cannot create /layers", origin);
    mw_status rc = MW_OK;
    for (int i = 0; i < m->nlayers && rc == MW_OK; i++) {
        const mw_layer *l = &m->layers[i];
        if (!mw_keras_layer_is_own(l))
            continue;
        mw_keras_var v[MW_KERAS_MAX_VARS];
        int nv = 0;
        if ((rc = mw_keras_layer_vars(l, v, &nv)) != MW_OK)
            break;
        char key[160];
        mw_keras_layer_key(m, i, key, sizeof key);
        hid_t vars = make_vars(layers, key, l->name);
        if (vars < 0)
            rc = mw_err(MW_EINTERNAL, "%s: HDF5 cannot create layers/%s/vars", origin, key);
        for (int j = 0; j < nv && rc == MW_OK; j++)
            if (!put(vars, j, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, v[j].rank, v[j].shape,
                     params + v[j].off))
                rc =
                    mw_err(MW_EINTERNAL, "%s: HDF5 cannot write layers/%s/vars/%d", origin, key, j);
        close_id(vars, H5Gclose);
    }
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
