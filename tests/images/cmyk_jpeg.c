/* Writes CMYK JPEG files for the comparison with TensorFlow (check_images.py), which has no
 * CMYK encoder: an H x W pattern of four smooth channels, through libjpeg, with Adobe's marker
 * (how Photoshop writes them: values stored inverted), without it, or as YCCK.
 *
 *   cmyk_jpeg adobe|plain|ycck H W OUT */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

static void fill_row(JSAMPLE *row, int y, int w)
{
    for (int x = 0; x < w; x++)
        for (int k = 0; k < 4; k++) {
            double v = 127.0 + 100.0 * sin(x / (3.0 + k) + y / (4.0 + 2 * k));
            row[4 * x + k] = (JSAMPLE)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: cmyk_jpeg adobe|plain|ycck H W OUT\n");
        return 2;
    }
    int h = atoi(argv[2]), w = atoi(argv[3]);
    FILE *f = fopen(argv[4], "wb");
    if (h <= 0 || w <= 0 || w > 4096 || !f) {
        fprintf(stderr, "cmyk_jpeg: bad size or cannot create %s\n", argv[4]);
        return 2;
    }
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr err;
    ci.err = jpeg_std_error(&err);
    jpeg_create_compress(&ci);
    jpeg_stdio_dest(&ci, f);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = 4;
    ci.in_color_space = JCS_CMYK;
    jpeg_set_defaults(&ci);
    if (strcmp(argv[1], "ycck") == 0)
        jpeg_set_colorspace(&ci, JCS_YCCK);
    ci.write_Adobe_marker = strcmp(argv[1], "plain") != 0;
    jpeg_set_quality(&ci, 90, TRUE);
    jpeg_start_compress(&ci, TRUE);
    JSAMPLE *row = malloc((size_t)w * 4);
    if (!row)
        return 6;
    while (ci.next_scanline < ci.image_height) {
        fill_row(row, (int)ci.next_scanline, w);
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    free(row);
    return fclose(f) == 0 ? 0 : 4;
}
