/* Resizing decoded pixels to the model's input as tf.image.resize does (image_resize.h;
 * docs/images.md): half-pixel bilinear or nearest sampling in TensorFlow's float32
 * arithmetic, after Keras' aspect-ratio crop when asked. Every value is
 * lerp(lerp(tl, tr, xl), lerp(bl, br, xl), yl), each operation rounded to float32; the inner
 * lerps of an input row are computed once for all the output rows that read it, RGB and RGBA
 * ones 4 values at a time (SSE2), the outer lerp over contiguous rows (omp simd), with the
 * same operations per value as one at a time, so the same bits. Nothing is allocated. */
#include "worker/data/image_resize.h"

#include <math.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define RESIZE_CHUNK 512 /* output columns whose weights are computed at once */

/* One output index's sampling along an axis of in_n input pixels (tf.image.resize, half-pixel
 * centers, TensorFlow's float arithmetic): the two input indices and the upper one's weight.
 * Nearest: floor((i + 0.5) * scale), clamped, weight 0. */
typedef struct {
    uint32_t lo, hi;
    float lerp;
} axis_weight;

static axis_weight axis_at(uint32_t i, float scale, uint32_t in_n, mw_image_interp interp)
{
    axis_weight a;
    if (interp == MW_IMAGE_NEAREST) {
        long k = (long)floorf(((float)i + 0.5f) * scale);
        k = k > (long)in_n - 1 ? (long)in_n - 1 : k;
        a.lo = a.hi = k < 0 ? 0 : (uint32_t)k;
        a.lerp = 0.0f;
        return a;
    }
    float in = ((float)i + 0.5f) * scale - 0.5f;
    float in_f = floorf(in);
    long lo = (long)in_f, hi = (long)ceilf(in);
    a.lo = lo < 0 ? 0 : (uint32_t)lo;
    a.hi = hi > (long)in_n - 1 ? in_n - 1 : (uint32_t)hi;
    a.lerp = in - in_f;
    return a;
}

/* Keras' smart_resize crop (the float32 arithmetic of its dynamic-shape branch): the largest
 * centered box of the target's aspect ratio. */
static void crop_box(uint32_t h, uint32_t w, uint32_t th, uint32_t tw, uint32_t box[4])
{
    int64_t ch = (int64_t)((float)((int64_t)w * th) / (float)tw);
    int64_t cw = (int64_t)((float)((int64_t)h * tw) / (float)th);
    ch = ch > h ? h : ch < 1 ? 1 : ch;
    cw = cw > w ? w : cw < 1 ? 1 : cw;
    box[0] = (uint32_t)(int64_t)((float)(h - ch) / 2.0f);
    box[1] = (uint32_t)(int64_t)((float)(w - cw) / 2.0f);
    box[2] = (uint32_t)ch;
    box[3] = (uint32_t)cw;
}

static float lerp(float a, float b, float t)
{
    return a + (b - a) * t;
}

/* The x-interpolated input rows an output row reads (its top and bottom), each computed once
 * and kept while the next output rows read it again (shrinking by less than 2 or enlarging,
 * an input row serves two or more output rows). lo, hi, t: for each value of a chunk's output
 * row (column x channel), the offsets of its two input values in a row and the upper one's
 * weight, so that one flat loop interpolates a row whatever the channel count. */
typedef struct {
    float buf[2][RESIZE_CHUNK * 4];
    long row[2]; /* the input row each buf holds, -1: none */
    uint32_t lo[RESIZE_CHUNK * 4], hi[RESIZE_CHUNK * 4];
    float t[RESIZE_CHUNK * 4];
    size_t m; /* values of the chunk's output row */
    size_t c;
    uint32_t n4; /* the leading columns interpolated 4 values at a time (below) */
    const uint8_t *base;
    size_t stride;
} row_cache;

#ifdef __SSE2__
/* 4 values at once (SSE2, every x86-64): an RGB or RGBA pixel's lerp on 4 lanes, each the same
 * IEEE operations as one value alone. Elsewhere n4 stays 0 and the scalar loop does all. */
#define RESIZE_VEC4 1

static inline __m128 load4(const uint8_t *p)
{
    int32_t w;
    memcpy(&w, p, sizeof w);
    const __m128i z = _mm_setzero_si128();
    return _mm_cvtepi32_ps(_mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(w), z), z));
}

/* The chunk's first n4 columns of 3 or 4 channels: one pixel a step, loading 4 bytes (for RGB
 * the next pixel's first one too, which n4 keeps inside the row) and storing 4 floats (for
 * RGB the 4th is the next column's first value, written over by it: the buffers have room). */
