/* The data offset of a stored .npz member (worker/data/data_zip.h), so an uncompressed member
 * can be memory-mapped like a .npy file instead of copied. libzip reads and checks the archive
 * but does not say where a member's bytes lie; this walks the zip structures for it (APPNOTE
 * 6.3: end of central directory, its zip64 locator and record, central directory headers
 * with their zip64 extra field, the local header). Every read is bounds-checked; anything
 * unexpected gives 0 and the caller copies the member through libzip instead. */
#include "worker/data/data_zip.h"

#include <string.h>

#include "worker/data/data_formats.h"

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Bytes [at, at + len) lie within the file. */
static int within(size_t nbytes, uint64_t at, uint64_t len)
{
    return at <= nbytes && len <= nbytes - at;
}

/* The central directory's offset and entry count, from the end of central directory record
 * (and the zip64 one when the 32-bit fields are saturated). 0 on failure. */
static int find_directory(const uint8_t *f, size_t n, uint64_t *cd, uint64_t *entries)
{
    if (n < 22)
        return 0;
    size_t lo = n - 22 > 65535 ? n - 22 - 65535 : 0;
    for (size_t e = n - 22 + 1; e-- > lo;) {
        if (memcmp(f + e, "PK\x05\x06", 4) != 0)
            continue;
        *entries = le(f + e + 10, 2);
        *cd = le(f + e + 16, 4);
        if (*cd != 0xffffffffu && *entries != 0xffffu)
            return 1;
        if (e < 20 || memcmp(f + e - 20, "PK\x06\x07", 4) != 0)
            return 0;
        uint64_t z = le(f + e - 20 + 8, 8);
        if (!within(n, z, 56) || memcmp(f + z, "PK\x06\x06", 4) != 0)
            return 0;
        *entries = le(f + z + 32, 8);
        *cd = le(f + z + 48, 8);
        return 1;
    }
    return 0;
}

/* The local header offset of a central directory entry at p (its fixed part checked to be in
 * the file), reading the zip64 extra field when the 32-bit offset is saturated; UINT64_MAX
 * when that field is missing or malformed. */
static uint64_t local_offset(const uint8_t *f, size_t n, uint64_t p)
{
    uint64_t off = le(f + p + 42, 4);
    if (off != 0xffffffffu)
        return off;
    const uint64_t nl = le(f + p + 28, 2), xl = le(f + p + 30, 2);
    uint64_t x = p + 46 + nl;
    if (!within(n, x, xl))
        return UINT64_MAX;
    for (uint64_t end = x + xl; x + 4 <= end;) {
        uint64_t id = le(f + x, 2), len = le(f + x + 2, 2);
        if (x + 4 + len > end)
            return UINT64_MAX;
        if (id == 1) { /* the saturated fields in order: size, compressed size, offset */
            uint64_t at = x + 4;
            at += le(f + p + 24, 4) == 0xffffffffu ? 8 : 0;
            at += le(f + p + 20, 4) == 0xffffffffu ? 8 : 0;
            return at + 8 <= x + 4 + len ? le(f + at, 8) : UINT64_MAX;
        }
        x += 4 + len;
    }
    return UINT64_MAX;
}

uint64_t mw_data_zip_data_offset(const uint8_t *file, size_t nbytes, const char *name)
{
    uint64_t cd, entries;
    if (!find_directory(file, nbytes, &cd, &entries))
        return 0;
    const size_t name_len = strlen(name);
    uint64_t p = cd;
    for (uint64_t i = 0; i < entries; i++) {
        if (!within(nbytes, p, 46) || memcmp(file + p, "PK\x01\x02", 4) != 0)
            return 0;
        const uint64_t nl = le(file + p + 28, 2), xl = le(file + p + 30, 2);
        const uint64_t cl = le(file + p + 32, 2);
        if (!within(nbytes, p + 46, nl + xl + cl))
            return 0;
        if (nl == name_len && memcmp(file + p + 46, name, name_len) == 0) {
            uint64_t h = local_offset(file, nbytes, p);
            if (h == UINT64_MAX || !within(nbytes, h, 30) || memcmp(file + h, "PK\x03\x04", 4) != 0)
                return 0;
            uint64_t data = h + 30 + le(file + h + 26, 2) + le(file + h + 28, 2);
            return data <= nbytes ? data : 0;
        }
        p += 46 + nl + xl + cl;
    }
    return 0;
}
