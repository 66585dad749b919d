/* CIFAR-10 and CIFAR-100 in their binary versions (worker/data/data_cifar.c). */
#ifndef MW_WORKER_DATA_DATA_CIFAR_H
#define MW_WORKER_DATA_DATA_CIFAR_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/data/data_formats.h"

/* The reader table's rows. */
extern const mw_data_reader mw_reader_cifar10, mw_reader_cifar100;

/* CIFAR-10 (fine unused) or CIFAR-100 (fine: the fine labels, else the coarse); *nclasses:
 * the format's own class count (10, 100 or 20). */
mw_status mw_data_read_cifar(mw_dataset *train, mw_dataset *test, const char *dir, int cifar100,
                             int fine, int classes, int *nclasses);
/* Records of one CIFAR file in memory (bytes[0..nbytes)) appended to d's images and labels at
 * example *next (d->count examples allocated). */
mw_status mw_data_cifar_records(mw_dataset *d, uint32_t *next, const uint8_t *bytes, size_t nbytes,
                                int cifar100, int fine, int classes, const char *name);

#endif
