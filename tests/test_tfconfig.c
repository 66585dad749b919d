/* Unit tests for the cluster layer's MPI-free parts: TF_CONFIG parsing and validation
 * (a table of malformed configs read from tests/data/tf_config/<case>/, each with the message
 * it must produce, plus good configs and loading), rank-to-task assignment and node grouping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/tfconfig.h"
#include "cluster/topology.h"
#include "common/status.h"
#include "tests/util.h"

/* A malformed config: MW_ECONFIG (also as the recorded status), a message that starts
 * "TF_CONFIG: ", and nothing left in the struct. The message is for the caller to check. */
static int malformed(void *ctx, const char *name, const char *text, size_t n)
{
    (void)ctx;
    mw_tfconfig c;
    mw_tfconfig_init(&c);
    mw_status rc = mw_tfconfig_parse(&c, text, n, "TF_CONFIG");
    int ok = rc == MW_ECONFIG && mw_err_status() == MW_ECONFIG &&
             strncmp(mw_err_msg(), "TF_CONFIG: ", 11) == 0 && c.tasks == NULL && c.ntasks == 0;
    if (!ok)
        fprintf(stderr, "case %s: got %s, %d tasks; want MW_ECONFIG, \"TF_CONFIG: ...\", none\n",
                name, mw_status_str(rc), c.ntasks);
    mw_tfconfig_free(&c);
    return ok;
}

/* Parse text, expect a malformed config whose message contains `want`; print both when not. */
static int fails_with(const char *name, const char *text, size_t n, const char *want)
{
    return mw_test_case_check(name, malformed, NULL, text, n, want);
}

/* Every tests/data/tf_config/<case>/input.json fails with its `expected` substring. */
static void test_malformed_table(void **state)
{
    (void)state;
    assert_true(mw_test_cases("tests/data/tf_config", malformed, NULL) >= 30);
}

/* Inputs that cannot live in a JSON file or the environment: size, NUL bytes, no terminator. */
static void test_malformed_inline(void **state)
{
    (void)state;
    size_t big = MW_TFCONFIG_MAX_BYTES + 1;
    char *text = malloc(big);
    memset(text, ' ', big);
    text[0] = '{';
    text[big - 1] = '}';
    assert_true(fails_with("too_large", text, big, "1048577 bytes; expected at most 1048576"));
    free(text);

    static const char nul[] = "{\"cluster\": {\"worker\": [\"a:1\"]}\0, \"task\": {}}";
    assert_true(fails_with("raw_nul", nul, sizeof nul - 1, "invalid JSON at"));

    /* Only nbytes are read: the valid prefix followed by garbage past nbytes parses. */
    static const char ok[] =
        "{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}"
        "GARBAGE";
    mw_tfconfig c;
    mw_tfconfig_init(&c);
    mw_err_clear();
    assert_int_equal(mw_tfconfig_parse(&c, ok, sizeof ok - 1 - 7, NULL), MW_OK);
    assert_int_equal(c.ntasks, 1);
    mw_tfconfig_free(&c);
    assert_true(fails_with("garbage", ok, sizeof ok - 1, "trailing text"));
    /* A message quoting odd bytes escapes them. */
    static const char ctl[] = "{\"cluster\": {\"worker\": [\"a\\u0001b\"]}}";
    assert_true(fails_with("control", ctl, sizeof ctl - 1, "\"a\\x01b\" has no port"));
    /* Long user text is shortened in messages. */
    char longkey[400];
    snprintf(longkey, sizeof longkey, "{\"%0300d\": 1}", 0);
    assert_true(fails_with("long_key", longkey, strlen(longkey), "000...\"; expected only"));
}

static mw_tfconfig parse_ok(const char *text)
{
    mw_tfconfig c;
    mw_tfconfig_init(&c);
    mw_err_clear();
    mw_status rc = mw_tfconfig_parse(&c, text, strlen(text), "TF_CONFIG");
    if (rc != MW_OK)
        fail_msg("parse failed: %s", mw_err_msg());
    return c;
}

static void expect_task(const mw_tfconfig *c, int i, mw_job job, int index, const char *host,
                        int port)
{
    assert_true(i < c->ntasks);
    assert_int_equal(c->tasks[i].job, job);
    assert_int_equal(c->tasks[i].index, index);
    assert_string_equal(c->tasks[i].host, host);
    assert_int_equal(c->tasks[i].port, port);
}

