/* Zip archives as inputs; see zip_input.h. */
#include "worker/data/zip_input.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/fs.h"

/* The first member name that appears twice, in buf (cap bytes); "" when none is found. src is
 * opened again without the consistency check, which is what refused the duplicate. */
static void find_duplicate(zip_source_t *src, char *buf, size_t cap)
{
    buf[0] = '\0';
    zip_error_t e;
    zip_error_init(&e);
    zip_source_keep(src);
    zip_t *z = zip_open_from_source(src, ZIP_RDONLY, &e);
    zip_error_fini(&e);
    if (!z) {
        zip_source_free(src); /* the reference taken above */
        return;
    }
    const zip_int64_t n = zip_get_num_entries(z, 0);
    for (zip_int64_t i = 0; i < n && !buf[0]; i++) {
        const char *a = zip_get_name(z, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
        for (zip_int64_t j = i + 1; a && j < n && !buf[0]; j++) {
            const char *b = zip_get_name(z, (zip_uint64_t)j, ZIP_FL_ENC_RAW);
            if (b && !strcmp(a, b))
                snprintf(buf, cap, "%s", a);
        }
    }
    zip_discard(z); /* frees the reference taken above */
}

mw_status mw_zip_input_open(zip_source_t *src, const char *name, const char *bad_zip, zip_t **za)
{
    zip_error_t e;
    zip_error_init(&e);
    /* success hands src to *za; after a failure it is still ours, to name a duplicate */
    *za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &e);
    if (*za) {
        zip_error_fini(&e);
        return MW_OK;
    }
    mw_status rc;
    const int code = zip_error_code_zip(&e);
    char dup[256];
    if (code == ZIP_ER_EXISTS && (find_duplicate(src, dup, sizeof dup), dup[0]))
        rc = mw_err(MW_EDATA,
                    "%s: the member name '%s' appears twice in the archive; expected each "
                    "member once (which copy a reader takes is not defined)",
                    name, dup);
    else
        rc = mw_err(code == ZIP_ER_READ || code == ZIP_ER_OPEN ? MW_EIO : MW_EDATA, "%s: %s: %s",
                    name, bad_zip, zip_error_strerror(&e));
    zip_error_fini(&e);
    zip_source_free(src);
    return rc;
}

mw_status mw_zip_input_open_file(const char *path, const char *expected, const char *bad_zip,
                                 zip_t **za, int *map_fd, size_t *file_nbytes)
{
    *za = NULL;
    if (map_fd)
        *map_fd = -1;
    int fd;
    size_t nbytes;
    MW_TRY(mw_fs_open_input(path, expected, &fd, &nbytes));
    if (file_nbytes)
        *file_nbytes = nbytes;
    const int zfd = dup(fd);
    FILE *fp = zfd >= 0 ? fdopen(zfd, "rb") : NULL;
    zip_error_t e;
    zip_error_init(&e);
    zip_source_t *src = fp ? zip_source_filep_create(fp, 0, -1, &e) : NULL;
    if (!src) {
        if (fp)
            fclose(fp);
        else if (zfd >= 0)
            close(zfd);
        close(fd);
        zip_error_fini(&e);
        return mw_err(MW_ENOMEM, "%s: cannot open: out of memory", path);
    }
    zip_error_fini(&e);
    mw_status rc = mw_zip_input_open(src, path, bad_zip, za);
    if (rc == MW_OK && map_fd)
        *map_fd = fd;
    else
        close(fd);
    return rc;
}

mw_status mw_zip_input_open_buffer(const void *bytes, size_t nbytes, const char *name,
                                   const char *bad_zip, zip_t **za)
{
    *za = NULL;
    zip_error_t e;
    zip_error_init(&e);
    zip_source_t *src = zip_source_buffer_create(bytes, nbytes, 0, &e);
    if (!src) {
        mw_status rc = mw_err(MW_EDATA, "%s: %s: %s", name, bad_zip, zip_error_strerror(&e));
        zip_error_fini(&e);
        return rc;
    }
    zip_error_fini(&e);
    return mw_zip_input_open(src, name, bad_zip, za);
}
