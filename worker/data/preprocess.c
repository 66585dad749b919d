/* The input pipeline of Keras preprocessing layers; see preprocess.h. Each layer maps one
 * example (H, W, C) to the next buffer; the pipeline ping-pongs between the caller's two
 * scratch buffers and writes the last layer's output where the batch wants it. */
#include "worker/data/preprocess.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "worker/model/keras_keys.h"

#define MAX_PRE 16 /* layers in one pipeline */

typedef enum { RESCALING, NORMALIZATION, FLIP, CROP, TRANSLATION } kind;
typedef enum { FILL_REFLECT, FILL_WRAP, FILL_CONSTANT, FILL_NEAREST } fill_mode;

static const char *const classes[] = {"Rescaling", "Normalization", "RandomFlip", "RandomCrop",
                                      "RandomTranslation"};
static const char *const fills[] = {"reflect", "wrap", "constant", "nearest"};
_Static_assert(sizeof classes / sizeof *classes == TRANSLATION + 1, "a class per kind");
_Static_assert(sizeof fills / sizeof *fills == FILL_NEAREST + 1, "a name per fill_mode");

typedef struct {
    kind kind;
    char name[64];
    int h, w, c;           /* input */
    int oh, ow;            /* output (channels unchanged) */
    float *scale, *offset; /* Rescaling: c values each, the same or per channel (owned) */
    float *mean, *denom;   /* Normalization: c values each (owned) */
    int invert;            /* Normalization */
    int horizontal, vertical;
    int box_y, box_x;          /* RandomCrop: Keras's fixed window */
    double hlo, hhi, wlo, whi; /* RandomTranslation factor ranges */
    fill_mode fill;
    float fill_value;
    int nearest; /* interpolation */
} layer;

struct mw_preprocess {
    layer l[MAX_PRE];
    int n;
    int raw; /* Rescaling or Normalization present */
};

