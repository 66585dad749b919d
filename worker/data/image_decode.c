/* Image decoding (JPEG through libjpeg-turbo, PNG through libpng, GIF's first frame through
 * giflib, BMP parsed here) (image_decode.h; docs/images.md; the resize: image_resize.c).
 *
 * Each decoder reproduces what TensorFlow's tf.io.decode_image does with the same library, so
 * the pixels Keras trains on are the pixels mwtrain trains on: the same libjpeg settings
 * (integer-fast DCT, fancy upsampling, TensorFlow's CMYK-to-RGB formula), the same libpng
 * transformations in the same order (palette and low bit depths expanded, 16 bits stripped to
 * their high byte, alpha stripped or added, RGB to gray with 0.299/0.587/0.114 in libpng's
 * fixed point), GIF frames composed on the screen as TensorFlow composes the first, BMP rows
 * read bottom-up unless the height is negative.
 *
 * Hostile input: the declared width x height is checked against MW_IMAGE_MAX_PIXELS before
 * any pixel buffer (or libjpeg's coefficient buffers) exists; libjpeg's warnings (corrupt
 * data, a premature end) are errors, as is a progressive JPEG of more than MAX_JPEG_SCANS
 * scans (a slow-decoding trick); libpng's errors (truncation, a critical chunk's CRC) are
 * errors, its warnings are ignored as TensorFlow ignores them (a bad ancillary chunk is
 * dropped). The libraries' longjmp-based errors stay inside each decoder; every state is on
 * the stack or in the caller's mw_image, so threads decode at once. */
#include "worker/data/image_decode.h"

#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gif_lib.h>
#include <jpeglib.h>
#include <png.h>

#define MAX_JPEG_SCANS 500 /* libjpeg-turbo's own fuzzers stop there */

mw_image_format mw_image_sniff(const uint8_t *b, size_t n)
{
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF)
        return MW_IMAGE_JPEG;
    if (n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0)
        return MW_IMAGE_PNG;
    if (n >= 6 && (memcmp(b, "GIF87a", 6) == 0 || memcmp(b, "GIF89a", 6) == 0))
        return MW_IMAGE_GIF;
    if (n >= 2 && b[0] == 'B' && b[1] == 'M')
        return MW_IMAGE_BMP;
    return MW_IMAGE_UNKNOWN;
}

const char *mw_image_format_name(mw_image_format f)
{
    static const char *const names[] = {"unknown", "JPEG", "PNG", "GIF", "BMP"};
    return (unsigned)f < sizeof names / sizeof *names ? names[f] : "unknown";
}

void mw_image_free(mw_image *img)
{
    free(img->pixels);
    memset(img, 0, sizeof *img);
}

/* The declared size against the limit, before anything is allocated. */
static mw_status check_size(uint64_t width, uint64_t height, mw_image_format f, const char *name)
{
    if (width == 0 || height == 0)
        return mw_err(MW_EDATA, "%s: a %s image of %llu x %llu pixels: expected both sides > 0",
                      name, mw_image_format_name(f), (unsigned long long)width,
                      (unsigned long long)height);
    if (width * height > MW_IMAGE_MAX_PIXELS)
        return mw_err(MW_EDATA,
                      "%s: a %s image declaring %llu x %llu pixels: more than the limit of %llu "
                      "pixels (MW_IMAGE_MAX_PIXELS); refused before decoding",
                      name, mw_image_format_name(f), (unsigned long long)width,
                      (unsigned long long)height, (unsigned long long)MW_IMAGE_MAX_PIXELS);
    return MW_OK;
}

/* out's pixel buffer for a checked size. */
static mw_status alloc_pixels(mw_image *out, uint32_t width, uint32_t height, int channels,
                              mw_image_format f, const char *name)
{
    size_t nbytes = (size_t)width * height * (size_t)channels;
    out->pixels = malloc(nbytes);
    if (!out->pixels)
        return mw_err(MW_ENOMEM, "%s: cannot allocate %zu bytes for a %u x %u %s image", name,
                      nbytes, width, height, mw_image_format_name(f));
    out->width = width;
    out->height = height;
    out->channels = channels;
    out->format = f;
    return MW_OK;
}

/* A channel count TensorFlow refuses for this format (its own rule, so that a folder Keras
 * cannot read is not read differently here). */
