/* What the readers behind mw_dataset_open share (data_formats.c): the reader table's row type
 * (mw_data_reader), arrays as a reader hands them over, label conversion and the checks every
 * format makes. The readers are one file and header per format, each with its row (listed in
 * data_open.c): IDX files (worker/data/data_idx.c), a .npy file and a directory of them
 * (data_npy.c, whose header parser the .npz reader uses too), a .npz archive (data_npz.c, with
 * data_zip.c finding a stored member's bytes so they can be memory-mapped), CIFAR-10 and
 * CIFAR-100 (data_cifar.c) and CSV files (data_csv.c); and the byte-level text corpus
 * (data_text.c), which --sequence-length selects instead of a row. A new format is its file
 * and header with its row, and the row in data_open.c.
 *
 * A .npy file (NumPy's format, version 1.0, 2.0 or 3.0):
 *   magic "\x93NUMPY", major and minor version bytes (1|2|3, 0),
 *   header_len: little-endian uint16 (version 1) or uint32 (2 and 3),
 *   header_len bytes of a Python dict literal, padded with spaces and ending in '\n':
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
 *   then the array's data, C order, shape product x itemsize bytes, nothing after it. */
#ifndef MW_WORKER_DATA_FORMATS_H
#define MW_WORKER_DATA_FORMATS_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/data/data.h"

#define MW_NPY_MAX_DIMS 8
#define MW_NPY_MAX_HEADER (1u << 20)           /* largest header_len accepted */
#define MW_DATA_MAX_CHANNELS 4096u             /* largest accepted channel count */
#define MW_DATA_MAX_MAPPED (UINT64_C(1) << 40) /* largest memory-mapped image data */
#define MW_DATA_MAX_CLASSES 65536              /* labels must be below this without --classes */
#define MW_DATA_MAX_TARGETS 65536              /* float targets per example */

/* A row of the reader table: one data format. */
typedef struct {
    const char *name; /* for messages and the debug log ("CIFAR-10") */
    /* 1 when path is in this format: a directory (is_dir) by the files it holds, a regular
     * file by its first bytes head[0..got) (got <= 8). */
    int (*claims)(const char *path, int is_dir, const uint8_t *head, size_t got);
    /* Fill train and test (initialised, empty) from path, or fail leaving them for the caller
     * to free; *top: the largest label of both (-1: none seen), *own: the format's own class
     * count (0: none; CIFAR's 10, 100 or 20). */
    mw_status (*read)(mw_dataset *train, mw_dataset *test, const char *path, const mw_data_opts *o,
                      int *top, int *own);
} mw_data_reader;

/* 1 when dir/name exists. */
int mw_data_has(const char *dir, const char *name);

/* A parsed .npy header. */
typedef struct {
    char kind;      /* 'u', 'i', 'f' or 'b' (NumPy's type character; 'b': bool) */
    int itemsize;   /* bytes per element: 1, 2, 4 or 8 */
    char descr[16]; /* as written, for messages ('<f4') */
    int ndim;       /* 0..MW_NPY_MAX_DIMS */
    uint64_t shape[MW_NPY_MAX_DIMS];
    uint64_t count;     /* elements: the product of shape */
    size_t data_offset; /* where the data start: 10 or 12 + header_len */
} mw_npy_header;

/* An array as a reader hands it over: its header, its data (h.count elements), and what holds
 * them: a heap block (heap), a read-only file mapping (map), or neither (borrowed). */
typedef struct {
    char name[512]; /* for messages: "dir/x_train.npy" or "data.npz: x_train.npy" */
    mw_npy_header h;
    uint8_t *data;
    void *heap; /* owned, or NULL */
    void *map;  /* owned, or NULL */
    size_t map_nbytes;
} mw_npy_array;

void mw_npy_array_init(mw_npy_array *a);
void mw_npy_array_free(mw_npy_array *a);

/* Build d from images x ((N, H, W) or (N, H, W, C), uint8 or float32; finite floats) and
 * labels y ((N,) or (N, 1), uint8, int32 or int64; each in [0, classes), classes 0: below
 * MW_DATA_MAX_CLASSES) or float32 targets y ((N,) or (N, K), finite: d->targets), N equal
 * and > 0. d takes over x's storage (x is left empty); y is left as it is. *max_label: the
 * largest label (-1 for targets). d must be initialised and empty. */
mw_status mw_data_from_arrays(mw_dataset *d, mw_npy_array *x, const mw_npy_array *y, int classes,
                              int *max_label);

/* d's sample weights from w ((N,) or (N, 1), or one per label position: the shape of d's (N, T)
 * or (N, H, W) labels; float32 or float64, N = d->count; each finite and >= 0): d->weights,
 * d->weight_width. MW_EDATA naming the array, the example (and position) and the value. */
mw_status mw_data_take_weights(mw_dataset *d, const mw_npy_array *w);

/* Convert count raw labels (kind 'u'/'i', itemsize 1, 4 or 8, little-endian; src may be
 * unaligned) to out, checking each is in [0, classes) (classes 0: below MW_DATA_MAX_CLASSES).
 * stride: bytes from one label to the next. why says what set classes in messages
 * ("--classes 5", "CIFAR-10 has 10 classes"). *max_label: the largest. */
mw_status mw_data_take_labels(int32_t *out, const uint8_t *src, size_t stride, char kind,
                              int itemsize, uint32_t count, int classes, const char *why,
                              const char *name, int *max_label);

/* path joined to name in out (cap bytes); MW_EINVAL when too long. */
mw_status mw_data_join(char *out, size_t cap, const char *dir, const char *name);

#endif
