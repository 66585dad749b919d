/* Tabular data: a directory with train.csv and test.csv (worker/data/data_csv.c). */
#ifndef MW_WORKER_DATA_DATA_CSV_H
#define MW_WORKER_DATA_DATA_CSV_H

#include "worker/data/data_formats.h"

/* The reader table's row. */
extern const mw_data_reader mw_reader_csv;

#endif
