/* Open MPI hostfile parsing and TF_CONFIG generation; see hostfile.h.
 *
 * A line is split into words and '=' signs (so "slots=2", "slots = 2" and "slots= 2" all
 * read alike, as in Open MPI's lexer), after dropping everything from '#'. The grammar is
 *   line := [host (key '=' value)*]      key := slots | max_slots
 * Hosts are merged case-insensitively in order of first appearance; the JSON is built with
 * jansson so host names are escaped correctly. User text reaching a message is escaped and
 * shortened first. */
#include "cluster/hostfile.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "common/fs.h"

/* Longest piece of user text quoted in a message, and the host length limit (RFC 1035). */
#define QUOTE_MAX 48
#define HOST_MAX 255
/* Most words on one line (a host and a few settings; more is surely not a hostfile). */
#define WORDS_MAX 32

typedef struct {
    char *host; /* owned */
    int slots;
} node;

typedef struct {
    node *nodes;
    int nnodes, cap;
    int ntasks;
} nodes;

static void nodes_free(nodes *n)
{
    for (int i = 0; i < n->nnodes; i++)
        free(n->nodes[i].host);
    free(n->nodes);
    memset(n, 0, sizeof *n);
}

/* "s" in double quotes, control bytes and quotes escaped, cut after QUOTE_MAX bytes. */
static const char *quote(char *buf, size_t n, const char *s, size_t len)
{
    size_t o = 0, i = 0;
    if (n < 8) {
        if (n)
            buf[0] = '\0';
        return buf;
    }
    buf[o++] = '"';
    for (; i < len && i < QUOTE_MAX && o + 8 < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)ch;
        } else if (ch < 0x20 || ch >= 0x7f) {
            o += (size_t)snprintf(buf + o, n - o, "\\x%02x", ch);
        } else {
            buf[o++] = (char)ch;
        }
    }
    if (i < len && o + 5 < n) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

typedef struct {
    const char *s;
    size_t len;
} word;

/* Split line (comment already cut) into words and single '=' words. Returns the count, or -1
 * when there are more than WORDS_MAX. Whitespace includes '\r' (CRLF files). */
static int split(const char *line, word *w)
{
    int n = 0;
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n' || *p == '\v' || *p == '\f')
            p++;
        if (!*p)
            return n;
        if (n == WORDS_MAX)
            return -1;
        const char *start = p;
        if (*p == '=')
            p++;
        else
            while (*p && *p != '=' && !strchr(" \t\r\n\v\f", *p))
                p++;
        w[n].s = start;
        w[n].len = (size_t)(p - start);
        n++;
    }
}

static int is(const word *w, const char *s)
{
    return w->len == strlen(s) && memcmp(w->s, s, w->len) == 0;
}

/* A positive count from a value word; 0 with *why set when it is not one. */
static int count_value(const word *w, const char **why)
{
    long v = 0;
    if (w->len == 0) {
        *why = "has no value";
        return 0;
    }
    for (size_t i = 0; i < w->len; i++) {
        if (w->s[i] < '0' || w->s[i] > '9') {
            *why = w->s[0] == '-' ? "is negative" : "is not a number";
            return 0;
        }
        if (v <= MW_HOSTFILE_MAX_TASKS)
            v = v * 10 + (w->s[i] - '0');
    }
    if (v == 0) {
        *why = "is zero";
        return 0;
    }
    if (v > MW_HOSTFILE_MAX_TASKS) {
        *why = "is too large";
        return 0;
    }
    return (int)v;
}

