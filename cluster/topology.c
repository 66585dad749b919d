/* Rank <-> task resolution, nodes, communicators and agreeing on failure; see topology.h.
 *
 * mw_topology_resolve runs in agreed steps. After each step that can fail differently on
 * different ranks, mw_agree (one MPI_Allreduce, plus a broadcast only on failure) makes every
 * rank take the same branch, so no rank ever waits in a collective that a failed rank skipped:
 *
 *   1. each rank reads and validates its own TF_CONFIG                         -> agree
 *   2. allgather (has TF_CONFIG, claimed task, cluster hash); all ranks must
 *      have a TF_CONFIG or none, and the same cluster                           -> agree
 *   3. map ranks to tasks (mw_topology_assign, the same on every rank)         -> agree
 *   4. nodes and local ranks, then the four communicators (MPI_Comm_split)
 *
 * Steps 3 and 4 compute the whole table on every rank from allgathered data, so every rank
 * holds the same table and can print it. */
#include "cluster/topology.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cluster/comm.h"
#include "common/watchdog.h"

/* Messages crossing ranks: the size of common/status.c's message slot. */
#define AGREE_MSG 1024
/* Items listed in one message before "... (N in all)". */
#define LIST_MAX 6

/* Allgathered per rank in step 2. */
enum { I_FOUND, I_CLAIM, I_NTASKS, I_HASH_LO, I_HASH_HI, I_COUNT };

const char *mw_topo_mode_name(mw_topo_mode mode)
{
    switch (mode) {
    case MW_TOPO_MPI:
        return "mpi";
    case MW_TOPO_SHARED:
        return "shared";
    case MW_TOPO_PER_RANK:
        return "per-rank";
    }
    return "?";
}

static mw_status mpi_check(int rc, const char *what)
{
    if (rc == MPI_SUCCESS)
        return MW_OK;
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    MPI_Error_string(rc, s, &n);
    return mw_err(MW_EMPI, "%s failed: %s", what, s);
}

/* Set-up collectives under the deadline (mw_comm_timeout): the broadcasts and gathers are
 * polled; a communicator split cannot be, so the watchdog guards it. */
static mw_status bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    mw_wait_ctx w = {"topology broadcast", -1, mw_comm_timeout()};
    return mw_comm_bcast(&w, buf, count, type, root, comm);
}

static mw_status allgather(const void *mine, void *all, int count, MPI_Datatype type)
{
    mw_wait_ctx w = {"topology all-gather", -1, mw_comm_timeout()};
    return mw_comm_allgather(&w, mine, all, count, type, MPI_COMM_WORLD);
}

static mw_status split(int color, int key, MPI_Comm *out, const char *what)
{
    mw_watchdog_arm(what, mw_comm_timeout());
    mw_status rc = mpi_check(MPI_Comm_split(MPI_COMM_WORLD, color, key, out), what);
    mw_watchdog_disarm();
    return rc;
}

/* ---- a bounded string builder for messages ----------------------------------------------- */

typedef struct {
    char buf[AGREE_MSG];
    size_t len;
} sb;

