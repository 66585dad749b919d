/* TF_CONFIG parsing and validation; see tfconfig.h.
 *
 * The parser is jansson with JSON_REJECT_DUPLICATES (so {"worker": [...], "worker": [...]} is
 * not silently half-read) and the end-of-input check left on (trailing garbage is an error).
 * Everything the user wrote that reaches a message is escaped and shortened first, so odd bytes
 * in the input cannot garble a terminal or overflow the message slot. */
#include "cluster/tfconfig.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "common/fs.h"
#include "common/strfmt.h"

/* Longest piece of user text quoted in a message. */
#define QUOTE_MAX 48

static const char *const job_names[MW_JOB_COUNT] = {"chief", "worker", "evaluator"};
static const char *const job_list = "chief, worker, evaluator";

const char *mw_job_name(mw_job job)
{
    if ((unsigned)job >= MW_JOB_COUNT)
        return "?";
    return job_names[job];
}

int mw_task_addr(const mw_task *t, char *buf, size_t nbytes)
{
    if (strchr(t->host, ':'))
        return snprintf(buf, nbytes, "[%s]:%d", t->host, t->port);
    return snprintf(buf, nbytes, "%s:%d", t->host, t->port);
}

int mw_task_name(const mw_task *t, char *buf, size_t nbytes)
{
    return snprintf(buf, nbytes, "%s[%d]", mw_job_name(t->job), t->index);
}

void mw_tfconfig_init(mw_tfconfig *c)
{
    memset(c, 0, sizeof *c);
    c->task = -1;
}

void mw_tfconfig_free(mw_tfconfig *c)
{
    if (c->tasks)
        for (int i = 0; i < c->ntasks; i++)
            free(c->tasks[i].host);
    free(c->tasks);
    mw_tfconfig_init(c);
}

int mw_tfconfig_find(const mw_tfconfig *c, mw_job job, int index)
{
    for (int i = 0; i < c->ntasks; i++)
        if (c->tasks[i].job == job && c->tasks[i].index == index)
            return i;
    return -1;
}

/* ---- message helpers ---------------------------------------------------------------------- */

/* "s" in double quotes, escaped and shortened. */
static const char *quote(char *buf, size_t n, const char *s)
{
    return mw_str_quote(buf, n, s, QUOTE_MAX);
}

/* What a JSON value is, for "found ...": "an integer (2222)", "a string (\"a:1\")". */
static const char *describe(char *buf, size_t n, const json_t *v)
{
    char q[QUOTE_MAX * 4 + 8];
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        snprintf(buf, n, "an object");
        break;
    case JSON_ARRAY:
        snprintf(buf, n, "an array");
        break;
    case JSON_STRING:
        snprintf(buf, n, "a string (%s)", quote(q, sizeof q, json_string_value(v)));
        break;
    case JSON_INTEGER:
        snprintf(buf, n, "an integer (%lld)", (long long)json_integer_value(v));
        break;
    case JSON_REAL:
        snprintf(buf, n, "a number with a fraction or exponent (%g)", json_real_value(v));
        break;
    case JSON_TRUE:
        snprintf(buf, n, "true");
        break;
    case JSON_FALSE:
        snprintf(buf, n, "false");
        break;
    default:
        snprintf(buf, n, "null");
        break;
    }
    return buf;
}