static mw_status fail(const char *origin, const char *name, const char *cls, mw_status s,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static mw_status fail(const char *origin, const char *name, const char *cls, mw_status s,
                      const char *fmt, ...)
{
    char where[400];
    snprintf(where, sizeof where, "%s: layer '%s' (%s)", origin, name, cls);
    va_list ap;
    va_start(ap, fmt);
    mw_status rc = mw_verr_at(s, where, fmt, ap);
    va_end(ap);
    return rc;
}

typedef struct {
    const char *origin, *name, *cls;
    const json_t *cfg;
} ctx;

#define FAIL(X, s, ...) fail((X)->origin, (X)->name, (X)->cls, s, __VA_ARGS__)

static mw_status get_number(const ctx *X, const char *key, double def, double *out)
{
    const json_t *v = json_object_get(X->cfg, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return MW_OK;
    }
    if (!json_is_number(v))
        return FAIL(X, MW_EMODEL, "'%s' must be a number", key);
    *out = json_number_value(v);
    return MW_OK;
}

static mw_status get_int(const ctx *X, const char *key, int lo, int hi, int *out)
{
    const json_t *v = json_object_get(X->cfg, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return FAIL(X, MW_EMODEL, "'%s' must be an integer in %d..%d", key, lo, hi);
    *out = (int)json_integer_value(v);
    return MW_OK;
}

static mw_status get_string(const ctx *X, const char *key, const char *def, const char **out)
{
    const json_t *v = json_object_get(X->cfg, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return MW_OK;
    }
    if (!json_is_string(v))
        return FAIL(X, MW_EMODEL, "'%s' must be a string", key);
    *out = json_string_value(v);
    return MW_OK;
}

static mw_status check_format(const ctx *X)
{
    const char *f;
    MW_TRY(get_string(X, "data_format", "channels_last", &f));
    if (strcmp(f, "channels_last") != 0)
        return FAIL(X, MW_EUNSUPPORTED,
                    "data_format \"%s\" is not supported; supported: "
                    "\"channels_last\"",
                    f);
    return MW_OK;
}

/* A Keras factor: a number f (the range -|f|..|f|) or a pair [lo, hi], each in [-1, 1]. */
static mw_status get_factor(const ctx *X, const char *key, double *lo, double *hi)
{
    const json_t *v = json_object_get(X->cfg, key);
    double a, b;
    if (json_is_number(v)) {
        a = -fabs(json_number_value(v)), b = fabs(json_number_value(v));
    } else if (json_is_array(v) && json_array_size(v) == 2 &&
               json_is_number(json_array_get(v, 0)) && json_is_number(json_array_get(v, 1))) {
        a = json_number_value(json_array_get(v, 0)), b = json_number_value(json_array_get(v, 1));
        if (a > b) {
            double t = a;
            a = b, b = t;
        }
    } else {
        return FAIL(X, MW_EMODEL, "'%s' must be a number or a pair [lower, upper]", key);
    }
    if (a < -1 || b > 1)
        return FAIL(X, MW_EMODEL, "'%s' must lie in [-1, 1]", key);
    *lo = a, *hi = b;
    return MW_OK;
}

/* Normalization's mean or variance: one number, or c of them (a list, possibly nested as
 * Keras writes a (1, 1, 1, C) array). Fills out[0..c). */
static mw_status get_stats(const ctx *X, const char *key, int c, double *out)
{
    const json_t *v = json_object_get(X->cfg, key);
    while (json_is_array(v) && json_array_size(v) == 1 && json_is_array(json_array_get(v, 0)))
        v = json_array_get(v, 0);
    if (!v || json_is_null(v))
        return FAIL(X, MW_EUNSUPPORTED,
                    "'%s' is not in the config (an adapted layer keeps it in its weights); give "
                    "mean and variance to the constructor",
                    key);
    if (json_is_number(v)) {
        for (int i = 0; i < c; i++)
            out[i] = json_number_value(v);
        return MW_OK;
    }
    size_t n = json_array_size(v);
    if (!json_is_array(v) || (n != 1 && n != (size_t)c))
        return FAIL(X, MW_EMODEL, "'%s' must be a number or a list of %d (the channels)", key, c);
    for (int i = 0; i < c; i++) {
        const json_t *e = json_array_get(v, n == 1 ? 0 : (size_t)i);
        if (!json_is_number(e))
            return FAIL(X, MW_EMODEL, "'%s' must hold numbers", key);
        out[i] = json_number_value(e);
    }
    return MW_OK;
}

static mw_status parse_normalization(const ctx *X, layer *l)
{
    const json_t *axis = json_object_get(X->cfg, "axis");
    if (json_is_array(axis) && json_array_size(axis) <= 1) /* Keras 3: (-1,), or () for None */
        axis = json_array_get(axis, 0);
    if (axis && !json_is_null(axis) &&
        !(json_is_integer(axis) &&
          (json_integer_value(axis) == -1 || json_integer_value(axis) == 3)))
        return FAIL(X, MW_EUNSUPPORTED, "'axis' must be -1 (the channels) or null");
    double *st = malloc(2 * (size_t)l->c * sizeof *st);
    l->mean = malloc((size_t)l->c * sizeof *l->mean);
    l->denom = malloc((size_t)l->c * sizeof *l->denom);
    mw_status rc = MW_OK;
    if (!st || !l->mean || !l->denom) {
        rc = mw_err(MW_ENOMEM, "out of memory");
        goto done;
    }
    MW_TRY_GOTO(get_stats(X, "mean", l->c, st), rc, done);
    MW_TRY_GOTO(get_stats(X, "variance", l->c, st + l->c), rc, done);
    for (int i = 0; i < l->c; i++) {
        if (st[l->c + i] < 0) {
            rc = FAIL(X, MW_EMODEL, "'variance' must not be negative");
            goto done;
        }
        l->mean[i] = (float)st[i];
        l->denom[i] = fmaxf(sqrtf((float)st[l->c + i]), 1e-7f);
    }
    const json_t *inv = json_object_get(X->cfg, "invert");
    l->invert = json_is_true(inv);
done:
    free(st);
    return rc;
}

/* Rescaling's scale and offset: each a number, or a list of 1 or c (one per channel, possibly
 * nested as a (1, 1, 1, c) array), as Keras broadcasts them on the last axis. */
static mw_status parse_rescaling(const ctx *X, layer *l)
{
    static const char *const keys[] = {"scale", "offset"};
    double *v = malloc((size_t)l->c * sizeof *v);
    l->scale = malloc((size_t)l->c * sizeof *l->scale);
    l->offset = malloc((size_t)l->c * sizeof *l->offset);
    if (!v || !l->scale || !l->offset) {
        free(v);
        return mw_err(MW_ENOMEM, "out of memory");
    }
    mw_status rc = MW_OK;
    for (int k = 0; k < 2 && rc == MW_OK; k++) {
        float *out = k ? l->offset : l->scale;
        const json_t *j = json_object_get(X->cfg, keys[k]);
        if (!j || json_is_null(j)) { /* absent: 1 and 0, as the layer form reads them */
            for (int i = 0; i < l->c; i++)
                out[i] = k ? 0.0f : 1.0f;
            continue;
        }
        rc = get_stats(X, keys[k], l->c, v);
        for (int i = 0; rc == MW_OK && i < l->c; i++)
            out[i] = (float)v[i];
    }
    free(v);
    return rc;
}

static mw_status parse_translation(const ctx *X, layer *l)
{
    const char *fm, *interp;
    double fv = 0.0;
    MW_TRY(get_factor(X, "height_factor", &l->hlo, &l->hhi));
    MW_TRY(get_factor(X, "width_factor", &l->wlo, &l->whi));
    MW_TRY(get_string(X, "fill_mode", "reflect", &fm));
    MW_TRY(get_string(X, "interpolation", "bilinear", &interp));
    MW_TRY(get_number(X, "fill_value", 0.0, &fv));
    int k = 0;
    while (k < 4 && strcmp(fm, fills[k]) != 0)
        k++;
    if (k == 4)
        return FAIL(X, MW_EUNSUPPORTED,
                    "fill_mode \"%s\" is not supported; supported: reflect, wrap, constant, "
                    "nearest",
                    fm);
    if (strcmp(interp, "bilinear") != 0 && strcmp(interp, "nearest") != 0)
        return FAIL(X, MW_EUNSUPPORTED,
                    "interpolation \"%s\" is not supported; supported: bilinear, nearest", interp);
    l->fill = (fill_mode)k;
    l->fill_value = (float)fv;
    l->nearest = !strcmp(interp, "nearest");
    return MW_OK;
}

static mw_status parse_crop(const ctx *X, layer *l)
{
    MW_TRY(get_int(X, "height", 1, 1 << 16, &l->oh));
    MW_TRY(get_int(X, "width", 1, 1 << 16, &l->ow));
    if (l->oh > l->h || l->ow > l->w)
        return FAIL(X, MW_EUNSUPPORTED,
                    "crops %dx%d from %dx%d images; an input smaller than the crop (Keras "
                    "resizes it) is not supported",
                    l->oh, l->ow, l->h, l->w);
    /* Keras 3.6's window when it does not draw one (RandomCrop.get_random_transformation) */
    int ch = (int)((double)l->w * l->oh / l->ow), cw = (int)((double)l->h * l->ow / l->oh);
    ch = ch < l->h ? ch : l->h, cw = cw < l->w ? cw : l->w;
    ch = ch > 1 ? ch : 1, cw = cw > 1 ? cw : 1;
    l->box_y = (l->h - ch) / 2, l->box_x = (l->w - cw) / 2;
    return MW_OK;
}

/* The keys Keras writes for each class, in the order of classes[] (worker/model/keras_keys.h).
 * The random layers' seed is their random stream: mwtrain draws its own from --seed. */
#define SEED_KEY MW_KIGN("seed", "the random stream; mwtrain draws its own from --seed")
static const mw_kkey keys[][8] = {
    {MW_KREAD("scale"), MW_KREAD("offset"), MW_KEND},
    {MW_KREAD("axis"), MW_KREAD("invert"), MW_KREAD("mean"), MW_KREAD("variance"), MW_KEND},
    {MW_KREAD("data_format"), MW_KREAD("mode"), SEED_KEY, MW_KEND},
    {MW_KREAD("data_format"), MW_KREAD("height"), MW_KREAD("width"), SEED_KEY, MW_KEND},
    {MW_KREAD("data_format"), MW_KREAD("height_factor"), MW_KREAD("width_factor"),
     MW_KREAD("fill_mode"), MW_KREAD("interpolation"), MW_KREAD("fill_value"), SEED_KEY, MW_KEND},
};

static mw_status parse_layer(const ctx *X, layer *l)
{
    const char *mode;
    char where[160];
    snprintf(where, sizeof where, "layer '%s' (%s)", X->name, X->cls);
    MW_TRY(mw_kcheck_keys(X->origin, where, X->cls, X->cfg, keys[l->kind], 1));
    switch (l->kind) {
    case RESCALING:
        return parse_rescaling(X, l);
    case NORMALIZATION:
        return parse_normalization(X, l);
    case FLIP:
        MW_TRY(check_format(X));
        MW_TRY(get_string(X, "mode", "horizontal_and_vertical", &mode));
        l->horizontal = !strcmp(mode, "horizontal") || !strcmp(mode, "horizontal_and_vertical");
        l->vertical = !strcmp(mode, "vertical") || !strcmp(mode, "horizontal_and_vertical");
        if (!l->horizontal && !l->vertical)
            return FAIL(X, MW_EMODEL,
                        "mode \"%s\": expected horizontal, vertical or horizontal_and_vertical",
                        mode);
        return MW_OK;
    case CROP:
        MW_TRY(check_format(X));
        return parse_crop(X, l);
    default:
        MW_TRY(check_format(X));
        return parse_translation(X, l);
    }
}

int mw_preprocess_is_layer(const char *cls)
{
    for (size_t i = 0; i < sizeof classes / sizeof *classes; i++)
        if (!strcmp(cls, classes[i]))
            return 1;
    return 0;
}

mw_status mw_preprocess_add(mw_preprocess **pp, int *h, int *w, int *c, int nlayers, int flat_input,
                            int is_last, const char *cls, const json_t *cfg, const char *name,
                            const char *origin)
{
    int k = 0;
    while (strcmp(cls, classes[k]) != 0)
        k++;
    char auto_name[64];
    if (!name || !*name) {
        snprintf(auto_name, sizeof auto_name, "%s", cls);
        name = auto_name;
    }
    ctx X = {origin, name, cls, cfg};
    if (nlayers > 0)
        return FAIL(&X, MW_EUNSUPPORTED,
                    "preprocessing layers are supported only as a leading run, right after the "
                    "input; move it before the model's first other layer");
    if (flat_input || *c < 1)
        return FAIL(&X, MW_EMODEL, "needs image input (None, H, W, C); the model's is flat");
    if (is_last)
        return FAIL(&X, MW_EMODEL, "a preprocessing layer cannot end the model");
    mw_preprocess *p = *pp;
    if (!p && !(p = *pp = calloc(1, sizeof *p)))
        return mw_err(MW_ENOMEM, "out of memory");
    if (p->n == MAX_PRE)
        return FAIL(&X, MW_EUNSUPPORTED, "at most %d preprocessing layers", MAX_PRE);
    layer *l = &p->l[p->n];
    memset(l, 0, sizeof *l);
    l->kind = (kind)k;
    snprintf(l->name, sizeof l->name, "%s", name);
    l->h = l->oh = *h, l->w = l->ow = *w, l->c = *c;
    mw_status rc = parse_layer(&X, l);
    if (rc != MW_OK) {
        free(l->mean), free(l->denom), free(l->scale), free(l->offset);
        return rc;
    }
    p->n++;
    p->raw |= l->kind == RESCALING || l->kind == NORMALIZATION;
    *h = l->oh, *w = l->ow;
    return MW_OK;
}

void mw_preprocess_close(mw_preprocess **pp)
{
    mw_preprocess *p = *pp;
    if (!p)
        return;
    for (int i = 0; i < p->n; i++)
        free(p->l[i].mean), free(p->l[i].denom), free(p->l[i].scale), free(p->l[i].offset);
    free(p);
    *pp = NULL;
}

size_t mw_preprocess_in_count(const mw_preprocess *p)
{
    return p->n ? (size_t)p->l[0].h * p->l[0].w * p->l[0].c : 0;
}

size_t mw_preprocess_out_count(const mw_preprocess *p)
{
    if (!p->n)
        return 0;
    const layer *l = &p->l[p->n - 1];
    return (size_t)l->oh * l->ow * l->c;
}

int mw_preprocess_takes_raw(const mw_preprocess *p)
{
    return p && p->raw;
}

int mw_preprocess_nlayers(const mw_preprocess *p)
{
    return p ? p->n : 0;
}

/* ---- draws ---- */

/* A uniform float in [0, 1) from the key and a counter. */
static double uniform(uint64_t seed, uint64_t stream, uint32_t id, unsigned k)
{
    return (double)(mw_rng_hash(seed, stream, ((uint64_t)id << 8) | k) >> 11) * 0x1p-53;
}

void mw_preprocess_draw(const mw_preprocess *p, uint64_t seed, int epoch, uint32_t id,
                        mw_pre_draw *draws)
{
    for (int i = 0; i < p->n; i++) {
        const layer *l = &p->l[i];
        const uint64_t stream = UINT64_C(0xa0900000) + (uint64_t)epoch * MAX_PRE + (uint64_t)i;
        mw_pre_draw *d = &draws[i];
        memset(d, 0, sizeof *d);
        if (l->kind == FLIP)
            d->flip = uniform(seed, stream, id, 0) <= 0.5;
        if (l->kind == CROP) {
            d->crop_y = l->box_y, d->crop_x = l->box_x;
            if (l->h > l->oh && l->w > l->ow) {
                d->crop_y = (int)(uniform(seed, stream, id, 0) * (l->h - l->oh + 1));
                d->crop_x = (int)(uniform(seed, stream, id, 1) * (l->w - l->ow + 1));
            }
        }
        if (l->kind == TRANSLATION) {
            d->dy = (float)((l->hlo + (l->hhi - l->hlo) * uniform(seed, stream, id, 0)) * l->h);
            d->dx = (float)((l->wlo + (l->whi - l->wlo) * uniform(seed, stream, id, 1)) * l->w);
        }
    }
}

/* ---- layers ---- */

static int fix_index(int i, int n, fill_mode m, int *valid)
{
    *valid = 1;
    switch (m) {
    case FILL_NEAREST:
        return i < 0 ? 0 : i >= n ? n - 1 : i;
    case FILL_WRAP: {
        int k = i % n;
        return k < 0 ? k + n : k;
    }
    case FILL_REFLECT: { /* half-sample symmetric, period 2n */
        int k = i % (2 * n);
        k = k < 0 ? k + 2 * n : k;
        return k < n ? k : 2 * n - 1 - k;
    }
    default:
        *valid = i >= 0 && i < n;
        return *valid ? i : 0;
    }
}

/* Keras's affine_transform for a translation: out(y, x) = in(y - dy, x - dx), through
 * map_coordinates (order 1 or 0): the weighted sum over the neighbours in (row, col) order,
 * a neighbour outside the image giving fill_value in constant mode. */
static void translate(const layer *l, float *out, const float *in, float dy, float dx)
{
    const int H = l->h, W = l->w, C = l->c;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            const float sy = (float)y - dy, sx = (float)x - dx;
            int iy[2], ix[2], vy[2], vx[2], ny = 2, nx = 2;
            float wy[2], wx[2];
            if (l->nearest) { /* round half away from zero */
                iy[0] = (int)(sy < 0 ? -floorf(-sy + 0.5f) : floorf(sy + 0.5f));
                ix[0] = (int)(sx < 0 ? -floorf(-sx + 0.5f) : floorf(sx + 0.5f));
                wy[0] = wx[0] = 1.0f, ny = nx = 1;
            } else {
                const float fy = floorf(sy), fx = floorf(sx);
                iy[0] = (int)fy, iy[1] = iy[0] + 1, wy[1] = sy - fy, wy[0] = 1.0f - wy[1];
                ix[0] = (int)fx, ix[1] = ix[0] + 1, wx[1] = sx - fx, wx[0] = 1.0f - wx[1];
            }
            for (int a = 0; a < ny; a++)
                iy[a] = fix_index(iy[a], H, l->fill, &vy[a]);
            for (int b = 0; b < nx; b++)
                ix[b] = fix_index(ix[b], W, l->fill, &vx[b]);
            for (int c = 0; c < C; c++) {
                float sum = 0.0f;
                for (int a = 0; a < ny; a++)
                    for (int b = 0; b < nx; b++) {
                        float v = vy[a] && vx[b] ? in[((size_t)iy[a] * W + ix[b]) * C + c]
                                                 : l->fill_value;
                        sum += wy[a] * wx[b] * v;
                    }
                out[((size_t)y * W + x) * C + c] = sum;
            }
        }
}

/* Layer l on one example: in -> out (they may not overlap, except for the pointwise layers). */
static void apply_layer(const layer *l, float *out, const float *in, int training,
                        const mw_pre_draw *d)
{
    const int H = l->h, W = l->w, C = l->c;
    const size_t count = (size_t)H * W * C;
    switch (l->kind) {
    case RESCALING:
        for (size_t i = 0; i < count; i += (size_t)C) /* a pixel's C channels */
            for (int c = 0; c < C; c++)
                out[i + c] = in[i + c] * l->scale[c] + l->offset[c];
        return;
    case NORMALIZATION:
        for (size_t i = 0; i < count; i++) {
            const int c = (int)(i % (size_t)C);
            out[i] =
                l->invert ? l->mean[c] + in[i] * l->denom[c] : (in[i] - l->mean[c]) / l->denom[c];
        }
        return;
    case FLIP:
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) {
                const int sy = training && d->flip && l->vertical ? H - 1 - y : y;
                const int sx = training && d->flip && l->horizontal ? W - 1 - x : x;
                memcpy(out + ((size_t)y * W + x) * C, in + ((size_t)sy * W + sx) * C,
                       (size_t)C * sizeof *out);
            }
        return;
    case CROP: {
        const int y0 = training ? d->crop_y : l->box_y, x0 = training ? d->crop_x : l->box_x;
        for (int y = 0; y < l->oh; y++)
            memcpy(out + (size_t)y * l->ow * C, in + ((size_t)(y + y0) * W + x0) * C,
                   (size_t)l->ow * C * sizeof *out);
        return;
    }
    default:
        if (training)
            translate(l, out, in, d->dy, d->dx);
        else
            memcpy(out, in, count * sizeof *out);
        return;
    }
}

