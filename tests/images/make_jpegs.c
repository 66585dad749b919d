/* Writes a synthetic image folder of JPEG files through libjpeg, for the streaming tests and
 * benchmarks: OUT/train/cK/NNNNN.jpg (PER files for each of CLASSES classes) and OUT/test/cK/
 * (PER / 8 + 1 files each), H x W RGB at the given quality. Each image is a smooth pattern
 * whose frequency depends on its class (so a model can learn the classes) plus seeded noise
 * (so the files have the entropy of photographs and do not compress to nothing).
 *
 *   make_jpegs OUT CLASSES PER H W QUALITY SEED
 *
 * Prints the total bytes written. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>

static uint64_t next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void fill_row(JSAMPLE *row, int y, int w, int cls, uint64_t *rng)
{
    const double f = 0.02 + 0.015 * cls;
    for (int x = 0; x < w; x++)
        for (int k = 0; k < 3; k++) {
            double v = 128.0 + 90.0 * sin(f * x * (1 + k) + f * y) * cos(f * 0.7 * y);
            v += (double)(next(rng) % 41) - 20.0;
            row[3 * x + k] = (JSAMPLE)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
}

static long write_one(const char *path, int h, int w, int q, int cls, uint64_t *rng)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr err;
    ci.err = jpeg_std_error(&err);
    jpeg_create_compress(&ci);
    jpeg_stdio_dest(&ci, f);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = 3;
    ci.in_color_space = JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, q, TRUE);
    jpeg_start_compress(&ci, TRUE);
    JSAMPLE *row = malloc((size_t)w * 3);
    if (!row)
        return -1;
    while (ci.next_scanline < ci.image_height) {
        fill_row(row, (int)ci.next_scanline, w, cls, rng);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(row);
    const long n = ftell(f);
    return fclose(f) == 0 ? n : -1;
}

static int mkdirs(const char *out, const char *split, int cls, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s", out);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return -1;
    snprintf(dir, cap, "%s/%s", out, split);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return -1;
    snprintf(dir, cap, "%s/%s/c%d", out, split, cls);
    return mkdir(dir, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: make_jpegs OUT CLASSES PER H W QUALITY SEED\n");
        return 2;
    }
    const int classes = atoi(argv[2]), per = atoi(argv[3]), h = atoi(argv[4]), w = atoi(argv[5]);
    const int q = atoi(argv[6]);
    uint64_t rng = strtoull(argv[7], NULL, 10);
    if (classes < 1 || per < 1 || h < 1 || w < 1 || h > 8192 || w > 8192 || q < 1 || q > 100) {
        fprintf(stderr, "make_jpegs: bad arguments\n");
        return 2;
    }
    long long total = 0;
    static const char *const splits[] = {"train", "test"};
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < classes; c++) {
            char dir[4096], path[4200];
            if (mkdirs(argv[1], splits[s], c, dir, sizeof dir) != 0) {
                fprintf(stderr, "make_jpegs: cannot make %s: %s\n", dir, strerror(errno));
                return 4;
            }
            for (int i = 0; i < (s == 0 ? per : per / 8 + 1); i++) {
                snprintf(path, sizeof path, "%s/%05d.jpg", dir, i);
                const long n = write_one(path, h, w, q, c, &rng);
                if (n < 0) {
                    fprintf(stderr, "make_jpegs: cannot write %s\n", path);
                    return 4;
                }
                total += n;
            }
        }
    printf("%lld\n", total);
    return 0;
}