static mw_status refuse_channels(mw_image_format f, int channels, const char *allowed,
                                 const char *name)
{
    return mw_err(MW_EDATA,
                  "%s: a %s image cannot be decoded to %d channel%s (color_mode %s): expected %s "
                  "for %s, as tf.io.decode_image requires",
                  name, mw_image_format_name(f), channels, channels == 1 ? "" : "s",
                  channels == 1   ? "grayscale"
                  : channels == 3 ? "rgb"
                                  : "rgba",
                  allowed, mw_image_format_name(f));
}

/* ---- JPEG ---- */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX + 64];
} jpeg_fail_mgr;

static void jpeg_fail(j_common_ptr c)
{
    jpeg_fail_mgr *e = (jpeg_fail_mgr *)c->err;
    c->err->format_message(c, e->msg);
    longjmp(e->jump, 1);
}

/* level < 0: a warning (corrupt data, a premature end): an error here. Trace levels: nothing. */
static void jpeg_message(j_common_ptr c, int level)
{
    if (level < 0)
        jpeg_fail(c);
}

static void jpeg_progress(j_common_ptr c)
{
    j_decompress_ptr d = (j_decompress_ptr)c;
    if (d->input_scan_number > MAX_JPEG_SCANS) {
        jpeg_fail_mgr *e = (jpeg_fail_mgr *)c->err;
        snprintf(e->msg, sizeof e->msg, "more than %d progressive scans", MAX_JPEG_SCANS);
        longjmp(e->jump, 1);
    }
}

/* TensorFlow's CMYK to RGB (libjpeg hands Adobe's files' CMYK inverted). */
static void cmyk_to_rgb(uint8_t *dst, const uint8_t *src, uint32_t width, int adobe)
{
    for (uint32_t i = 0; i < width; i++) {
        int c = src[4 * i], m = src[4 * i + 1], y = src[4 * i + 2], k = src[4 * i + 3];
        if (adobe) {
            dst[3 * i] = (uint8_t)(k * c / 255);
            dst[3 * i + 1] = (uint8_t)(k * m / 255);
            dst[3 * i + 2] = (uint8_t)(k * y / 255);
        } else {
            dst[3 * i] = (uint8_t)((255 - k) * (255 - c) / 255);
            dst[3 * i + 1] = (uint8_t)((255 - k) * (255 - m) / 255);
            dst[3 * i + 2] = (uint8_t)((255 - k) * (255 - y) / 255);
        }
    }
}

/* After jpeg_read_header: the checks and settings before decompression. */
static mw_status jpeg_setup(j_decompress_ptr ci, int channels, int *cmyk, const char *name)
{
    MW_TRY(check_size(ci->image_width, ci->image_height, MW_IMAGE_JPEG, name));
    *cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
    if (*cmyk && channels == 1)
        return mw_err(MW_EDATA,
                      "%s: a CMYK JPEG image cannot be decoded to 1 channel (color_mode "
                      "grayscale): expected rgb, as tf.io.decode_image requires",
                      name);
    ci->out_color_space = channels == 1 ? JCS_GRAYSCALE : *cmyk ? JCS_CMYK : JCS_RGB;
    ci->dct_method = JDCT_IFAST; /* tf.io.decode_image's */
    ci->do_fancy_upsampling = TRUE;
    return MW_OK;
}

/* The scanlines of a started decompression into out (CMYK through row). */
static void jpeg_rows(j_decompress_ptr ci, mw_image *out, uint8_t *row, int cmyk)
{
    size_t stride = (size_t)out->width * (size_t)out->channels;
    while (ci->output_scanline < ci->output_height) {
        uint8_t *dst = out->pixels + (size_t)ci->output_scanline * stride;
        JSAMPROW r = cmyk ? row : dst;
        jpeg_read_scanlines(ci, &r, 1);
        if (cmyk)
            cmyk_to_rgb(dst, row, out->width, ci->saw_Adobe_marker);
    }
}

