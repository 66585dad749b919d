#!/bin/sh
# Build the TF_CONFIG fuzz target with clang and run a short, bounded libFuzzer session.
#
#   tests/fuzz/run.sh [SECONDS]      (default 20; FUZZ_RUNS caps the executions, default 2000000)
#
# Works without meson: one clang command line over the parser and common/status.c. New inputs
# go to a scratch corpus, so the seed corpus in tests/fuzz/corpus/tfconfig stays as committed.
# Exits non-zero when the build fails or the fuzzer finds a crash, leak, timeout or failed
# invariant; the reproducer is then left in the output directory (FUZZ_OUT, or a temporary one,
# removed after a clean run).
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SECONDS_MAX=${1:-20}
RUNS=${FUZZ_RUNS:-2000000}
OUT=${FUZZ_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/mwfuzz-XXXXXX")}
CLANG=${CLANG:-}
if [ -z "$CLANG" ]; then
    for c in clang-14 clang; do
        if command -v "$c" >/dev/null 2>&1; then CLANG=$c; break; fi
    done
fi
[ -n "$CLANG" ] || { echo "run.sh: clang not found (set CLANG=...)" >&2; exit 2; }

mkdir -p "$OUT/corpus"
"$CLANG" -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$ROOT" "$ROOT/tests/fuzz/fuzz_tfconfig.c" "$ROOT/cluster/tfconfig.c" \
    "$ROOT/common/status.c" -ljansson -o "$OUT/fuzz_tfconfig"

# Tokens that reach the validator's branches quickly.
cat > "$OUT/tfconfig.dict" <<'DICT'
"\"cluster\""
"\"task\""
"\"type\""
"\"index\""
"\"chief\""
"\"worker\""
"\"evaluator\""
"\"ps\""
"\"environment\""
"\"rpc_layer\""
"\"master\""
":2222"
":65535"
":65536"
":0"
"[::1]"
"localhost"
"\\u0000"
"null"
"true"
"1e999"
DICT

echo "run.sh: fuzzing for at most ${SECONDS_MAX}s / ${RUNS} runs in $OUT"
set +e
"$OUT/fuzz_tfconfig" -max_total_time="$SECONDS_MAX" -runs="$RUNS" -max_len=4096 -timeout=10 \
    -rss_limit_mb=2048 -dict="$OUT/tfconfig.dict" -artifact_prefix="$OUT/" \
    -print_final_stats=1 "$OUT/corpus" "$ROOT/tests/fuzz/corpus/tfconfig"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
    echo "run.sh: fuzzer failed (exit $rc); reproducers in $OUT:" >&2
    ls "$OUT" | grep -E '^(crash|leak|timeout|oom)-' >&2 || true
    exit 1
fi
echo "run.sh: no crash"
[ -n "${FUZZ_OUT:-}" ] || rm -rf "$OUT"
