/* TF_CONFIG: parse and validate TensorFlow's cluster description.
 *
 * TF_CONFIG is the JSON that TensorFlow's MultiWorkerMirroredStrategy reads:
 *
 *   {"cluster": {"chief": ["host:port"], "worker": ["host:port", ...],
 *                "evaluator": ["host:port"]},
 *    "task": {"type": "worker", "index": 0}}
 *
 * mwtrain takes the same text from the TF_CONFIG environment variable or from a file
 * (--tf-config PATH), so a job written for TensorFlow launches unchanged. A wrong TF_CONFIG is
 * the most common reason a multi-worker job hangs, so validation is strict and every message
 * names the key path, what was found and what was expected:
 *
 *   TF_CONFIG: cluster.worker[1]: port "99999" is out of range; expected 1-65535
 *
 * This file knows nothing of MPI; topology.c maps the tasks to ranks. */
#ifndef MW_CLUSTER_TFCONFIG_H
#define MW_CLUSTER_TFCONFIG_H

#include <stddef.h>

#include "common/status.h"

/* Longest TF_CONFIG text accepted, in bytes. */
#define MW_TFCONFIG_MAX_BYTES (1u << 20)
/* Longest host name accepted (RFC 1035 limit), in bytes. */
#define MW_TFCONFIG_MAX_HOST 255

typedef enum { MW_JOB_CHIEF, MW_JOB_WORKER, MW_JOB_EVALUATOR, MW_JOB_COUNT } mw_job;

typedef struct {
    mw_job job;
    int index;  /* task index within its job */
    char *host; /* owned; IPv6 hosts without the brackets ("::1") */
    int port;   /* 1-65535 */
} mw_task;

typedef struct {
    /* All tasks in TensorFlow's order: the chief (if any), the workers by index, then the
     * evaluator (if any). The first ntrain are the training tasks. Owned. */
    mw_task *tasks;
    int ntasks;
    int ntrain;
    int njob[MW_JOB_COUNT]; /* tasks per job */
    /* The `task` field (required): this process's job and index, and its place in tasks[]. */
    mw_job task_job;
    int task_index;
    int task;
} mw_tfconfig;

/* "chief", "worker", "evaluator"; never NULL. */
const char *mw_job_name(mw_job job);
/* Write the task's address as "host:port" ("[::1]:2222" for IPv6) into buf (always
 * NUL-terminated when nbytes > 0); returns what snprintf returns. */
int mw_task_addr(const mw_task *t, char *buf, size_t nbytes);
/* Write the task's name as "worker[1]"; returns what snprintf returns. */
int mw_task_name(const mw_task *t, char *buf, size_t nbytes);

void mw_tfconfig_init(mw_tfconfig *c);
/* Safe on an initialized or half-built config; leaves it initialized. */
void mw_tfconfig_free(mw_tfconfig *c);

/* Parse and validate nbytes of JSON text (no NUL terminator needed). `origin` ("TF_CONFIG" or
 * the file's path; NULL means "TF_CONFIG") starts every message. c must be initialized; what
 * it held is freed first. On error returns MW_ECONFIG with the message recorded (mw_err) and
 * leaves c initialized and empty. */
mw_status mw_tfconfig_parse(mw_tfconfig *c, const char *text, size_t nbytes, const char *origin);

/* Read the file at `path` when path is non-NULL, else the TF_CONFIG environment variable, and
 * parse it. *found (may be NULL) is 1 when a config was read, 0 when path is NULL and TF_CONFIG
 * is unset (not an error: the cluster then comes from MPI). A set but empty TF_CONFIG is an
 * error. The file must be a regular file (a FIFO is refused without being opened) that can be
 * read, else MW_EIO; one over MW_TFCONFIG_MAX_BYTES is MW_ECONFIG, nothing read. */
mw_status mw_tfconfig_load(mw_tfconfig *c, const char *path, int *found);

/* Index in c->tasks of task `index` of `job`, or -1 when there is none. */
int mw_tfconfig_find(const mw_tfconfig *c, mw_job job, int index);

#endif
