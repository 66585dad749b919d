/* The checkpoint file format (docs/checkpoint.md): the state's encoding and decoding.
 *
 * File: a 16-byte header (magic "MWCKPT\0\1", uint32 version, uint32 section count), then
 * sections, each a 28-byte header (8-byte NUL-padded tag, uint64 compressed size, uint64 raw
 * size, uint32 CRC32 of the raw bytes) and a zlib stream. Everything is little-endian. The
 * first section is always "meta": it fixes the size of every other section, so the reader
 * knows what to expect before it allocates anything.
 *
 * Reading never trusts a size: each one is checked against the format's limits, against the
 * meta record, against the bytes actually left in the file, and against deflate's maximum
 * expansion (1032:1) before memory is allocated, so a small file cannot make us allocate a
 * lot. Decompression must fill the declared raw size exactly and consume the whole stream. A
 * file is opened without following a link or blocking (a FIFO), and its header and section
 * table are checked against its size before its body is read, so neither a huge file nor a
 * special one costs more than a few small reads. The directory of checkpoints is
 * worker/checkpoint_dir.c. */
#include "worker/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/fs.h"
#include "common/log.h"
#include "common/sysmem.h"
#include "worker/optimizers.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "worker/checkpoint.c copies float arrays as they are: it needs a little-endian host"
#endif

static const unsigned char MAGIC[8] = {'M', 'W', 'C', 'K', 'P', 'T', 0, 1};

enum {
    HDR_NBYTES = 16,     /* magic, version, section count */
    SEC_HDR_NBYTES = 28, /* tag[8], u64 compressed, u64 raw, u32 crc */
    META_NBYTES = 104,   /* the fixed meta record, see docs/checkpoint.md */
    MAX_SECTIONS = 16,
    MAX_EXPANSION = 1032, /* deflate's largest raw/compressed ratio */
    ZLEVEL = 1,           /* parameters barely compress; favour speed */
};
#define MAX_RAW ((uint64_t)1 << 30) /* 1 GiB per section */
_Static_assert(MAX_RAW / sizeof(float) == MW_CKPT_MAX_PARAMS, "checkpoint.h's limit");

enum { SEC_META, SEC_MODEL, SEC_PARAMS, SEC_SLOT1, SEC_SLOT2, SEC_SLOT3, SEC_LSCALE, NSEC };
static const char *const SEC_NAMES[NSEC] = {"meta",  "model", "params", "slot1",
                                            "slot2", "slot3", "lscale"};
enum { LSCALE_NBYTES = 16 }; /* float64 loss scale, int64 finite steps since it changed */

/* ---- little-endian fields ---- */

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* ---- the state ---- */

void mw_ckpt_init(mw_ckpt *c)
{
    memset(c, 0, sizeof *c);
}

void mw_ckpt_free(mw_ckpt *c)
{
    free(c->model_json);
    free(c->params);
    free(c->slot1);
    free(c->slot2);
    free(c->slot3);
    mw_ckpt_init(c);
}