static void sb_add(sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_add(sb *s, const char *fmt, ...)
{
    if (s->len >= sizeof s->buf - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(s->buf + s->len, sizeof s->buf - s->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        s->len += (size_t)n < sizeof s->buf - s->len ? (size_t)n : sizeof s->buf - s->len - 1;
}

/* "rank 3" / "ranks 0 and 2" / "ranks 0, 1 and 5" / "ranks 0, 1, ... (9 in all)". */
static void sb_ranks(sb *s, const int *v, int count)
{
    sb_add(s, count == 1 ? "rank " : "ranks ");
    for (int i = 0; i < count; i++) {
        if (i == LIST_MAX && count > LIST_MAX + 1) {
            sb_add(s, ", ... (%d in all)", count);
            return;
        }
        sb_add(s, "%s%d", i == 0 ? "" : i == count - 1 ? " and " : ", ", v[i]);
    }
}

/* "worker[2] (c:2222)" */
static void sb_task(sb *s, const mw_tfconfig *c, int task)
{
    char name[64], addr[300];
    mw_task_name(&c->tasks[task], name, sizeof name);
    mw_task_addr(&c->tasks[task], addr, sizeof addr);
    sb_add(s, "%s (%s)", name, addr);
}

/* "chief + 2 workers + evaluator" */
static void sb_jobs(sb *s, const int *njob)
{
    const char *sep = "";
    if (njob[MW_JOB_CHIEF]) {
        sb_add(s, "chief");
        sep = " + ";
    }
    if (njob[MW_JOB_WORKER]) {
        sb_add(s, "%s%d worker%s", sep, njob[MW_JOB_WORKER], njob[MW_JOB_WORKER] == 1 ? "" : "s");
        sep = " + ";
    }
    if (njob[MW_JOB_EVALUATOR])
        sb_add(s, "%sevaluator", sep);
}

void mw_topology_jobs(const int *njob, char *buf, size_t n)
{
    sb s = {.len = 0};
    s.buf[0] = '\0';
    sb_jobs(&s, njob);
    snprintf(buf, n, "%s", s.buf);
}

/* Re-record this rank's message as "rank N: message" (when the world has several ranks). */
static void prefix_rank(int rank, int size)
{
    if (size <= 1 || mw_err_status() == MW_OK)
        return;
    char m[AGREE_MSG];
    mw_status s = mw_err_status();
    snprintf(m, sizeof m, "%s", mw_err_msg());
    mw_err_clear();
    mw_err(s, "rank %d: %s", rank, m);
}

/* ---- pure parts ---------------------------------------------------------------------------- */

/* Shared TF_CONFIG and a world of another size: the message naming what is left over. */
static mw_status shared_mismatch(const mw_tfconfig *c, int world_size)
{
    const int nt = c->ntasks;
    sb s = {.len = 0};
    s.buf[0] = '\0';
    /* One environment: rank r would take task r; name what is left over. */
    sb_add(&s, "MPI started %d rank%s but TF_CONFIG lists %d task%s (", world_size,
           world_size == 1 ? "" : "s", nt, nt == 1 ? "" : "s");
    sb_jobs(&s, c->njob);
    sb_add(&s, "): ");
    if (world_size < nt) {
        int left = nt - world_size;
        sb_add(&s, "task%s ", left == 1 ? "" : "s");
        for (int i = 0; i < left; i++) {
            if (i == LIST_MAX && left > LIST_MAX + 1) {
                sb_add(&s, ", ... (%d in all)", left);
                break;
            }
            sb_add(&s, "%s", i == 0 ? "" : i == left - 1 ? " and " : ", ");
            sb_task(&s, c, world_size + i);
        }
        sb_add(&s, " %s no rank", left == 1 ? "has" : "have");
    } else {
        int left = world_size - nt, v[LIST_MAX + 2] = {0};
        for (int i = 0; i < left && i < LIST_MAX + 2; i++)
            v[i] = nt + i;
        sb_ranks(&s, v, left);
        sb_add(&s, " %s no task", left == 1 ? "has" : "have");
    }
    sb_add(&s, "; expected one rank per task (mpiexec -n %d)", nt);
    return mw_err(MW_ECONFIG, "%s", s.buf);
}

/* Per-rank TF_CONFIGs that do not claim every task once (count[i]: the ranks claiming task i,
 * ndup tasks claimed twice or more, nfree claimed by none; who: scratch for world_size ranks):
 * the message naming the first duplicates and the unclaimed tasks. */
static mw_status per_rank_mismatch(const mw_tfconfig *c, const int *claims, int world_size,
                                   const int *count, int ndup, int nfree, int *who)
{
    const int nt = c->ntasks;
    sb s = {.len = 0};
    s.buf[0] = '\0';
    if (world_size != nt) {
        sb_add(&s, "MPI started %d rank%s but TF_CONFIG lists %d task%s (", world_size,
               world_size == 1 ? "" : "s", nt, nt == 1 ? "" : "s");
        sb_jobs(&s, c->njob);
        sb_add(&s, ")");
    } else {
        sb_add(&s, "the ranks' TF_CONFIG \"task\" fields do not name every task exactly once");
    }
    int shown = 0;
    for (int i = 0; i < nt && shown < 3; i++) {
        if (count[i] < 2)
            continue;
        int k = 0;
        for (int r = 0; r < world_size; r++)
            if (claims[r] == i)
                who[k++] = r;
        sb_add(&s, "%s", shown == 0 ? ": " : "; ");
        sb_ranks(&s, who, k);
        sb_add(&s, " %s claim ", k == 2 ? "both" : "all");
        sb_task(&s, c, i);
        shown++;
    }
    if (ndup > shown)
        sb_add(&s, "; and %d more task%s claimed twice", ndup - shown,
               ndup - shown == 1 ? " is" : "s are");
    if (nfree) {
        sb_add(&s, "%sno rank claims ", shown == 0 ? ": " : "; ");
        int k = 0;
        for (int i = 0; i < nt; i++) {
            if (count[i] != 0)
                continue;
            if (k == LIST_MAX && nfree > LIST_MAX + 1) {
                sb_add(&s, ", ... (%d in all)", nfree);
                break;
            }
            sb_add(&s, "%s", k == 0 ? "" : k == nfree - 1 ? " or " : ", ");
            sb_task(&s, c, i);
            k++;
        }
    }
    sb_add(&s, "; expected one rank per task, each naming its own task (or the same TF_CONFIG on "
               "every rank)");
    if (world_size != nt)
        sb_add(&s, " and mpiexec -n %d", nt);
    return mw_err(MW_ECONFIG, "%s", s.buf);
}

mw_status mw_topology_assign(const mw_tfconfig *c, const int *claims, int world_size,
                             int *task_of_rank, mw_topo_mode *mode)
{
    int nt = c->ntasks, shared = 1;
    for (int r = 0; r < world_size; r++) {
        if (claims[r] < 0 || claims[r] >= nt)
            return mw_err(MW_EINTERNAL, "rank %d claims task %d of %d", r, claims[r], nt);
        shared &= claims[r] == claims[0];
    }
    *mode = shared ? MW_TOPO_SHARED : MW_TOPO_PER_RANK;
    if (shared && world_size != nt)
        return shared_mismatch(c, world_size);
    if (shared) {
        for (int r = 0; r < world_size; r++)
            task_of_rank[r] = r;
        return MW_OK;
    }
    /* One TF_CONFIG per rank: every task claimed exactly once. */
    int *count = calloc((size_t)nt, sizeof *count);
    int *who = malloc((size_t)(world_size > 0 ? world_size : 1) * sizeof *who);
    if (!count || !who) {
        free(count);
        free(who);
        return mw_err(MW_ENOMEM, "out of memory for %d ranks", world_size);
    }
    int ndup = 0, nfree = 0;
    for (int r = 0; r < world_size; r++)
        count[claims[r]]++;
    for (int i = 0; i < nt; i++) {
        ndup += count[i] > 1;
        nfree += count[i] == 0;
    }
    mw_status rc = MW_OK;
    if (world_size == nt && ndup == 0 && nfree == 0)
        for (int r = 0; r < world_size; r++)
            task_of_rank[r] = claims[r];
    else
        rc = per_rank_mismatch(c, claims, world_size, count, ndup, nfree, who);
    free(count);
    free(who);
    return rc;
}

typedef struct {
    const char *host;
    int idx;
} host_key;

static int host_cmp(const void *a, const void *b)
{
    const host_key *x = a, *y = b;
    int c = strcasecmp(x->host, y->host);
    if (c)
        return c;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static int int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

mw_status mw_topology_nodes(const char *const *hosts, int n, int ntrain, int *node, int *local_rank,
                            int *nnodes)
{
    *nnodes = 0;
    if (n <= 0)
        return MW_OK;
    host_key *k = malloc((size_t)n * sizeof *k);
    int *first = malloc((size_t)n * sizeof *first); /* per group: its smallest task */
    int *group = malloc((size_t)n * sizeof *group); /* per task: its group */
    int *sorted = malloc((size_t)n * sizeof *sorted);
    if (!k || !first || !group || !sorted) {
        free(k);
        free(first);
        free(group);
        free(sorted);
        return mw_err(MW_ENOMEM, "out of memory grouping %d hosts", n);
    }
    for (int i = 0; i < n; i++)
        k[i] = (host_key){hosts[i], i};
    qsort(k, (size_t)n, sizeof *k, host_cmp);
    int ng = 0, start = 0;
    for (int i = 0; i < n; i++) {
        if (i == 0 || strcasecmp(k[i].host, k[i - 1].host) != 0) {
            start = i;
            first[ng++] = k[i].idx;
        }
        group[k[i].idx] = ng - 1;
        local_rank[k[i].idx] = i - start;
    }
    /* Number the nodes by their first task: sort the groups' first tasks. */
    memcpy(sorted, first, (size_t)ng * sizeof *sorted);
    qsort(sorted, (size_t)ng, sizeof *sorted, int_cmp);
    for (int i = 0; i < n; i++) {
        const int *p = bsearch(&first[group[i]], sorted, (size_t)ng, sizeof *sorted, int_cmp);
        node[i] = (int)(p - sorted);
    }
    for (int g = 0; g < ng; g++)
        *nnodes += first[g] < ntrain;
    free(k);
    free(first);
    free(group);
    free(sorted);
    return MW_OK;
}

/* ---- resolving ----------------------------------------------------------------------------- */

void mw_topology_init(mw_topology *t)
{
    memset(t, 0, sizeof *t);
    t->world = t->train = t->node_comm = t->cross = MPI_COMM_NULL;
}

static void comm_free(MPI_Comm *c)
{
    int fin = 0;
    MPI_Finalized(&fin);
    if (*c != MPI_COMM_NULL && !fin)
        MPI_Comm_free(c);
    *c = MPI_COMM_NULL;
}

void mw_topology_free(mw_topology *t)
{
    if (t->ranks)
        for (int i = 0; i < t->world_size; i++)
            free(t->ranks[i].host);
    free(t->ranks);
    comm_free(&t->world);
    comm_free(&t->train);
    comm_free(&t->node_comm);
    comm_free(&t->cross);
    mw_topology_init(t);
}

/* The cluster as text, one "name address" line per task, for comparing ranks' clusters. */
static char *canonical(const mw_tfconfig *c, size_t *nbytes)
{
    size_t cap = 64, len = 0;
    for (int i = 0; i < c->ntasks; i++)
        cap += strlen(c->tasks[i].host) + 48;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    for (int i = 0; i < c->ntasks; i++) {
        char name[64], addr[300];
        mw_task_name(&c->tasks[i], name, sizeof name);
        mw_task_addr(&c->tasks[i], addr, sizeof addr);
        len += (size_t)snprintf(s + len, cap - len, "%s %s\n", name, addr);
    }
    s[len] = '\0';
    *nbytes = len;
    return s;
}

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* Line i of a canonical text as "cluster.worker[1] = \"a:1\"", or "nothing" past the end. */
static void canon_line(char *buf, size_t n, const char *text, int i)
{
    const char *p = text;
    for (int k = 0; k < i && p; k++) {
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    if (!p || !*p) {
        snprintf(buf, n, "nothing");
        return;
    }
    const char *sp = strchr(p, ' '), *nl = strchr(p, '\n');
    if (!sp || !nl || sp > nl) {
        snprintf(buf, n, "?");
        return;
    }
    snprintf(buf, n, "cluster.%.*s = \"%.*s\"", (int)(sp - p), p, (int)(nl - sp - 1), sp + 1);
}

/* Step 2: every rank has a TF_CONFIG or none, and all clusters equal rank 0's. The branch taken
 * depends only on allgathered data, so every rank takes the same one (the broadcast inside is
 * safe); only the message about a differing cluster is local to a rank. */
/* TF_CONFIG set on some ranks only (info: each rank's I_FOUND): the message naming both. */
static mw_status found_on_some(const int *info, int ws)
{
    int *with = malloc((size_t)ws * sizeof *with), *without = malloc((size_t)ws * sizeof *with);
    if (!with || !without) {
        free(with);
        free(without);
        return mw_err(MW_ENOMEM, "out of memory for %d ranks", ws);
    }
    int a = 0, b = 0;
    for (int r = 0; r < ws; r++) {
        if (info[r * I_COUNT + I_FOUND])
            with[a++] = r;
        else
            without[b++] = r;
    }
    sb s = {.len = 0};
    sb_add(&s, "TF_CONFIG is set on ");
    sb_ranks(&s, with, a);
    sb_add(&s, " but not on ");
    sb_ranks(&s, without, b);
    sb_add(&s, "; expected it on every rank or on none");
    free(with);
    free(without);
    return mw_err(MW_ECONFIG, "%s", s.buf);
}

static mw_status check_same(const mw_tfconfig *c, const int *info, int ws, int wr)
{
    int nfound = 0;
    for (int r = 0; r < ws; r++)
        nfound += info[r * I_COUNT + I_FOUND] != 0;
    if (nfound != 0 && nfound != ws)
        return found_on_some(info, ws);
    if (nfound == 0)
        return MW_OK;

    int differ = 0;
    for (int r = 1; r < ws; r++)
        for (int k = I_NTASKS; k <= I_HASH_HI; k++)
            differ |= info[r * I_COUNT + k] != info[k];
    if (!differ)
        return MW_OK;

    /* Some cluster differs: send rank 0's text so each differing rank can say where. */
    size_t n = 0;
    char *mine = canonical(c, &n);
    int len = (int)n;
    mw_status rc = MW_OK;
    MW_TRY(bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD));
    char *theirs = malloc((size_t)len + 1);
    if (!theirs || !mine) {
        /* the broadcast still has to happen; receive into a scratch buffer and fail after */
        free(theirs);
        free(mine);
        char *scratch = malloc((size_t)len + 1);
        if (scratch)
            (void)bcast(scratch, len, MPI_CHAR, 0, MPI_COMM_WORLD);
        free(scratch);
        return mw_err(MW_ENOMEM, "out of memory comparing clusters");
    }
    if (wr == 0)
        memcpy(theirs, mine, (size_t)len);
    rc = bcast(theirs, len, MPI_CHAR, 0, MPI_COMM_WORLD);
    theirs[len] = '\0';
    if (rc == MW_OK && strcmp(mine, theirs) != 0) {
        int line = 0;
        const char *a = mine, *b = theirs;
        while (*a && *a == *b) {
            line += *a == '\n';
            a++;
            b++;
        }
        char la[400], lb[400];
        canon_line(la, sizeof la, mine, line);
        canon_line(lb, sizeof lb, theirs, line);
        rc = mw_err(MW_ECONFIG,
                    "rank %d's TF_CONFIG lists a different cluster from rank 0's: "
                    "rank 0 has %s where rank %d has %s; expected the same cluster on every "
                    "rank (only \"task\" may differ)",
                    wr, lb, wr, la);
    }
    free(mine);
    free(theirs);
    return rc;
}

/* Step 3 with a TF_CONFIG: fill the table from the assignment. */
static mw_status table_from_tfconfig(mw_topology *t, const mw_tfconfig *c, const int *task_of_rank)
{
    int n = c->ntasks;
    const char **hosts = malloc((size_t)n * sizeof *hosts);
    int *node = malloc((size_t)n * sizeof *node), *local = malloc((size_t)n * sizeof *local);
    mw_status rc = MW_OK;
    if (!hosts || !node || !local) {
        rc = mw_err(MW_ENOMEM, "out of memory for %d tasks", n);
        goto done;
    }
    for (int i = 0; i < n; i++)
        hosts[i] = c->tasks[i].host;
    MW_TRY_GOTO(mw_topology_nodes(hosts, n, c->ntrain, node, local, &t->nnodes), rc, done);
    for (int r = 0; r < n; r++) {
        int i = task_of_rank[r];
        mw_rank_info *row = &t->ranks[i];
        const mw_task *task = &c->tasks[i];
        row->world_rank = r;
        row->task = i;
        row->job = task->job;
        row->job_index = task->index;
        row->host = strdup(task->host);
        row->port = task->port;
        row->node = node[i];
        row->local_rank = local[i];
        row->is_chief = i == 0;
        if (!row->host) {
            rc = mw_err(MW_ENOMEM, "out of memory");
            goto done;
        }
    }
    t->ntrain = c->ntrain;
    t->rank = task_of_rank[t->world_rank];
done:
    free(hosts);
    free(node);
    free(local);
    return rc;
}

/* Step 3 without a TF_CONFIG: all workers in MPI order; nodes from the shared-memory split.
 * Collective; every call inside is reached by every rank. */
static mw_status table_from_mpi(mw_topology *t)
{
    int ws = t->world_size, wr = t->world_rank, len = 0;
    char name[MPI_MAX_PROCESSOR_NAME];
    memset(name, 0, sizeof name);
    MW_TRY(mpi_check(MPI_Get_processor_name(name, &len), "MPI_Get_processor_name"));
    char *names = calloc((size_t)ws, MPI_MAX_PROCESSOR_NAME);
    int *leader = malloc((size_t)ws * sizeof *leader), *count = calloc((size_t)ws, sizeof *count);
    mw_status rc = MW_OK;
    MPI_Comm shm = MPI_COMM_NULL;
    int lead = wr, nn = 0;
    if (!names || !leader || !count)
        rc = mw_err(MW_ENOMEM, "out of memory for %d ranks", ws);
    MW_TRY_GOTO(mw_agree(MPI_COMM_WORLD, rc, NULL), rc, done);
    MW_TRY_GOTO(allgather(name, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR), rc, done);
    /* Key = world rank, so rank 0 of each shared-memory group is its lowest world rank. */
    mw_watchdog_arm("MPI_Comm_split_type", mw_comm_timeout());
    rc = mpi_check(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, wr, MPI_INFO_NULL, &shm),
        "MPI_Comm_split_type");
    mw_watchdog_disarm();
    MW_TRY_GOTO(rc, rc, done);
    rc = bcast(&lead, 1, MPI_INT, 0, shm);
    MPI_Comm_free(&shm);
    MW_TRY_GOTO(rc, rc, done);
    MW_TRY_GOTO(allgather(&lead, leader, 1, MPI_INT), rc, done);
    for (int r = 0; r < ws; r++) {
        int l = leader[r];
        mw_rank_info *row = &t->ranks[r];
        if (l < 0 || l > r) {
            rc = mw_err(MW_EINTERNAL, "rank %d's shared-memory leader is rank %d", r, l);
            goto done;
        }
        if (l == r)
            t->ranks[r].node = nn++;
        row->node = t->ranks[l].node;
        row->local_rank = count[row->node]++;
        row->world_rank = r;
        row->task = r;
        row->job = MW_JOB_WORKER;
        row->job_index = r;
        names[(size_t)r * MPI_MAX_PROCESSOR_NAME + MPI_MAX_PROCESSOR_NAME - 1] = '\0';
        row->host = strdup(names + (size_t)r * MPI_MAX_PROCESSOR_NAME);
        row->port = 0;
        row->is_chief = r == 0;
        if (!row->host) {
            rc = mw_err(MW_ENOMEM, "out of memory");
            goto done;
        }
    }
    t->nnodes = nn;
    t->ntrain = ws;
    t->rank = wr;
done:
    free(names);
    free(leader);
    free(count);
    return rc;
}

/* Step 4: my own fields and the communicators. */
static mw_status split_comms(mw_topology *t)
{
    const mw_rank_info *me = &t->ranks[t->rank];
    t->task = me->task;
    t->job = me->job;
    t->job_index = me->job_index;
    t->is_chief = me->is_chief;
    t->is_evaluator = me->job == MW_JOB_EVALUATOR;
    t->node = me->node;
    t->local_rank = me->local_rank;
    t->local_size = 0;
    for (int i = 0; i < t->ntrain; i++)
        t->local_size += t->ranks[i].node == me->node;
    if (t->is_evaluator)
        t->local_size = t->local_rank + 1;

    int ev = t->is_evaluator;
    MW_TRY(split(0, t->rank, &t->world, "MPI_Comm_split"));
    MW_TRY(split(ev ? MPI_UNDEFINED : 0, t->rank, &t->train, "MPI_Comm_split (training)"));
    MW_TRY(
        split(ev ? MPI_UNDEFINED : t->node, t->local_rank, &t->node_comm, "MPI_Comm_split (node)"));
    MW_TRY(split(ev ? MPI_UNDEFINED : t->local_rank, t->node, &t->cross,
                 "MPI_Comm_split (cross-node)"));
    return MW_OK;
}

mw_status mw_topology_resolve(mw_topology *t, const char *tf_config_path)
{
    mw_topology_init(t);
    mw_tfconfig cfg;
    mw_tfconfig_init(&cfg);
    int *info = NULL, *claims = NULL, *task_of_rank = NULL;
    mw_status rc = MW_OK;
    int wr = 0, ws = 1, found = 0;
    MW_TRY_GOTO(mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &wr), "MPI_Comm_rank"), rc, fail);
    MW_TRY_GOTO(mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &ws), "MPI_Comm_size"), rc, fail);
    t->world_rank = wr;
    t->world_size = ws;

    /* 1. Each rank reads and validates its own TF_CONFIG. */
    rc = mw_tfconfig_load(&cfg, tf_config_path, &found);
    if (rc != MW_OK)
        prefix_rank(wr, ws);
    MW_TRY_GOTO(mw_agree(MPI_COMM_WORLD, rc, NULL), rc, fail);

    /* 2. The same kind of config everywhere, and the same cluster. */
    int mine[I_COUNT] = {found, -1, 0, 0, 0};
    if (found) {
        size_t n = 0;
        char *text = canonical(&cfg, &n);
        uint64_t h = text ? fnv1a(text, n) : 0;
        if (!text)
            rc = mw_err(MW_ENOMEM, "out of memory hashing the cluster");
        free(text);
        mine[I_CLAIM] = cfg.task;
        mine[I_NTASKS] = cfg.ntasks;
        mine[I_HASH_LO] = (int)(uint32_t)h;
        mine[I_HASH_HI] = (int)(uint32_t)(h >> 32);
    }
    info = malloc((size_t)ws * I_COUNT * sizeof *info);
    claims = malloc((size_t)ws * sizeof *claims);
    task_of_rank = malloc((size_t)ws * sizeof *task_of_rank);
    t->ranks = calloc((size_t)ws, sizeof *t->ranks);
    if (!info || !claims || !task_of_rank || !t->ranks)
        rc = mw_err(MW_ENOMEM, "out of memory for %d ranks", ws);
    MW_TRY_GOTO(mw_agree(MPI_COMM_WORLD, rc, NULL), rc, fail);
    MW_TRY_GOTO(allgather(mine, info, I_COUNT, MPI_INT), rc, fail);
    rc = check_same(&cfg, info, ws, wr);
    MW_TRY_GOTO(mw_agree(MPI_COMM_WORLD, rc, NULL), rc, fail);

    /* 3. Ranks to tasks, and the table. */
    if (found) {
        for (int r = 0; r < ws; r++)
            claims[r] = info[r * I_COUNT + I_CLAIM];
        rc = mw_topology_assign(&cfg, claims, ws, task_of_rank, &t->mode);
        if (rc == MW_OK)
            rc = table_from_tfconfig(t, &cfg, task_of_rank);
    } else {
        t->mode = MW_TOPO_MPI;
        rc = table_from_mpi(t);
    }
    MW_TRY_GOTO(mw_agree(MPI_COMM_WORLD, rc, NULL), rc, fail);

    /* 4. Communicators. */
    rc = split_comms(t);
    MW_TRY_GOTO(mw_agree(MPI_COMM_WORLD, rc, NULL), rc, fail);

    mw_tfconfig_free(&cfg);
    free(info);
    free(claims);
    free(task_of_rank);
    return MW_OK;

fail:
    mw_tfconfig_free(&cfg);
    free(info);
    free(claims);
    free(task_of_rank);
    mw_topology_free(t);
    return rc;
}
