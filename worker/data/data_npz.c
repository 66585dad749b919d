/* The .npz reader (worker/data/data_npz.h): a zip archive (np.savez: stored members;
 * np.savez_compressed: deflated) holding exactly x_train.npy, y_train.npy, x_test.npy and
 * y_test.npy, as Keras's mnist.npz does, and optionally sample_weight_train.npy and
 * sample_weight_test.npy (Keras' fit(sample_weight=...), evaluate(sample_weight=...)); a model
 * of several named inputs takes x_train.<name>.npy and x_test.<name>.npy instead of x_train and
 * x_test (worker/data/data_parts.h packs them). libzip reads
 * the archive structure and inflates; it checks each member's CRC when the member has been read to
 * its end.
 *
 * A stored member of images (np.savez) is memory-mapped from the archive like a .npy file,
 * its CRC-32 checked over the mapping; a deflated one is inflated onto the heap.
 *
 * Each member's .npy header is read first and checked against the member's size before
 * anything large is allocated, and a member may not claim more bytes than its compressed size
 * can inflate to (deflate's limit is about 1032:1), so a forged size cannot make us allocate
 * more than the archive could hold. Labels and deflated members are copied onto the heap. */
#include "worker/data/data_npz.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>
#include <zlib.h>

#include "common/log.h"
#include "common/mapguard.h"
#include "common/sysmem.h"
#include "worker/data/data_formats.h"
#include "worker/data/data_npy.h"
#include "worker/data/data_parts.h"
#include "worker/data/data_zip.h"
#include "worker/data/zip_input.h"

#define INFLATE_RATIO 1032u
#define CRC_WINDOW (64u << 20) /* bytes of a mapped member summed before they are dropped */

/* The archive's file, for mapping stored members: fd -1 when it is in memory. */
typedef struct {
    int fd;
    size_t nbytes;
} file_ref;
enum { NMEMBERS = 6, NREQUIRED = 4 }; /* the last two are optional */
static const char *const members[NMEMBERS] = {
    "x_train.npy",           "y_train.npy", "x_test.npy", "y_test.npy", "sample_weight_train.npy",
    "sample_weight_test.npy"};

static mw_status zip_fail(const char *name, const char *what, zip_error_t *e)
{
    return mw_err(MW_EDATA, "%s: %s: %s", name, what, zip_error_strerror(e));
}

/* Read exactly nbytes of member f (named who) into buf. */
static mw_status read_member(zip_file_t *f, const char *who, uint8_t *buf, uint64_t nbytes,
                             uint64_t at)
{
    uint64_t got = 0;
    while (got < nbytes) {
        zip_int64_t r = zip_fread(f, buf + got, nbytes - got);
        if (r < 0)
            return mw_err(MW_EDATA, "%s: corrupt member data at byte %llu: %s", who,
                          (unsigned long long)(at + got),
                          zip_error_strerror(zip_file_get_error(f)));
        if (r == 0)
            return mw_err(MW_EDATA, "%s: truncated member: expected %llu bytes, read %llu", who,
                          (unsigned long long)(at + nbytes), (unsigned long long)(at + got));
        got += (uint64_t)r;
    }
    return MW_OK;
}

/* A stored member's data mapped from the archive file (fd, nbytes) instead of copied: its
 * offset from the zip structures (mw_data_zip_data_offset), confirmed by the header bytes
 * libzip read (hdr[0..hn)), its CRC-32 computed window by window, each window dropped from
 * this process's pages once summed. 1 when a maps the member, 0 to copy it instead. */