static mw_status add_slots(nodes *n, const char *path, int lineno, const char *host, size_t hlen,
                           int slots)
{
    if (n->ntasks + slots > MW_HOSTFILE_MAX_TASKS)
        return mw_err(MW_ECONFIG,
                      "%s:%d: the hostfile has more than %d slots in all; expected "
                      "at most %d",
                      path, lineno, MW_HOSTFILE_MAX_TASKS, MW_HOSTFILE_MAX_TASKS);
    for (int i = 0; i < n->nnodes; i++)
        if (strlen(n->nodes[i].host) == hlen && strncasecmp(n->nodes[i].host, host, hlen) == 0) {
            n->nodes[i].slots += slots;
            n->ntasks += slots;
            return MW_OK;
        }
    if (n->nnodes == n->cap) {
        int cap = n->cap ? 2 * n->cap : 16;
        node *p = realloc(n->nodes, (size_t)cap * sizeof *p);
        if (!p)
            return mw_err(MW_ENOMEM, "%s: out of memory", path);
        n->nodes = p;
        n->cap = cap;
    }
    char *h = strndup(host, hlen);
    if (!h)
        return mw_err(MW_ENOMEM, "%s: out of memory", path);
    n->nodes[n->nnodes].host = h;
    n->nodes[n->nnodes].slots = slots;
    n->nnodes++;
    n->ntasks += slots;
    return MW_OK;
}

static const char *const expect_line = "expected \"host [slots=N] [max_slots=N]\"";

/* The host of a line's first word w: "user@host" is read as host, as mpirun does; a name or
 * an IP address (':' only in IPv6 ones). */
static mw_status line_host(const word *w, const char *path, int lineno, const char **host_out,
                           size_t *hlen_out)
{
    char q[QUOTE_MAX * 4 + 16];
    const char *host = w->s;
    size_t hlen = w->len;
    const char *at = memchr(host, '@', hlen);
    if (at) {
        hlen -= (size_t)(at + 1 - host);
        host = at + 1;
    }
    if (hlen == 0)
        return mw_err(MW_ECONFIG, "%s:%d: %s has an empty host name; %s", path, lineno,
                      quote(q, sizeof q, w->s, w->len), expect_line);
    if (hlen > HOST_MAX)
        return mw_err(MW_ECONFIG, "%s:%d: the host name is %zu bytes; expected at most %d", path,
                      lineno, hlen, HOST_MAX);
    for (size_t i = 0; i < hlen; i++) {
        unsigned char ch = (unsigned char)host[i];
        const char *what = ch < 0x20 || ch == 0x7f   ? "a control character"
                           : ch == '/'               ? "'/'"
                           : ch == '[' || ch == ']'  ? "a bracket"
                           : ch == '"' || ch == '\'' ? "a quote"
                                                     : NULL;
        if (what)
            return mw_err(MW_ECONFIG,
                          "%s:%d: host %s contains %s; expected a host name or IP "
                          "address",
                          path, lineno, quote(q, sizeof q, w->s, w->len), what);
    }
    /* ':' only in IPv6 addresses; "host:N" is MPICH's and Intel MPI's way to give slots */
    const char *colon = memchr(host, ':', hlen);
    if (colon) {
        size_t ncolon = 0, i = 0;
        for (; i < hlen && (isxdigit((unsigned char)host[i]) || host[i] == ':' || host[i] == '.');
             i++)
            ncolon += host[i] == ':';
        if (i < hlen || ncolon < 2)
            return mw_err(MW_ECONFIG,
                          "%s:%d: host %s contains ':' but is not an IPv6 address; "
                          "%s (\"host:N\" is MPICH's and Intel MPI's format, not Open MPI's)",
                          path, lineno, quote(q, sizeof q, w->s, w->len), expect_line);
    }
    *host_out = host, *hlen_out = hlen;
    return MW_OK;
}

/* The setting that starts at word i of a line's nw words, "key = value", into *slots or
 * *max_slots (0 until set). */
