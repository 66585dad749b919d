/* The layer table's conformance: every Keras class that a row of the table reads
 * (mw_layer_row_nth(i)->keras[], the readers without a kind included) has
 *   (a) a gradient check: a model holding the class, read through the layer table, whose
 *       analytic gradients a test compares with central differences (gradchecks[] below: the
 *       model files and the inline model of those tests, each verified to be run by its
 *       registered test, so a renamed or dropped test shows here);
 *   (b) a Keras parity case: a script under tests/keras/ (Keras as the oracle) that builds
 *       the class (`Class(` or "Class" in its Python);
 *   (c) a line of docs/keras.md naming it.
 * Keras' own aliases (keras.layers.MaxPool2D is keras.layers.MaxPooling2D, saved under the
 * latter's name) share their class's (a) and (b); the docs still name them, as a reader
 * looks for the name in their model. Each missing item is printed, and any fails the test;
 * a made-up class, missing everything, is the control that shows each check can fail. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "tests/util.h"
#include "worker/model/layer.h"
#include "worker/model/model.h"

/* The gradient-check tests: the test file, its test (registered with cmocka_unit_test), and
 * the model file it reads, or NULL with the classes of the model written in the test. */
static const struct {
    const char *file, *test, *model;
    const char *classes[8];
} gradchecks[] = {
    {"tests/test_keras.c",
     "test_gradcheck_ref",
     NULL,
     {"Dropout", "Conv2D", "MaxPooling2D", "Flatten", "Dense"}},
    {"tests/test_keras.c",
     "test_graph_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_k2.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_crop_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_crop.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_mha_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_mha.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_act_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_act.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_misc_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_misc.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_norm_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_norm.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_tokens_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_tokens.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_tokens_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_tokens_pos.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_tokens_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_tokens_fn.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_tokens_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_tokens_rope.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_se_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_se.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_se_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_apps.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_dwconv_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_dwconv.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_up_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_up.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_tokens_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_tokens_tied.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_tokens_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_tokens_untied.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_transformer_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_transformer.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_vit_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_vit.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_rms_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_rms.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_llama_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_llama.json",
     {NULL}},
    {"tests/test_keras.c",
     "test_gemma_gradcheck_ref",
     "tests/data/keras/graph/gradcheck_gemma.json",
     {NULL}},
};

/* Keras' aliases: {alias, the class Keras saves it as}. */
static const char *const aliases[][2] = {
    {"MaxPool2D", "MaxPooling2D"},
    {"AvgPool2D", "AveragePooling2D"},
    {"GlobalMaxPool2D", "GlobalMaxPooling2D"},
    {"GlobalAvgPool2D", "GlobalAveragePooling2D"},
};

/* The scripts under tests/keras/ that are no parity case: they write archives mwtrain must
 * refuse, so a class named there is never compared. */
static const char *const not_parity[] = {"gen_bad_archives.py"};

#define MAX_CLASSES 256

typedef struct {
    const char *grad[MAX_CLASSES]; /* classes some gradient check holds */
    int ngrad;
    char *python; /* every parity script's text, concatenated */
    char *docs;   /* docs/keras.md */
} evidence;

static char *read_src(const char *rel)
{
    char *path = mw_test_srcpath(rel);
    size_t n = 0;
    char *text = mw_test_read_file(path, &n);
    if (!text)
        fail_msg("cannot read %s (is MW_SRCDIR the source root?)", path);
    free(path);
    return text;
}

static int is_word(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/* 1 when text names word as a whole word followed (after blanks) by one of `after` (any
 * character when after is ""), or quoted by one of `quotes`. */
static int names(const char *text, const char *word, const char *after, const char *quotes)
{
    size_t n = strlen(word);
    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word)) {
        char before = p == text ? ' ' : p[-1], next = p[n];
        if (is_word(before) || is_word(next))
            continue;
        if (quotes && before != '\0' && strchr(quotes, before) && next == before)
            return 1;
        const char *q = p + n;
        while (*q == ' ')
            q++;
        if (!*after || (*q && strchr(after, *q)))
            return 1;
    }
    return 0;
}

static void add_grad(evidence *e, const char *cls)
{
    for (int i = 0; i < e->ngrad; i++)
        if (!strcmp(e->grad[i], cls))
            return;
    assert_true(e->ngrad < MAX_CLASSES);
    e->grad[e->ngrad++] = cls;
}

/* Every "class_name" in a Keras model file (layers, nested blocks). */
static void model_classes(evidence *e, const json_t *v)
{
    const char *key;
    json_t *x;
    size_t i;
    if (json_is_object(v)) {
        const json_t *c = json_object_get(v, "class_name");
        if (json_is_string(c))
            add_grad(e, json_string_value(c));
        json_object_foreach((json_t *)v, key, x) model_classes(e, x);
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, x) model_classes(e, x);
    }
}