/* Record "origin: path: message" (or "origin: message" when path is empty) as MW_ECONFIG. */
static mw_status fail(const char *origin, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static mw_status fail(const char *origin, const char *path, const char *fmt, ...)
{
    char where[600];
    if (path && *path)
        snprintf(where, sizeof where, "%s: %s", origin, path);
    else
        snprintf(where, sizeof where, "%s", origin);
    va_list ap;
    va_start(ap, fmt);
    mw_status rc = mw_verr_at(MW_ECONFIG, where, fmt, ap);
    va_end(ap);
    return rc;
}

/* -1 unknown, -2 "ps", else the job. */
static int job_from_name(const char *name)
{
    for (int j = 0; j < MW_JOB_COUNT; j++)
        if (strcmp(name, job_names[j]) == 0)
            return j;
    if (strcmp(name, "ps") == 0)
        return -2;
    return -1;
}

/* A hint for a near miss of a job name, or "". */
static const char *job_hint(const char *name)
{
    if (strcasecmp(name, "master") == 0)
        return " (\"master\" is TensorFlow 1's name for the chief)";
    for (int j = 0; j < MW_JOB_COUNT; j++)
        if (strcasecmp(name, job_names[j]) == 0)
            return " (job names are lower case)";
    if (strcasecmp(name, "workers") == 0)
        return " (the job is \"worker\", singular)";
    return "";
}

static mw_status fail_ps(const char *origin, const char *path)
{
    return fail(origin, path,
                "parameter servers (\"ps\") are not supported; mwtrain trains with synchronous "
                "all-reduce: list those hosts under \"worker\" instead");
}

/* ---- addresses ------------------------------------------------------------------------- */

/* Parse "host:port" or "[v6]:port" into an owned host and a port. */
static mw_status parse_addr(const char *origin, const char *path, const char *s, char **host,
                            int *port)
{
    char q[QUOTE_MAX * 4 + 8], qh[QUOTE_MAX * 4 + 8];
    const char *h, *hend, *p;
    quote(q, sizeof q, s);
    if (s[0] == '[') {
        h = s + 1;
        hend = strchr(h, ']');
        if (!hend)
            return fail(origin, path, "%s has no closing ']'; expected \"[IPv6 address]:port\"", q);
        if (hend[1] == '\0')
            return fail(origin, path, "%s has no port; expected \"[IPv6 address]:port\"", q);
        if (hend[1] != ':')
            return fail(origin, path,
                        "%s has text after ']' that is not ':port'; expected "
                        "\"[IPv6 address]:port\"",
                        q);
        p = hend + 2;
        if (hend == h)
            return fail(origin, path, "%s has an empty host; expected \"[IPv6 address]:port\"", q);
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon)
            return fail(origin, path, "%s has no port; expected \"host:port\"", q);
        h = s;
        hend = colon;
        p = colon + 1;
        if (memchr(s, ':', (size_t)(colon - s)))
            return fail(origin, path,
                        "%s has more than one ':'; IPv6 addresses need brackets: "
                        "expected \"[IPv6 address]:port\"",
                        q);
        if (hend == h)
            return fail(origin, path, "%s has an empty host; expected \"host:port\"", q);
    }
    size_t hlen = (size_t)(hend - h);
    if (hlen > MW_TFCONFIG_MAX_HOST)
        return fail(origin, path, "%s: the host is %zu bytes; expected at most %d", q, hlen,
                    MW_TFCONFIG_MAX_HOST);
    for (size_t i = 0; i < hlen; i++) {
        unsigned char ch = (unsigned char)h[i];
        const char *what = ch == ' '                 ? "a space"
                           : ch < 0x20 || ch == 0x7f ? "a control character"
                           : ch == '/'               ? "'/'"
                           : ch == '[' || ch == ']'  ? "a bracket"
                                                     : NULL;
        if (what)
            return fail(origin, path,
                        "%s: the host contains %s; expected a host name or IP "
                        "address without spaces, control characters, '/', '[' or ']'",
                        q, what);
    }
    if (*p == '\0')
        return fail(origin, path, "%s has no port after ':'; expected a port 1-65535", q);
    long v = 0;
    for (const char *d = p; *d; d++) {
        if (!isdigit((unsigned char)*d))
            return fail(origin, path, "%s: port %s is not a number; expected 1-65535", q,
                        quote(qh, sizeof qh, p));
        if (v <= 65535)
            v = v * 10 + (*d - '0');
    }
    if (v < 1 || v > 65535)
        return fail(origin, path, "%s: port %s is out of range; expected 1-65535", q,
                    quote(qh, sizeof qh, p));
    *host = strndup(h, hlen);
    if (!*host)
        return mw_err(MW_ENOMEM, "%s: %s: out of memory", origin, path);
    *port = (int)v;
    return MW_OK;
}

typedef struct {
    const char *host;
    int port;
    int idx;
} addr_key;