static mw_status line_setting(const word *w, int nw, int i, const char *path, int lineno,
                              int *slots, int *max_slots)
{
    char q[QUOTE_MAX * 4 + 16], q2[QUOTE_MAX * 4 + 16];
    const word *key = &w[i];
    if (is(key, "="))
        return mw_err(MW_ECONFIG, "%s:%d: '=' without a setting name before it; %s", path, lineno,
                      expect_line);
    int k_slots = is(key, "slots"), k_max = is(key, "max_slots");
    if (i + 1 >= nw || !is(&w[i + 1], "=")) {
        if (k_slots || k_max)
            return mw_err(MW_ECONFIG,
                          "%s:%d: %.*s has no '=value'; expected %.*s=N with N "
                          "a positive integer",
                          path, lineno, (int)key->len, key->s, (int)key->len, key->s);
        return mw_err(MW_ECONFIG,
                      "%s:%d: unexpected %s after the host; %s, one host per "
                      "line",
                      path, lineno, quote(q, sizeof q, key->s, key->len), expect_line);
    }
    if (!k_slots && !k_max)
        return mw_err(MW_ECONFIG,
                      "%s:%d: unknown setting %s; expected slots=N or "
                      "max_slots=N",
                      path, lineno, quote(q, sizeof q, key->s, key->len));
    if ((k_slots && *slots) || (k_max && *max_slots))
        return mw_err(MW_ECONFIG,
                      "%s:%d: %.*s is given twice; expected it at most once per "
                      "line",
                      path, lineno, (int)key->len, key->s);
    word none = {"", 0};
    const word *val = i + 2 < nw && !is(&w[i + 2], "=") ? &w[i + 2] : &none;
    const char *why = NULL;
    int v = count_value(val, &why);
    if (!v) {
        if (val->len == 0)
            return mw_err(MW_ECONFIG,
                          "%s:%d: %.*s= has no value; expected %.*s=N with N a "
                          "positive integer",
                          path, lineno, (int)key->len, key->s, (int)key->len, key->s);
        if (strcmp(why, "is too large") == 0)
            return mw_err(MW_ECONFIG,
                          "%s:%d: %.*s=%s is too large; expected %.*s=N with N "
                          "at most %d",
                          path, lineno, (int)key->len, key->s,
                          quote(q2, sizeof q2, val->s, val->len), (int)key->len, key->s,
                          MW_HOSTFILE_MAX_TASKS);
        return mw_err(MW_ECONFIG,
                      "%s:%d: %.*s=%s %s; expected %.*s=N with N a positive "
                      "integer",
                      path, lineno, (int)key->len, key->s, quote(q2, sizeof q2, val->s, val->len),
                      why, (int)key->len, key->s);
    }
    *(k_slots ? slots : max_slots) = v;
    return MW_OK;
}

/* One line: nothing (blank or comment) or a host and its settings. */
static mw_status parse_line(nodes *n, const char *path, int lineno, char *line)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    word w[WORDS_MAX];
    int nw = split(line, w);
    if (nw < 0)
        return mw_err(MW_ECONFIG,
                      "%s:%d: more than %d words on one line; %s, one host per "
                      "line",
                      path, lineno, WORDS_MAX, expect_line);
    if (nw == 0)
        return MW_OK;
    if (is(&w[0], "="))
        return mw_err(MW_ECONFIG, "%s:%d: the line starts with '='; %s", path, lineno, expect_line);
    const char *host = NULL;
    size_t hlen = 0;
    MW_TRY(line_host(&w[0], path, lineno, &host, &hlen));
    int slots = 0, max_slots = 0;
    for (int i = 1; i < nw; i += 3)
        MW_TRY(line_setting(w, nw, i, path, lineno, &slots, &max_slots));
    if (!slots)
        slots = 1;
    if (max_slots && max_slots < slots)
        return mw_err(MW_ECONFIG,
                      "%s:%d: max_slots=%d is less than slots=%d; expected max_slots "
                      ">= slots",
                      path, lineno, max_slots, slots);
    return add_slots(n, path, lineno, host, hlen, slots);
}

/* The whole file first (a regular file of at most MW_HOSTFILE_MAX_BYTES, never blocking:
 * common/fs.h), then line by line, each at most MW_HOSTFILE_MAX_LINE bytes. */