void mw_preprocess_apply(const mw_preprocess *p, float *out, float *a, float *b, int training,
                         const mw_pre_draw *draws)
{
    float *cur = a, *next = b;
    for (int i = 0; i < p->n; i++) {
        float *dst = i + 1 == p->n ? out : next;
        apply_layer(&p->l[i], dst, cur, training, draws ? &draws[i] : NULL);
        next = cur, cur = dst;
    }
}

/* What layer l computes, in words, for messages. */
static void describe(const layer *l, char *buf, size_t len)
{
    switch (l->kind) {
    case RESCALING:
        snprintf(buf, len, "Rescaling(scale %g, offset %g%s)", l->scale[0], l->offset[0],
                 l->c > 1 && (memcmp(l->scale, l->scale + 1, (size_t)(l->c - 1) * sizeof(float)) ||
                              memcmp(l->offset, l->offset + 1, (size_t)(l->c - 1) * sizeof(float)))
                     ? ", ... per channel"
                     : "");
        return;
    case NORMALIZATION:
        snprintf(buf, len, "Normalization(mean[0] %g, ...%s)", l->mean[0],
                 l->invert ? ", invert" : "");
        return;
    case FLIP:
        snprintf(buf, len, "RandomFlip(%s%s%s)", l->horizontal ? "horizontal" : "",
                 l->horizontal && l->vertical ? "_and_" : "", l->vertical ? "vertical" : "");
        return;
    case CROP:
        snprintf(buf, len, "RandomCrop %dx%d", l->oh, l->ow);
        return;
    default:
        snprintf(buf, len, "RandomTranslation(%g..%g, %g..%g, %s, %s)", l->hlo, l->hhi, l->wlo,
                 l->whi, fills[l->fill], l->nearest ? "nearest" : "bilinear");
        return;
    }
}

