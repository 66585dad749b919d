/* libFuzzer target for the TF_CONFIG parser (cluster/tfconfig.c).
 *
 * Any bytes must either parse into a config that satisfies the invariants below or fail with
 * MW_ECONFIG and a non-empty "TF_CONFIG: ..." message; never crash, leak or read out of
 * bounds (build with -fsanitize=fuzzer,address). Run it with tests/fuzz/run.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/tfconfig.h"
#include "common/status.h"

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_tfconfig: invariant failed: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy with no terminator, so reading past size is caught by ASan. */
    char *text = malloc(size ? size : 1);
    if (!text)
        return 0;
    if (size)
        memcpy(text, data, size);
    mw_tfconfig c;
    mw_tfconfig_init(&c);
    mw_err_clear();
    mw_status rc = mw_tfconfig_parse(&c, text, size, "TF_CONFIG");
    if (rc == MW_OK) {
        check(c.ntasks > 0 && c.ntrain > 0 && c.ntrain <= c.ntasks, "task counts");
        check(c.task >= 0 && c.task < c.ntasks, "task field in range");
        check(c.tasks[c.task].job == c.task_job && c.tasks[c.task].index == c.task_index,
              "task field matches its task");
        check(c.njob[MW_JOB_CHIEF] <= 1 && c.njob[MW_JOB_EVALUATOR] <= 1, "job sizes");
        for (int i = 0; i < c.ntasks; i++) {
            const mw_task *t = &c.tasks[i];
            check(t->host && t->host[0] != '\0', "non-empty host");
            check(t->port >= 1 && t->port <= 65535, "port range");
            check((i < c.ntrain) == (t->job != MW_JOB_EVALUATOR), "training tasks first");
            if (i > 0)
                check(t->job > c.tasks[i - 1].job ||
                          (t->job == c.tasks[i - 1].job && t->index == c.tasks[i - 1].index + 1),
                      "task order");
            char addr[600];
            int n = mw_task_addr(t, addr, sizeof addr);
            check(n > 0 && (size_t)n < sizeof addr, "address fits");
        }
    } else {
        check(rc == MW_ECONFIG || rc == MW_ENOMEM, "status");
        check(strncmp(mw_err_msg(), "TF_CONFIG: ", 11) == 0, "message names its origin");
        check(c.tasks == NULL && c.ntasks == 0, "failed parse leaves the config empty");
    }
    mw_tfconfig_free(&c);
    mw_err_clear();
    free(text);
    return 0;
}