static mw_status decode_jpeg(mw_image *out, const uint8_t *b, size_t n, int channels,
                             const char *name)
{
    if (channels == 4)
        return refuse_channels(MW_IMAGE_JPEG, channels, "1 or 3", name);
    struct jpeg_decompress_struct ci;
    jpeg_fail_mgr err;
    struct jpeg_progress_mgr progress = {.progress_monitor = jpeg_progress};
    uint8_t *volatile row = NULL;
    ci.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = jpeg_fail;
    err.pub.emit_message = jpeg_message;
    if (setjmp(err.jump)) {
        jpeg_destroy_decompress(&ci);
        free(row);
        mw_image_free(out);
        return mw_err(MW_EDATA,
                      "%s: a JPEG image libjpeg cannot decode: %s (expected complete, "
                      "uncorrupted JPEG data)",
                      name, err.msg);
    }
    jpeg_create_decompress(&ci);
    ci.progress = &progress;
    jpeg_mem_src(&ci, b, (unsigned long)n);
    jpeg_read_header(&ci, TRUE);
    int cmyk = 0;
    mw_status rc = jpeg_setup(&ci, channels, &cmyk, name);
    if (rc == MW_OK) {
        jpeg_start_decompress(&ci);
        rc = alloc_pixels(out, ci.output_width, ci.output_height, channels, MW_IMAGE_JPEG, name);
    }
    if (rc == MW_OK && cmyk && !(row = malloc((size_t)ci.output_width * 4)))
        rc =
            mw_err(MW_ENOMEM, "%s: cannot allocate a CMYK row of %u pixels", name, ci.output_width);
    if (rc == MW_OK) {
        jpeg_rows(&ci, out, row, cmyk);
        jpeg_finish_decompress(&ci);
    }
    jpeg_destroy_decompress(&ci);
    free(row);
    if (rc != MW_OK)
        mw_image_free(out);
    return rc;
}

/* ---- PNG ---- */

/* The bytes libpng and giflib read through their callbacks; msg: libpng's error. */
typedef struct {
    const uint8_t *p;
    size_t left;
    char msg[160];
} mem_src;

/* Up to n bytes from s into dst; returns how many there were. */
static size_t mem_take(mem_src *s, uint8_t *dst, size_t n)
{
    size_t k = n < s->left ? n : s->left;
    memcpy(dst, s->p, k);
    s->p += k;
    s->left -= k;
    return k;
}