/* (a)'s classes, each test's registration and model checked on the way. */
static void read_gradchecks(evidence *e, json_t **keep, int *nkeep)
{
    for (size_t i = 0; i < sizeof gradchecks / sizeof *gradchecks; i++) {
        char *src = read_src(gradchecks[i].file), reg[128];
        snprintf(reg, sizeof reg, "cmocka_unit_test(%s)", gradchecks[i].test);
        if (!strstr(src, reg))
            fail_msg("%s does not register %s: update gradchecks[] in %s", gradchecks[i].file,
                     gradchecks[i].test, __FILE__);
        if (gradchecks[i].model) {
            if (!strstr(src, gradchecks[i].model))
                fail_msg("%s does not read %s", gradchecks[i].file, gradchecks[i].model);
            char *path = mw_test_srcpath(gradchecks[i].model);
            json_error_t err;
            json_t *m = json_load_file(path, 0, &err);
            if (!m)
                fail_msg("%s: %s", path, err.text);
            free(path);
            model_classes(e, m);
            keep[(*nkeep)++] = m; /* its strings stay in e->grad */
        }
        for (int j = 0; j < 8 && gradchecks[i].classes[j]; j++) {
            char quoted[96];
            snprintf(quoted, sizeof quoted, "\\\"%s\\\"", gradchecks[i].classes[j]);
            if (!strstr(src, quoted))
                fail_msg("%s holds no \"%s\" for %s", gradchecks[i].file, gradchecks[i].classes[j],
                         gradchecks[i].test);
            add_grad(e, gradchecks[i].classes[j]);
        }
        free(src);
    }
}

static int skipped(const char *name)
{
    for (size_t i = 0; i < sizeof not_parity / sizeof *not_parity; i++)
        if (!strcmp(name, not_parity[i]))
            return 1;
    return 0;
}

/* Append every .py under dir (recursively) to *all. */
static void read_python(const char *dir, char **all, size_t *len)
{
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("cannot open %s (is MW_SRCDIR the source root?)", dir);
    for (struct dirent *ent; (ent = readdir(d));) {
        char path[4096];
        size_t n = strlen(ent->d_name);
        struct stat st;
        if (ent->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            read_python(path, all, len);
        } else if (n > 3 && !strcmp(ent->d_name + n - 3, ".py") && !skipped(ent->d_name)) {
            size_t m = 0;
            char *text = mw_test_read_file(path, &m);
            assert_non_null(text);
            *all = realloc(*all, *len + m + 2);
            assert_non_null(*all);
            memcpy(*all + *len, text, m);
            *len += m;
            (*all)[(*len)++] = '\n';
            (*all)[*len] = '\0';
            free(text);
        }
    }
    closedir(d);
}

static const char *canonical(const char *cls)
{
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
        if (!strcmp(cls, aliases[i][0]))
            return aliases[i][1];
    return cls;
}

/* The missing items of cls, printed; how many. */
static int check_class(const evidence *e, const char *cls, const char *row)
{
    const char *c = canonical(cls);
    int grad = 0;
    for (int i = 0; i < e->ngrad; i++)
        grad |= !strcmp(e->grad[i], c);
    const int parity = names(e->python, c, "(", "\"'"), docs = names(e->docs, cls, "", NULL);
    if (!grad)
        printf("%s (%s): no gradient check (no model of gradchecks[] holds %s)\n", cls, row, c);
    if (!parity)
        printf("%s (%s): no Keras parity case (no script under tests/keras/ builds %s)\n", cls, row,
               c);
    if (!docs)
        printf("%s (%s): not named in docs/keras.md\n", cls, row);
    return !grad + !parity + !docs;
}

static void read_evidence(evidence *e, json_t **keep, int *nkeep)
{
    memset(e, 0, sizeof *e);
    read_gradchecks(e, keep, nkeep);
    size_t len = 0;
    char *dir = mw_test_srcpath("tests/keras");
    e->python = calloc(1, 1);
    read_python(dir, &e->python, &len);
    free(dir);
    e->docs = read_src("docs/keras.md");
}

static void test_every_row_conforms(void **state)
{
    (void)state;
    evidence e;
    json_t *keep[sizeof gradchecks / sizeof *gradchecks];
    int nkeep = 0, missing = 0, classes = 0;
    read_evidence(&e, keep, &nkeep);
    const mw_layer_ops *row;
    for (int k = 0; (row = mw_layer_row_nth(k)) != NULL; k++) {
        char what[96];
        snprintf(what, sizeof what, "the row of %s",
                 row->keras[0] ? mw_layer_keras_class(row->keras[0]) : "-");
        for (int j = 0; j < MW_LAYER_KERAS_MAX && row->keras[j]; j++, classes++)
            missing += check_class(&e, mw_layer_keras_class(row->keras[j]), what);
    }
    printf("layer table: %d Keras classes, %d missing item(s)\n", classes, missing);
    assert_true(classes > 20); /* the rows were read */
    /* the control: a class no row reads misses all three */
    assert_int_equal(check_class(&e, "NoSuchLayer", "control"), 3);
    for (int i = 0; i < nkeep; i++)
        json_decref(keep[i]);
    free(e.python);
    free(e.docs);
    assert_int_equal(missing, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_row_conforms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