static int map_member(mw_npy_array *a, int fd, size_t nbytes, const char *member,
                      const zip_stat_t *st, const uint8_t *hdr, size_t hn, mw_status *rc)
{
    uint8_t *p = mmap(NULL, nbytes, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return 0;
    uint64_t off = mw_data_zip_data_offset(p, nbytes, member);
    if (!off || off + st->size > nbytes || off + hn > nbytes || memcmp(p + off, hdr, hn) != 0) {
        munmap(p, nbytes);
        return 0;
    }
    madvise(p, nbytes, MADV_RANDOM);
    mw_mapguard_add(p, nbytes, a->name); /* an archive that shrinks: exit 3, named */
    a->map = p, a->map_nbytes = nbytes;
    a->data = p + off + a->h.data_offset;
    uLong crc = crc32(0L, Z_NULL, 0);
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (uint64_t at = 0; at < st->size; at += CRC_WINDOW) {
        const uint64_t len = st->size - at < CRC_WINDOW ? st->size - at : CRC_WINDOW;
        crc = crc32(crc, p + off + at, (uInt)len);
        uintptr_t lo = ((uintptr_t)(p + off + at) + pg - 1) & ~(pg - 1);
        uintptr_t hi = (uintptr_t)(p + off + at + len) & ~(pg - 1);
        if (hi > lo)
            madvise((void *)lo, hi - lo, MADV_DONTNEED);
    }
    if ((st->valid & ZIP_STAT_CRC) && crc != st->crc)
        *rc = mw_err(MW_EDATA,
                     "%s: CRC error: the member's data sum to CRC-32 0x%08lx, its zip entry says "
                     "0x%08x (corrupt archive)",
                     a->name, (unsigned long)crc, (unsigned)st->crc);
    return 1;
}

/* Member i of za into a: its header checked, its data on the heap, its CRC verified; with the
 * archive's file (fd >= 0) a stored member of images is mapped instead (map_member). */
static mw_status load_member(zip_t *za, zip_int64_t i, const char *arch, mw_npy_array *a,
                             const file_ref *fr, int images)
{
    zip_stat_t st;
    snprintf(a->name, sizeof a->name, "%s: %s", arch, zip_get_name(za, (zip_uint64_t)i, 0));
    if (zip_stat_index(za, (zip_uint64_t)i, 0, &st) != 0)
        return zip_fail(a->name, "cannot read the member's entry", zip_get_error(za));
    if (!(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE))
        return mw_err(MW_EDATA, "%s: the zip entry has no size", a->name);
    if (st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE)
        return mw_err(MW_EDATA,
                      "%s: zip compression method %d; expected 0 (stored, np.savez) or 8 "
                      "(deflated, np.savez_compressed)",
                      a->name, (int)st.comp_method);
    if (st.size > (uint64_t)st.comp_size * INFLATE_RATIO + 64)
        return mw_err(MW_EDATA,
                      "%s: zip entry size %llu: more than %llu compressed bytes can hold "
                      "(corrupt archive)",
                      a->name, (unsigned long long)st.size, (unsigned long long)st.comp_size);
    zip_file_t *f = zip_fopen_index(za, (zip_uint64_t)i, 0);
    if (!f)
        return zip_fail(a->name, "cannot open the member", zip_get_error(za));
    mw_status rc = MW_OK;
    uint8_t hdr[MW_NPY_MAX_HEADER / 256]; /* 4 KiB: np.save's headers are 64 to 128 bytes */
    uint64_t hn = st.size < sizeof hdr ? st.size : sizeof hdr;
    MW_TRY_GOTO(read_member(f, a->name, hdr, hn, 0), rc, done);
    MW_TRY_GOTO(mw_npy_parse_header(&a->h, hdr, (size_t)hn, st.size, a->name), rc, done);
    if (fr->fd >= 0 && images && st.comp_method == ZIP_CM_STORE &&
        map_member(a, fr->fd, fr->nbytes, zip_get_name(za, (zip_uint64_t)i, 0), &st, hdr,
                   (size_t)hn, &rc))
        goto done;
    uint64_t nbytes = a->h.count * (uint64_t)a->h.itemsize;
    if (nbytes > MW_DATA_MAX_NBYTES) {
        rc = mw_err(MW_EDATA, "%s: %llu data bytes, more than the limit %llu", a->name,
                    (unsigned long long)nbytes, (unsigned long long)MW_DATA_MAX_NBYTES);
        goto done;
    }
    a->heap = malloc(nbytes ? (size_t)nbytes : 1);
    if (!a->heap) {
        rc = mw_err(MW_ENOMEM, "%s: cannot allocate %llu bytes", a->name,
                    (unsigned long long)nbytes);
        goto done;
    }
    a->data = a->heap;
    /* the header lies within hdr (the parser checked); the data bytes after it too */
    size_t off = a->h.data_offset, have = (size_t)hn > off ? (size_t)hn - off : 0;
    if (have > nbytes)
        have = (size_t)nbytes;
    memcpy(a->data, hdr + off, have);
    MW_TRY_GOTO(read_member(f, a->name, a->data + have, nbytes - have, hn), rc, done);
    uint8_t extra; /* reaching the end makes libzip check the CRC */
    zip_int64_t r = zip_fread(f, &extra, 1);
    if (r < 0)
        rc = mw_err(MW_EDATA, "%s: corrupt member at its end: %s", a->name,
                    zip_error_strerror(zip_file_get_error(f)));
    else if (r > 0)
        rc = mw_err(MW_EDATA, "%s: more data than the zip entry's size %llu", a->name,
                    (unsigned long long)st.size);
done:
    zip_fclose(f);
    return rc;
}

/* The named inputs of each split (x_train.<name>.npy, x_test.<name>.npy): their members. */
typedef struct {
    zip_int64_t idx[MW_MAX_MODEL_INPUTS];
    mw_input_parts p;
} split_parts;

/* Member nm as a named input of one of the two splits: 1 when it is one (recorded in sp), 0
 * when it is not, or an error. */
static int take_part(const char *arch, const char *nm, zip_int64_t i, split_parts sp[2],
                     mw_status *rc)
{
    static const char *const splits[2] = {"x_train", "x_test"};
    for (int s = 0; s < 2; s++) {
        char name[MW_INPUT_NAME_MAX];
        const int r = mw_data_part_name(nm, splits[s], name, sizeof name);
        if (r == 0)
            continue;
        mw_input_parts *p = &sp[s].p;
        int dup = 0;
        for (int k = 0; k < p->n && r > 0; k++)
            dup |= !strcmp(p->name[k], name);
        if (dup)
            *rc = mw_err(MW_EDATA, "%s: member '%s' appears twice", arch, nm);
        else if (r < 0)
            *rc = mw_err(MW_EDATA,
                         "%s: member '%s': a named input's name has letters, digits and '_' "
                         "only, at most %d of them",
                         arch, nm, MW_INPUT_NAME_MAX - 1);
        else if (p->n == MW_MAX_MODEL_INPUTS)
            *rc = mw_err(MW_EUNSUPPORTED, "%s: more than %d named inputs %s.<name>", arch,
                         MW_MAX_MODEL_INPUTS, splits[s]);
        else
            snprintf(p->name[p->n], MW_INPUT_NAME_MAX, "%s", name), sp[s].idx[p->n++] = i;
        return 1;
    }
    return 0;
}

/* The archive's members by name: the four, each once (or, for x_train and x_test, named
 * inputs x_train.<name> and x_test.<name>), and the optional weights (idx -1 when absent). */
static mw_status find_members(zip_t *za, const char *arch, zip_int64_t idx[NMEMBERS],
                              split_parts sp[2])
{
    zip_int64_t n = zip_get_num_entries(za, 0);
    for (int k = 0; k < NMEMBERS; k++)
        idx[k] = -1;
    sp[0].p.n = sp[1].p.n = 0;
    for (zip_int64_t i = 0; i < n; i++) {
        const char *nm = zip_get_name(za, (zip_uint64_t)i, 0);
        int k = 0;
        while (k < NMEMBERS && (!nm || strcmp(nm, members[k]) != 0))
            k++;
        mw_status rc = MW_OK;
        if (k == NMEMBERS && nm && take_part(arch, nm, i, sp, &rc))
            MW_TRY(rc);
        else if (k == NMEMBERS)
            return mw_err(MW_EDATA,
                          "%s: unexpected member '%s'; a Keras-style .npz holds exactly "
                          "x_train, y_train, x_test and y_test (and optionally "
                          "sample_weight_train, sample_weight_test; a model of several inputs "
                          "takes x_train.<input name> and x_test.<input name>)",
                          arch, nm ? nm : "?");
        else if (idx[k] >= 0)
            return mw_err(MW_EDATA, "%s: member '%s' appears twice", arch, nm);
        else
            idx[k] = i;
    }
    for (int k = 0; k < NREQUIRED; k++) {
        const int named = k % 2 == 0 ? sp[k / 2].p.n : 0;
        if (named && idx[k] >= 0)
            return mw_err(MW_EDATA,
                          "%s: both '%s' and named inputs %s.<name>; expected one or the other",
                          arch, members[k], k ? "x_test" : "x_train");
        if (idx[k] < 0 && !named)
            return mw_err(MW_EDATA,
                          "%s: member '%s' is missing; a Keras-style .npz holds x_train, "
                          "y_train, x_test and y_test (np.savez(path, x_train=..., ...))",
                          arch, members[k]);
    }
    return MW_OK;
}

/* What the members will take on the heap, from the zip directory alone (nothing inflated yet):
 * every member but the stored images of an archive on disk, which are mapped. Checked against
 * the memory this process may use (common/sysmem.h). */
static mw_status check_heap(zip_t *za, const char *arch, const file_ref *fr,
                            const zip_int64_t idx[NMEMBERS], const split_parts sp[2])
{
    uint64_t total = 0;
    int deflated = 0, n = 0;
    char names[192] = "";
    for (int k = 0; k < NMEMBERS + 2 * MW_MAX_MODEL_INPUTS; k++) {
        zip_stat_t st;
        const int part = k >= NMEMBERS, s = part ? (k - NMEMBERS) / MW_MAX_MODEL_INPUTS : 0;
        const int j = part ? (k - NMEMBERS) % MW_MAX_MODEL_INPUTS : 0;
        const zip_int64_t at = !part ? idx[k] : j < sp[s].p.n ? sp[s].idx[j] : -1;
        if (at < 0 || zip_stat_index(za, (zip_uint64_t)at, 0, &st) != 0 ||
            !(st.valid & ZIP_STAT_SIZE))
            continue; /* load_member reports it */
        const int stored = (st.valid & ZIP_STAT_COMP_METHOD) && st.comp_method == ZIP_CM_STORE;
        if (fr->fd >= 0 && !part && k % 2 == 0 && stored)
            continue;
        total += st.size;
        deflated += !stored;
        if (!part || j == 0)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", n++ ? " + " : "",
                     part ? (s ? "x_test.*" : "x_train.*") : members[k]);
    }
    return mw_sysmem_check_load(total, "%s: %s %s to", arch, names,
                                deflated ? (n > 1 ? "inflate" : "inflates")
                                         : (n > 1 ? "take" : "takes"));
}

