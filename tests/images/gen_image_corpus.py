"""The small images committed in tests/fuzz/corpus/image/: the fuzz target's seeds and the
files tests/test_image_decode.c makes its hostile variants of (truncated, corrupt, declaring
60000 x 60000 pixels). JPEG and PNG by TensorFlow's encoders, GIF, palette PNG and BMP by
check_images.py's writers. Run in the TensorFlow venv (tests/bench/tf_venv.sh):

    python tests/images/gen_image_corpus.py tests/fuzz/corpus/image
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_images as ci  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    pal = ci.RNG.integers(0, 256, 16 * 3).tolist()
    files = {
        "rgb.jpg": tf.io.encode_jpeg(ci.photo(16, 16, 3), quality=50).numpy(),
        "gray.jpg": tf.io.encode_jpeg(ci.photo(9, 11, 1), quality=50).numpy(),
        "prog.jpg": tf.io.encode_jpeg(ci.photo(16, 24, 3), quality=50, progressive=True).numpy(),
        "rgb.png": tf.io.encode_png(ci.photo(8, 8, 3)).numpy(),
        "rgba16.png": tf.io.encode_png(ci.photo(5, 6, 4).astype(np.uint16) * 257).numpy(),
        "pal4.png": ci.png_raw(7, 5, 4, 3, ci.pack_bits(ci.RNG.integers(0, 16, (5, 7)), 4),
                               pal, trns=[0, 9]),
        "anim.gif": ci.gif(8, 8, pal * 16, ci.RNG.integers(0, 16, (6, 5)), left=1, top=2,
                           transparent=2, more=[ci.RNG.integers(0, 16, (8, 9))]),
        "inter.gif": ci.gif(6, 9, pal * 16, ci.RNG.integers(0, 16, (9, 6)), interlace=True),
        "rgb.bmp": ci.bmp(ci.photo(3, 5, 3)),
        "rgba.bmp": ci.bmp(ci.photo(4, 2, 4), top_down=True),
    }
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
