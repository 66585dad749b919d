/* libFuzzer target for the checkpoint reader (worker/checkpoint.c, mw_ckpt_read_buffer).
 *
 * Any bytes must either parse into a state that satisfies the invariants below and survives a
 * serialize/read round trip unchanged, or fail with MW_ECKPT and a "fuzz.ckpt: ..." message
 * that leaves the caller's struct untouched; never crash, leak, read out of bounds or allocate
 * more than the input can justify (build with -fsanitize=fuzzer,address; run.sh also sets
 * -malloc_limit_mb). Run it with tests/fuzz/run.sh; seeds come from gen_checkpoint_corpus.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"
#include "worker/checkpoint.h"

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_checkpoint: invariant failed: %s\n", what);
        abort();
    }
}

static int same_floats(const float *a, const float *b, size_t count)
{
    return count == 0 || (a && b && memcmp(a, b, count * sizeof(float)) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy of exactly size bytes, so reading past the end is caught by ASan. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    if (size)
        memcpy(buf, data, size);
    mw_log_set_level(MW_LOG_ERROR);
    mw_ckpt c;
    mw_ckpt_init(&c);
    mw_err_clear();
    mw_status rc = mw_ckpt_read_buffer(&c, buf, size, "fuzz.ckpt");
    if (rc == MW_OK) {
        int adam = strcmp(c.optimizer, "adam") == 0;
        check(adam || strcmp(c.optimizer, "sgd") == 0, "optimizer");
        check(c.model_json != NULL, "model text present");
        check(c.params != NULL, "parameter array present");
        check(!c.slot2 || c.slot1, "slot2 only with slot1");
        check(adam ? c.slot1 && c.slot2 : !c.slot2, "slots match the optimizer");
        check(c.nslots == (c.slot1 ? c.nparams : 0), "slot size");
        check(c.epoch >= 0 && c.opt_step >= 0 && c.step_in_epoch >= 0 &&
                  c.step_in_epoch <= c.global_step && c.global_batch >= 1,
              "counters");
        /* what was read writes back and reads again to the same state */
        void *bytes;
        size_t nbytes;
        check(mw_ckpt_serialize(&c, &bytes, &nbytes) == MW_OK, "serialize what was read");
        mw_ckpt d;
        mw_ckpt_init(&d);
        check(mw_ckpt_read_buffer(&d, bytes, nbytes, "again") == MW_OK, "read it back");
        check(strcmp(c.model_json, d.model_json) == 0 && c.nparams == d.nparams &&
                  c.nslots == d.nslots && strcmp(c.optimizer, d.optimizer) == 0 &&
                  c.opt_step == d.opt_step && c.epoch == d.epoch &&
                  c.step_in_epoch == d.step_in_epoch && c.global_step == d.global_step &&
                  c.seed == d.seed && c.global_batch == d.global_batch &&
                  memcmp(&c.learning_rate, &d.learning_rate, sizeof(double)) == 0 &&
                  same_floats(c.params, d.params, c.nparams) &&
                  same_floats(c.slot1, d.slot1, c.slot1 ? c.nslots : 0) &&
                  same_floats(c.slot2, d.slot2, c.slot2 ? c.nslots : 0),
              "round trip keeps the state");
        mw_ckpt_free(&d);
        free(bytes);
    } else {
        check(rc == MW_ECKPT || rc == MW_ENOMEM, "status");
        check(strncmp(mw_err_msg(), "fuzz.ckpt: ", 11) == 0, "message names its origin");
        check(c.params == NULL && c.model_json == NULL && c.slot1 == NULL && c.nparams == 0,
              "failed read leaves the struct untouched");
    }
    mw_ckpt_free(&c);
    mw_err_clear();
    free(buf);
    return 0;
}