static mw_status read_hostfile(nodes *n, const char *path)
{
    char *text = NULL;
    size_t nbytes = 0;
    MW_TRY(mw_fs_read_input(path, "a readable Open MPI hostfile", MW_HOSTFILE_MAX_BYTES, MW_ECONFIG,
                            &text, &nbytes));
    char line[MW_HOSTFILE_MAX_LINE + 2];
    int lineno = 0;
    mw_status rc = MW_OK;
    for (size_t at = 0; rc == MW_OK && at < nbytes;) {
        const char *nl = memchr(text + at, '\n', nbytes - at);
        const size_t len = nl ? (size_t)(nl - (text + at)) + 1 : nbytes - at;
        lineno++;
        if (len - (nl != NULL) > MW_HOSTFILE_MAX_LINE)
            rc = mw_err(MW_ECONFIG,
                        "%s:%d: a line of %zu bytes; expected at most %d (\"host [slots=N] "
                        "[max_slots=N]\")",
                        path, lineno, len - (nl != NULL), MW_HOSTFILE_MAX_LINE);
        else if (memchr(text + at, '\0', len))
            rc = mw_err(MW_ECONFIG, "%s:%d: contains a NUL byte; expected a text hostfile", path,
                        lineno);
        else {
            memcpy(line, text + at, len);
            line[len] = '\0';
            rc = parse_line(n, path, lineno, line);
        }
        at += len;
    }
    free(text);
    if (rc == MW_OK && n->ntasks == 0)
        rc = mw_err(MW_ECONFIG,
                    "%s: no hosts (only blank lines and comments); expected lines "
                    "\"host [slots=N] [max_slots=N]\"",
                    path);
    return rc;
}

void mw_hostfile_configs_free(char **configs, int ntasks)
{
    if (!configs)
        return;
    for (int i = 0; i < ntasks; i++)
        free(configs[i]);
    free(configs);
}

/* Build the cluster object {"worker":[...]} into *out (owned). */
static mw_status cluster_json(json_t **out, const nodes *n, const char *path, int base_port)
{
    mw_status rc;
    json_t *workers = json_array(), *cluster = json_object();
    if (!workers || !cluster || json_object_set(cluster, "worker", workers) != 0)
        goto oom;
    for (int i = 0; i < n->nnodes; i++) {
        const node *nd = &n->nodes[i];
        if (base_port + nd->slots - 1 > 65535) {
            char q[QUOTE_MAX * 4 + 16];
            rc = mw_err(MW_ECONFIG,
                        "%s: host %s has %d slots: ports %d-%d pass 65535; "
                        "expected a base port at most %d",
                        path, quote(q, sizeof q, nd->host, strlen(nd->host)), nd->slots, base_port,
                        base_port + nd->slots - 1, 65536 - nd->slots);
            goto fail;
        }
        int v6 = strchr(nd->host, ':') != NULL;
        for (int s = 0; s < nd->slots; s++) {
            char addr[HOST_MAX + 16];
            snprintf(addr, sizeof addr, v6 ? "[%s]:%d" : "%s:%d", nd->host, base_port + s);
            json_t *str = json_string(addr);
            if (!str) {
                char q[QUOTE_MAX * 4 + 16];
                rc = mw_err(MW_ECONFIG,
                            "%s: host %s is not valid UTF-8; expected a host name "
                            "or IP address",
                            path, quote(q, sizeof q, nd->host, strlen(nd->host)));
                goto fail;
            }
            if (json_array_append_new(workers, str) != 0)
                goto oom;
        }
    }
    json_decref(workers);
    *out = cluster;
    return MW_OK;
oom:
    rc = mw_err(MW_ENOMEM, "%s: out of memory", path);
fail:
    json_decref(workers);
    json_decref(cluster);
    return rc;
}

