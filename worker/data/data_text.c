/* A plain text file as a byte-level language-modelling corpus (--data FILE
 * --sequence-length T; docs/data.md): its bytes, cut into windows of T + 1 bytes that start
 * T apart (byte i * T to i * T + T), are N = (size - 1) / T examples: the first T bytes of a
 * window its token ids, the last T its labels, one per position (each byte's next). The last
 * tenth of the windows (rounded up, at least one) is the validation ("test") set, the rest
 * the training set: a contiguous split, so no validation text is also trained on. 256
 * classes (the byte values) unless --classes says otherwise. */
#include "worker/data/data_text.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/log.h"
#include "common/sysmem.h"
#include "worker/data/data.h"
#include "worker/data/data_formats.h"

/* Largest corpus: its labels take 4 bytes per byte. */
#define MW_TEXT_MAX_BYTES (UINT64_C(1) << 30)
/* Bytes in memory per byte of text while it is read: the text, a token id and a label. */
#define MW_TEXT_EXPANSION (1 + 1 + (int)sizeof(int32_t))

/* Windows first .. first + n of T + 1 bytes of text into d. */
static mw_status take_windows(mw_dataset *d, const uint8_t *text, size_t first, size_t n, int T,
                              int classes, const char *path, int *top)
{
    const size_t count = n * (size_t)T;
    d->images = malloc(count);
    d->labels = malloc(count * sizeof *d->labels);
    if (!d->images || !d->labels)
        return mw_err(MW_ENOMEM, "%s: cannot allocate %zu windows of %d bytes", path, n, T);
    memcpy(d->images, text + first * (size_t)T, count);
    d->type = MW_IMAGES_TOKENS, d->tok_size = 1, d->tok_signed = 0;
    d->tok_max = 0;
    for (size_t i = 0; i < count; i++)
        d->tok_max = d->images[i] > d->tok_max ? d->images[i] : d->tok_max;
    d->count = (uint32_t)n;
    d->rows = 1, d->cols = 1, d->channels = (uint32_t)T;
    d->label_width = T;
    char why[32];
    snprintf(why, sizeof why, "--classes %d", classes);
    int max = -1;
    MW_TRY(mw_data_take_labels(d->labels, text + first * (size_t)T + 1, 1, 'u', 1, (uint32_t)count,
                               classes, why, path, &max));
    *top = max > *top ? max : *top;
    return MW_OK;
}

mw_status mw_data_read_text(mw_dataset *train, mw_dataset *test, const char *path,
                            const mw_data_opts *o, int *top, int *own)
{
    const int T = o->sequence_length;
    char *text = NULL;
    size_t nbytes = 0;
    int fd = -1;
    MW_TRY(mw_fs_open_input(path, "a text corpus (--sequence-length)", &fd, &nbytes));
    close(fd);
    /* the text, its windows' token ids (a byte each) and their labels (4 bytes each) */
    MW_TRY(mw_sysmem_check_load((uint64_t)nbytes * MW_TEXT_EXPANSION,
                                "data %s: a text corpus of %zu bytes, read and cut into windows "
                                "of token ids and labels (%d bytes a byte), takes",
                                path, nbytes, MW_TEXT_EXPANSION));
    MW_TRY(mw_fs_read_input(path, "a text corpus (--sequence-length)", MW_TEXT_MAX_BYTES, MW_EDATA,
                            &text, &nbytes));
    const size_t windows = nbytes > 0 ? (nbytes - 1) / (size_t)T : 0;
    mw_status rc = MW_OK;
    if (windows < 2 || windows >= UINT32_MAX / (size_t)T)
        rc = mw_err(MW_EDATA,
                    "%s: %zu bytes make %zu window(s) of %d + 1 bytes; expected at least 2 (one "
                    "to train on, one to validate on) and fewer than 2^32 bytes: a longer text "
                    "or a shorter --sequence-length",
                    path, nbytes, windows, T);
    const size_t valid = (windows + 9) / 10, trained = windows - valid;
    if (rc == MW_OK)
        rc = take_windows(train, (const uint8_t *)text, 0, trained, T, o->classes, path, top);
    if (rc == MW_OK)
        rc = take_windows(test, (const uint8_t *)text, trained, valid, T, o->classes, path, top);
    free(text);
    MW_TRY(rc);
    *own = 256; /* the byte values */
    mw_log_debug("data: %s: %zu bytes, %zu windows of %d + 1 bytes: %zu to train, %zu to validate",
                 path, nbytes, windows, T, trained, valid);
    return MW_OK;
}