static int addr_cmp(const void *a, const void *b)
{
    const addr_key *x = a, *y = b;
    int c = strcasecmp(x->host, y->host);
    if (c)
        return c;
    if (x->port != y->port)
        return x->port < y->port ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* No address twice (hosts compared case-insensitively). Sorting keeps this O(n log n) for the
 * largest accepted input; the message names the earliest task (in task order) that repeats an
 * address, and the task it repeats. */
static mw_status check_unique(const mw_tfconfig *c, const char *origin)
{
    if (c->ntasks < 2)
        return MW_OK;
    addr_key *k = malloc((size_t)c->ntasks * sizeof *k);
    if (!k)
        return mw_err(MW_ENOMEM, "%s: out of memory", origin);
    for (int i = 0; i < c->ntasks; i++)
        k[i] = (addr_key){c->tasks[i].host, c->tasks[i].port, i};
    qsort(k, (size_t)c->ntasks, sizeof *k, addr_cmp);
    int dup = -1, orig = -1, start = 0;
    for (int i = 1; i < c->ntasks; i++) {
        if (strcasecmp(k[i].host, k[i - 1].host) != 0 || k[i].port != k[i - 1].port) {
            start = i; /* a new run of equal addresses; its first has the smallest index */
            continue;
        }
        if (dup < 0 || k[i].idx < dup) {
            dup = k[i].idx;
            orig = k[start].idx;
        }
    }
    free(k);
    if (dup < 0)
        return MW_OK;
    char path[64], opath[64], a[300], q[QUOTE_MAX * 4 + 8];
    const mw_task *t = &c->tasks[dup], *o = &c->tasks[orig];
    snprintf(path, sizeof path, "cluster.%s[%d]", mw_job_name(t->job), t->index);
    snprintf(opath, sizeof opath, "cluster.%s[%d]", mw_job_name(o->job), o->index);
    mw_task_addr(t, a, sizeof a);
    return fail(origin, path,
                "address %s is also used by %s; expected each task to have its "
                "own host:port",
                quote(q, sizeof q, a), opath);
}

/* ---- cluster and task -------------------------------------------------------------------- */

static mw_status parse_cluster(mw_tfconfig *c, const json_t *cl, const char *origin)
{
    char what[QUOTE_MAX * 4 + 64], key[QUOTE_MAX * 4 + 8], path[QUOTE_MAX * 4 + 32];
    if (!json_is_object(cl))
        return fail(origin, "cluster",
                    "found %s; expected an object mapping job names (%s) to "
                    "lists of \"host:port\"",
                    describe(what, sizeof what, cl), job_list);
    const json_t *jobs[MW_JOB_COUNT] = {NULL};
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)cl, name, v)
    {
        int j = job_from_name(name);
        mw_str_escape(key, sizeof key, name, QUOTE_MAX, 1);
        snprintf(path, sizeof path, "cluster.%s", key);
        if (j == -2)
            return fail_ps(origin, path);
        if (j < 0)
            return fail(origin, path, "unknown job %s; expected one of %s%s",
                        quote(what, sizeof what, name), job_list, job_hint(name));
        jobs[j] = v;
    }
    int total = 0;
    for (int j = 0; j < MW_JOB_COUNT; j++) {
        if (!jobs[j])
            continue;
        snprintf(path, sizeof path, "cluster.%s", job_names[j]);
        if (!json_is_array(jobs[j]))
            return fail(origin, path, "found %s; expected an array of \"host:port\" strings%s",
                        describe(what, sizeof what, jobs[j]),
                        json_is_object(jobs[j]) ? " (sparse {index: address} maps are not "
                                                  "supported)"
                                                : "");
        size_t n = json_array_size(jobs[j]);
        if (n == 0)
            return fail(origin, path,
                        "empty array; expected at least one \"host:port\" (or "
                        "leave the job out)");
        if (j != MW_JOB_WORKER && n > 1)
            return fail(origin, path, "%zu tasks; expected at most 1 %s", n, job_names[j]);
        if (n > (size_t)MW_TFCONFIG_MAX_BYTES) /* cannot happen within the size cap */
            return fail(origin, path, "%zu tasks; expected fewer", n);
        c->njob[j] = (int)n;
        total += (int)n;
    }
    if (total == 0)
        return fail(origin, "cluster",
                    "no jobs; expected at least one of \"chief\" or "
                    "\"worker\" with a list of \"host:port\"");
    if (c->njob[MW_JOB_CHIEF] + c->njob[MW_JOB_WORKER] == 0)
        return fail(origin, "cluster",
                    "only an evaluator; expected at least one \"chief\" or "
                    "\"worker\" task to train");
    c->tasks = calloc((size_t)total, sizeof *c->tasks);
    if (!c->tasks)
        return mw_err(MW_ENOMEM, "%s: out of memory for %d tasks", origin, total);
    for (int j = 0; j < MW_JOB_COUNT; j++) {
        for (int i = 0; i < c->njob[j]; i++) {
            const json_t *a = json_array_get(jobs[j], (size_t)i);
            snprintf(path, sizeof path, "cluster.%s[%d]", job_names[j], i);
            if (!json_is_string(a))
                return fail(origin, path, "found %s; expected a \"host:port\" string",
                            describe(what, sizeof what, a));
            mw_task *t = &c->tasks[c->ntasks];
            MW_TRY(parse_addr(origin, path, json_string_value(a), &t->host, &t->port));
            t->job = (mw_job)j;
            t->index = i;
            c->ntasks++;
        }
    }
    c->ntrain = c->njob[MW_JOB_CHIEF] + c->njob[MW_JOB_WORKER];
    return check_unique(c, origin);
}

