#!/bin/sh
# Multi-rank tests of the cluster layer (suite 'mpi'): run tests/mpi/topo_driver under mpiexec
# with 2 and 4 ranks in each launch mode and assert the resolved table, or, for bad configs,
# the one error message, printed once, and that every rank exited non-zero within 10 s and is
# gone.
#
#   run_topo.sh DRIVER CASE      (CASE "list" prints the cases; "all" runs them all)
#
# MPIEXEC names the launcher (default mpiexec); MW_SRCDIR the source root (default: from this
# script's path). The driver itself checks every rank's communicators against the table.
set -u

DRIVER=${1:?usage: run_topo.sh DRIVER CASE}
CASE=${2:?usage: run_topo.sh DRIVER CASE}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=${MW_SRCDIR:-$(cd "$HERE/../.." && pwd)}
MPIEXEC=${MPIEXEC:-mpiexec}
WRAP="sh $HERE/per_rank_env.sh"
# the Open MPI environment, read as tests/lib.sh reads it (a POSIX shell cannot source lib.sh)
set -a
. "$HERE/../openmpi.env"
set +a
unset TF_CONFIG

WORK=$(mktemp -d "${TMPDIR:-/tmp}/mwtopo-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
FAILS=0
SUB=

fail() {
    echo "FAIL [$CASE${SUB:+ $SUB}]: $*" >&2
    FAILS=$((FAILS + 1))
}

# Whether a process is alive. A zombie has exited: in a container whose init does not reap,
# ranks orphaned by mpiexec stay zombies, so kill -0 alone would call them running.
running() {
    kill -0 "$1" 2>/dev/null || return 1
    state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
    [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

# launch NP CMD...: run under mpiexec with a 10 s limit; sets RC and CODES (each rank's exit
# code, in world order) and checks that every rank reported and none is still running.
launch() {
    np=$1
    shift
    rm -rf "$WORK/exit"
    mkdir "$WORK/exit"
    MW_TEST_EXIT_DIR=$WORK/exit timeout -k 5 10 "$MPIEXEC" -n "$np" "$@" \
        >"$WORK/out" 2>"$WORK/err" </dev/null
    RC=$?
    CODES=
    if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then
        fail "mpiexec -n $np did not finish within 10 s"
        return
    fi
    for r in $(seq 0 $((np - 1))); do
        f=$WORK/exit/rank$r
        if [ ! -s "$f" ]; then
            fail "rank $r did not report its exit code"
            CODES="$CODES ?"
            continue
        fi
        read -r code pid <"$f"
        CODES="$CODES $code"
        if running "$pid"; then
            sleep 1
            if running "$pid"; then
                fail "rank $r (pid $pid) is still running after mpiexec returned"
            fi
        fi
    done
}

# Squeeze spaces and write the MPI processor name (this host) as HOST.
normalize() {
    awk -v h="$(hostname)" '{ if (NF >= 4 && $4 == h) $4 = "HOST"; $1 = $1; print }' "$1"
}

# expect_ok NP EXPECTED CMD...: success on every rank and exactly this output on rank 0.
expect_ok() {
    np=$1
    want=$2
    shift 2
    launch "$np" "$@"
    [ "$RC" -eq 0 ] || fail "mpiexec exited $RC; stderr: $(cat "$WORK/err")"
    for c in $CODES; do
        [ "$c" = 0 ] || fail "a rank exited $c (codes:$CODES)"
    done
    printf '%s\n' "$want" >"$WORK/want"
    normalize "$WORK/out" >"$WORK/got"
    if ! cmp -s "$WORK/want" "$WORK/got"; then
        fail "output differs (- want, + got):"
        diff -u "$WORK/want" "$WORK/got" | tail -n +3 >&2
    fi
}

# expect_fail NP MESSAGE CMD...: every rank exits 2 (configuration error; WANT_CODE=N for
# another code), mpiexec fails, and rank 0 alone printed one "error:" line that contains MESSAGE.
expect_fail() {
    np=$1
    want=$2
    shift 2
    launch "$np" "$@"
    # (with orte_abort_on_non_zero_status=0 mpiexec exits 0 whatever the ranks did; the
    # per-rank codes below are what counts)
    if [ "${OMPI_MCA_orte_abort_on_non_zero_status:-1}" != 0 ]; then
        [ "$RC" -ne 0 ] || fail "mpiexec exited 0"
    fi
    for c in $CODES; do
        [ "$c" = "${WANT_CODE:-2}" ] ||
            fail "a rank exited $c, expected ${WANT_CODE:-2} (codes:$CODES)"
    done
    nerr=$(grep -c '^error: ' "$WORK/err")
    [ "$nerr" -eq 1 ] || fail "$nerr error lines, expected 1: $(cat "$WORK/err")"
    if ! grep '^error: ' "$WORK/err" | grep -qF -- "$want"; then
        fail "message: $(grep '^error: ' "$WORK/err")
    expected it to contain: $want"
    fi
    [ ! -s "$WORK/out" ] || fail "unexpected output on stdout: $(cat "$WORK/out")"
}

# rank_cfg RANK CLUSTER TYPE INDEX: rank RANK's TF_CONFIG for per_rank_env.sh.
rank_cfg() {
    mkdir -p "$WORK/cfg"
    printf '{"cluster": %s, "task": {"type": "%s", "index": %s}}' "$2" "$3" "$4" \
        >"$WORK/cfg/rank$1.json"
}

one_env() {
    TF_CONFIG=$(printf '{"cluster": %s, "task": {"type": "%s", "index": %s}}' "$1" "$2" "$3")
    export TF_CONFIG
}

HDR="rank world task host node local_rank role"
FOUR='{"worker": ["a:1", "b:1", "c:1", "d:1"]}'
NODES='{"chief": ["node-a:2222"], "worker": ["node-a:2223", "node-b:2222", "node-b:2223"]}'

run_case() {
    rm -rf "$WORK/cfg"
    unset TF_CONFIG
    case $1 in
    one-env-2)
        one_env '{"worker": ["a:2222", "b:2222"]}' worker 0
        expect_ok 2 "cluster: 2 ranks (2 workers) on 2 nodes; TF_CONFIG, one environment
$HDR
0 0 worker[0] a 0 0 chief
1 1 worker[1] b 1 0 worker" "$DRIVER"
        ;;
    one-env-4)
        one_env '{"evaluator": ["localhost:2225"], "chief": ["localhost:2222"],
                  "worker": ["localhost:2223", "localhost:2224"]}' evaluator 0
        expect_ok 4 "cluster: 4 ranks (chief + 2 workers + evaluator) on 1 node; TF_CONFIG, one environment
$HDR
0 0 chief[0] localhost 0 0 chief
1 1 worker[0] localhost 0 1 worker
2 2 worker[1] localhost 0 2 worker
3 3 evaluator[0] localhost 0 3 evaluator" "$DRIVER"
        ;;
    per-rank-2)
        # reversed: world rank 0 is the worker, world rank 1 the chief
        rank_cfg 0 '{"chief": ["c:1"], "worker": ["w:1"]}' worker 0
        rank_cfg 1 '{"chief": ["c:1"], "worker": ["w:1"]}' chief 0
        expect_ok 2 "cluster: 2 ranks (chief + 1 worker) on 2 nodes; TF_CONFIG, one per rank