static void png_fail(png_structp png, png_const_charp msg)
{
    mem_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_warn(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static void png_read_mem(png_structp png, png_bytep dst, size_t n)
{
    mem_src *s = png_get_io_ptr(png);
    if (n > s->left)
        png_error(png, "the data end before the image does (a truncated file)");
    mem_take(s, dst, n);
}

/* TensorFlow's transformations for channels (after png_read_info); returns the passes. */
static int png_transforms(png_structp png, png_infop info, int channels)
{
    int bit_depth = png_get_bit_depth(png, info), color = png_get_color_type(png, info);
    int has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
    if ((channels & 1) == 0) {
        if (!(color & PNG_COLOR_MASK_ALPHA)) {
            if (has_trns)
                png_set_tRNS_to_alpha(png);
            else
                png_set_add_alpha(png, (png_uint_32)((1 << bit_depth) - 1), PNG_FILLER_AFTER);
        }
    } else if ((color & PNG_COLOR_MASK_ALPHA) || has_trns) {
        png_set_strip_alpha(png);
    }
    if (bit_depth > 8)
        png_set_strip_16(png);
    png_set_packing(png);
    int passes = png_set_interlace_handling(png);
    if (color == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    int is_gray = !(color & PNG_COLOR_MASK_COLOR);
    if (is_gray && bit_depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (channels < 3 && !is_gray)
        png_set_rgb_to_gray(png, 1, 0.299, 0.587);
    else if (channels >= 3 && is_gray)
        png_set_gray_to_rgb(png);
    png_read_update_info(png, info);
    return passes;
}

/* Inside the caller's setjmp: header, checks, transformations, rows, end. */
static mw_status png_body(png_structp png, png_infop info, mw_image *out, int channels,
                          const char *name)
{
    png_read_info(png, info);
    uint32_t width = png_get_image_width(png, info), height = png_get_image_height(png, info);
    MW_TRY(check_size(width, height, MW_IMAGE_PNG, name));
    int passes = png_transforms(png, info, channels);
    size_t rowbytes = png_get_rowbytes(png, info);
    if (rowbytes != (size_t)width * (size_t)channels)
        return mw_err(MW_EDATA,
                      "%s: a PNG image whose rows decode to %zu bytes: expected %zu "
                      "(%u pixels of %d channels)",
                      name, rowbytes, (size_t)width * channels, width, channels);
    MW_TRY(alloc_pixels(out, width, height, channels, MW_IMAGE_PNG, name));
    for (int p = 0; p < passes; p++)
        for (uint32_t y = 0; y < height; y++)
            png_read_row(png, out->pixels + y * rowbytes, NULL);
    png_read_end(png, info);
    return MW_OK;
}

static mw_status decode_png(mw_image *out, const uint8_t *b, size_t n, int channels,
                            const char *name)
{
    mem_src src = {.p = b, .left = n};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_fail, png_warn);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
        return mw_err(MW_ENOMEM, "%s: cannot allocate libpng's decoder", name);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        mw_image_free(out);
        return mw_err(MW_EDATA,
                      "%s: a PNG image libpng cannot decode: %s (expected complete PNG "
                      "data whose chunks' CRCs hold)",
                      name, src.msg);
    }
    png_set_read_fn(png, &src, png_read_mem);
    mw_status rc = png_body(png, info, out, channels, name);
    png_destroy_read_struct(&png, &info, NULL);
    if (rc != MW_OK)
        mw_image_free(out);
    return rc;
}

/* ---- GIF ---- */

static int gif_read_mem(GifFileType *g, GifByteType *dst, int n)
{
    return n > 0 ? (int)mem_take(g->UserData, dst, (size_t)n) : 0;
}

static mw_status gif_error(const GifFileType *g, int code, const char *name)
{
    const char *what = GifErrorString(g ? g->Error : code);
    return mw_err(MW_EDATA,
                  "%s: a GIF image giflib cannot decode: %s (expected complete, "
                  "uncorrupted GIF data)",
                  name, what ? what : "unknown error");
}

/* Skip to the first image descriptor, reading the transparent index from the graphics control
 * extension before it (-1: none). */
static mw_status gif_first_image(GifFileType *g, int *transparent, const char *name)
{
    *transparent = NO_TRANSPARENT_COLOR;
    for (;;) {
        GifRecordType type;
        if (DGifGetRecordType(g, &type) == GIF_ERROR)
            return gif_error(g, 0, name);
        if (type == IMAGE_DESC_RECORD_TYPE)
            return DGifGetImageDesc(g) == GIF_ERROR ? gif_error(g, 0, name) : MW_OK;
        if (type == TERMINATE_RECORD_TYPE)
            return mw_err(MW_EDATA,
                          "%s: a GIF file that ends before its first image: expected "
                          "an image descriptor",
                          name);
        if (type != EXTENSION_RECORD_TYPE)
            continue;
        int code;
        GifByteType *ext;
        if (DGifGetExtension(g, &code, &ext) == GIF_ERROR)
            return gif_error(g, 0, name);
        GraphicsControlBlock gcb;
        if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4 &&
            DGifExtensionToGCB(ext[0], ext + 1, &gcb) == GIF_OK)
            *transparent = gcb.TransparentColor;
        while (ext)
            if (DGifGetExtensionNext(g, &ext) == GIF_ERROR)
                return gif_error(g, 0, name);
    }
}

/* The first frame as TensorFlow keeps it: its pixels at (Left, Top) on a zeroed canvas,
 * clipped; a transparent index leaves the canvas black, an index past the color map is an
 * error. */
typedef struct {
    int left, top, width, height, transparent, ncolors;
    GifColorType colors[256];
    uint8_t *idx; /* width x height color indices */
} gif_first;

static mw_status gif_compose(mw_image *out, const gif_first *f, const char *name)
{
    memset(out->pixels, 0, (size_t)out->width * out->height * 3);
    for (int fy = 0; fy < f->height; fy++) {
        long y = (long)f->top + fy;
        if (y >= (long)out->height)
            break;
        uint8_t *dst = out->pixels + (size_t)y * out->width * 3;
        const uint8_t *row = f->idx + (size_t)fy * (size_t)f->width;
        for (int fx = 0; fx < f->width; fx++) {
            long x = (long)f->left + fx;
            if (x >= (long)out->width || row[fx] == f->transparent)
                continue;
            if (row[fx] >= f->ncolors)
                return mw_err(MW_EDATA,
                              "%s: a GIF pixel of color index %d: expected an index "
                              "below the color map's %d entries",
                              name, row[fx], f->ncolors);
            const GifColorType *c = &f->colors[row[fx]];
            dst[3 * x] = c->Red;
            dst[3 * x + 1] = c->Green;
            dst[3 * x + 2] = c->Blue;
        }
    }
    return MW_OK;
}

/* The first frame's descriptor, color map and indices (interlaced rows in their four passes). */
static mw_status gif_read_first(GifFileType *g, gif_first *f, const char *name)
{
    static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
    const GifImageDesc *d = &g->Image;
    const ColorMapObject *map = d->ColorMap ? d->ColorMap : g->SColorMap;
    if (!map)
        return mw_err(MW_EDATA,
                      "%s: a GIF image without a color map: expected a global or a "
                      "local one",
                      name);
    MW_TRY(check_size((uint64_t)d->Width, (uint64_t)d->Height, MW_IMAGE_GIF, name));
    f->left = d->Left;
    f->top = d->Top;
    f->width = d->Width;
    f->height = d->Height;
    f->ncolors = map->ColorCount < 256 ? map->ColorCount : 256;
    memcpy(f->colors, map->Colors, (size_t)f->ncolors * sizeof *f->colors);
    f->idx = malloc((size_t)d->Width * (size_t)d->Height);
    if (!f->idx)
        return mw_err(MW_ENOMEM, "%s: cannot allocate a GIF frame of %d x %d pixels", name,
                      d->Width, d->Height);
    int passes = d->Interlace ? 4 : 1;
    for (int p = 0; p < passes; p++)
        for (int y = d->Interlace ? start[p] : 0; y < f->height; y += d->Interlace ? step[p] : 1)
            if (DGifGetLine(g, f->idx + (size_t)y * (size_t)f->width, f->width) == GIF_ERROR)
                return gif_error(g, 0, name);
    return MW_OK;
}

/* TensorFlow's canvas: the largest width and the largest height of all frames (it decodes them
 * all and keeps the first). The frames after the first are walked for their descriptors, their
 * pixel data skipped. */
static mw_status gif_canvas(GifFileType *g, const gif_first *f, uint32_t *w, uint32_t *h,
                            const char *name)
{
    *w = (uint32_t)f->width;
    *h = (uint32_t)f->height;
    for (;;) {
        GifRecordType type;
        int code;
        GifByteType *blk;
        if (DGifGetRecordType(g, &type) == GIF_ERROR)
            return gif_error(g, 0, name);
        if (type == TERMINATE_RECORD_TYPE)
            return MW_OK;
        if (type == IMAGE_DESC_RECORD_TYPE) {
            if (DGifGetImageDesc(g) == GIF_ERROR || DGifGetCode(g, &code, &blk) == GIF_ERROR)
                return gif_error(g, 0, name);
            *w = (uint32_t)g->Image.Width > *w ? (uint32_t)g->Image.Width : *w;
            *h = (uint32_t)g->Image.Height > *h ? (uint32_t)g->Image.Height : *h;
            MW_TRY(check_size(*w, *h, MW_IMAGE_GIF, name));
        } else if (type == EXTENSION_RECORD_TYPE) {
            if (DGifGetExtension(g, &code, &blk) == GIF_ERROR)
                return gif_error(g, 0, name);
        } else {
            continue;
        }
        while (blk)
            if (DGifGetCodeNext(g, &blk) == GIF_ERROR)
                return gif_error(g, 0, name);
    }
}

static mw_status decode_gif(mw_image *out, const uint8_t *b, size_t n, int channels,
                            const char *name)
{
    if (channels != 3)
        return refuse_channels(MW_IMAGE_GIF, channels, "3", name);
    mem_src src = {.p = b, .left = n};
    int code = 0;
    GifFileType *g = DGifOpen(&src, gif_read_mem, &code);
    if (!g)
        return gif_error(NULL, code, name);
    gif_first f = {.idx = NULL};
    uint32_t w = 0, h = 0;
    mw_status rc = gif_first_image(g, &f.transparent, name);
    if (rc == MW_OK)
        rc = gif_read_first(g, &f, name);
    if (rc == MW_OK)
        rc = gif_canvas(g, &f, &w, &h, name);
    if (rc == MW_OK)
        rc = alloc_pixels(out, w, h, 3, MW_IMAGE_GIF, name);
    if (rc == MW_OK)
        rc = gif_compose(out, &f, name);
    free(f.idx);
    DGifCloseFile(g, &code);
    if (rc != MW_OK)
        mw_image_free(out);
    return rc;
}

/* ---- BMP ---- */

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The header fields TensorFlow's decode_bmp reads, with what it does not check checked. */
static mw_status bmp_header(const uint8_t *b, size_t n, uint32_t *w, uint32_t *h, int *top_down,
                            int *bpp, const char *name)
{
    if (n < 54)
        return mw_err(MW_EDATA,
                      "%s: a BMP file of %zu bytes: expected at least the 54 bytes of "
                      "its headers",
                      name, n);
    uint32_t hsize = le32(b + 14), comp = le32(b + 30);
    int32_t width = (int32_t)le32(b + 18), height = (int32_t)le32(b + 22);
    *bpp = b[28] | b[29] << 8;
    if (hsize < 40)
        return mw_err(MW_EDATA,
                      "%s: a BMP info header of %u bytes: expected 40 or more "
                      "(BITMAPINFOHEADER or later)",
                      name, hsize);
    if (*bpp != 24 && *bpp != 32)
        return mw_err(MW_EDATA,
                      "%s: a BMP image of %d bits per pixel: expected 24 or 32 "
                      "(palette and 16-bit BMP files are not read)",
                      name, *bpp);
    int masks_ok = comp == 3 && *bpp == 32 && n >= 66 && le32(b + 54) == 0xFF0000u &&
                   le32(b + 58) == 0xFF00u && le32(b + 62) == 0xFFu;
    if (comp != 0 && !masks_ok)
        return mw_err(MW_EDATA,
                      "%s: a BMP image of compression %u: expected 0 (uncompressed) "
                      "or 3 with 32 bits of BGRA masks",
                      name, comp);
    if (width <= 0 || height == 0 || height == INT32_MIN)
        return mw_err(MW_EDATA,
                      "%s: a BMP image of %d x %d pixels: expected a width > 0 and a "
                      "height != 0",
                      name, (int)width, (int)height);
    *w = (uint32_t)width;
    *top_down = height < 0;
    *h = height < 0 ? (uint32_t)-height : (uint32_t)height;
    return check_size(*w, *h, MW_IMAGE_BMP, name);
}

static mw_status decode_bmp(mw_image *out, const uint8_t *b, size_t n, int channels,
                            const char *name)
{
    if (channels == 1)
        return refuse_channels(MW_IMAGE_BMP, channels, "3 or 4", name);
    uint32_t w = 0, h = 0;
    int top_down = 0, bpp = 0;
    MW_TRY(bmp_header(b, n, &w, &h, &top_down, &bpp, name));
    uint64_t src_c = (uint64_t)bpp / 8, row = (src_c * w + 3) / 4 * 4, offset = le32(b + 10);
    uint64_t need = offset + row * (h - 1) + src_c * w;
    if (need > n)
        return mw_err(MW_EDATA,
                      "%s: a %u x %u BMP image of %d bits per pixel at offset %llu "
                      "needs %llu bytes: the file has %zu (truncated)",
                      name, w, h, bpp, (unsigned long long)offset, (unsigned long long)need, n);
    MW_TRY(alloc_pixels(out, w, h, channels, MW_IMAGE_BMP, name));
    for (uint32_t y = 0; y < h; y++) {
        const uint8_t *src = b + offset + row * (top_down ? y : h - 1 - y);
        uint8_t *dst = out->pixels + (size_t)y * w * (size_t)channels;
        for (uint32_t x = 0; x < w; x++, src += src_c, dst += channels) {
            dst[0] = src[2];
            dst[1] = src[1];
            dst[2] = src[0];
            if (channels == 4)
                dst[3] = src_c == 4 ? src[3] : 255;
        }
    }
    return MW_OK;
}

mw_status mw_image_decode(mw_image *out, const uint8_t *bytes, size_t n, int channels,
                          const char *name)
{
    memset(out, 0, sizeof *out);
    if (channels != 1 && channels != 3 && channels != 4)
        return mw_err(MW_EINVAL, "%s: %d channels asked of an image: expected 1, 3 or 4", name,
                      channels);
    mw_image_format f = mw_image_sniff(bytes, n);
    switch (f) {
    case MW_IMAGE_JPEG:
        return decode_jpeg(out, bytes, n, channels, name);
    case MW_IMAGE_PNG:
        return decode_png(out, bytes, n, channels, name);
    case MW_IMAGE_GIF:
        return decode_gif(out, bytes, n, channels, name);
    case MW_IMAGE_BMP:
        return decode_bmp(out, bytes, n, channels, name);
    default:
        break;
    }
    if (n == 0)
        return mw_err(MW_EDATA, "%s: an empty file: expected a JPEG, PNG, GIF or BMP image", name);
    char head[3 * 8 + 1] = "";
    for (size_t i = 0; i < n && i < 8; i++)
        snprintf(head + 3 * i, sizeof head - 3 * i, "%02x ", bytes[i]);
    head[3 * (n < 8 ? n : 8) - 1] = '\0';
    return mw_err(MW_EDATA,
                  "%s: not an image: it starts with bytes %s, expected the signature "
                  "of a JPEG (ff d8 ff), PNG (89 50 4e 47), GIF (GIF87a, GIF89a) or BMP (BM)",
                  name, head);
}
