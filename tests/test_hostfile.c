/* Unit tests for cluster/hostfile: Open MPI hostfiles to TF_CONFIG. Good hostfiles (comments,
 * spacing around '=', merged hosts, IPv6, CRLF) must give the exact JSON, and every config must
 * parse back with mw_tfconfig_parse into the same cluster; a table of bad hostfiles must each
 * fail with a message naming the file, the line and what was expected; and the --task spec
 * and the `mwtrain tf-config` printer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/hostfile.h"
#include "cluster/tfconfig.h"
#include "common/status.h"
#include "tests/util.h"

static const char *dir; /* one for the group; the tests name their files apart */

static int group_setup(void **state)
{
    int rc = mw_test_tmpdir_setup(state);
    dir = *state;
    return rc;
}

static char *write_hostfile(const char *name, const char *text, size_t nbytes)
{
    return mw_test_write_file(dir, name, text, nbytes);
}

/* Parse every config back; check it names task i and that all share one cluster. */
static void check_parses(char **configs, int n, const char *const *addrs)
{
    for (int i = 0; i < n; i++) {
        mw_tfconfig c;
        mw_tfconfig_init(&c);
        mw_err_clear();
        mw_status rc = mw_tfconfig_parse(&c, configs[i], strlen(configs[i]), "generated");
        if (rc != MW_OK)
            fail_msg("config %d does not parse: %s\n  %s", i, mw_err_msg(), configs[i]);
        assert_int_equal(c.ntasks, n);
        assert_int_equal(c.njob[MW_JOB_WORKER], n);
        assert_int_equal(c.task_job, MW_JOB_WORKER);
        assert_int_equal(c.task_index, i);
        for (int t = 0; t < n; t++) {
            char addr[300];
            mw_task_addr(&c.tasks[t], addr, sizeof addr);
            assert_string_equal(addr, addrs[t]);
        }
        mw_tfconfig_free(&c);
    }
}

static void test_good(void **state)
{
    (void)state;
    const char text[] = "# two nodes\n"
                        "\n"
                        "node-a slots=2   # trailing comment\n"
                        "  node-b slots = 2 max_slots=4\r\n"
                        "admin@node-c\n"
                        "\tNODE-A slots=1\n" /* merged into node-a's line */
                        "node-d max_slots= 3 slots =1";
    char *path = write_hostfile("good", text, sizeof text - 1);
    char **configs = NULL, *cluster = NULL;
    int n = -1;
    mw_err_clear();
    mw_status rc = mw_hostfile_tf_configs(path, 2222, &configs, &n, &cluster);
    if (rc != MW_OK)
        fail_msg("%s", mw_err_msg());
    assert_int_equal(n, 7);
    static const char *const addrs[] = {"node-a:2222", "node-a:2223", "node-a:2224", "node-b:2222",
                                        "node-b:2223", "node-c:2222", "node-d:2222"};
    const char *want_cluster = "{\"worker\":[\"node-a:2222\",\"node-a:2223\",\"node-a:2224\","
                               "\"node-b:2222\",\"node-b:2223\",\"node-c:2222\",\"node-d:2222\"]}";
    assert_string_equal(cluster, want_cluster);
    char want[512];
    snprintf(want, sizeof want, "{\"cluster\":%s,\"task\":{\"type\":\"worker\",\"index\":0}}",
             want_cluster);
    assert_string_equal(configs[0], want);
    snprintf(want, sizeof want, "{\"cluster\":%s,\"task\":{\"type\":\"worker\",\"index\":6}}",
             want_cluster);
    assert_string_equal(configs[6], want);
    check_parses(configs, n, addrs);
    mw_hostfile_configs_free(configs, n);
    free(cluster);
    free(path);
}

static void test_ipv6_and_port(void **state)
{
    (void)state;
    const char text[] = "::1 slots=2\n10.0.0.7\n";
    char *path = write_hostfile("v6", text, sizeof text - 1);
    char **configs = NULL;
    int n = 0;
    assert_int_equal(mw_hostfile_tf_configs(path, 40000, &configs, &n, NULL), MW_OK);
    static const char *const addrs[] = {"[::1]:40000", "[::1]:40001", "10.0.0.7:40000"};
    assert_int_equal(n, 3);
    check_parses(configs, n, addrs);
    mw_hostfile_configs_free(configs, n);

    /* the last port a host can have is 65535 */
    const char two[] = "node-a slots=2\n";
    char *p2 = write_hostfile("ports", two, sizeof two - 1);
    assert_int_equal(mw_hostfile_tf_configs(p2, 65534, &configs, &n, NULL), MW_OK);
    mw_hostfile_configs_free(configs, n);
    mw_err_clear();
    expect_err(mw_hostfile_tf_configs(p2, 65535, &configs, &n, NULL), MW_ECONFIG,
               "ports 65535-65536 pass 65535; expected a base port "
               "at most 65534");
    assert_null(configs);
    assert_int_equal(n, 0);
    mw_err_clear();
    expect_err(mw_hostfile_tf_configs(p2, 0, &configs, &n, NULL), MW_EINVAL,
               "base port 0 is out of range; expected 1-65535");
    mw_err_clear();
    free(path);
    free(p2);
}