$HDR
0 1 chief[0] c 0 0 chief
1 0 worker[0] w 1 0 worker" $WRAP "$WORK/cfg" "$DRIVER"
        ;;
    per-rank-4)
        cl='{"chief": ["h0:1"], "worker": ["h1:1", "h1:2"], "evaluator": ["ev:1"]}'
        rank_cfg 0 "$cl" chief 0
        rank_cfg 1 "$cl" worker 0
        rank_cfg 2 "$cl" worker 1
        rank_cfg 3 "$cl" evaluator 0
        expect_ok 4 "cluster: 4 ranks (chief + 2 workers + evaluator) on 3 nodes; TF_CONFIG, one per rank
$HDR
0 0 chief[0] h0 0 0 chief
1 1 worker[0] h1 1 0 worker
2 2 worker[1] h1 1 1 worker
3 3 evaluator[0] ev 2 0 evaluator" $WRAP "$WORK/cfg" "$DRIVER"
        ;;
    per-rank-reversed-4)
        # the fake 2-node layout, one TF_CONFIG per rank, world ranks in reverse task order
        cl='{"worker": ["node-a:2222", "node-a:2223", "node-b:2222", "node-b:2223"]}'
        for r in 0 1 2 3; do rank_cfg $r "$cl" worker $((3 - r)); done
        expect_ok 4 "cluster: 4 ranks (4 workers) on 2 nodes; TF_CONFIG, one per rank
$HDR
0 3 worker[0] node-a 0 0 chief
1 2 worker[1] node-a 0 1 worker
2 1 worker[2] node-b 1 0 worker
3 0 worker[3] node-b 1 1 worker" $WRAP "$WORK/cfg" "$DRIVER"
        ;;
    no-tfconfig-2)
        expect_ok 2 "cluster: 2 ranks (2 workers) on 1 node; no TF_CONFIG: all workers from MPI
