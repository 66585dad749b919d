/* The chief's summary writer: TensorBoard event files and metrics.csv.
 *
 * Events go to <dir>/events.out.tfevents.<unix seconds>.<hostname> (".<n>"
 * added when a writer started in the same second took that name), a TFRecord
 * stream TensorBoard reads directly:
 *     uint64 length (LE) | uint32 masked CRC-32C of those 8 bytes |
 *     data (a serialized tensorflow.Event) | uint32 masked CRC-32C of data
 * The first record is Event{wall_time, file_version: "brain.Event:2"}; each
 * scalar is Event{wall_time, step, summary{value{tag, simple_value}}}. The
 * protobuf is encoded by hand (field numbers in summary.c); docs/formats.md
 * describes both files.
 *
 * metrics.csv beside it has one row per call of mw_summary_row under the
 * header "step,epoch,<names...>". A fresh run (append = 0) truncates it; a
 * resumed run (append = 1) keeps the rows already there and checks that its
 * columns match the existing header.
 *
 * Only the chief opens one (docs/design.md: the chief owns the disk). Not thread-safe. */
#ifndef MW_WORKER_SUMMARY_H
#define MW_WORKER_SUMMARY_H

#include <stdio.h>

#include "common/status.h"

typedef struct {
    FILE *events;      /* owned; NULL when closed */
    FILE *csv;         /* owned; NULL when closed */
    char *events_path; /* owned: full path of the event file */
    char *csv_path;    /* owned: <dir>/metrics.csv */
    char *csv_header;  /* owned: "step,epoch,..." once known (written or found), else NULL */
} mw_summary;

/* Zero s so mw_summary_close is safe on a never-opened writer. */
void mw_summary_init(mw_summary *s);
/* Create dir (and its parents), open a new event file and metrics.csv, and write the
 * file_version record. append: keep an existing metrics.csv (resume) instead of
 * truncating it. MW_EIO naming the path and the system's reason when something
 * cannot be created; s is then closed. */
mw_status mw_summary_open(mw_summary *s, const char *dir, int append);
/* Append a scalar event (value is stored as a float, as simple_value is). */
mw_status mw_summary_scalar(mw_summary *s, const char *tag, long step, double value);
/* Append a CSV row "step,epoch,values..."; the first row writes the header
 * "step,epoch,names...". Every row must name the same n columns in the same
 * order (MW_EINVAL naming the file otherwise). */
mw_status mw_summary_row(mw_summary *s, long step, int epoch, const char *const *names,
                         const double *values, int n);
/* Push both files to the OS (TensorBoard reads the event file while it grows). */
mw_status mw_summary_flush(mw_summary *s);
/* Flush and close both files; safe on a closed or half-opened writer. Call
 * mw_summary_flush first to see write errors. */
void mw_summary_close(mw_summary *s);

#endif