static void test_chief_and_workers(void **state)
{
    (void)state;
    /* The evaluator is listed first and the task before the cluster: order comes from TF's
     * rules, not from the text. */
    mw_tfconfig c = parse_ok(
        "{\"task\": {\"index\": 1, \"type\": \"worker\"},\n"
        " \"cluster\": {\"evaluator\": [\"e:7\"], \"worker\": [\"w0:2222\", \"w1:2222\"],\n"
        "             \"chief\": [\"c:2222\"]}}");
    assert_int_equal(c.ntasks, 4);
    assert_int_equal(c.ntrain, 3);
    assert_int_equal(c.njob[MW_JOB_CHIEF], 1);
    assert_int_equal(c.njob[MW_JOB_WORKER], 2);
    assert_int_equal(c.njob[MW_JOB_EVALUATOR], 1);
    expect_task(&c, 0, MW_JOB_CHIEF, 0, "c", 2222);
    expect_task(&c, 1, MW_JOB_WORKER, 0, "w0", 2222);
    expect_task(&c, 2, MW_JOB_WORKER, 1, "w1", 2222);
    expect_task(&c, 3, MW_JOB_EVALUATOR, 0, "e", 7);
    assert_int_equal(c.task_job, MW_JOB_WORKER);
    assert_int_equal(c.task_index, 1);
    assert_int_equal(c.task, 2);
    assert_int_equal(mw_tfconfig_find(&c, MW_JOB_EVALUATOR, 0), 3);
    assert_int_equal(mw_tfconfig_find(&c, MW_JOB_WORKER, 2), -1);
    char buf[64];
    mw_task_name(&c.tasks[3], buf, sizeof buf);
    assert_string_equal(buf, "evaluator[0]");
    mw_task_addr(&c.tasks[1], buf, sizeof buf);
    assert_string_equal(buf, "w0:2222");
    mw_tfconfig_free(&c);
    mw_tfconfig_free(&c); /* free is idempotent */
    assert_null(c.tasks);
}

static void test_workers_only(void **state)
{
    (void)state;
    mw_tfconfig c = parse_ok("{\"cluster\": {\"worker\": [\"localhost:1\", \"localhost:65535\", "
                             "\"10.0.0.1:2222\"]}, \"task\": {\"type\": \"worker\", "
                             "\"index\": 2}}");
    assert_int_equal(c.ntasks, 3);
    assert_int_equal(c.ntrain, 3);
    expect_task(&c, 1, MW_JOB_WORKER, 1, "localhost", 65535);
    expect_task(&c, 2, MW_JOB_WORKER, 2, "10.0.0.1", 2222);
    assert_int_equal(c.task, 2);
    /* parsing again into the same struct frees what it held */
    mw_err_clear();
    static const char again[] = "{\"cluster\": {\"chief\": [\"x:1\"]}, \"task\": {\"type\": "
                                "\"chief\", \"index\": 0}}";
    assert_int_equal(mw_tfconfig_parse(&c, again, strlen(again), NULL), MW_OK);
    assert_int_equal(c.ntasks, 1);
    assert_int_equal(c.task, 0);
    mw_tfconfig_free(&c);
}

static void test_evaluator(void **state)
{
    (void)state;
    mw_tfconfig c = parse_ok("{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"], \"evaluator\": "
                             "[\"a:2\"]}, \"task\": {\"type\": \"evaluator\", \"index\": 0}}");
    assert_int_equal(c.ntasks, 3);
    assert_int_equal(c.ntrain, 2);
    expect_task(&c, 2, MW_JOB_EVALUATOR, 0, "a", 2);
    assert_int_equal(c.task, 2);
    mw_tfconfig_free(&c);
}

static void test_ipv6(void **state)
{
    (void)state;
    mw_tfconfig c = parse_ok("{\"cluster\": {\"chief\": [\"[::1]:2222\"], \"worker\": "
                             "[\"[fe80::1%eth0]:2223\", \"[::1]:2223\"]}, \"task\": {\"type\": "
                             "\"chief\", \"index\": 0}}");
    expect_task(&c, 0, MW_JOB_CHIEF, 0, "::1", 2222);
    expect_task(&c, 1, MW_JOB_WORKER, 0, "fe80::1%eth0", 2223);
    char buf[64];
    mw_task_addr(&c.tasks[0], buf, sizeof buf);
    assert_string_equal(buf, "[::1]:2222");
    mw_tfconfig_free(&c);
    /* the same address in two spellings of case is still the same address */
    static const char v6dup[] = "{\"cluster\": {\"worker\": [\"[FE80::1]:1\", \"[fe80::1]:1\"]}}";
    assert_true(fails_with("v6dup", v6dup, strlen(v6dup),
                           "cluster.worker[1]: address "
                           "\"[fe80::1]:1\" is also used by cluster.worker[0]"));
}