$HDR
0 0 worker[0] HOST 0 0 chief
1 1 worker[1] HOST 0 1 worker" "$DRIVER"
        ;;
    no-tfconfig-4)
        expect_ok 4 "cluster: 4 ranks (4 workers) on 1 node; no TF_CONFIG: all workers from MPI
$HDR
0 0 worker[0] HOST 0 0 chief
1 1 worker[1] HOST 0 1 worker
2 2 worker[2] HOST 0 2 worker
3 3 worker[3] HOST 0 3 worker" "$DRIVER"
        ;;
    two-nodes-4)
        one_env "$NODES" worker 2
        expect_ok 4 "cluster: 4 ranks (chief + 3 workers) on 2 nodes; TF_CONFIG, one environment
$HDR
0 0 chief[0] node-a 0 0 chief
1 1 worker[0] node-a 0 1 worker
2 2 worker[1] node-b 1 0 worker
3 3 worker[2] node-b 1 1 worker" "$DRIVER"
        ;;
    two-nodes-json-4)
        # hosts interleaved (a b a b) and differently cased: cross-node groups are {0,1}, {2,3}
        one_env '{"worker": ["node-a:1", "node-b:1", "NODE-A:2", "node-b:2"]}' worker 0
        expect_ok 4 '{
"mode": "shared",
"world_size": 4,
"ntrain": 4,
"nnodes": 2,
"chief": 0,
"jobs": {"chief": 0, "worker": 4, "evaluator": 0},
"ranks": [
{"rank": 0, "world_rank": 0, "task": "worker[0]", "job": "worker", "index": 0, "host": "node-a", "port": 1, "node": 0, "local_rank": 0, "role": "chief"},
{"rank": 1, "world_rank": 1, "task": "worker[1]", "job": "worker", "index": 1, "host": "node-b", "port": 1, "node": 1, "local_rank": 0, "role": "worker"},
{"rank": 2, "world_rank": 2, "task": "worker[2]", "job": "worker", "index": 2, "host": "NODE-A", "port": 2, "node": 0, "local_rank": 1, "role": "worker"},
{"rank": 3, "world_rank": 3, "task": "worker[3]", "job": "worker", "index": 3, "host": "node-b", "port": 2, "node": 1, "local_rank": 1, "role": "worker"}
]
}' "$DRIVER" --json
        ;;
    tf-config-file-2)
        # --tf-config wins over the environment
        one_env '{"worker": ["x:1"]}' worker 0
        printf '{"cluster": {"chief": ["c:1"], "worker": ["w:1"]}, "task": {"type": "chief", "index": 0}}\n' \
            >"$WORK/tf.json"
        expect_ok 2 "cluster: 2 ranks (chief + 1 worker) on 2 nodes; TF_CONFIG, one environment
$HDR
0 0 chief[0] c 0 0 chief
1 1 worker[0] w 1 0 worker" "$DRIVER" --tf-config "$WORK/tf.json"
        ;;
    mismatch-duplicate-4)
        rank_cfg 0 "$FOUR" worker 0
        rank_cfg 1 "$FOUR" worker 0
        rank_cfg 2 "$FOUR" worker 1
        rank_cfg 3 "$FOUR" worker 2
        expect_fail 4 "error: the ranks' TF_CONFIG \"task\" fields do not name every task exactly "\
"once: ranks 0 and 1 both claim worker[0] (a:1); no rank claims worker[3] "\
"(d:1); expected one rank per task" \
            $WRAP "$WORK/cfg" "$DRIVER"
        ;;
    mismatch-world-small-2)
        one_env "$FOUR" worker 0
        expect_fail 2 "error: MPI started 2 ranks but TF_CONFIG lists 4 tasks (4 workers): tasks "\
"worker[2] (c:1) and worker[3] (d:1) have no rank; expected one rank per task "\
"(mpiexec -n 4)" \
            "$DRIVER"
        ;;
    mismatch-world-large-4)
        one_env '{"chief": ["c:1"], "worker": ["w:1"]}' chief 0
        expect_fail 4 "error: MPI started 4 ranks but TF_CONFIG lists 2 tasks (chief + 1 worker): "\
"ranks 2 and 3 have no task; expected one rank per task (mpiexec -n 2)" \
            "$DRIVER"
        ;;
    mismatch-world-small-per-rank-2)
        rank_cfg 0 '{"worker": ["a:1", "b:1", "c:1"]}' worker 0
        rank_cfg 1 '{"worker": ["a:1", "b:1", "c:1"]}' worker 2
        expect_fail 2 "error: MPI started 2 ranks but TF_CONFIG lists 3 tasks (3 workers): no "\