/* Split s's named inputs loaded and packed into x (worker/data/data_parts.h). */
static mw_status load_parts(zip_t *za, const char *arch, const file_ref *fr, split_parts *sp, int s,
                            mw_npy_array *x)
{
    mw_npy_array a[MW_MAX_MODEL_INPUTS];
    for (int k = 0; k < sp->p.n; k++)
        mw_npy_array_init(&a[k]);
    mw_status rc = MW_OK;
    for (int k = 0; k < sp->p.n && rc == MW_OK; k++)
        rc = load_member(za, sp->idx[k], arch, &a[k], fr, 0);
    char what[600];
    snprintf(what, sizeof what, "%s: x_%s.*", arch, s ? "test" : "train");
    if (rc == MW_OK)
        rc = mw_data_pack_parts(a, &sp->p, what, x);
    for (int k = 0; k < sp->p.n; k++)
        mw_npy_array_free(&a[k]);
    return rc;
}

static mw_status read_archive(zip_t *za, mw_dataset *train, mw_dataset *test, const char *arch,
                              const file_ref *fr, int classes, int *max_label)
{
    zip_int64_t idx[NMEMBERS];
    split_parts sp[2];
    MW_TRY(find_members(za, arch, idx, sp));
    MW_TRY(check_heap(za, arch, fr, idx, sp));
    mw_npy_array a[NMEMBERS];
    for (int k = 0; k < NMEMBERS; k++)
        mw_npy_array_init(&a[k]);
    mw_status rc = MW_OK;
    int m1 = -1, m2 = -1;
    for (int k = 0; k < NMEMBERS; k++)
        if (idx[k] >= 0)
            MW_TRY_GOTO(load_member(za, idx[k], arch, &a[k], fr, k < NREQUIRED && k % 2 == 0), rc,
                        done);
    for (int s = 0; s < 2; s++)
        if (sp[s].p.n)
            MW_TRY_GOTO(load_parts(za, arch, fr, &sp[s], s, &a[2 * s]), rc, done);
    if (sp[0].p.n || sp[1].p.n)
        MW_TRY_GOTO(mw_data_same_parts(&sp[0].p, &sp[1].p, arch), rc, done);
    MW_TRY_GOTO(mw_data_from_arrays(train, &a[0], &a[1], classes, &m1), rc, done);
    MW_TRY_GOTO(mw_data_from_arrays(test, &a[2], &a[3], classes, &m2), rc, done);
    train->parts = sp[0].p, test->parts = sp[1].p;
    if (idx[4] >= 0)
        MW_TRY_GOTO(mw_data_take_weights(train, &a[4]), rc, done);
    if (idx[5] >= 0)
        MW_TRY_GOTO(mw_data_take_weights(test, &a[5]), rc, done);
    *max_label = m1 > m2 ? m1 : m2;
done:
    for (int k = 0; k < NMEMBERS; k++)
        mw_npy_array_free(&a[k]);
    return rc;
}