/* Copy up to n bytes of possibly binary text into out (size >= n + 1) for a message. */
static const char *printable(char *out, const char *s, size_t n)
{
    size_t i = 0;
    for (; i < n && s[i]; i++)
        out[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    out[i] = '\0';
    return out;
}

/* The consistency rules every checkpoint obeys; shared by the writer (MW_EINVAL) and the
 * reader (MW_ECKPT). nslot_arrays: how many optimizer slots are present. */
static mw_status check_state(const mw_ckpt *c, int nslot_arrays, mw_status code, const char *name)
{
    char opt[sizeof c->optimizer + 1];
    printable(opt, c->optimizer, sizeof c->optimizer);
    /* the optimizers a checkpoint may name and the slot sections each may hold (the table's
     * rows, docs/checkpoint.md): files written before Keras' other optimizers existed (adam:
     * 2, sgd: 0 or 1) still read */
    const int k =
        memchr(c->optimizer, '\0', sizeof c->optimizer) ? mw_optimizer_find(c->optimizer, 0) : -1;
    if (k < 0)
        return mw_err(code, "%s: unknown optimizer '%s' (expected %s)", name, opt,
                      mw_optimizer_list(0));
    const mw_optimizer_row *row = mw_optimizer_row_of((mw_optimizer)k);
    if (nslot_arrays < row->slots_lo || nslot_arrays > row->slots_hi)
        return mw_err(code, "%s: optimizer %s with %d slot(s) (expected %s)", name, opt,
                      nslot_arrays, row->slots_what);
    if (c->nparams > MAX_RAW / sizeof(float))
        return mw_err(code, "%s: %zu parameters (expected at most %llu: 1 GiB)", name, c->nparams,
                      (unsigned long long)(MAX_RAW / sizeof(float)));
    size_t want_slots = nslot_arrays ? c->nparams : 0;
    if (c->nslots != want_slots)
        return mw_err(code, "%s: %zu floats per optimizer slot (expected %zu: %s)", name, c->nslots,
                      want_slots, nslot_arrays ? "one per parameter" : "no slots");
    if (c->opt_step < 0 || c->epoch < 0 || c->step_in_epoch < 0 || c->global_step < 0)
        return mw_err(code,
                      "%s: negative counter: optimizer step %ld, epoch %d, step in epoch %ld, "
                      "global step %ld (expected all >= 0)",
                      name, c->opt_step, c->epoch, c->step_in_epoch, c->global_step);
    if (c->step_in_epoch > c->global_step)
        return mw_err(code, "%s: step in epoch %ld is beyond the global step %ld (expected <=)",
                      name, c->step_in_epoch, c->global_step);
    if (c->global_batch < 1)
        return mw_err(code, "%s: global batch %ld (expected >= 1)", name, c->global_batch);
    if (!isfinite(c->learning_rate) || c->learning_rate < 0)
        return mw_err(code, "%s: learning rate %g (expected a finite value >= 0)", name,
                      c->learning_rate);
    return MW_OK;
}

/* The loss-scale record's rules (docs/checkpoint.md). */
static mw_status check_loss_scale(const mw_ckpt *c, mw_status code, const char *name)
{
    int e;
    const double m = frexp(c->loss_scale, &e);
    if (!(c->loss_scale >= MW_LOSS_SCALE_MIN && c->loss_scale <= MW_LOSS_SCALE_MAX) || m != 0.5)
        return mw_err(code, "%s: lscale: loss scale %g (expected a power of 2 from 2^-24 to 2^127)",
                      name, c->loss_scale);
    if (c->loss_scale_steps < 0 || c->loss_scale_steps >= MW_LOSS_SCALE_MAX_GROWTH)
        return mw_err(code, "%s: lscale: finite steps %ld (expected 0 to %ld)", name,
                      c->loss_scale_steps, MW_LOSS_SCALE_MAX_GROWTH - 1);
    return MW_OK;
}

/* ---- serialize ---- */

static void meta_encode(unsigned char *m, const mw_ckpt *c, int nslot_arrays, size_t model_nbytes)
{
    memset(m, 0, META_NBYTES);
    memcpy(m, c->optimizer, strnlen(c->optimizer, sizeof c->optimizer)); /* NUL-padded */
    put_u64(m + 16, c->nparams);
    put_u64(m + 24, c->nslots);
    put_u32(m + 32, (uint32_t)nslot_arrays);
    put_u32(m + 36, 0);
    put_u64(m + 40, (uint64_t)c->opt_step);
    put_u64(m + 48, (uint64_t)c->epoch);
    put_u64(m + 56, (uint64_t)c->step_in_epoch);
    put_u64(m + 64, (uint64_t)c->global_step);
    put_u64(m + 72, c->seed);
    put_u64(m + 80, (uint64_t)c->global_batch);
    uint64_t lr;
    memcpy(&lr, &c->learning_rate, sizeof lr);
    put_u64(m + 88, lr);
    put_u64(m + 96, model_nbytes);
}

mw_status mw_ckpt_serialize(const mw_ckpt *c, void **data, size_t *nbytes)
{
    *data = NULL;
    *nbytes = 0;
    if ((c->slot2 && !c->slot1) || (c->slot3 && !c->slot2))
        return mw_err(MW_EINVAL, "checkpoint: optimizer slot%d without slot%d",
                      c->slot3 && !c->slot2 ? 3 : 2, c->slot3 && !c->slot2 ? 2 : 1);
    int nslot_arrays = c->slot1 ? (c->slot2 ? (c->slot3 ? 3 : 2) : 1) : 0;
    MW_TRY(check_state(c, nslot_arrays, MW_EINVAL, "checkpoint"));
    if (c->has_loss_scale)
        MW_TRY(check_loss_scale(c, MW_EINVAL, "checkpoint"));
    unsigned char lscale[LSCALE_NBYTES];
    uint64_t lsbits;
    memcpy(&lsbits, &c->loss_scale, sizeof lsbits);
    put_u64(lscale, lsbits);
    put_u64(lscale + 8, (uint64_t)c->loss_scale_steps);
    if (c->nparams && !c->params)
        return mw_err(MW_EINVAL, "checkpoint: %zu parameters but no parameter array", c->nparams);
    const char *model = c->model_json ? c->model_json : "";
    size_t model_nbytes = strlen(model);
    if (model_nbytes > MAX_RAW)
        return mw_err(MW_EINVAL,
                      "checkpoint: model description of %zu bytes (expected at most "
                      "1 GiB)",
                      model_nbytes);

    unsigned char meta[META_NBYTES];
    meta_encode(meta, c, nslot_arrays, model_nbytes);
    static const unsigned char empty[1] = {0};
    struct {
        int id;
        const void *raw;
        size_t nbytes;
    } sec[NSEC] = {
        {SEC_META, meta, META_NBYTES},
        {SEC_MODEL, model, model_nbytes},
        {SEC_PARAMS, c->params ? (const void *)c->params : empty, c->nparams * sizeof(float)},
        {SEC_SLOT1, c->slot1, c->nslots * sizeof(float)},
        {SEC_SLOT2, c->slot2, c->nslots * sizeof(float)},
        {SEC_SLOT3, c->slot3, c->nslots * sizeof(float)},
        {SEC_LSCALE, lscale, LSCALE_NBYTES},
    };
    int nsec = 3 + nslot_arrays;
    if (c->has_loss_scale) /* after the slots that are written */
        sec[nsec++] = sec[SEC_LSCALE];
    size_t cap = HDR_NBYTES;
    for (int i = 0; i < nsec; i++)
        cap += SEC_HDR_NBYTES + compressBound((uLong)sec[i].nbytes);
    unsigned char *buf = malloc(cap);
    if (!buf)
        return mw_err(MW_ENOMEM, "checkpoint: cannot allocate %zu bytes to serialize", cap);
    memcpy(buf, MAGIC, sizeof MAGIC);
    put_u32(buf + 8, MW_CKPT_VERSION);
    put_u32(buf + 12, (uint32_t)nsec);
    size_t off = HDR_NBYTES;
    for (int i = 0; i < nsec; i++) {
        unsigned char *h = buf + off;
        const unsigned char *raw = sec[i].raw ? sec[i].raw : empty;
        memset(h, 0, 8);
        memcpy(h, SEC_NAMES[sec[i].id], strlen(SEC_NAMES[sec[i].id]));
        uLongf comp = (uLongf)(cap - off - SEC_HDR_NBYTES);
        int zrc = compress2(h + SEC_HDR_NBYTES, &comp, raw, (uLong)sec[i].nbytes, ZLEVEL);
        if (zrc != Z_OK) {
            free(buf);
            return mw_err(zrc == Z_MEM_ERROR ? MW_ENOMEM : MW_EINTERNAL,
                          "checkpoint: cannot compress section %s (zlib: %s)", SEC_NAMES[sec[i].id],
                          zError(zrc));
        }
        put_u64(h + 8, comp);
        put_u64(h + 16, sec[i].nbytes);
        put_u32(h + 24, (uint32_t)crc32(0L, raw, (uInt)sec[i].nbytes));
        off += SEC_HDR_NBYTES + comp;
    }
    unsigned char *shrunk = realloc(buf, off);
    *data = shrunk ? shrunk : buf;
    *nbytes = off;
    return MW_OK;
}

/* ---- parse ---- */

static mw_status bad(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static mw_status bad(const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mw_status rc = mw_verr_at(MW_ECKPT, name, fmt, ap);
    va_end(ap);
    return rc;
}

/* Which section a tag names, or -1. A tag is a name padded with NULs to 8 bytes. */
static int tag_id(const unsigned char *tag)
{
    for (int i = 0; i < NSEC; i++) {
        size_t n = strlen(SEC_NAMES[i]);
        if (memcmp(tag, SEC_NAMES[i], n) == 0) {
            size_t j = n;
            while (j < 8 && tag[j] == 0)
                j++;
            if (j == 8)
                return i;
        }
    }
    return -1;
}

/* Inflate exactly comp bytes of zlib stream into exactly raw bytes. Returns Z_OK, Z_MEM_ERROR,
 * or Z_DATA_ERROR with the reason in why. */
static int inflate_exact(unsigned char *dst, size_t raw, const unsigned char *src, size_t comp,
                         char *why, size_t why_cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    int zrc = inflateInit(&z);
    if (zrc != Z_OK) {
        snprintf(why, why_cap, "zlib: %s", zError(zrc));
        return zrc == Z_MEM_ERROR ? Z_MEM_ERROR : Z_DATA_ERROR;
    }
    z.next_in = (Bytef *)src; /* zlib's API is not const-correct; it does not write here */
    z.avail_in = (uInt)comp;
    unsigned char spare;
    z.next_out = raw ? dst : &spare; /* one spare byte to notice output beyond raw */
    z.avail_out = raw ? (uInt)raw : 1;
    zrc = inflate(&z, Z_FINISH);
    size_t out = raw ? raw - z.avail_out : 1 - z.avail_out;
    if (zrc == Z_STREAM_END && out == raw && z.avail_in == 0)
        zrc = Z_OK;
    else if (zrc == Z_MEM_ERROR)
        snprintf(why, why_cap, "zlib: out of memory");
    else if (zrc == Z_STREAM_END && out != raw)
        snprintf(why, why_cap, "inflates to %s%zu bytes", out > raw ? "at least " : "", out);
    else if (zrc == Z_STREAM_END)
        snprintf(why, why_cap, "%u bytes after the stream", z.avail_in);
    else if (zrc == Z_DATA_ERROR || zrc == Z_NEED_DICT)
        snprintf(why, why_cap, "zlib: %s", z.msg ? z.msg : "data error");
    else if (z.avail_out == 0)
        snprintf(why, why_cap, "inflates to more than declared");
    else
        snprintf(why, why_cap, "stream ends early");
    inflateEnd(&z);
    return zrc == Z_OK ? Z_OK : zrc == Z_MEM_ERROR ? Z_MEM_ERROR : Z_DATA_ERROR;
}

static mw_status meta_decode(mw_ckpt *t, const unsigned char *m, int *nslot_arrays,
                             uint64_t *model_nbytes, const char *name)
{
    memcpy(t->optimizer, m, sizeof t->optimizer);
    uint64_t np = get_u64(m + 16), ns = get_u64(m + 24), ep = get_u64(m + 48);
    uint32_t arrays = get_u32(m + 32), reserved = get_u32(m + 36);
    if (np > MAX_RAW / sizeof(float) || ns > MAX_RAW / sizeof(float))
        return bad(name,
                   "meta lists %llu parameters and %llu floats per slot (expected at most "
                   "%llu: 1 GiB)",
                   (unsigned long long)np, (unsigned long long)ns,
                   (unsigned long long)(MAX_RAW / sizeof(float)));
    if (arrays > 3 || reserved != 0)
        return bad(name,
                   "meta lists %u optimizer slots, reserved field %u (expected 0 to 3, "
                   "and 0)",
                   arrays, reserved);
    if (ep > INT_MAX)
        return bad(name, "meta epoch %llu is out of range (expected at most %d)",
                   (unsigned long long)ep, INT_MAX);
    t->nparams = (size_t)np;
    t->nslots = (size_t)ns;
    t->opt_step = (long)(int64_t)get_u64(m + 40);
    t->epoch = (int)ep;
    t->step_in_epoch = (long)(int64_t)get_u64(m + 56);
    t->global_step = (long)(int64_t)get_u64(m + 64);
    t->seed = get_u64(m + 72);
    t->global_batch = (long)(int64_t)get_u64(m + 80);
    uint64_t lr = get_u64(m + 88);
    memcpy(&t->learning_rate, &lr, sizeof lr);
    *model_nbytes = get_u64(m + 96);
    *nslot_arrays = (int)arrays;
    if (*model_nbytes > MAX_RAW)
        return bad(name, "meta lists a model description of %llu bytes (expected at most 1 GiB)",
                   (unsigned long long)*model_nbytes);
    return check_state(t, (int)arrays, MW_ECKPT, name);
}

/* What parse knows part-way through a file. */
typedef struct {
    const unsigned char *p;
    size_t nbytes;
    const char *name;
    uint32_t count; /* sections, from the header */
    size_t off;     /* where the next section header starts */
    int seen[NSEC];
    uint64_t want[NSEC]; /* raw sizes, known once meta is read */
    int nslot_arrays;
} reader;

/* One section's header fields. */
typedef struct {
    int id;
    uint64_t comp, raw;
    uint32_t crc;
} sec_hdr;

/* The file header: the magic, the version, and a section count in range. */
static mw_status parse_header(reader *r)
{
    const unsigned char *p = r->p;
    const char *name = r->name;
    if (r->nbytes < HDR_NBYTES)
        return bad(name, "file is %zu bytes, shorter than the %d-byte header (truncated?)",
                   r->nbytes, HDR_NBYTES);
    if (memcmp(p, MAGIC, sizeof MAGIC) != 0)
        return bad(name, "not a checkpoint: bad magic (expected \"MWCKPT\\0\\1\")");
    uint32_t version = get_u32(p + 8), count = get_u32(p + 12);
    if (version != MW_CKPT_VERSION)
        return bad(name, "unsupported format version %u (expected %d)", version, MW_CKPT_VERSION);
    if (count < 3 || count > MAX_SECTIONS)
        return bad(name, "section count %u is out of range (expected 3 to %d)", count,
                   MAX_SECTIONS);
    r->count = count;
    return MW_OK;
}

/* Section i's header at r->off, checked against the format's limits, the sections seen so
 * far, the sizes the meta section fixed, and the bytes left in the file; on success r->off
 * is at the section's compressed data. */
static mw_status parse_section_header(reader *r, uint32_t i, sec_hdr *s)
{
    const char *name = r->name;
    size_t nbytes = r->nbytes, off = r->off;
    if (nbytes - off < SEC_HDR_NBYTES)
        return bad(name,
                   "truncated: section %u of %u starts at byte %zu but the file ends "
                   "at %zu (expected a %d-byte section header)",
                   i + 1, r->count, off, nbytes, SEC_HDR_NBYTES);
    const unsigned char *h = r->p + off;
    uint64_t comp = get_u64(h + 8), raw = get_u64(h + 16);
    int id = tag_id(h);
    if (id < 0) {
        char tag[9];
        return bad(name,
                   "unknown section tag '%s' at byte %zu (expected meta, model, "
                   "params, slot1, slot2, slot3 or lscale)",
                   printable(tag, (const char *)h, 8), off);
    }
    const char *sn = SEC_NAMES[id];
    if (i == 0 && id != SEC_META)
        return bad(name, "first section is %s (expected meta)", sn);
    if (r->seen[id])
        return bad(name, "duplicate section %s at byte %zu (expected each once)", sn, off);
    if (id >= SEC_SLOT1 && id <= SEC_SLOT3 && id - SEC_SLOT1 >= r->nslot_arrays)
        return bad(name, "unexpected section %s (meta lists %d optimizer slot(s))", sn,
                   r->nslot_arrays);
    if (raw > MAX_RAW)
        return bad(name, "section %s claims %llu bytes (expected at most 1 GiB)", sn,
                   (unsigned long long)raw);
    if (raw != r->want[id])
        return bad(name, "section %s holds %llu bytes (expected %llu from the meta section)", sn,
                   (unsigned long long)raw, (unsigned long long)r->want[id]);
    if (comp > compressBound((uLong)raw) || raw > comp * MAX_EXPANSION)
        return bad(name,
                   "section %s: %llu compressed bytes cannot hold %llu raw bytes "
                   "(expected %llu to %llu)",
                   sn, (unsigned long long)comp, (unsigned long long)raw,
                   (unsigned long long)((raw + MAX_EXPANSION - 1) / MAX_EXPANSION),
                   (unsigned long long)compressBound((uLong)raw));
    off += SEC_HDR_NBYTES;
    if (comp > nbytes - off)
        return bad(name,
                   "truncated in section %s: %llu compressed bytes at byte %zu but "
                   "only %zu left",
                   sn, (unsigned long long)comp, off, nbytes - off);
    r->off = off;
    s->id = id;
    s->comp = comp;
    s->raw = raw;
    s->crc = get_u32(h + 24);
    return MW_OK;
}

/* Inflate the section at r->off into *out (malloc'ed, one spare byte for a model's NUL) and
 * check its CRC. Its sizes were checked, so the allocation is bounded by the input. */
static mw_status inflate_section(const reader *r, const sec_hdr *s, unsigned char **out)
{
    const char *name = r->name, *sn = SEC_NAMES[s->id];
    uint64_t comp = s->comp, raw = s->raw;
    unsigned char *dst = malloc(raw ? (size_t)raw + (s->id == SEC_MODEL) : 1);
    if (!dst)
        return mw_err(MW_ENOMEM, "%s: cannot allocate %llu bytes for section %s", name,
                      (unsigned long long)raw, sn);
    char why[128];
    int zrc = inflate_exact(dst, (size_t)raw, r->p + r->off, (size_t)comp, why, sizeof why);
    if (zrc != Z_OK) {
        free(dst);
        if (zrc == Z_MEM_ERROR)
            return mw_err(MW_ENOMEM, "%s: out of memory decompressing section %s", name, sn);
        return bad(name,
                   "bad compressed data in section %s (%s; expected %llu compressed "
                   "bytes inflating to %llu)",
                   sn, why, (unsigned long long)comp, (unsigned long long)raw);
    }
    uint32_t got = (uint32_t)crc32(0L, dst, (uInt)raw);
    if (got != s->crc) {
        free(dst);
        return bad(name, "bad CRC in section %s (computed 0x%08x, stored 0x%08x)", sn,
                   (unsigned)got, (unsigned)s->crc);
    }
    *out = dst;
    return MW_OK;
}

/* Take the inflated section dst (owned) into t: meta fixes the sizes of the others, the
 * model becomes a string, arrays are kept as they are. */
static mw_status store_section(mw_ckpt *t, reader *r, int id, unsigned char *dst, uint64_t raw)
{
    const char *name = r->name;
    if (id == SEC_META) {
        uint64_t model_nbytes = 0;
        mw_status rc = meta_decode(t, dst, &r->nslot_arrays, &model_nbytes, name);
        free(dst);
        MW_TRY(rc);
        r->want[SEC_MODEL] = model_nbytes;
        r->want[SEC_PARAMS] = t->nparams * sizeof(float);
        r->want[SEC_SLOT1] = r->want[SEC_SLOT2] = r->want[SEC_SLOT3] = t->nslots * sizeof(float);
    } else if (id == SEC_LSCALE) {
        uint64_t bits = get_u64(dst);
        memcpy(&t->loss_scale, &bits, sizeof bits);
        t->loss_scale_steps = (long)(int64_t)get_u64(dst + 8);
        t->has_loss_scale = 1;
        free(dst);
        return check_loss_scale(t, MW_ECKPT, name);
    } else if (id == SEC_MODEL) {
        const void *nul = memchr(dst, '\0', (size_t)raw);
        if (nul) {
            size_t at = (size_t)((const unsigned char *)nul - dst);
            free(dst);
            return bad(name,
                       "model description has a NUL byte at offset %zu (expected "
                       "JSON text)",
                       at);
        }
        dst[raw] = '\0';
        t->model_json = (char *)dst;
    } else {
        float **slot[NSEC] = {NULL, NULL, &t->params, &t->slot1, &t->slot2, &t->slot3};
        *slot[id] = (float *)dst;
    }
    return MW_OK;
}

/* The sections the meta section fixes (the model's is at most 1 GiB, each array too) fit in
 * what this process may use (common/sysmem.h), else MW_ENOMEM before anything is inflated. */
static mw_status check_inflated(const reader *r)
{
    uint64_t total = 0;
    for (int id = SEC_MODEL; id <= SEC_SLOT3; id++)
        if (id < SEC_SLOT1 || id - SEC_SLOT1 < r->nslot_arrays)
            total += r->want[id];
    return mw_sysmem_check_load(total, "%s: its sections inflate to", r->name);
}

static mw_status parse(mw_ckpt *t, const unsigned char *p, size_t nbytes, const char *name)
{
    reader r = {.p = p,
                .nbytes = nbytes,
                .name = name,
                .off = HDR_NBYTES,
                .want = {META_NBYTES, 0, 0, 0, 0, 0, LSCALE_NBYTES}};
    MW_TRY(parse_header(&r));
    for (uint32_t i = 0; i < r.count; i++) {
        sec_hdr s = {0};
        unsigned char *dst = NULL;
        MW_TRY(parse_section_header(&r, i, &s));
        MW_TRY(inflate_section(&r, &s, &dst));
        r.off += s.comp;
        r.seen[s.id] = 1;
        MW_TRY(store_section(t, &r, s.id, dst, s.raw));
        if (s.id == SEC_META) /* the sizes it fixes, asked before any is inflated */
            MW_TRY(check_inflated(&r));
    }
    if (r.off != nbytes)
        return bad(name,
                   "%zu trailing bytes after the last section (expected the file to end "
                   "at byte %zu)",
                   nbytes - r.off, r.off);
    for (int id = 0; id < 3 + r.nslot_arrays; id++)
        if (!r.seen[id])
            return bad(name, "missing section %s", SEC_NAMES[id]);
    return MW_OK;
}

mw_status mw_ckpt_read_buffer(mw_ckpt *c, const void *data, size_t nbytes, const char *name)
{
    mw_ckpt t;
    mw_ckpt_init(&t);
    mw_status rc = parse(&t, data, nbytes, name);
    if (rc != MW_OK) {
        mw_ckpt_free(&t);
        return rc;
    }
    mw_ckpt_free(c);
    *c = t;
    return MW_OK;
}

/* The largest file the format allows: the header and five sections at their limits. */
static uint64_t max_file_nbytes(void)
{
    return HDR_NBYTES + NSEC * (SEC_HDR_NBYTES + (uint64_t)compressBound((uLong)MAX_RAW));
}

/* Read exactly n bytes at off. Returns 0, an errno, or -1 when the file ends first. */
/* Open path for reading a checkpoint without ever blocking or following a symbolic link, and
 * accept only a regular file of a size the format allows: *fd and its *size. */
static mw_status open_file(const char *path, int *fd_out, uint64_t *size)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
            return mw_err(MW_EIO,
                          "%s: is a symbolic link (expected a regular file: checkpoints are "
                          "never read through links)",
                          path);
        return mw_err(MW_EIO, "%s: cannot open (%s)", path, strerror(e));
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return mw_err(MW_EIO, "%s: cannot stat (%s)", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return mw_err(MW_EIO, "%s: is %s (expected a checkpoint file)", path,
                      mw_fs_kind(st.st_mode));
    }
    if ((uint64_t)st.st_size > max_file_nbytes() || (uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return mw_err(MW_ECKPT, "%s: file is %lld bytes (expected at most %llu)", path,
                      (long long)st.st_size, (unsigned long long)max_file_nbytes());
    }
    *fd_out = fd;
    *size = (uint64_t)st.st_size;
    return MW_OK;
}

/* Header first: the file header and the section table (a few hundred bytes) read on their own
 * and checked against the file's size, so that a file that ends early or goes on far beyond
 * what its table declares is rejected before its body is read or memory allocated for it. The
 * sections' contents are checked later, by parse. */
static mw_status check_table(int fd, const char *path, uint64_t size)
{
    unsigned char h[SEC_HDR_NBYTES] = {0};
    reader r = {.p = h, .nbytes = (size_t)size, .name = path};
    int e = size >= HDR_NBYTES ? mw_fs_pread_full(fd, h, HDR_NBYTES, 0) : 0;
    if (e)
        return mw_err(MW_EIO, "%s: cannot read the header (%s)", path,
                      e < 0 ? "the file shrank" : strerror(e));
    MW_TRY(parse_header(&r));
    uint64_t off = HDR_NBYTES;
    for (uint32_t i = 0; i < r.count; i++) {
        if (size - off < SEC_HDR_NBYTES)
            return bad(path,
                       "truncated: section %u of %u starts at byte %llu but the file ends "
                       "at %llu (expected a %d-byte section header)",
                       i + 1, r.count, (unsigned long long)off, (unsigned long long)size,
                       SEC_HDR_NBYTES);
        if ((e = mw_fs_pread_full(fd, h, SEC_HDR_NBYTES, off)))
            return mw_err(MW_EIO, "%s: cannot read section %u's header (%s)", path, i + 1,
                          e < 0 ? "the file shrank" : strerror(e));
        uint64_t comp = get_u64(h + 8);
        off += SEC_HDR_NBYTES;
        if (comp > size - off) {
            char tag[9], sn[12];
            int id = tag_id(h);
            if (id >= 0)
                snprintf(sn, sizeof sn, "%s", SEC_NAMES[id]);
            else
                snprintf(sn, sizeof sn, "'%s'", printable(tag, (const char *)h, 8));
            uint64_t need = comp > UINT64_MAX - off ? UINT64_MAX : off + comp;
            return bad(path,
                       "truncated in section %s: %llu compressed bytes at byte %llu but only "
                       "%llu left (the file is %llu bytes; its sections declare at least %llu)",
                       sn, (unsigned long long)comp, (unsigned long long)off,
                       (unsigned long long)(size - off), (unsigned long long)size,
                       (unsigned long long)need);
        }
        off += comp;
    }
    if (off != size)
        return bad(path,
                   "file is %llu bytes but its header and sections declare %llu (%llu trailing "
                   "bytes after the last section; expected the file to end at byte %llu)",
                   (unsigned long long)size, (unsigned long long)off,
                   (unsigned long long)(size - off), (unsigned long long)off);
    return MW_OK;
}

/* The whole file (size bytes, checked) into a malloc'ed buffer. */
static mw_status read_body(int fd, const char *path, size_t nbytes, unsigned char **out)
{
    unsigned char *buf = malloc(nbytes ? nbytes : 1);
    if (!buf)
        return mw_err(MW_ENOMEM, "%s: cannot allocate %zu bytes to read it", path, nbytes);
    int e = mw_fs_pread_full(fd, buf, nbytes, 0);
    if (e) {
        free(buf);
        if (e < 0)
            return mw_err(MW_ECKPT, "%s: file shrank while reading (expected %zu bytes)", path,
                          nbytes);
        return mw_err(MW_EIO, "%s: cannot read (%s)", path, strerror(e));
    }
    *out = buf;
    return MW_OK;
}

mw_status mw_ckpt_read(mw_ckpt *c, const char *path)
{
    int fd = -1;
    uint64_t size = 0;
    unsigned char *buf = NULL;
    MW_TRY(open_file(path, &fd, &size));
    mw_status rc = check_table(fd, path, size);
    if (rc == MW_OK)
        rc = read_body(fd, path, (size_t)size, &buf);
    close(fd);
    if (rc == MW_OK)
        rc = mw_ckpt_read_buffer(c, buf, (size_t)size, path);
    free(buf);
    return rc;
}

/* ---- writing (atomically: common/fs.h) ---- */

mw_status mw_ckpt_write(const mw_ckpt *c, const char *path)
{
    void *data;
    size_t nbytes;
    MW_TRY(mw_ckpt_serialize(c, &data, &nbytes));
    const char *step;
    int e = mw_fs_write_atomic_errno(path, data, nbytes, &step);
    free(data);
    if (e)
        return mw_err(MW_EIO, "%s: cannot %s the checkpoint (%s)", path, step, strerror(e));
    return MW_OK;
}