static void test_ignored_keys(void **state)
{
    (void)state;
    /* TensorFlow's "environment" and "rpc_layer" are accepted whatever their value. */
    mw_tfconfig c = parse_ok("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": "
                             "\"worker\", \"index\": 0}, \"environment\": \"cloud\", "
                             "\"rpc_layer\": \"grpc\"}");
    assert_int_equal(c.ntasks, 1);
    mw_tfconfig_free(&c);
    c = parse_ok("{\"environment\": {\"x\": [1, 2]}, \"rpc_layer\": null, \"cluster\": "
                 "{\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 0}}");
    assert_int_equal(c.ntasks, 1);
    mw_tfconfig_free(&c);
}

/* Many tasks: the duplicate check must not be quadratic, and must find the earliest repeat. */
static void test_many_tasks(void **state)
{
    (void)state;
    int n = 20000;
    size_t cap = (size_t)n * 24 + 128, len = 0;
    char *t = malloc(cap);
    len += (size_t)snprintf(t + len, cap - len, "{\"cluster\": {\"worker\": [");
    for (int i = 0; i < n; i++)
        len +=
            (size_t)snprintf(t + len, cap - len, "%s\"h%d:%d\"", i ? ", " : "", i % 97, 1000 + i);
    len += (size_t)snprintf(t + len, cap - len,
                            "]}, \"task\": {\"type\": \"worker\", \"index\": 19999}}");
    mw_tfconfig c;
    mw_tfconfig_init(&c);
    mw_err_clear();
    assert_int_equal(mw_tfconfig_parse(&c, t, len, NULL), MW_OK);
    assert_int_equal(c.ntasks, n);
    assert_int_equal(c.task, n - 1);
    mw_tfconfig_free(&c);
    /* make worker[15000] repeat worker[5] ("h5:1005") and worker[19000] repeat worker[3] */
    char *p = strstr(t, "\"h62:16000\"");
    assert_non_null(p);
    memcpy(p, "\"h5:1005\"  ", 11);
    p = strstr(t, "\"h85:20000\"");
    assert_non_null(p);
    memcpy(p, "\"H3:1003\"  ", 11);
    assert_true(fails_with("dups", t, len,
                           "cluster.worker[15000]: address \"h5:1005\" is also "
                           "used by cluster.worker[5]"));
    free(t);
}

