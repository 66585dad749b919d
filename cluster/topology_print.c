/* Printing the topology table: what `mwtrain cluster` shows, as text or as JSON; see
 * topology_print.h. The table itself, and agreeing on it, is topology.c's. */
#include "cluster/topology_print.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const char *role(const mw_rank_info *r)
{
    return r->is_chief ? "chief" : mw_job_name(r->job);
}

static void print_json(const mw_topology *t, FILE *f, const char *const *devices)
{
    int njob[MW_JOB_COUNT] = {0};
    for (int i = 0; i < t->world_size; i++)
        njob[t->ranks[i].job]++;
    fprintf(f,
            "{\n  \"mode\": \"%s\",\n  \"world_size\": %d,\n  \"ntrain\": %d,\n"
            "  \"nnodes\": %d,\n  \"chief\": 0,\n  \"jobs\": {\"chief\": %d, \"worker\": %d, "
            "\"evaluator\": %d},\n  \"ranks\": [\n",
            mw_topo_mode_name(t->mode), t->world_size, t->ntrain, t->nnodes, njob[MW_JOB_CHIEF],
            njob[MW_JOB_WORKER], njob[MW_JOB_EVALUATOR]);
    for (int i = 0; i < t->world_size; i++) {
        const mw_rank_info *r = &t->ranks[i];
        char task[64];
        snprintf(task, sizeof task, "%s[%d]", mw_job_name(r->job), r->job_index);
        /* jansson escapes the host; a row per line keeps the output readable and greppable */
        json_t *row = json_pack(
            "{s:i, s:i, s:s, s:s, s:i, s:s, s:o, s:i, s:i, s:s}", "rank", i, "world_rank",
            r->world_rank, "task", task, "job", mw_job_name(r->job), "index", r->job_index, "host",
            r->host ? r->host : "", "port", r->port ? json_integer(r->port) : json_null(), "node",
            r->node, "local_rank", r->local_rank, "role", role(r));
        if (row && devices)
            json_object_set_new(row, "device", json_string(devices[i]));
        char *s = row ? json_dumps(row, 0) : NULL;
        fprintf(f, "    %s%s\n", s ? s : "{}", i + 1 < t->world_size ? "," : "");
        free(s);
        json_decref(row);
    }
    fprintf(f, "  ]\n}\n");
}

void mw_topology_print(const mw_topology *t, FILE *f, int json, const char *const *devices)
{
    if (json) {
        print_json(t, f, devices);
        return;
    }
    int njob[MW_JOB_COUNT] = {0}, nodes = t->nnodes;
    size_t hw = 4, tw = 4;
    for (int i = 0; i < t->world_size; i++) {
        const mw_rank_info *r = &t->ranks[i];
        char task[64];
        njob[r->job]++;
        nodes = r->node + 1 > nodes ? r->node + 1 : nodes; /* an evaluator's own node too */
        size_t hl = strlen(r->host ? r->host : "");
        hw = hl > hw ? hl : hw;
        size_t tl =
            (size_t)snprintf(task, sizeof task, "%s[%d]", mw_job_name(r->job), r->job_index);
        tw = tl > tw ? tl : tw;
    }
    char jobs[256];
    mw_topology_jobs(njob, jobs, sizeof jobs);
    static const char *const modes[] = {"no TF_CONFIG: all workers from MPI",
                                        "TF_CONFIG, one environment", "TF_CONFIG, one per rank"};
    fprintf(f, "cluster: %d rank%s (%s) on %d node%s; %s\n", t->world_size,
            t->world_size == 1 ? "" : "s", jobs, nodes, nodes == 1 ? "" : "s", modes[t->mode]);
    /* the role column is padded only when a device column follows it */
    const int rw = devices ? 9 : 0;
    fprintf(f, "%-4s  %-5s  %-*s  %-*s  %-4s  %-10s  %-*s%s%s\n", "rank", "world", (int)tw, "task",
            (int)hw, "host", "node", "local_rank", rw, "role", devices ? "  " : "",
            devices ? "device" : "");
    for (int i = 0; i < t->world_size; i++) {
        const mw_rank_info *r = &t->ranks[i];
        char task[64];
        snprintf(task, sizeof task, "%s[%d]", mw_job_name(r->job), r->job_index);
        fprintf(f, "%-4d  %-5d  %-*s  %-*s  %-4d  %-10d  %-*s%s%s\n", i, r->world_rank, (int)tw,
                task, (int)hw, r->host ? r->host : "", r->node, r->local_rank, rw, role(r),
                devices ? "  " : "", devices ? devices[i] : "");
    }
}