mw_status mw_data_read_npz(mw_dataset *train, mw_dataset *test, const char *path, int classes,
                           int *max_label)
{
    zip_t *za;
    file_ref fr = {-1, 0};
    MW_TRY(mw_zip_input_open_file(path, "a .npz archive or a directory",
                                  "not a readable zip archive (.npz)", &za, &fr.fd, &fr.nbytes));
    mw_status rc = read_archive(za, train, test, path, &fr, classes, max_label);
    zip_discard(za);
    if (fr.fd >= 0)
        close(fr.fd);
    if (rc == MW_OK)
        mw_log_debug("data: %u train and %u test images of %ux%ux%u from %s", train->count,
                     test->count, train->rows, train->cols, train->channels, path);
    return rc;
}

mw_status mw_data_read_npz_buffer(mw_dataset *train, mw_dataset *test, const void *bytes,
                                  size_t nbytes, const char *name, int classes, int *max_label)
{
    zip_t *za;
    MW_TRY(mw_zip_input_open_buffer(bytes, nbytes, name, "not a readable zip archive (.npz)", &za));
    const file_ref none = {-1, 0};
    mw_status rc = read_archive(za, train, test, name, &none, classes, max_label);
    zip_discard(za);
    return rc;
}

/* ---- the reader table's row ---- */

static int npz_claims(const char *path, int is_dir, const uint8_t *head, size_t got)
{
    (void)path;
    return !is_dir && got >= 4 && !memcmp(head, "PK", 2);
}

static mw_status npz_read(mw_dataset *train, mw_dataset *test, const char *path,
                          const mw_data_opts *o, int *top, int *own)
{
    (void)own;
    return mw_data_read_npz(train, test, path, o->classes, top);
}

const mw_data_reader mw_reader_npz = {"a .npz archive", npz_claims, npz_read};
