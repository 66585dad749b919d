/* The .weights.h5 reader (worker/keras/keras_h5.c) against every way HDF5 can store a dataset or
 * reach an object (a .keras archive must not read host files). The model is one Dense(3) over
 * 2x2x1 images, flattened: layers/dense/vars/0 (4, 3) and /1 (3,), written here with the HDF5
 * C API.
 *
 * Storage layouts of the kernel:
 *   accepted, read bitwise: contiguous (what Keras writes), compact, chunked, chunked with
 *     shuffle and fletcher32, chunked with chunks larger than the shape but small;
 *   refused with MW_EDATA (exit 3) and a message naming the variable and what it names:
 *     external raw storage in a host file, a virtual dataset whose source is another file,
 *     a deflate filter (its output is not bounded by the chunk), chunks of 4 MiB.
 * Links, at each step of the path layers/dense/vars/0 (the top group, the layer group, its
 *   vars group, the dataset) and for a group of /layers the model does not have:
 *   an external link to another HDF5 file, a soft link (to a copy inside the same file), a
 *   user-defined link: each refused with MW_EDATA naming the path and the link's target.
 * Every refused case also asserts that nothing outside the image was touched: an inotify watch
 * on the host files it names (the canary raw file, the canary .h5) sees no open or read, the
 * first-error message holds the variable's path, and the kernel in the arena is untouched.
 * Values: a NaN or an infinity among the weights is refused with MW_EDATA naming the variable,
 * the value's index and the value (--nonfinite OUT writes such a .keras for the command line).
 * One external-storage case goes through a .keras file on disk (mw_keras_model_load, then the
 * weights applied), the path `train --model` takes.
 *
 *   test_keras_h5 --corpus DIR   writes each case as DIR/h5_<case>.keras (the fuzz seeds of
 *                                tests/fuzz/corpus/keras_archive) and exits;
 *   test_keras_h5 --case NAME OUT.keras HOSTFILE
 *                                writes case NAME, its external names leading to HOSTFILE
 *                                (nothing is written there), for tests/mpi/test_hostile.sh. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include "tests/util.h"
#include "worker/keras/keras.h"
#include "worker/keras/keras_archive.h"
#include "worker/keras/keras_h5.h"
#include "worker/keras/keras_vars.h"
#include "worker/model/model.h"

/* 2x2x1 images (so `mwtrain train` can run it on a tiny .npz), flattened into Dense(3). */
static const char model_json[] =
    "{\"module\": \"keras\", \"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", "
    "\"layers\": [{\"module\": \"keras.layers\", \"class_name\": \"InputLayer\", \"config\": "
    "{\"batch_shape\": [null, 2, 2, 1], \"name\": \"in\"}}, {\"module\": \"keras.layers\", "
    "\"class_name\": \"Flatten\", \"config\": {\"name\": \"f\"}}, {\"module\": "
    "\"keras.layers\", \"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": "
    "3}}]}}";

#define NK 12 /* kernel (4, 3) */
#define NB 3  /* bias (3,) */

typedef enum {
    S_CONTIGUOUS,
    S_COMPACT,
    S_CHUNKED,
    S_SHUFFLE,
    S_WIDE_CHUNK,
    S_EXTERNAL,
    S_VIRTUAL,
    S_DEFLATE,
    S_HUGE_CHUNK
} storage;
typedef enum { L_HARD, L_SOFT, L_EXTERNAL, L_USER } link_kind;
/* where a link replaces the object: "layers", "layers/dense", ".../vars", ".../vars/0", and a
 * group of /layers no layer of the model has ("layers/stray") */
typedef enum { AT_TOP, AT_LAYER, AT_VARS, AT_DATASET, AT_STRAY } link_at;

static const char *const at_path[] = {"layers", "layers/dense", "layers/dense/vars",
                                      "layers/dense/vars/0", "layers/stray"};

typedef struct {
    const char *name;
    storage st;
    link_kind link;
    link_at at;
    const char *want; /* NULL: read; else a part of the message */
} h5_case;