static mw_status parse_task(mw_tfconfig *c, const json_t *task, const char *origin)
{
    char what[QUOTE_MAX * 4 + 64], key[QUOTE_MAX * 4 + 8];
    if (!json_is_object(task))
        return fail(origin, "task",
                    "found %s; expected an object such as {\"type\": \"worker\", "
                    "\"index\": 0}",
                    describe(what, sizeof what, task));
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)task, name, v)
    {
        if (strcmp(name, "type") != 0 && strcmp(name, "index") != 0)
            return fail(origin, "task", "unknown key %s; expected only \"type\" and \"index\"",
                        quote(key, sizeof key, name));
    }
    const json_t *type = json_object_get(task, "type");
    if (!type)
        return fail(origin, "task.type", "missing; expected one of %s", job_list);
    if (!json_is_string(type))
        return fail(origin, "task.type", "found %s; expected one of %s",
                    describe(what, sizeof what, type), job_list);
    const char *tn = json_string_value(type);
    int j = job_from_name(tn);
    if (j == -2)
        return fail_ps(origin, "task.type");
    if (j < 0)
        return fail(origin, "task.type", "unknown job %s; expected one of %s%s",
                    quote(key, sizeof key, tn), job_list, job_hint(tn));
    if (c->njob[j] == 0)
        return fail(origin, "task.type",
                    "\"%s\" but the cluster has no %s job; expected a job "
                    "listed in cluster",
                    job_names[j], job_names[j]);
    const json_t *index = json_object_get(task, "index");
    if (!index)
        return fail(origin, "task.index", "missing; expected an integer 0-%d", c->njob[j] - 1);
    if (!json_is_integer(index))
        return fail(origin, "task.index", "found %s; expected an integer 0-%d",
                    describe(what, sizeof what, index), c->njob[j] - 1);
    json_int_t idx = json_integer_value(index);
    if (idx < 0 || idx >= c->njob[j]) {
        if (c->njob[j] == 1)
            return fail(origin, "task.index",
                        "%lld is out of range; expected 0 (cluster.%s has "
                        "1 task)",
                        (long long)idx, job_names[j]);
        return fail(origin, "task.index",
                    "%lld is out of range; expected 0-%d (cluster.%s has "
                    "%d tasks)",
                    (long long)idx, c->njob[j] - 1, job_names[j], c->njob[j]);
    }
    c->task_job = (mw_job)j;
    c->task_index = (int)idx;
    c->task = mw_tfconfig_find(c, c->task_job, c->task_index);
    return MW_OK;
}