static void test_load(void **state)
{
    const char *dir = *state;
    mw_tfconfig c;
    mw_tfconfig_init(&c);
    int found = -1;
    mw_err_clear();
    unsetenv("TF_CONFIG");
    assert_int_equal(mw_tfconfig_load(&c, NULL, &found), MW_OK);
    assert_int_equal(found, 0);
    assert_int_equal(c.ntasks, 0);

    setenv("TF_CONFIG",
           "{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}, \"task\": {\"type\": "
           "\"worker\", \"index\": 1}}",
           1);
    assert_int_equal(mw_tfconfig_load(&c, NULL, &found), MW_OK);
    assert_int_equal(found, 1);
    assert_int_equal(c.ntasks, 2);
    assert_int_equal(c.task, 1);

    setenv("TF_CONFIG", "", 1);
    expect_err(mw_tfconfig_load(&c, NULL, &found), MW_ECONFIG,
               "TF_CONFIG: empty; expected a JSON object");
    assert_int_equal(found, 1);
    assert_int_equal(c.ntasks, 0);
    mw_err_clear();

    /* A path wins over the environment, and names itself in messages. */
    static const char good[] = "{\"cluster\": {\"chief\": [\"c:1\"]}, \"task\": {\"type\": "
                               "\"chief\", \"index\": 0}}\n";
    char *path = mw_test_write_file(dir, "good.json", good, sizeof good - 1);
    assert_int_equal(mw_tfconfig_load(&c, path, &found), MW_OK);
    assert_int_equal(found, 1);
    assert_int_equal(c.ntasks, 1);
    assert_int_equal(c.tasks[0].job, MW_JOB_CHIEF);
    free(path);

    static const char bad[] = "{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": "
                              "\"worker\", \"index\": 4}}";
    path = mw_test_write_file(dir, "bad.json", bad, sizeof bad - 1);
    assert_int_equal(mw_tfconfig_load(&c, path, &found), MW_ECONFIG);
    char want[4200];
    snprintf(want, sizeof want,
             "%s: task.index: 4 is out of range; expected 0 (cluster.worker has 1 task)", path);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    free(path);

    char missing[4200];
    snprintf(missing, sizeof missing, "%s/none.json", dir);
    found = -1;
    expect_err(mw_tfconfig_load(&c, missing, &found), MW_EIO,
               "none.json: cannot open: No such file or directory");
    assert_int_equal(found, 0);
    mw_err_clear();

    expect_err(mw_tfconfig_load(&c, dir, &found), MW_EIO,
               "is a directory, not a regular file; expected a readable TF_CONFIG JSON file");
    mw_err_clear();

    /* a file over the cap: the message states the file's size, also past what is read (a sparse
     * 1 GiB file once said 2097152 bytes, the bytes read before reading stopped) */
    char *huge = malloc(MW_TFCONFIG_MAX_BYTES + 10);
    memset(huge, ' ', MW_TFCONFIG_MAX_BYTES + 10);
    path = mw_test_write_file(dir, "huge.json", huge, MW_TFCONFIG_MAX_BYTES + 10);
    assert_int_equal(mw_tfconfig_load(&c, path, &found), MW_ECONFIG);
    expect_contains(mw_err_msg(), ": 1048586 bytes; expected at most 1048576 (1 MiB)");
    mw_err_clear();
    assert_int_equal(truncate(path, (off_t)1 << 30), 0);
    assert_int_equal(mw_tfconfig_load(&c, path, &found), MW_ECONFIG);
    snprintf(want, sizeof want, "%s: 1073741824 bytes; expected at most 1048576 (1 MiB)", path);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    free(huge);
    free(path);
    unsetenv("TF_CONFIG");
    mw_tfconfig_free(&c);
}

/* ---- rank <-> task assignment ------------------------------------------------------------ */

/* chief c:1, workers a:1 a:2 b:1, evaluator e:1: tasks 0..4 */
static mw_tfconfig five_tasks(void)
{
    return parse_ok("{\"cluster\": {\"chief\": [\"c:1\"], \"worker\": [\"a:1\", \"a:2\", "
                    "\"b:1\"], \"evaluator\": [\"e:1\"]}, \"task\": {\"type\": \"chief\", "
                    "\"index\": 0}}");
}

static void expect_assign_fails(const mw_tfconfig *c, const int *claims, int n, const char *want)
{
    int tor[16];
    mw_topo_mode mode;
    mw_err_clear();
    expect_err(mw_topology_assign(c, claims, n, tor, &mode), MW_ECONFIG, want);
    mw_err_clear();
}

