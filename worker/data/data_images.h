/* An image folder as --data (worker/data/data_images.c; docs/images.md): DIR/train/ and
 * DIR/test/ (or DIR/validation/), each with one folder per class, read as Keras'
 * keras.utils.image_dataset_from_directory reads a folder with shuffle=False:
 *   - the classes are the training split's subfolders sorted by name (code points, as
 *     Python's sorted()), labels 0, 1, ... in that order; a folder whose name starts with '.'
 *     is no class (skipped, as Keras skips it); the test split's folders must be
 *     classes of the training split (labelled as there);
 *   - a class's examples are its image files (names ending in .bmp, .gif, .jpeg, .jpg, .png,
 *     any case) in it and its subfolders, folders sorted by path and files by name within
 *     each; other files are skipped; links to folders are not followed (no loop can form);
 *   - every image is decoded as --color-mode says (default rgb, 3 channels) and resized to
 *     --image-size (default: the first training image's size) when a batch needs it.
 * An empty class folder in the training split is an error (MW_EDATA naming it), and so is a
 * test split without any image (as the TFRecord reader refuses test shards without a record). */
#ifndef MW_WORKER_DATA_DATA_IMAGES_H
#define MW_WORKER_DATA_DATA_IMAGES_H

#include "worker/data/data_formats.h"

extern const mw_data_reader mw_reader_images;

#endif