static mw_status parse_root(mw_tfconfig *c, const json_t *root, const char *origin)
{
    static const char *const keys[] = {"cluster", "task", "environment", "rpc_layer"};
    char what[QUOTE_MAX * 4 + 64];
    if (!json_is_object(root))
        return fail(origin, "", "found %s; expected a JSON object with \"cluster\" and \"task\"",
                    describe(what, sizeof what, root));
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)root, name, v)
    {
        int known = 0;
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            known |= strcmp(name, keys[i]) == 0;
        if (!known)
            return fail(origin, "",
                        "unknown key %s; expected only \"cluster\", \"task\", "
                        "\"environment\" and \"rpc_layer\"",
                        quote(what, sizeof what, name));
    }
    /* "environment" and "rpc_layer" are accepted and ignored, as TensorFlow does. */
    const json_t *cl = json_object_get(root, "cluster");
    if (!cl)
        return fail(origin, "cluster",
                    "missing; expected an object mapping job names (%s) to "
                    "lists of \"host:port\" (unset TF_CONFIG to take the cluster from MPI)",
                    job_list);
    MW_TRY(parse_cluster(c, cl, origin));
    const json_t *task = json_object_get(root, "task");
    if (!task)
        return fail(origin, "task",
                    "missing; expected an object such as {\"type\": \"worker\", "
                    "\"index\": 0} naming this process's task");
    return parse_task(c, task, origin);
}

mw_status mw_tfconfig_parse(mw_tfconfig *c, const char *text, size_t nbytes, const char *origin)
{
    mw_tfconfig_free(c);
    if (!origin)
        origin = "TF_CONFIG";
    if (nbytes > MW_TFCONFIG_MAX_BYTES)
        return fail(origin, "", "%zu bytes; expected at most %u (1 MiB)", nbytes,
                    MW_TFCONFIG_MAX_BYTES);
    size_t i = 0;
    while (i < nbytes && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
        i++;
    if (i == nbytes)
        return fail(origin, "",
                    "empty; expected a JSON object with \"cluster\" and \"task\" "
                    "(unset TF_CONFIG to take the cluster from MPI)");

    json_error_t e;
    json_t *root = json_loadb(text, nbytes, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
    if (!root) {
        char txt[sizeof e.text * 4 + 8];
        mw_str_escape(txt, sizeof txt, e.text, sizeof e.text, 0);
        const char *hint = "";
        if (strstr(e.text, "end of file expected"))
            hint = " (trailing text after the JSON value); expected exactly one JSON object";
        else if (strstr(e.text, "duplicate object key"))
            hint = "; expected each key once";
        else if (strstr(e.text, "maximum parsing depth"))
            hint = "; expected a shallow TF_CONFIG object";
        else if (strstr(e.text, "JSON_ALLOW_NUL"))
            hint = "; expected strings without NUL characters";
        if (e.line > 0 && e.column > 0)
            return fail(origin, "", "invalid JSON at line %d, column %d: %s%s", e.line, e.column,
                        txt, hint);
        return fail(origin, "", "invalid JSON at byte %d: %s%s", e.position, txt, hint);
    }
    mw_status rc = parse_root(c, root, origin);
    json_decref(root);
    if (rc != MW_OK)
        mw_tfconfig_free(c);
    return rc;
}

/* A whole TF_CONFIG file: a regular file (a FIFO or device is refused without being opened:
 * MW_EIO), its size checked against the cap before anything is read (common/fs.h). */
static mw_status read_file(const char *path, char **text, size_t *nbytes)
{
    return mw_fs_read_input(path, "a readable TF_CONFIG JSON file", MW_TFCONFIG_MAX_BYTES,
                            MW_ECONFIG, text, nbytes);
}

mw_status mw_tfconfig_load(mw_tfconfig *c, const char *path, int *found)
{
    if (found)
        *found = 0;
    if (path) {
        char *text = NULL;
        size_t n = 0;
        MW_TRY(read_file(path, &text, &n));
        if (found)
            *found = 1;
        mw_status rc = mw_tfconfig_parse(c, text, n, path);
        free(text);
        return rc;
    }
    const char *env = getenv("TF_CONFIG");
    if (!env) {
        mw_tfconfig_free(c);
        return MW_OK;
    }
    if (found)
        *found = 1;
    return mw_tfconfig_parse(c, env, strlen(env), "TF_CONFIG");
}