typedef struct {
    const char *name;
    const char *text;
    size_t nbytes;    /* 0: strlen(text) */
    const char *want; /* after "<path>" */
} bad_case;

static const bad_case bad_cases[] = {
    {"empty", "", 0,
     ": no hosts (only blank lines and comments); expected lines "
     "\"host [slots=N] [max_slots=N]\""},
    {"comments-only", "# nothing\n\n   # here\n", 0, ": no hosts"},
    {"slots-nan", "node-a slots=x\n", 0,
     ":1: slots=\"x\" is not a number; expected slots=N with N a positive integer"},
    {"slots-zero", "node-a slots=0\n", 0, ":1: slots=\"0\" is zero; expected slots=N"},
    {"slots-negative", "node-a slots=-2\n", 0, ":1: slots=\"-2\" is negative"},
    {"slots-huge", "node-a slots=99999999999999999999\n", 0,
     ":1: slots=\"99999999999999999999\" is too large; expected slots=N with N at most 65536"},
    {"slots-no-equals", "node-a slots\n", 0,
     ":1: slots has no '=value'; expected slots=N with N a positive integer"},
    {"slots-no-value", "node-a slots=\n", 0,
     ":1: slots= has no value; expected slots=N with N a positive integer"},
    {"max-slots-nan", "node-a max_slots=many\n", 0, ":1: max_slots=\"many\" is not a number"},
    {"unknown-key", "node-a cpus=4\n", 0,
     ":1: unknown setting \"cpus\"; expected slots=N or max_slots=N"},
    {"two-hosts", "node-a node-b\n", 0,
     ":1: unexpected \"node-b\" after the host; expected \"host [slots=N] [max_slots=N]\", one "
     "host per line"},
    {"bare-count", "node-a 4\n", 0, ":1: unexpected \"4\" after the host"},
    {"starts-with-equals", "=node-a\n", 0, ":1: the line starts with '='"},
    {"equals-no-key", "node-a slots=2 = 3\n", 0, ":1: '=' without a setting name before it"},
    {"twice", "node-a slots=2 slots=3\n", 0,
     ":1: slots is given twice; expected it at most once per line"},
    {"max-below-slots", "node-a slots=4 max_slots=2\n", 0,
     ":1: max_slots=2 is less than slots=4; expected max_slots >= slots"},
    {"slash", "node/a\n", 0,
     ":1: host \"node/a\" contains '/'; expected a host name or IP "
     "address"},
    {"brackets", "[::1] slots=2\n", 0, ":1: host \"[::1]\" contains a bracket"},
    {"quote", "\"node-a\"\n", 0, ":1: host \"\\\"node-a\\\"\" contains a quote"},
    {"control", "node\001a\n", 0, ":1: host \"node\\x01a\" contains a control character"},
    {"mpich-style", "node-a:4\n", 0,
     ":1: host \"node-a:4\" contains ':' but is not an IPv6 address; expected \"host "
     "[slots=N] [max_slots=N]\" (\"host:N\" is MPICH's and Intel MPI's format, not Open MPI's)"},
    {"empty-user-host", "root@ slots=2\n", 0, ":1: \"root@\" has an empty host name"},
    {"later-line", "node-a slots=2\n# ok\n\nnode-b slots=two\n", 0,
     ":4: slots=\"two\" is not a number"},
    {"nul", "node-a\0 slots=2\n", 15, ":1: contains a NUL byte; expected a text hostfile"},
    {"not-utf8", "node-\xff\n", 0, ": host \"node-\\xff\" is not valid UTF-8"},
    {"too-many-slots", "node-a slots=65536\nnode-b\n", 0,
     ":2: the hostfile has more than 65536 slots in all"},
};

static void test_bad_table(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        size_t nb = c->nbytes ? c->nbytes : strlen(c->text);
        char *path = write_hostfile(c->name, c->text, nb);
        char want[1024];
        snprintf(want, sizeof want, "%s%s", path, c->want);
        char **configs = (char **)1, *cluster = (char *)1;
        int n = -1;
        mw_err_clear();
        mw_status rc = mw_hostfile_tf_configs(path, 2222, &configs, &n, &cluster);
        int ok = rc == MW_ECONFIG && strncmp(mw_err_msg(), want, strlen(want)) == 0 && !configs &&
                 !cluster && n == 0;
        if (!ok) {
            fprintf(stderr, "case %s: got %s \"%s\"\n  want MW_ECONFIG \"%s...\"\n", c->name,
                    mw_status_str(rc), mw_err_msg(), want);
            bad++;
        }
        mw_err_clear();
        free(path);
    }
    assert_int_equal(bad, 0);

    /* a host name longer than RFC 1035 allows */
    char text[300];
    memset(text, 'h', 256);
    strcpy(text + 256, " slots=2\n");
    char *path = write_hostfile("long-host", text, strlen(text));
    char **configs;
    int n;
    mw_err_clear();
    assert_int_equal(mw_hostfile_tf_configs(path, 2222, &configs, &n, NULL), MW_ECONFIG);
    char want[1200];
    snprintf(want, sizeof want, "%s:1: the host name is 256 bytes; expected at most 255", path);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
    free(path);
}

