/* libFuzzer target for the image decoder and resize (worker/data/image_decode.h). The input is
 * the encoded image (JPEG, PNG, GIF or BMP, sniffed), whole; its last byte also picks the
 * channel count (1, 3 or 4), the interpolation and the aspect-ratio crop (the decoders ignore
 * what follows an image's end, so the seed corpus is plain image files).
 *
 * Any bytes must either decode into an image whose invariants hold (sides > 0 within
 * MW_IMAGE_MAX_PIXELS, the channels asked; every resized value within 0..255), or fail with
 * MW_EDATA (MW_ENOMEM when the fuzzer's malloc limit refuses a size the limit allows) and a
 * message naming the image, leaving no pixels; never crash, leak, hang or read out of bounds.
 * Run it with tests/fuzz/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "worker/data/image_decode.h"
#include "worker/data/image_resize.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_image: invariant failed: %s (message: %s)\n", what, mw_err_msg());
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const int channels[4] = {3, 1, 4, 3};
    uint8_t mode = data[size - 1];
    int ch = channels[mode & 3];
    mw_image_interp interp = (mode >> 2) & 1 ? MW_IMAGE_NEAREST : MW_IMAGE_BILINEAR;
    int crop = (mode >> 3) & 1;
    mw_image img;
    mw_err_clear();
    mw_status rc = mw_image_decode(&img, data, size, ch, "fuzz.img");
    if (rc != MW_OK) {
        check(rc == MW_EDATA || rc == MW_ENOMEM, "a failure is MW_EDATA");
        check(strstr(mw_err_msg(), "fuzz.img") != NULL, "the message names the image");
        check(img.pixels == NULL, "no pixels after a failure");
        mw_err_clear();
        return 0;
    }
    check(img.height > 0 && img.width > 0 && img.channels == ch, "the shape asked");
    check((uint64_t)img.height * img.width <= MW_IMAGE_MAX_PIXELS, "within the pixel limit");
    enum { H = 7, W = 5 };
    float out[H * W * 4];
    mw_image_resize(out, &img, H, W, interp, crop);
    for (int i = 0; i < H * W * ch; i++)
        check(out[i] >= 0.0f && out[i] <= 255.0f, "resized values within 0..255");
    mw_image_free(&img);
    return 0;
}