static int same_layer(const layer *a, const layer *b)
{
    if (a->kind != b->kind || a->h != b->h || a->w != b->w || a->c != b->c || a->oh != b->oh ||
        a->ow != b->ow || a->invert != b->invert || a->horizontal != b->horizontal ||
        a->vertical != b->vertical || a->hlo != b->hlo || a->hhi != b->hhi || a->wlo != b->wlo ||
        a->whi != b->whi || a->fill != b->fill || a->fill_value != b->fill_value ||
        a->nearest != b->nearest)
        return 0;
    if (a->kind == NORMALIZATION)
        return !memcmp(a->mean, b->mean, (size_t)a->c * sizeof *a->mean) &&
               !memcmp(a->denom, b->denom, (size_t)a->c * sizeof *a->denom);
    if (a->kind == RESCALING)
        return !memcmp(a->scale, b->scale, (size_t)a->c * sizeof *a->scale) &&
               !memcmp(a->offset, b->offset, (size_t)a->c * sizeof *a->offset);
    return 1;
}

int mw_preprocess_diff(const mw_preprocess *a, const mw_preprocess *b, char *what, size_t len)
{
    const int na = a ? a->n : 0, nb = b ? b->n : 0;
    for (int i = 0; i < na && i < nb; i++) {
        if (same_layer(&a->l[i], &b->l[i]))
            continue;
        char da[160], db[160];
        describe(&a->l[i], da, sizeof da);
        describe(&b->l[i], db, sizeof db);
        if (len)
            snprintf(what, len, "input pipeline layer %d (%s): %s in the checkpoint, %s in --model",
                     i, b->l[i].name, da, db);
        return 1;
    }
    if (na == nb)
        return 0;
    if (len)
        snprintf(what, len, "the checkpoint's model has %d preprocessing layer%s, --model %d", na,
                 na == 1 ? "" : "s", nb);
    return 1;
}

void mw_preprocess_summary(const mw_preprocess *p, FILE *f)
{
    if (!p)
        return;
    for (int i = 0; i < p->n; i++) {
        const layer *l = &p->l[i];
        char left[160], shape[64];
        snprintf(left, sizeof left, "%s (%s)", l->name, classes[l->kind]);
        snprintf(shape, sizeof shape, "(None, %d, %d, %d)", l->oh, l->ow, l->c);
        fprintf(f, "%-32s %-25s %7d\n", left, shape, 0);
    }
}