static void test_missing_file(void **state)
{
    (void)state;
    char path[1100];
    snprintf(path, sizeof path, "%s/does-not-exist", dir);
    char **configs;
    int n;
    mw_err_clear();
    assert_int_equal(mw_hostfile_tf_configs(path, 2222, &configs, &n, NULL), MW_EIO);
    char want[1200];
    snprintf(want, sizeof want,
             "%s: cannot open: No such file or directory; expected a readable "
             "Open MPI hostfile",
             path);
    assert_string_equal(mw_err_msg(), want);
    mw_err_clear();
}

static void test_parse_task(void **state)
{
    (void)state;
    int idx = -1;
    assert_int_equal(mw_hostfile_parse_task("worker:0", &idx), MW_OK);
    assert_int_equal(idx, 0);
    assert_int_equal(mw_hostfile_parse_task("worker:17", &idx), MW_OK);
    assert_int_equal(idx, 17);
    static const struct {
        const char *spec, *want;
    } bad[] = {
        {"ps:0", "--task \"ps:0\": parameter servers (\"ps\") are not supported; expected "
                 "worker:N"},
        {"chief:0", "--task \"chief:0\": unknown job chief; expected worker:N (every hostfile "
                    "slot is a worker; worker 0 is the chief)"},
        {"worker:x", "--task \"worker:x\": the index is not a number; expected worker:N (N from "
                     "0)"},
        {"worker:1x", "--task \"worker:1x\": the index is not a number"},
        {"worker:-1", "--task \"worker:-1\": the index is negative; expected worker:N (N from 0)"},
        {"worker:", "--task \"worker:\" has no index after ':'"},
        {"worker", "--task \"worker\" has no ':'; expected worker:N (N from 0)"},
        {"1", "--task \"1\" has no ':'"},
        {"worker:99999999999", "--task \"worker:99999999999\": the index is too large"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mw_err_clear();
        idx = -7;
        mw_status rc = mw_hostfile_parse_task(bad[i].spec, &idx);
        if (rc != MW_EINVAL || strncmp(mw_err_msg(), bad[i].want, strlen(bad[i].want)) != 0 ||
            idx != -7)
            fail_msg("spec \"%s\": got %s \"%s\"\n  want MW_EINVAL \"%s...\"", bad[i].spec,
                     mw_status_str(rc), mw_err_msg(), bad[i].want);
    }
    mw_err_clear();
}

/* Run mw_hostfile_print into memory; returns the owned text. */
static char *print_to_string(const char *path, int task, mw_status *rc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    *rc = mw_hostfile_print(f, path, 2222, task);
    fclose(f);
    return buf;
}

static void test_print(void **state)
{
    (void)state;
    const char text[] = "node-a slots=1\nnode-b slots=1\n";
    char *path = write_hostfile("print", text, sizeof text - 1);
    const char *cl = "{\"cluster\":{\"worker\":[\"node-a:2222\",\"node-b:2222\"]},";
    char want[512];
    mw_status rc;
    char *out = print_to_string(path, -1, &rc);
    assert_int_equal(rc, MW_OK);
    snprintf(want, sizeof want,
             "worker:0 %s\"task\":{\"type\":\"worker\",\"index\":0}}\n"
             "worker:1 %s\"task\":{\"type\":\"worker\",\"index\":1}}\n",
             cl, cl);
    assert_string_equal(out, want);
    free(out);

    out = print_to_string(path, 1, &rc);
    assert_int_equal(rc, MW_OK);
    snprintf(want, sizeof want, "%s\"task\":{\"type\":\"worker\",\"index\":1}}\n", cl);
    assert_string_equal(out, want);
    free(out);

    mw_err_clear();
    out = print_to_string(path, 2, &rc);
    assert_int_equal(rc, MW_EINVAL);
    assert_string_equal(out, "");
    snprintf(want, sizeof want, "--task worker:2: %s has 2 slots; expected worker:0 to worker:1",
             path);
    assert_string_equal(mw_err_msg(), want);
    free(out);
    mw_err_clear();
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),       cmocka_unit_test(test_ipv6_and_port),
        cmocka_unit_test(test_bad_table),  cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_parse_task), cmocka_unit_test(test_print),
    };
    return cmocka_run_group_tests(tests, group_setup, mw_test_tmpdir_teardown);
}
