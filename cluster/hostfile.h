/* Open MPI hostfiles to TF_CONFIG, for `mwtrain tf-config --hostfile H`.
 *
 * Under mpirun mwtrain needs no TF_CONFIG (the cluster comes from MPI), but users who launch
 * the ranks some other way, or who want to see and pin the cluster, can turn the hostfile they
 * give mpirun into the TF_CONFIG of every task. A hostfile is Open MPI's format:
 *
 *   # comment (to the end of the line)
 *   node-a slots=2              -> worker 0 "node-a:2222", worker 1 "node-a:2223"
 *   node-b slots=2 max_slots=4  -> worker 2 "node-b:2222", worker 3 "node-b:2223"
 *   node-c                      -> worker 4 "node-c:2222" (no slots: 1)
 *
 * One worker task per slot, in the order mpirun fills slots by default: hosts in order of
 * their first line, each host's slots before the next host's (a host listed again adds its
 * slots to its first line, as Open MPI does; names compare case-insensitively, as topology.c
 * groups nodes). Worker i's port is base_port + its slot's index on that host. Only slots
 * count; max_slots is checked (>= slots) and otherwise ignored. "user@host" is read as host;
 * IPv6 addresses are written "[::1]:2222"; MPICH's "host:N" is an error.
 * Unlike mpirun, a line without slots= counts 1 slot, not the host's core count, which a
 * remote host's file cannot tell us: write slots= explicitly.
 *
 * A hostfile that cannot be read, or is not a regular file (a FIFO is refused without being
 * opened), is MW_EIO. Every other error is MW_ECONFIG with a message naming the file and line,
 * what was found and what was expected:
 *
 *   hosts.txt:3: slots="x" is not a number; expected slots=N with N a positive integer */
#ifndef MW_CLUSTER_HOSTFILE_H
#define MW_CLUSTER_HOSTFILE_H

#include <stdio.h>

#include "common/status.h"

/* The default base port (TensorFlow's examples use 2222). */
#define MW_HOSTFILE_DEFAULT_PORT 2222
/* Most slots (worker tasks) a hostfile may describe in all. */
#define MW_HOSTFILE_MAX_TASKS 65536
/* Largest hostfile (a line per task at MW_HOSTFILE_MAX_LINE would be more; real ones are far
 * smaller) and longest line, without its line break: more is an error naming the file (and
 * the line), found before anything more is read. */
#define MW_HOSTFILE_MAX_BYTES (16u << 20)
#define MW_HOSTFILE_MAX_LINE 4096

/* Read the hostfile at `path` and build one TF_CONFIG per worker task. On success
 * *configs_out is an owned array of *ntasks_out owned, NUL-terminated compact JSON strings,
 *   {"cluster":{"worker":["node-a:2222",...]},"task":{"type":"worker","index":i}}
 * (free with mw_hostfile_configs_free), and *cluster_json_out (may be NULL: not wanted) the
 * owned compact JSON of the cluster object alone, {"worker":[...]}. base_port must be
 * 1-65535 and every port it yields at most 65535. On error the outputs are NULL / 0. */
mw_status mw_hostfile_tf_configs(const char *path, int base_port, char ***configs_out,
                                 int *ntasks_out, char **cluster_json_out);

/* Free what mw_hostfile_tf_configs returned; safe on NULL. */
void mw_hostfile_configs_free(char **configs, int ntasks);

/* Parse a --task spec "worker:N" into N (>= 0). Other jobs ("chief:0", "ps:0"), a missing
 * ':', a non-number or a negative index are MW_EINVAL with a message naming the spec. Whether
 * N exists is checked against the hostfile by mw_hostfile_print. */
mw_status mw_hostfile_parse_task(const char *spec, int *index);

/* `mwtrain tf-config`: with task < 0 print one line per task, "worker:<i> <json>"; with
 * task >= 0 print that task's JSON alone (a line), ready for TF_CONFIG=$(...). A task beyond
 * the hostfile's slots is MW_EINVAL naming the valid range. Nothing is printed on error. */
mw_status mw_hostfile_print(FILE *f, const char *path, int base_port, int task);

#endif
