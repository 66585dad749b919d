/* Tests for the image decoder and resize (worker/data/image_decode.h): the seed images of
 * tests/fuzz/corpus/image/ decode at every channel count TensorFlow allows, the resize's
 * identity, nearest and crop boxes, and every hostile file: truncated and corrupt JPEG (a
 * libjpeg warning), truncated PNG and a bad CRC, 60000 x 60000 pixels declared in a file of
 * under 1 KiB (JPEG, PNG, GIF, BMP), non-image bytes, an empty file, the BMP variants not read,
 * the channel counts TensorFlow refuses, CMYK JPEG; each checks the status, its exit code (3)
 * and the message (the name, what was found, what was expected). RGB and RGBA resize as their
 * channels one by one, the scaled resize as the resize / 255. Each hostile file is a seed
 * that test_seeds decodes, changed in one place: the change is what is refused. Decoding from four
 * threads at once gives the same pixels and each thread its own error message. The pixels against
 * TensorFlow's are tests/images/check_images.py's (suite keras). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jpeglib.h>
#include <zlib.h>

#include "common/status.h"
#include "tests/util.h"
#include "worker/data/image_decode.h"
#include "worker/data/image_resize.h"

/* A seed image's bytes (malloc'ed). */
static uint8_t *seed(const char *name, size_t *n)
{
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fuzz/corpus/image/%s", name);
    char *path = mw_test_srcpath(rel);
    uint8_t *b = (uint8_t *)mw_test_read_file(path, n);
    free(path);
    assert_non_null(b);
    return b;
}

/* Decoding b refused with MW_EDATA (exit 3), a message holding the name and every part, no
 * pixels left behind. */
#define expect_refused(b, n, channels, name, ...)                                                  \
    do {                                                                                           \
        mw_image img_;                                                                             \
        mw_err_clear();                                                                            \
        mw_status rc_ = mw_image_decode(&img_, (b), (n), (channels), (name));                      \
        expect_err(rc_, MW_EDATA, (name), __VA_ARGS__);                                            \
        assert_int_equal(mw_status_exit_code(rc_), 3);                                             \
        assert_null(img_.pixels);                                                                  \
        mw_err_clear();                                                                            \
    } while (0)

static void decode_ok(const char *name, int channels, uint32_t h, uint32_t w)
{
    size_t n;
    uint8_t *b = seed(name, &n);
    mw_image img;
    mw_err_clear();
    mw_status rc = mw_image_decode(&img, b, n, channels, name);
    if (rc != MW_OK)
        fail_msg("%s (%d channels): %s", name, channels, mw_err_msg());
    assert_int_equal(img.height, h);
    assert_int_equal(img.width, w);
    assert_int_equal(img.channels, channels);
    mw_image_free(&img);
    free(b);
}

static void test_seeds(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        uint32_t h, w;
        int gray, rgba; /* 1: that channel count is allowed */
    } cases[] = {
        {"rgb.jpg", 16, 16, 1, 0}, {"gray.jpg", 9, 11, 1, 0},  {"prog.jpg", 16, 24, 1, 0},
        {"rgb.png", 8, 8, 1, 1},   {"rgba16.png", 5, 6, 1, 1}, {"pal4.png", 5, 7, 1, 1},
        {"anim.gif", 8, 9, 0, 0},  {"inter.gif", 9, 6, 0, 0},  {"rgb.bmp", 3, 5, 0, 1},
        {"rgba.bmp", 4, 2, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        decode_ok(cases[i].name, 3, cases[i].h, cases[i].w);
        if (cases[i].gray)
            decode_ok(cases[i].name, 1, cases[i].h, cases[i].w);
        if (cases[i].rgba)
            decode_ok(cases[i].name, 4, cases[i].h, cases[i].w);
    }
}