static void row_lerp4(float *h, const uint8_t *src, const row_cache *rc)
{
    const size_t c = rc->c;
    for (uint32_t x = 0; x < rc->n4; x++) {
        const __m128 a = load4(src + rc->lo[x * c]), b = load4(src + rc->hi[x * c]);
        _mm_storeu_ps(h + x * c,
                      _mm_add_ps(a, _mm_mul_ps(_mm_sub_ps(b, a), _mm_set1_ps(rc->t[x * c]))));
    }
}
#else
#define RESIZE_VEC4 0
static void row_lerp4(float *h, const uint8_t *src, const row_cache *rc)
{
    (void)h, (void)src, (void)rc;
}
#endif

/* Input row want x-interpolated, computed into the buffer not holding row keep if not held. */
static const float *cached_row(row_cache *rc, long want, long keep)
{
    for (int b = 0; b < 2; b++)
        if (rc->row[b] == want)
            return rc->buf[b];
    const int b = rc->row[0] == keep ? 1 : 0;
    const uint8_t *src = rc->base + (size_t)want * rc->stride;
    float *h = rc->buf[b];
    row_lerp4(h, src, rc);
    for (size_t j = rc->n4 * rc->c; j < rc->m; j++)
        h[j] = lerp(src[rc->lo[j]], src[rc->hi[j]], rc->t[j]);
    rc->row[b] = want;
    return h;
}

/* Chunk [x0, x0 + n)'s column tables (c channels). */
static void chunk_columns(row_cache *rc, uint32_t x0, uint32_t n, size_t c, float sx, uint32_t in_w,
                          mw_image_interp interp)
{
    for (uint32_t x = 0; x < n; x++) {
        const axis_weight a = axis_at(x0 + x, sx, in_w, interp);
        for (size_t k = 0; k < c; k++) {
            rc->lo[x * c + k] = a.lo * (uint32_t)c + (uint32_t)k;
            rc->hi[x * c + k] = a.hi * (uint32_t)c + (uint32_t)k;
            rc->t[x * c + k] = a.lerp;
        }
    }
    rc->m = (size_t)n * c;
    rc->c = c;
    rc->n4 = 0; /* RGB: while the right neighbor is not the row's last pixel (4 bytes there) */
    while (RESIZE_VEC4 && c >= 3 && c <= 4 && rc->n4 < n &&
           (c == 4 || rc->hi[rc->n4 * c] / c + 1 < in_w))
        rc->n4++;
    rc->row[0] = rc->row[1] = -1;
}

/* The second lerp, between the x-interpolated rows, each value then divided by div:
 * contiguous, so it vectorizes (the same IEEE operations per element as one at a time, so the
 * same bits; x / 1 is x). */
static void resize_rows(float *dst, const float *top, const float *bot, size_t n, float ylerp,
                        float div)
{
    if (div == 1.0f) {
#pragma omp simd
        for (size_t j = 0; j < n; j++)
            dst[j] = lerp(top[j], bot[j], ylerp);
    } else {
#pragma omp simd
        for (size_t j = 0; j < n; j++)
            dst[j] = lerp(top[j], bot[j], ylerp) / div;
    }
}

/* Each output value is lerp(lerp(tl, tr, xl), lerp(bl, br, xl), yl) as tf.image.resize
 * computes it; the inner lerps of an input row are shared by every output row that reads it.
 * The row cache (about 40 KB) is on the stack: this never allocates, so it cannot fail. */
void mw_image_resize_scaled(float *dst, const mw_image *src, uint32_t height, uint32_t width,
                            mw_image_interp interp, int crop, float divisor)
{
    uint32_t box[4] = {0, 0, src->height, src->width};
    if (crop)
        crop_box(src->height, src->width, height, width, box);
    float sy = (float)box[2] / (float)height, sx = (float)box[3] / (float)width;
    size_t c = (size_t)src->channels, stride = (size_t)src->width * c;
    row_cache rc;
    rc.base = src->pixels + box[0] * stride + box[1] * c;
    rc.stride = stride;
    for (uint32_t x0 = 0; x0 < width; x0 += RESIZE_CHUNK) {
        uint32_t n = width - x0 < RESIZE_CHUNK ? width - x0 : RESIZE_CHUNK;
        chunk_columns(&rc, x0, n, c, sx, box[3], interp);
        for (uint32_t y = 0; y < height; y++) {
            axis_weight ay = axis_at(y, sy, box[2], interp);
            const float *top = cached_row(&rc, ay.lo, ay.hi), *bot = cached_row(&rc, ay.hi, ay.lo);
            resize_rows(dst + ((size_t)y * width + x0) * c, top, bot, rc.m, ay.lerp, divisor);
        }
    }
}

void mw_image_resize(float *dst, const mw_image *src, uint32_t height, uint32_t width,
                     mw_image_interp interp, int crop)
{
    mw_image_resize_scaled(dst, src, height, width, interp, crop, 1.0f);
}