/* The host files a hostile image names (absolute paths under the test's directory). */
static char canary_raw[600], canary_h5[600];
static int corpus_mode; /* --corpus: the names lead nowhere */

/* The weights the image holds; the canary .h5 holds them times CANARY_SCALE, so a kernel read
 * from it is told apart. */
#define CANARY_SCALE 100.0f
static float kernel_value(int i)
{
    return 0.25f * (float)(i + 1);
}

static float bias_value(int i)
{
    return -1.0f - (float)i;
}

static void must(int ok, const char *what)
{
    if (!ok)
        fail_msg("HDF5 could not %s", what);
}

/* A dataset with the given creation list (dims of the kernel or the bias) and data. */
static void put(hid_t where, const char *name, hid_t dcpl, int kernel, int unlimited, float scale)
{
    const hsize_t kd[2] = {4, 3}, bd[1] = {3}, maxd[2] = {H5S_UNLIMITED, H5S_UNLIMITED};
    hid_t sp =
        kernel ? H5Screate_simple(2, kd, unlimited ? maxd : NULL) : H5Screate_simple(1, bd, NULL);
    hid_t d = H5Dcreate2(where, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    must(d >= 0, "create a dataset");
    /* a virtual dataset's data are its source's (the canary's); external storage is written
     * into the canary, except for the corpus, whose names lead nowhere */
    const int is_virtual = dcpl != H5P_DEFAULT && H5Pget_layout(dcpl) == H5D_VIRTUAL;
    const int is_external = dcpl != H5P_DEFAULT && H5Pget_external_count(dcpl) > 0;
    if (is_virtual || (is_external && corpus_mode)) {
        H5Dclose(d);
        H5Sclose(sp);
        return;
    }
    float v[NK];
    for (int i = 0; i < NK; i++)
        v[i] = scale * (kernel ? kernel_value(i) : bias_value(i));
    must(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0, "write");
    H5Dclose(d);
    H5Sclose(sp);
}

/* layers/dense/vars/{0,1} under `root` (a plain copy: the storage is contiguous), the values
 * times scale. */
static void plain_tree(hid_t root, float scale)
{
    hid_t a = H5Gcreate2(root, "layers", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t b = H5Gcreate2(a, "dense", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t c = H5Gcreate2(b, "vars", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    must(a >= 0 && b >= 0 && c >= 0, "create the groups");
    put(c, "0", H5P_DEFAULT, 1, 0, scale);
    put(c, "1", H5P_DEFAULT, 0, 0, scale);
    H5Gclose(c);
    H5Gclose(b);
    H5Gclose(a);
}

/* The other file an external link or a virtual dataset names: the same tree, on disk. */
static void write_canary_h5(void)
{
    hid_t f = H5Fcreate(canary_h5, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    must(f >= 0, "create the canary .h5");
    plain_tree(f, CANARY_SCALE);
    H5Fclose(f);
}

/* A user-defined link class: never traversed here (the reader refuses it by its type). */
static hid_t ud_traverse(const char *name, hid_t cur, const void *udata, size_t udata_size,
                         hid_t lapl, hid_t dxpl)
{
    (void)name, (void)cur, (void)udata, (void)udata_size, (void)lapl, (void)dxpl;
    return -1;
}
#define UD_CLASS 187
static const H5L_class_t ud_class = {H5L_LINK_CLASS_T_VERS,
                                     (H5L_type_t)UD_CLASS,
                                     "mwtest",
                                     NULL,
                                     NULL,
                                     NULL,
                                     ud_traverse,
                                     NULL,
                                     NULL};

/* Link `name` of loc to `target` (a path in the file, or in the canary .h5) of kind k. */
static void make_link(hid_t loc, const char *name, link_kind k, const char *target)
{
    herr_t e = -1;
    if (k == L_SOFT)
        e = H5Lcreate_soft(target, loc, name, H5P_DEFAULT, H5P_DEFAULT);
    else if (k == L_EXTERNAL)
        e = H5Lcreate_external(canary_h5, target, loc, name, H5P_DEFAULT, H5P_DEFAULT);
    else if (k == L_USER)
        e = H5Lcreate_ud(loc, name, (H5L_type_t)UD_CLASS, target, strlen(target) + 1, H5P_DEFAULT,
                         H5P_DEFAULT);
    must(e >= 0, "create a link");
}

/* The kernel's creation list for storage s; *unlimited for chunks beyond the shape. */
static hid_t kernel_dcpl(storage s, int *unlimited)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    const hsize_t whole[2] = {4, 3}, small[2] = {2, 2}, wide[2] = {16, 16}, huge[2] = {1024, 1024};
    *unlimited = 0;
    switch (s) {
    case S_CONTIGUOUS:
        break;
    case S_COMPACT:
        H5Pset_layout(dcpl, H5D_COMPACT);
        break;
    case S_CHUNKED:
        H5Pset_chunk(dcpl, 2, small);
        break;
    case S_SHUFFLE:
        H5Pset_chunk(dcpl, 2, whole);
        H5Pset_shuffle(dcpl);
        H5Pset_fletcher32(dcpl);
        break;
    case S_WIDE_CHUNK:
        *unlimited = 1;
        H5Pset_chunk(dcpl, 2, wide);
        break;
    case S_HUGE_CHUNK:
        *unlimited = 1;
        H5Pset_chunk(dcpl, 2, huge);
        break;
    case S_DEFLATE:
        H5Pset_chunk(dcpl, 2, whole);
        H5Pset_deflate(dcpl, 6);
        break;
    case S_EXTERNAL: /* the kernel is written into the canary: the image holds none of it */
        must(H5Pset_external(dcpl, canary_raw, 0, NK * sizeof(float)) >= 0, "set external");
        break;
    case S_VIRTUAL: {
        hid_t vs = H5Screate_simple(2, whole, NULL), ss = H5Screate_simple(2, whole, NULL);
        must(H5Pset_virtual(dcpl, vs, canary_h5, "/layers/dense/vars/0", ss) >= 0, "set virtual");
        H5Sclose(vs);
        H5Sclose(ss);
        break;
    }
    }
    return dcpl;
}

/* The HDF5 image of case c (malloc'ed; *n its size). */
static void *build(const h5_case *c, size_t *n)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 1 << 16, 0);
    hid_t f = H5Fcreate("/dev/null/mwtest-h5.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    must(f >= 0, "create the in-memory file");
    if (c->link == L_SOFT) { /* a copy for the soft link to lead to */
        hid_t h = H5Gcreate2(f, "hidden", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        plain_tree(h, 1.0f);
        H5Gclose(h);
    }
    char target[200];
    snprintf(target, sizeof target, "%s/%s", c->link == L_SOFT ? "/hidden" : "",
             at_path[c->at == AT_STRAY ? AT_LAYER : c->at]);
    hid_t g[3] = {f, -1, -1}; /* layers, dense, vars as they are made */
    static const char *const names[] = {"layers", "dense", "vars"};
    hid_t parent = f;
    int linked = 0;
    for (int k = 0; k < 3 && !linked; k++) {
        if (c->link != L_HARD && c->at == (link_at)k) {
            make_link(parent, names[k], c->link, target);
            linked = 1;
            break;
        }
        g[k] = H5Gcreate2(parent, names[k], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        must(g[k] >= 0, "create a group");
        parent = g[k];
    }
    if (!linked) {
        hid_t vars = g[2];
        if (c->link != L_HARD && c->at == AT_DATASET) {
            make_link(vars, "0", c->link, target);
        } else {
            int unlimited = 0;
            hid_t dcpl = kernel_dcpl(c->st, &unlimited);
            put(vars, "0", dcpl, 1, unlimited, 1.0f);
            H5Pclose(dcpl);
        }
        put(vars, "1", H5P_DEFAULT, 0, 0, 1.0f);
        if (c->at == AT_STRAY) /* a group of /layers that belongs to no layer */
            make_link(g[0], "stray", c->link, target);
    }
    for (int k = 2; k >= 0; k--)
        if (g[k] >= 0 && g[k] != f)
            H5Gclose(g[k]);
    must(H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0, "flush");
    ssize_t size = H5Fget_file_image(f, NULL, 0);
    void *img = size > 0 ? malloc((size_t)size) : NULL;
    must(img && H5Fget_file_image(f, img, (size_t)size) == size, "take the image");
    H5Fclose(f);
    H5Pclose(fapl);
    *n = (size_t)size;
    return img;
}

static const h5_case cases[] = {
    {"contiguous", S_CONTIGUOUS, L_HARD, AT_DATASET, NULL},
    {"compact", S_COMPACT, L_HARD, AT_DATASET, NULL},
    {"chunked", S_CHUNKED, L_HARD, AT_DATASET, NULL},
    {"chunked_shuffle_fletcher32", S_SHUFFLE, L_HARD, AT_DATASET, NULL},
    {"chunked_wider_than_shape", S_WIDE_CHUNK, L_HARD, AT_DATASET, NULL},
    {"external_storage", S_EXTERNAL, L_HARD, AT_DATASET,
     "layers/dense/vars/0 (kernel) keeps its data in the external file '"},
    {"virtual_dataset", S_VIRTUAL, L_HARD, AT_DATASET,
     "layers/dense/vars/0 (kernel) is a virtual dataset"},
    {"deflate", S_DEFLATE, L_HARD, AT_DATASET,
     "layers/dense/vars/0 (kernel) is stored through the HDF5 filter 1 ('deflate')"},
    {"huge_chunks", S_HUGE_CHUNK, L_HARD, AT_DATASET,
     "layers/dense/vars/0 (kernel) has chunks of 4194304 bytes"},
    {"external_link_top", S_CONTIGUOUS, L_EXTERNAL, AT_TOP, "layers is an HDF5 external link to '"},
    {"external_link_layer", S_CONTIGUOUS, L_EXTERNAL, AT_LAYER,
     "layers/dense is an HDF5 external link to '"},
    {"external_link_vars", S_CONTIGUOUS, L_EXTERNAL, AT_VARS,
     "layers/dense/vars is an HDF5 external link to '"},
    {"external_link_dataset", S_CONTIGUOUS, L_EXTERNAL, AT_DATASET,
     "layers/dense/vars/0 (kernel) is an HDF5 external link to '"},
    {"external_link_stray", S_CONTIGUOUS, L_EXTERNAL, AT_STRAY,
     "layers/stray is an HDF5 external link to '"},
    {"soft_link_top", S_CONTIGUOUS, L_SOFT, AT_TOP, "layers is a soft link to '/hidden/layers'"},
    {"soft_link_layer", S_CONTIGUOUS, L_SOFT, AT_LAYER,
     "layers/dense is a soft link to '/hidden/layers/dense'"},
    {"soft_link_vars", S_CONTIGUOUS, L_SOFT, AT_VARS, "layers/dense/vars is a soft link to '"},
    {"soft_link_dataset", S_CONTIGUOUS, L_SOFT, AT_DATASET,
     "layers/dense/vars/0 (kernel) is a soft link to '/hidden/layers/dense/vars/0'"},
    {"soft_link_stray", S_CONTIGUOUS, L_SOFT, AT_STRAY, "layers/stray is a soft link to '"},
    {"user_link_layer", S_CONTIGUOUS, L_USER, AT_LAYER,
     "layers/dense is a user-defined HDF5 link (type 187)"},
    {"user_link_dataset", S_CONTIGUOUS, L_USER, AT_DATASET,
     "layers/dense/vars/0 (kernel) is a user-defined HDF5 link (type 187)"},
};
#define NCASES (sizeof cases / sizeof *cases)

static const h5_case *find_case(const char *name)
{
    for (size_t i = 0; i < NCASES; i++)
        if (!strcmp(cases[i].name, name))
            return &cases[i];
    fail_msg("no case %s", name);
    return NULL;
}

static void load_model(mw_model *m)
{
    mw_err_clear();
    mw_status rc = mw_keras_load(m, model_json, strlen(model_json), "test.json", 0, 0, 0, 0);
    if (rc == MW_OK)
        rc = mw_model_finalize(m, 1);
    if (rc != MW_OK)
        fail_msg("model: %s", mw_err_msg());
}

/* The dense layer's kernel and bias as read (layer 1 is the Dense). */
static void dense_vars(const mw_model *m, mw_keras_var *v)
{
    int nv = 0;
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].w_count == NK) {
            assert_int_equal(mw_keras_layer_vars(&m->layers[i], v, &nv), MW_OK);
            assert_int_equal(nv, 2);
            return;
        }
    fail_msg("no Dense layer");
}

/* Case c's outcome: read and equal, or refused as wanted with nothing outside touched. */
static int check_case(const h5_case *c, const mw_model *m, const void *img, size_t n,
                      const char *origin)
{
    mw_keras_var v[MW_KERAS_MAX_VARS];
    dense_vars(m, v);
    float *params = m->params.data;
    for (size_t i = 0; i < m->params.count; i++)
        params[i] = NAN;
    const int w_raw = mw_test_watch(canary_raw), w_h5 = mw_test_watch(canary_h5);
    mw_err_clear();
    mw_status rc = mw_keras_h5_read(m, params, img, n, origin);
    const unsigned ev = mw_test_watch_events(w_raw) | mw_test_watch_events(w_h5);
    int ok = 1;
    if (!c->want) {
        const char *const none[] = {"", NULL};
        ok = mw_test_err_matches(c->name, rc, MW_OK, none);
        for (int i = 0; ok && i < NK; i++)
            ok = params[v[0].off + (size_t)i] == kernel_value(i);
        for (int i = 0; ok && i < NB; i++)
            ok = params[v[1].off + (size_t)i] == bias_value(i);
        if (rc == MW_OK && !ok)
            fprintf(stderr, "%s: the weights read are not the ones written\n", c->name);
    } else {
        const char *const subs[] = {origin, c->want, NULL};
        ok = mw_test_err_matches(c->name, rc, MW_EDATA, subs);
        /* unread, or (a stray group refused after the layer was read) read from the image */
        for (int i = 0; ok && i < NK; i++) {
            const float k = params[v[0].off + (size_t)i];
            if (!isnan(k) && !(c->at == AT_STRAY && k == kernel_value(i))) {
                fprintf(stderr, "%s: kernel[%d] = %g was read from somewhere\n", c->name, i,
                        (double)k);
                ok = 0;
            }
        }
    }
    if (ev & (IN_OPEN | IN_ACCESS | IN_MODIFY)) {
        fprintf(stderr, "%s: a host file the image names was opened (inotify 0x%x)\n", c->name, ev);
        ok = 0;
    }
    mw_err_clear();
    return ok;
}

static void make_canaries(const char *dir)
{
    snprintf(canary_raw, sizeof canary_raw, "%s/canary.raw", dir);
    snprintf(canary_h5, sizeof canary_h5, "%s/canary.h5", dir);
    free(mw_test_write_file(dir, "canary.raw", "", 0));
    write_canary_h5();
}

static void every_layout_and_link(void **state)
{
    make_canaries(*state);
    H5Lregister(&ud_class);
    mw_model m;
    load_model(&m);
    int failed = 0;
    for (size_t i = 0; i < NCASES; i++) {
        size_t n = 0;
        void *img = build(&cases[i], &n);
        failed += !check_case(&cases[i], &m, img, n, "t.keras: model.weights.h5");
        free(img);
    }
    printf("%zu storage and link cases, %d failed\n", NCASES, failed);
    mw_model_free(&m);
    assert_int_equal(failed, 0);
}

/* Control: the external-storage and external-link images do reach the canaries when HDF5
 * reads them without mwtrain's checks, so the refusals above are what keeps them out. */
static void control_hdf5_follows_them(void **state)
{
    make_canaries(*state);
    static const char *const which[] = {"external_storage", "external_link_layer",
                                        "virtual_dataset"};
    for (size_t k = 0; k < 3; k++) {
        const h5_case *c = find_case(which[k]);
        size_t n = 0;
        void *img = build(c, &n);
        char path[700];
        snprintf(path, sizeof path, "%s/%s.h5", (const char *)*state, c->name);
        free(mw_test_write_file(*state, strrchr(path, '/') + 1, img, n));
        free(img);
        const int w = mw_test_watch(c->st == S_EXTERNAL ? canary_raw : canary_h5);
        /* HDF5 resolves a relative name against the current directory: these are absolute */
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        hid_t d = f >= 0 ? H5Dopen2(f, "layers/dense/vars/0", H5P_DEFAULT) : -1;
        float k0[NK];
        herr_t r = d >= 0 ? H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, k0) : -1;
        if (d >= 0)
            H5Dclose(d);
        if (f >= 0)
            H5Fclose(f);
        const unsigned ev = mw_test_watch_events(w);
        if (!(ev & IN_OPEN))
            fail_msg("%s: HDF5 read it without opening the canary (r %d)", c->name, (int)r);
    }
}

/* A .keras on disk with model.weights.h5 = img. */
static void write_keras(const char *path, const void *img, size_t n)
{
    int ze = 0;
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &ze);
    assert_non_null(z);
    const char meta[] = "{\"keras_version\": \"3.6.0\"}";
    zip_source_t *a = zip_source_buffer(z, model_json, strlen(model_json), 0);
    zip_source_t *b = zip_source_buffer(z, meta, strlen(meta), 0);
    zip_source_t *c = zip_source_buffer(z, img, n, 0);
    assert_true(zip_file_add(z, "config.json", a, 0) >= 0);
    assert_true(zip_file_add(z, "metadata.json", b, 0) >= 0);
    assert_true(zip_file_add(z, "model.weights.h5", c, 0) >= 0);
    assert_int_equal(zip_close(z), 0);
}

/* train --model evil.keras: the archive loads (config.json is fine), its weights are refused
 * when applied, and the host file named by the external storage is never opened. */
static void keras_file_with_external_storage(void **state)
{
    const char *dir = *state;
    make_canaries(dir);
    size_t n = 0;
    void *img = build(find_case("external_storage"), &n);
    char path[700], want[2000];
    snprintf(path, sizeof path, "%s/evil.keras", dir);
    write_keras(path, img, n);
    free(img);
    const int w = mw_test_watch(canary_raw);
    mw_model m;
    mw_keras_weights kw;
    mw_keras_weights_init(&kw);
    mw_err_clear();
    assert_int_equal(mw_keras_model_load(&m, path, 0, 0, 0, 0, &kw), MW_OK);
    assert_int_equal(mw_model_finalize(&m, 1), MW_OK);
    expect_err(mw_keras_weights_apply(&kw, &m, m.params.data), MW_EDATA, "");
    snprintf(want, sizeof want,
             "%s: model.weights.h5: layer 'd': layers/dense/vars/0 (kernel) keeps its data in "
             "the external file '%s' (HDF5 external storage, 1 file); a .keras archive must "
             "hold its weights itself",
             path, canary_raw);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    assert_false(mw_test_watch_events(w) & (IN_OPEN | IN_ACCESS));
    mw_keras_weights_free(&kw);
    mw_model_free(&m);
}

/* --corpus DIR: each case as DIR/h5_<name>.keras, naming /nonexistent host files. */
static int write_corpus(const char *dir)
{
    corpus_mode = 1;
    snprintf(canary_raw, sizeof canary_raw, "/nonexistent-mwtrain/canary.raw");
    snprintf(canary_h5, sizeof canary_h5, "/nonexistent-mwtrain/canary.h5");
    H5Lregister(&ud_class);
    for (size_t i = 0; i < NCASES; i++) {
        if (cases[i].st == S_HUGE_CHUNK)
            continue; /* a 4 MiB seed: too large for a corpus */
        size_t n = 0;
        void *img = build(&cases[i], &n);
        char path[600];
        snprintf(path, sizeof path, "%s/h5_%s.keras", dir, cases[i].name);
        write_keras(path, img, n);
        free(img);
        printf("%s\n", path);
    }
    return 0;
}

/* --case NAME OUT HOSTFILE */
static int write_one(const char *name, const char *out, const char *host)
{
    corpus_mode = 1;
    snprintf(canary_raw, sizeof canary_raw, "%s", host);
    snprintf(canary_h5, sizeof canary_h5, "%s", host);
    H5Lregister(&ud_class);
    for (size_t i = 0; i < NCASES; i++)
        if (!strcmp(cases[i].name, name)) {
            size_t n = 0;
            void *img = build(&cases[i], &n);
            write_keras(out, img, n);
            free(img);
            return 0;
        }
    fprintf(stderr, "test_keras_h5: no case %s\n", name);
    return 2;
}

/* An image of m's weights, every value 0.25 but the Dense kernel's value 5 (bad 0), its bias's
 * value 2 (bad 1), or none (bad 2): NaN, -inf. */
static void *nonfinite_image(mw_model *m, int bad, size_t *n)
{
    mw_keras_var v[MW_KERAS_MAX_VARS];
    dense_vars(m, v);
    float *params = m->params.data;
    for (size_t i = 0; i < m->params.count; i++)
        params[i] = 0.25f;
    if (bad < 2)
        params[bad == 0 ? v[0].off + 5 : v[1].off + 2] = bad == 0 ? NAN : -INFINITY;
    const mw_keras_optimizer opt = {.name = "sgd", .learning_rate = 0.01};
    void *img = NULL;
    assert_int_equal(mw_keras_h5_write(m, params, &opt, &img, n, "w.h5"), MW_OK);
    return img;
}

/* Weights that are not finite are refused when read, naming the variable and the value (they
 * reached the kernels' exp and ended the run as diverged, exit 8); the same file with finite
 * weights reads (the control). */
static void nonfinite_weights_refused(void **state)
{
    (void)state;
    mw_model m;
    load_model(&m);
    const char *const want[2] = {"layers/dense/vars/0 (kernel): value 5 of 12 is nan (expected "
                                 "finite weights)",
                                 "layers/dense/vars/1 (bias): value 2 of 3 is -inf"};
    for (int k = 0; k < 3; k++) {
        size_t n = 0;
        void *img = nonfinite_image(&m, k, &n);
        mw_err_clear();
        const mw_status rc =
            mw_keras_h5_read(&m, m.params.data, img, n, "n.keras: model.weights.h5");
        if (k < 2) {
            const char *const subs[] = {"n.keras: model.weights.h5: layer 'd': ", want[k], NULL};
            assert_true(mw_test_err_matches("non-finite weight", rc, MW_EDATA, subs));
        } else {
            assert_int_equal(rc, MW_OK);
        }
        free(img);
    }
    mw_model_free(&m);
    mw_err_clear();
}

/* --nonfinite OUT: a .keras whose Dense kernel holds a NaN (tests/mpi/test_bad_values.sh). */
static int write_nonfinite(const char *out)
{
    mw_model m;
    load_model(&m);
    size_t n = 0;
    void *img = nonfinite_image(&m, 0, &n);
    write_keras(out, img, n);
    free(img);
    mw_model_free(&m);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--corpus"))
        return write_corpus(argv[2]);
    if (argc == 5 && !strcmp(argv[1], "--case"))
        return write_one(argv[2], argv[3], argv[4]);
    if (argc == 3 && !strcmp(argv[1], "--nonfinite"))
        return write_nonfinite(argv[2]);
    const struct CMUnitTest tests[] = {
        mw_test_in_tmpdir(every_layout_and_link),
        mw_test_in_tmpdir(control_hdf5_follows_them),
        mw_test_in_tmpdir(keras_file_with_external_storage),
        cmocka_unit_test(nonfinite_weights_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