static void test_sniff(void **state)
{
    (void)state;
    assert_int_equal(mw_image_sniff((const uint8_t *)"\xff\xd8\xff\xe0", 4), MW_IMAGE_JPEG);
    assert_int_equal(mw_image_sniff((const uint8_t *)"\x89PNG\r\n\x1a\n", 8), MW_IMAGE_PNG);
    assert_int_equal(mw_image_sniff((const uint8_t *)"GIF87a", 6), MW_IMAGE_GIF);
    assert_int_equal(mw_image_sniff((const uint8_t *)"BM", 2), MW_IMAGE_BMP);
    assert_int_equal(mw_image_sniff((const uint8_t *)"\x89PNG", 4), MW_IMAGE_UNKNOWN);
    assert_int_equal(mw_image_sniff((const uint8_t *)"", 0), MW_IMAGE_UNKNOWN);
    assert_string_equal(mw_image_format_name(MW_IMAGE_GIF), "GIF");
}

/* Same size: the pixels as they are (bilinear weights 0, nearest indices themselves). Keras'
 * own crop example: 340 x 500 to 200 x 200 takes the 340 x 340 box from column 80. */
static void test_resize(void **state)
{
    (void)state;
    enum { H = 340, W = 500 };
    mw_image img = {.height = H, .width = W, .channels = 1, .pixels = malloc(H * W)};
    assert_non_null(img.pixels);
    for (size_t i = 0; i < (size_t)H * W; i++)
        img.pixels[i] = (uint8_t)(i * 7 + i / W);
    float *out = malloc(sizeof(float) * H * W);
    assert_non_null(out);
    for (int interp = 0; interp < 2; interp++) {
        mw_image_resize(out, &img, H, W, (mw_image_interp)interp, 0);
        for (size_t i = 0; i < (size_t)H * W; i++)
            assert_true(out[i] == img.pixels[i]);
    }
    mw_image_resize(out, &img, H, H, MW_IMAGE_NEAREST, 1);
    for (size_t y = 0; y < H; y++)
        for (size_t x = 0; x < H; x++)
            assert_true(out[y * H + x] == img.pixels[y * W + 80 + x]);
    /* wider than the weights' chunk (1024 columns): 2 x 2500 RGB as it is */
    mw_image wide = {.height = 2, .width = 2500, .channels = 3, .pixels = malloc(2 * 2500 * 3)};
    float *wout = malloc(sizeof(float) * 2 * 2500 * 3);
    assert_true(wide.pixels && wout);
    for (size_t i = 0; i < 2 * 2500 * 3; i++)
        wide.pixels[i] = (uint8_t)(i * 13 + i / 7);
    mw_image_resize(wout, &wide, 2, 2500, MW_IMAGE_BILINEAR, 0);
    for (size_t i = 0; i < 2 * 2500 * 3; i++)
        assert_true(wout[i] == wide.pixels[i]);
    free(wout);
    free(wide.pixels);
    /* 2 x 1 to 4 x 1 bilinear: half-pixel centers give 0.25 and 0.75 of the way */
    mw_image two = {.height = 2, .width = 1, .channels = 1, .pixels = (uint8_t[]){0, 100}};
    mw_image_resize(out, &two, 4, 1, MW_IMAGE_BILINEAR, 0);
    assert_true(out[0] == 0.0f && out[1] == 25.0f && out[2] == 75.0f && out[3] == 100.0f);
    free(out);
    free(img.pixels);
}

/* An interleaved image's resize, channel by channel: c planes resized as 1-channel images. */
static void resize_planes(float *out, const mw_image *img, uint32_t h, uint32_t w,
                          mw_image_interp interp, int crop)
{
    const size_t n = (size_t)img->height * img->width, m = (size_t)h * w;
    mw_image plane = {
        .height = img->height, .width = img->width, .channels = 1, .pixels = malloc(n)};
    float *po = malloc(m * sizeof *po);
    assert_true(plane.pixels && po);
    for (int k = 0; k < img->channels; k++) {
        for (size_t i = 0; i < n; i++)
            plane.pixels[i] = img->pixels[i * (size_t)img->channels + (size_t)k];
        mw_image_resize(po, &plane, h, w, interp, crop);
        for (size_t i = 0; i < m; i++)
            out[i * (size_t)img->channels + (size_t)k] = po[i];
    }
    free(po);
    free(plane.pixels);
}

