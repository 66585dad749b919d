/* A plain text file as a byte-level corpus (worker/data/data_text.c). */
#ifndef MW_WORKER_DATA_DATA_TEXT_H
#define MW_WORKER_DATA_DATA_TEXT_H

#include "common/status.h"
#include "worker/data/data_formats.h"

/* Fill train and test from the text file at path, as a row's read does (no row of the reader
 * table: --sequence-length selects this reader, not the content). */
mw_status mw_data_read_text(mw_dataset *train, mw_dataset *test, const char *path,
                            const mw_data_opts *o, int *top, int *own);

#endif