mw_status mw_hostfile_tf_configs(const char *path, int base_port, char ***configs_out,
                                 int *ntasks_out, char **cluster_json_out)
{
    const size_t flags = JSON_COMPACT | JSON_PRESERVE_ORDER;
    *configs_out = NULL;
    *ntasks_out = 0;
    if (cluster_json_out)
        *cluster_json_out = NULL;
    if (base_port < 1 || base_port > 65535)
        return mw_err(MW_EINVAL, "base port %d is out of range; expected 1-65535", base_port);

    nodes n = {0};
    char **configs = NULL;
    json_t *cluster = NULL;
    mw_status rc;
    MW_TRY_GOTO(read_hostfile(&n, path), rc, done);
    MW_TRY_GOTO(cluster_json(&cluster, &n, path, base_port), rc, done);
    configs = calloc((size_t)n.ntasks, sizeof *configs);
    if (!configs)
        goto oom;
    for (int i = 0; i < n.ntasks; i++) {
        json_t *root =
            json_pack("{sOs{sssi}}", "cluster", cluster, "task", "type", "worker", "index", i);
        if (!root)
            goto oom;
        configs[i] = json_dumps(root, flags);
        json_decref(root);
        if (!configs[i])
            goto oom;
    }
    if (cluster_json_out) {
        *cluster_json_out = json_dumps(cluster, flags);
        if (!*cluster_json_out)
            goto oom;
    }
    *configs_out = configs;
    *ntasks_out = n.ntasks;
    configs = NULL;
    rc = MW_OK;
    goto done;
oom:
    rc = mw_err(MW_ENOMEM, "%s: out of memory", path);
done:
    mw_hostfile_configs_free(configs, n.ntasks);
    json_decref(cluster);
    nodes_free(&n);
    return rc;
}

mw_status mw_hostfile_parse_task(const char *spec, int *index)
{
    char q[QUOTE_MAX * 4 + 16];
    const char *colon = strchr(spec, ':');
    quote(q, sizeof q, spec, strlen(spec));
    if (!colon)
        return mw_err(MW_EINVAL, "--task %s has no ':'; expected worker:N (N from 0)", q);
    size_t jlen = (size_t)(colon - spec);
    if (jlen == 2 && strncmp(spec, "ps", 2) == 0)
        return mw_err(MW_EINVAL,
                      "--task %s: parameter servers (\"ps\") are not supported; "
                      "expected worker:N (every hostfile slot is a worker)",
                      q);
    if (jlen != 6 || strncmp(spec, "worker", 6) != 0)
        return mw_err(MW_EINVAL,
                      "--task %s: unknown job %.*s; expected worker:N (every "
                      "hostfile slot is a worker; worker 0 is the chief)",
                      q, (int)(jlen > QUOTE_MAX ? QUOTE_MAX : jlen), spec);
    const char *d = colon + 1;
    if (*d == '\0')
        return mw_err(MW_EINVAL, "--task %s has no index after ':'; expected worker:N (N from 0)",
                      q);
    if (*d == '-')
        return mw_err(MW_EINVAL, "--task %s: the index is negative; expected worker:N (N from 0)",
                      q);
    long v = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9')
            return mw_err(MW_EINVAL,
                          "--task %s: the index is not a number; expected worker:N "
                          "(N from 0)",
                          q);
        if (v <= MW_HOSTFILE_MAX_TASKS)
            v = v * 10 + (*d - '0');
    }
    if (v >= MW_HOSTFILE_MAX_TASKS)
        return mw_err(MW_EINVAL,
                      "--task %s: the index is too large; expected worker:N (N below "
                      "%d)",
                      q, MW_HOSTFILE_MAX_TASKS);
    *index = (int)v;
    return MW_OK;
}

mw_status mw_hostfile_print(FILE *f, const char *path, int base_port, int task)
{
    char **configs;
    int n;
    MW_TRY(mw_hostfile_tf_configs(path, base_port, &configs, &n, NULL));
    mw_status rc = MW_OK;
    if (task >= n) {
        if (n == 1)
            rc =
                mw_err(MW_EINVAL, "--task worker:%d: %s has 1 slot; expected worker:0", task, path);
        else
            rc = mw_err(MW_EINVAL,
                        "--task worker:%d: %s has %d slots; expected worker:0 to "
                        "worker:%d",
                        task, path, n, n - 1);
    } else if (task >= 0) {
        fprintf(f, "%s\n", configs[task]);
    } else {
        for (int i = 0; i < n; i++)
            fprintf(f, "worker:%d %s\n", i, configs[i]);
    }
    mw_hostfile_configs_free(configs, n);
    return rc;
}