/* RGB and RGBA pixels are interpolated 4 values at a time, gray ones one at a time: an RGB or
 * RGBA resize (shrinking, enlarging, odd widths whose last columns read the row's last pixel,
 * crop) equals its channels resized one by one, bit for bit; the scaled resize equals the
 * resize's values / 255 bit for bit, and differs from them * (1 / 255) (the control: a
 * product rounds apart, so the comparison can tell). */
static void test_resize_channels(void **state)
{
    (void)state;
    static const uint32_t sizes[][4] = {
        {250, 277, 224, 224}, {7, 5, 19, 23}, {301, 3, 4, 1}, {1, 2, 1, 3}, {64, 64, 224, 224}};
    int product_differs = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (int c = 3; c <= 4; c++)
            for (int mode = 0; mode < 3; mode++) {
                mw_image img = {.height = sizes[s][0], .width = sizes[s][1], .channels = c};
                const uint32_t h = sizes[s][2], w = sizes[s][3];
                const size_t n = (size_t)img.height * img.width * c, m = (size_t)h * w * c;
                img.pixels = malloc(n); /* exact: a read past the last pixel is ASan's to see */
                float *a = malloc(m * 4), *b = malloc(m * 4), *q = malloc(m * 4);
                assert_true(img.pixels && a && b && q);
                for (size_t i = 0; i < n; i++)
                    img.pixels[i] = (uint8_t)(i * 2654435761u >> 13);
                const mw_image_interp interp = mode == 1 ? MW_IMAGE_NEAREST : MW_IMAGE_BILINEAR;
                mw_image_resize(a, &img, h, w, interp, mode == 2);
                resize_planes(b, &img, h, w, interp, mode == 2);
                assert_memory_equal(a, b, m * 4);
                mw_image_resize_scaled(q, &img, h, w, interp, mode == 2, 255.0f);
                for (size_t i = 0; i < m; i++) {
                    assert_true(q[i] == a[i] / 255.0f);
                    product_differs |= q[i] != a[i] * (1.0f / 255.0f);
                }
                free(a), free(b), free(q), free(img.pixels);
            }
    assert_true(product_differs);
}

/* The offset of the first marker m (0xff m) after the SOI in a JPEG. */
static size_t jpeg_marker(const uint8_t *b, size_t n, uint8_t m)
{
    for (size_t i = 2; i + 1 < n; i++)
        if (b[i] == 0xFF && b[i + 1] == m)
            return i;
    fail_msg("no marker ff %02x", m);
    return 0;
}

static void test_jpeg_truncated(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = seed("rgb.jpg", &n);
    expect_refused(b, n / 2, 3, "cut.jpg", "JPEG", "Premature end of JPEG file",
                   "expected complete");
    free(b);
}

/* Two stray bytes before the DQT marker: libjpeg's "Corrupt JPEG data" warning, an error. */
static void test_jpeg_corrupt(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = seed("rgb.jpg", &n), *c = malloc(n + 2);
    assert_non_null(c);
    size_t dqt = jpeg_marker(b, n, 0xDB);
    memcpy(c, b, dqt);
    c[dqt] = 0x12;
    c[dqt + 1] = 0x34;
    memcpy(c + dqt + 2, b + dqt, n - dqt);
    expect_refused(c, n + 2, 3, "corrupt.jpg", "Corrupt JPEG data", "extraneous bytes");
    free(c);
    free(b);
}

/* 60000 x 60000 in the frame header of a file of under 1 KiB. */
static void test_jpeg_bomb(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = seed("rgb.jpg", &n);
    size_t sof = jpeg_marker(b, n, 0xC0);
    b[sof + 5] = b[sof + 7] = 60000 >> 8;
    b[sof + 6] = b[sof + 8] = 60000 & 255;
    assert_true(n < 1024);
    expect_refused(b, n, 3, "bomb.jpg", "JPEG", "60000 x 60000", "MW_IMAGE_MAX_PIXELS",
                   "refused before decoding");
    free(b);
}

