/* The image tests' driver: decode each file given on the command line with mw_image_decode and,
 * unless --native, resize it with mw_image_resize as Keras' image_dataset_from_directory would;
 * write the float32 pixels (HWC) to OUT_DIR/BASENAME.f32 and print one line per file,
 * "BASENAME FORMAT H W C", for check_images.py to compare against TensorFlow.
 *
 *   image_load [--channels 1|3|4] [--size H W] [--nearest] [--crop] [--native] OUT_DIR FILE...
 *
 * The first file that fails ends the run: its message on stderr, the status's exit code. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "worker/data/image_decode.h"
#include "worker/data/image_resize.h"

typedef struct {
    int channels, native, crop;
    uint32_t height, width;
    mw_image_interp interp;
} load_opts;

static mw_status read_all(const char *path, uint8_t **bytes, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return mw_err(MW_EIO, "%s: cannot open", path);
    size_t cap = 1 << 16, got = 0;
    uint8_t *b = malloc(cap);
    size_t r;
    while (b && (r = fread(b + got, 1, cap - got, f)) > 0) {
        got += r;
        if (got == cap) {
            uint8_t *nb = realloc(b, cap *= 2);
            if (!nb)
                free(b);
            b = nb;
        }
    }
    fclose(f);
    if (!b)
        return mw_err(MW_ENOMEM, "%s: out of memory", path);
    *bytes = b;
    *n = got;
    return MW_OK;
}

static mw_status write_floats(const char *path, const float *v, size_t count)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return mw_err(MW_EIO, "%s: cannot create", path);
    size_t w = fwrite(v, sizeof *v, count, f);
    int bad = fclose(f) != 0 || w != count;
    return bad ? mw_err(MW_EIO, "%s: write error", path) : MW_OK;
}

static mw_status load_one(const load_opts *o, const char *out_dir, const char *path)
{
    uint8_t *bytes = NULL;
    size_t n = 0;
    MW_TRY(read_all(path, &bytes, &n));
    mw_image img;
    mw_status rc = mw_image_decode(&img, bytes, n, o->channels, path);
    free(bytes);
    if (rc != MW_OK)
        return rc;
    uint32_t h = o->native ? img.height : o->height, w = o->native ? img.width : o->width;
    size_t count = (size_t)h * w * (size_t)img.channels;
    float *v = malloc(count * sizeof *v);
    if (!v) {
        mw_image_free(&img);
        return mw_err(MW_ENOMEM, "%s: out of memory", path);
    }
    if (o->native)
        for (size_t i = 0; i < count; i++)
            v[i] = img.pixels[i];
    else
        mw_image_resize(v, &img, h, w, o->interp, o->crop);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char out[4096];
    snprintf(out, sizeof out, "%s/%s.f32", out_dir, base);
    rc = write_floats(out, v, count);
    if (rc == MW_OK)
        printf("%s %s %u %u %d\n", base, mw_image_format_name(img.format), h, w, img.channels);
    free(v);
    mw_image_free(&img);
    return rc;
}

int main(int argc, char **argv)
{
    load_opts o = {.channels = 3, .height = 0, .width = 0, .interp = MW_IMAGE_BILINEAR};
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--channels") == 0 && i + 1 < argc)
            o.channels = atoi(argv[++i]);
        else if (strcmp(argv[i], "--size") == 0 && i + 2 < argc) {
            o.height = (uint32_t)atoi(argv[++i]);
            o.width = (uint32_t)atoi(argv[++i]);
        } else if (strcmp(argv[i], "--nearest") == 0)
            o.interp = MW_IMAGE_NEAREST;
        else if (strcmp(argv[i], "--crop") == 0)
            o.crop = 1;
        else if (strcmp(argv[i], "--native") == 0)
            o.native = 1;
        else
            break;
    }
    if (i + 1 >= argc || (!o.native && (o.height == 0 || o.width == 0))) {
        fprintf(stderr, "usage: image_load [--channels 1|3|4] [--size H W] [--nearest] [--crop] "
                        "[--native] OUT_DIR FILE...\n");
        return 2;
    }
    const char *out_dir = argv[i++];
    for (; i < argc; i++) {
        mw_status rc = load_one(&o, out_dir, argv[i]);
        if (rc != MW_OK) {
            fprintf(stderr, "image_load: %s\n", mw_err_msg());
            return mw_status_exit_code(rc);
        }
    }
    return 0;
}