"rank claims worker[1] (b:1); expected one rank per task, each naming its own task "\
"(or the same TF_CONFIG on every rank) and mpiexec -n 3" \
            $WRAP "$WORK/cfg" "$DRIVER"
        ;;
    mismatch-cluster-4)
        rank_cfg 0 "$FOUR" worker 0
        rank_cfg 1 "$FOUR" worker 1
        rank_cfg 2 '{"worker": ["a:1", "x:1", "c:1", "d:1"]}' worker 2
        rank_cfg 3 '{"worker": ["a:1", "b:1", "c:1"]}' worker 2
        expect_fail 4 "error: rank 2's TF_CONFIG lists a different cluster from rank 0's: rank "\
"0 has cluster.worker[1] = \"b:1\" where rank 2 has cluster.worker[1] = \"x:1\"; "\
"expected the same cluster on every rank (only \"task\" may differ)" \
            $WRAP "$WORK/cfg" "$DRIVER"
        ;;
    mismatch-partial-4)
        rank_cfg 0 "$FOUR" worker 0
        rank_cfg 2 "$FOUR" worker 2
        expect_fail 4 "error: TF_CONFIG is set on ranks 0 and 2 but not on ranks 1 and 3; "\
"expected it on every rank or on none" \
            $WRAP "$WORK/cfg" "$DRIVER"
        ;;
    bad-on-some-ranks-4)
        # ranks 1 and 3 are wrong in different ways: the lowest failing rank's message wins
        rank_cfg 0 "$FOUR" worker 0
        rank_cfg 1 '{"worker": ["a:1", "b:0", "c:1", "d:1"]}' worker 1
        rank_cfg 2 "$FOUR" worker 2
        printf '{"cluster": ' >"$WORK/cfg/rank3.json"
        expect_fail 4 'error: rank 1: TF_CONFIG: cluster.worker[1]: "b:0": port "0" is out of '\
'range; expected 1-65535' \
            $WRAP "$WORK/cfg" "$DRIVER"
        ;;
    bad-file-2)
        # a file that cannot be read is an I/O error (exit 4), as for every input
        WANT_CODE=4 expect_fail 2 \
            "error: rank 0: $WORK/none.json: cannot open: No such file or directory" \
            "$DRIVER" --tf-config "$WORK/none.json"
        ;;
    malformed-2)
        # Every malformed config of the unit tests, through the environment of 2 ranks. By
        # default mpiexec kills the job once a rank exits non-zero, which costs it about 2 s per
        # launch; turning that off here keeps the loop fast and shows more: each rank exits
        # non-zero on its own, none is killed by the launcher (checked through the exit files).
        export OMPI_MCA_orte_abort_on_non_zero_status=0
        ncases=0
        for d in "$SRC"/tests/data/tf_config/*/; do
            SUB=$(basename "$d")
            TF_CONFIG=$(cat "$d/input.json")
            export TF_CONFIG
            want=$(cat "$d/expected")
            expect_fail 2 "$want" "$DRIVER"
            grep -q '^error: rank 0: TF_CONFIG: ' "$WORK/err" ||
                fail "message does not start with 'rank 0: TF_CONFIG: ': $(cat "$WORK/err")"
            ncases=$((ncases + 1))
        done
        SUB=
        unset TF_CONFIG OMPI_MCA_orte_abort_on_non_zero_status
        [ "$ncases" -ge 30 ] || fail "only $ncases malformed cases in $SRC/tests/data/tf_config"
        echo "$ncases malformed configs checked under mpiexec -n 2"
        ;;
    *)
        echo "run_topo.sh: unknown case $1" >&2
        exit 2
        ;;
    esac
}

CASES="one-env-2 one-env-4 per-rank-2 per-rank-4 per-rank-reversed-4 no-tfconfig-2
no-tfconfig-4 two-nodes-4 two-nodes-json-4 tf-config-file-2 mismatch-duplicate-4
mismatch-world-small-2 mismatch-world-large-4 mismatch-world-small-per-rank-2
mismatch-cluster-4 mismatch-partial-4 bad-on-some-ranks-4 bad-file-2 malformed-2"

WHAT=$CASE
case $CASE in
list)
    echo $CASES
    exit 0
    ;;
all)
    for c in $CASES; do
        CASE=$c
        run_case "$c"
    done
    ;;
*)
    run_case "$CASE"
    ;;
esac
if [ "$FAILS" -ne 0 ]; then
    echo "run_topo.sh: $WHAT: $FAILS failure(s)" >&2
    exit 1
fi
echo "run_topo.sh: $WHAT: ok"
