/* --data PATH: the reader a path needs, by its content, through the reader table
 * (worker/data/data_open.c). */
#ifndef MW_WORKER_DATA_DATA_OPEN_H
#define MW_WORKER_DATA_DATA_OPEN_H

#include "common/status.h"
#include "worker/data/data.h"

/* Open --data PATH, recognised by content (docs/formats.md):
 *   a file starting with a zip signature: a Keras-style .npz (x_train, y_train, x_test, y_test)
 *   a directory with x_train.npy: the four .npy files (uncompressed images are memory-mapped)
 *   a directory with data_batch_1.bin: CIFAR-10 (data_batch_1..5.bin, test_batch.bin)
 *   a directory with train.bin and test.bin: CIFAR-100 (o->cifar_fine picks the labels)
 *   a directory with train.csv: tabular data, train.csv and test.csv (label, features)
 *   with o->sequence_length T: a text file as a byte-level corpus, windows of T + 1 bytes
 *   a directory with train-images-idx3-ubyte[.gz]: IDX (mw_dataset_load_dir)
 * Classes: o->classes, or the largest label of train and test + 1; every label is checked
 * against them. Train and test images must have the same shape. Every error names the file,
 * the field and what was expected (MW_EDATA, exit 3; MW_EIO when a file cannot be read). Same
 * ownership rules as mw_dataset_load. */
mw_status mw_dataset_open(mw_dataset *train, mw_dataset *test, const char *path,
                          const mw_data_opts *o);

#endif