static void test_jpeg_rgba(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = seed("rgb.jpg", &n);
    expect_refused(b, n, 4, "rgb.jpg", "4 channels (color_mode rgba)", "expected 1 or 3",
                   "tf.io.decode_image");
    free(b);
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void test_png_truncated(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = seed("rgb.png", &n);
    expect_refused(b, n / 2, 3, "cut.png", "PNG", "truncated", "expected complete PNG");
    expect_refused(b, n - 12, 3, "no-iend.png", "PNG", "truncated");
    free(b);
}

static void test_png_crc(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = seed("rgb.png", &n);
    b[29] ^= 0x40; /* IHDR's CRC */
    expect_refused(b, n, 3, "crc.png", "PNG", "CRC error", "CRCs hold");
    free(b);
}

/* 60000 x 60000 in a valid IHDR (its CRC recomputed): only the size is hostile. */
static void test_png_bomb(void **state)
{
    (void)state;
    size_t n;
    uint8_t *b = seed("rgb.png", &n);
    put_be32(b + 16, 60000);
    put_be32(b + 20, 60000);
    put_be32(b + 29, (uint32_t)crc32(0, b + 12, 17));
    assert_true(n < 1024);
    expect_refused(b, n, 3, "bomb.png", "PNG", "60000 x 60000", "MW_IMAGE_MAX_PIXELS");
    free(b);
}

static void test_gif_hostile(void **state)
{
    (void)state;
    size_t n;
    uint8_t *g = seed("anim.gif", &n);
    expect_refused(g, n - 30, 3, "cut.gif", "GIF", "giflib", "Failed to read", "expected complete");
    expect_refused(g, n, 1, "anim.gif", "1 channel (color_mode grayscale)", "expected 3");
    expect_refused(g, n, 4, "anim.gif", "4 channels (color_mode rgba)", "expected 3");
    size_t desc = 13 + 768 + 8; /* header, global color map, graphics control extension */
    assert_int_equal(g[desc], ',');
    g[desc + 5] = g[desc + 7] = 60000 & 255;
    g[desc + 6] = g[desc + 8] = 60000 >> 8;
    expect_refused(g, n, 3, "bomb.gif", "GIF", "60000 x 60000", "MW_IMAGE_MAX_PIXELS");
    free(g);
}

static void test_bmp_hostile(void **state)
{
    (void)state;
    size_t m;
    uint8_t *b = seed("rgb.bmp", &m);
    expect_refused(b, m - 2, 3, "cut.bmp", "BMP", "truncated");
    expect_refused(b, 40, 3, "short.bmp", "BMP", "54 bytes");
    expect_refused(b, m, 1, "rgb.bmp", "1 channel", "expected 3 or 4");
    b[28] = 8;
    expect_refused(b, m, 3, "pal.bmp", "8 bits per pixel", "expected 24 or 32");
    b[28] = 24;
    b[30] = 1;
    expect_refused(b, m, 3, "rle.bmp", "compression 1", "expected 0");
    b[30] = 0;
    b[18] = b[22] = 60000 & 255;
    b[19] = b[23] = 60000 >> 8;
    expect_refused(b, m, 3, "bomb.bmp", "BMP", "60000 x 60000", "MW_IMAGE_MAX_PIXELS");
    free(b);
}

static void test_not_image(void **state)
{
    (void)state;
    expect_refused((const uint8_t *)"hello, world", 12, 3, "notes.txt", "not an image",
                   "68 65 6c 6c 6f 2c 20 77", "expected the signature of a JPEG");
    expect_refused((const uint8_t *)"\xff\xd8\xff", 3, 3, "stub.jpg", "JPEG");
    expect_refused((const uint8_t *)"\x89PNG\r\n\x1a\n", 8, 3, "stub.png", "PNG", "truncated");
    mw_image img;
    expect_err(mw_image_decode(&img, (const uint8_t *)"BM", 2, 2, "x.bmp"), MW_EINVAL, "x.bmp",
               "2 channels", "expected 1, 3 or 4");
    mw_err_clear();
}

static void test_empty_file(void **state)
{
    (void)state;
    expect_refused((const uint8_t *)"", 0, 3, "empty.png", "an empty file", "expected a JPEG");
}

/* An 8 x 8 CMYK JPEG of one color, written by libjpeg (with its Adobe marker, so the decoder
 * reads the values as stored, inverted). */
static uint8_t *cmyk_jpeg(unsigned long *n, const uint8_t cmyk[4])
{
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr err;
    ci.err = jpeg_std_error(&err);
    jpeg_create_compress(&ci);
    unsigned char *out = NULL;
    jpeg_mem_dest(&ci, &out, n);
    ci.image_width = ci.image_height = 8;
    ci.input_components = 4;
    ci.in_color_space = JCS_CMYK;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, 100, TRUE);
    jpeg_start_compress(&ci, TRUE);
    uint8_t row[8 * 4];
    for (int i = 0; i < 8; i++)
        memcpy(row + 4 * i, cmyk, 4);
    while (ci.next_scanline < 8) {
        JSAMPROW r = row;
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    assert_true(ci.write_Adobe_marker);
    jpeg_destroy_compress(&ci);
    return out;
}

static void test_cmyk(void **state)
{
    (void)state;
    const uint8_t cmyk[4] = {200, 100, 50, 180};
    unsigned long n;
    uint8_t *b = cmyk_jpeg(&n, cmyk);
    mw_image img;
    assert_int_equal(mw_image_decode(&img, b, n, 3, "cmyk.jpg"), MW_OK);
    for (int k = 0; k < 3; k++) { /* TensorFlow's Adobe formula k * c / 255, within the DCT's 1 */
        int want = cmyk[3] * cmyk[k] / 255;
        assert_true(abs(img.pixels[k] - want) <= 1);
    }
    mw_image_free(&img);
    expect_refused(b, n, 1, "cmyk.jpg", "CMYK", "expected rgb");
    free(b);
}

typedef struct {
    const uint8_t *jpg, *png;
    size_t njpg, npng;
    const mw_image *ref_jpg, *ref_png;
    int bad; /* images that differed or failed, messages not this thread's own */
} thread_job;

static void *decode_many(void *arg)
{
    thread_job *j = arg;
    for (int i = 0; i < 40; i++) {
        mw_image a, c;
        if (mw_image_decode(&a, j->jpg, j->njpg, 3, "t.jpg") != MW_OK ||
            mw_image_decode(&c, j->png, j->npng, 4, "t.png") != MW_OK) {
            j->bad++;
            continue;
        }
        j->bad += memcmp(a.pixels, j->ref_jpg->pixels, 16 * 16 * 3) != 0;
        j->bad += memcmp(c.pixels, j->ref_png->pixels, 8 * 8 * 4) != 0;
        mw_image_free(&a);
        mw_image_free(&c);
        char name[32];
        snprintf(name, sizeof name, "bad-%p-%d.jpg", arg, i);
        mw_err_clear();
        mw_image_decode(&a, j->jpg, j->njpg / 2, 3, name);
        j->bad += strstr(mw_err_msg(), name) == NULL;
        mw_err_clear();
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    thread_job jobs[4];
    pthread_t t[4];
    size_t njpg, npng;
    uint8_t *jpg = seed("rgb.jpg", &njpg), *png = seed("rgb.png", &npng);
    mw_image rj, rp;
    assert_int_equal(mw_image_decode(&rj, jpg, njpg, 3, "rgb.jpg"), MW_OK);
    assert_int_equal(mw_image_decode(&rp, png, npng, 4, "rgb.png"), MW_OK);
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){jpg, png, njpg, npng, &rj, &rp, 0};
        assert_int_equal(pthread_create(&t[i], NULL, decode_many, &jobs[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(jobs[i].bad, 0);
    }
    mw_image_free(&rj);
    mw_image_free(&rp);
    free(jpg);
    free(png);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seeds),          cmocka_unit_test(test_sniff),
        cmocka_unit_test(test_resize),         cmocka_unit_test(test_resize_channels),
        cmocka_unit_test(test_jpeg_truncated), cmocka_unit_test(test_jpeg_corrupt),
        cmocka_unit_test(test_jpeg_bomb),      cmocka_unit_test(test_jpeg_rgba),
        cmocka_unit_test(test_png_truncated),  cmocka_unit_test(test_png_crc),
        cmocka_unit_test(test_png_bomb),       cmocka_unit_test(test_gif_hostile),
        cmocka_unit_test(test_bmp_hostile),    cmocka_unit_test(test_not_image),
        cmocka_unit_test(test_empty_file),     cmocka_unit_test(test_cmyk),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