static void test_assign(void **state)
{
    (void)state;
    mw_tfconfig c = five_tasks();
    int tor[16];
    mw_topo_mode mode;

    /* one environment: everyone claims the same task; rank r takes task r */
    int same[5] = {1, 1, 1, 1, 1};
    assert_int_equal(mw_topology_assign(&c, same, 5, tor, &mode), MW_OK);
    assert_int_equal(mode, MW_TOPO_SHARED);
    for (int r = 0; r < 5; r++)
        assert_int_equal(tor[r], r);

    /* per rank, reversed */
    int rev[5] = {4, 3, 2, 1, 0};
    assert_int_equal(mw_topology_assign(&c, rev, 5, tor, &mode), MW_OK);
    assert_int_equal(mode, MW_TOPO_PER_RANK);
    for (int r = 0; r < 5; r++)
        assert_int_equal(tor[r], 4 - r);

    expect_assign_fails(&c, same, 3,
                        "MPI started 3 ranks but TF_CONFIG lists 5 tasks (chief + 3 workers + "
                        "evaluator): tasks worker[2] (b:1) and evaluator[0] (e:1) have no rank; "
                        "expected one rank per task (mpiexec -n 5)");
    int same7[7] = {0, 0, 0, 0, 0, 0, 0};
    expect_assign_fails(&c, same7, 7,
                        "MPI started 7 ranks but TF_CONFIG lists 5 tasks (chief + 3 "
                        "workers + evaluator): ranks 5 and 6 have no task");
    int dup[5] = {0, 1, 1, 3, 4};
    expect_assign_fails(&c, dup, 5,
                        "the ranks' TF_CONFIG \"task\" fields do not name every task exactly "
                        "once: ranks 1 and 2 both claim worker[0] (a:1); no rank claims "
                        "worker[1] (a:2); expected one rank per task");
    int small[2] = {0, 2};
    expect_assign_fails(&c, small, 2,
                        "MPI started 2 ranks but TF_CONFIG lists 5 tasks (chief + 3 workers + "
                        "evaluator): no rank claims worker[0] (a:1), worker[2] (b:1) or "
                        "evaluator[0] (e:1); expected one rank per task, each naming its own task "
                        "(or the same TF_CONFIG on every rank) and mpiexec -n 5");
    int large[6] = {0, 1, 2, 3, 4, 0};
    expect_assign_fails(&c, large, 6,
                        "MPI started 6 ranks but TF_CONFIG lists 5 tasks (chief + 3 "
                        "workers + evaluator): ranks 0 and 5 both claim chief[0] "
                        "(c:1); expected");
    int three[5] = {2, 2, 2, 0, 1};
    expect_assign_fails(&c, three, 5,
                        "ranks 0, 1 and 2 all claim worker[1] (a:2); no rank claims "
                        "worker[2] (b:1) or evaluator[0] (e:1)");
    mw_tfconfig_free(&c);

    /* a one-task cluster on one rank */
    c = parse_ok("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": \"worker\", "
                 "\"index\": 0}}");
    int one[1] = {0};
    assert_int_equal(mw_topology_assign(&c, one, 1, tor, &mode), MW_OK);
    assert_int_equal(mode, MW_TOPO_SHARED);
    assert_int_equal(tor[0], 0);
    /* long lists are cut */
    int ten[10] = {0};
    expect_assign_fails(&c, ten, 10,
                        "MPI started 10 ranks but TF_CONFIG lists 1 task (1 "
                        "worker): ranks 1, 2, 3, 4, 5, 6, ... (9 in all) have no "
                        "task; expected one rank per task (mpiexec -n 1)");
    mw_tfconfig_free(&c);
}

static void test_nodes(void **state)
{
    (void)state;
    int node[8], local[8], nn = -1;
    /* interleaved hosts, case-insensitive; evaluator alone on its own host */
    const char *h1[] = {"node-a", "node-b", "NODE-A", "node-b", "eval"};
    assert_int_equal(mw_topology_nodes(h1, 5, 4, node, local, &nn), MW_OK);
    assert_int_equal(nn, 2);
    int n1[] = {0, 1, 0, 1, 2}, l1[] = {0, 0, 1, 1, 0};
    assert_memory_equal(node, n1, sizeof n1);
    assert_memory_equal(local, l1, sizeof l1);
    /* evaluator shares a training host: it comes after that node's training tasks */
    const char *h2[] = {"b", "a", "a", "b"};
    assert_int_equal(mw_topology_nodes(h2, 4, 3, node, local, &nn), MW_OK);
    assert_int_equal(nn, 2);
    int n2[] = {0, 1, 1, 0}, l2[] = {0, 0, 1, 1};
    assert_memory_equal(node, n2, sizeof n2);
    assert_memory_equal(local, l2, sizeof l2);
    /* one host */
    const char *h3[] = {"x", "x", "x"};
    assert_int_equal(mw_topology_nodes(h3, 3, 3, node, local, &nn), MW_OK);
    assert_int_equal(nn, 1);
    int n3[] = {0, 0, 0}, l3[] = {0, 1, 2};
    assert_memory_equal(node, n3, sizeof n3);
    assert_memory_equal(local, l3, sizeof l3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malformed_table),
        cmocka_unit_test(test_malformed_inline),
        cmocka_unit_test(test_chief_and_workers),
        cmocka_unit_test(test_workers_only),
        cmocka_unit_test(test_evaluator),
        cmocka_unit_test(test_ipv6),
        cmocka_unit_test(test_ignored_keys),
        cmocka_unit_test(test_many_tasks),
        mw_test_in_tmpdir(test_load),
        cmocka_unit_test(test_assign),
        cmocka_unit_test(test_nodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
