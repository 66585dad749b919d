#!/usr/bin/env bash
# --timeline FILE on the CPU: every training rank writes a Chrome trace (tests/mpi/
# check_timeline.py: valid JSON, the rank's own track, timestamps that never decrease, B/E
# events that nest, and every step with forward/backward, all-reduce and update). Asserted:
#   - 2 ranks on one node: FILE.rank0.json and FILE.rank1.json (the rank before the extension),
#     with the intra-node all-reduce's two halves, the data assembly, the chief's checkpoint
#     and each epoch's evaluation; the same training as without the flag (bitwise weights);
#   - %r in FILE is the rank; 2 fake nodes with --allreduce hierarchical show the inter-node
#     ring;
#   - one rank writes FILE as given; a FILE in a missing directory is one error, exit 2;
#   - the chief's epoch line names a straggler: rank 2 of 3 made slow (MW_FAULT=slow:2:300,
#     300 ms more per step) is named, with its median step, in every epoch line.
#   test_timeline.sh MWTRAIN CMP_WEIGHTS
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1 cmp=$2
src=${MW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
check_tl=$src/tests/mpi/check_timeline.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset TF_CONFIG MW_FAULT
quick=(--epochs 2 --steps-per-epoch 4 --test-examples 200 --progress none --summary-dir ""
       --checkpoint-every-epochs 1 --collective-timeout 60)

# 2 ranks, one node: the hierarchical all-reduce (auto)
timeout 120 mpiexec -n 2 "$mw" train "${quick[@]}" --checkpoint-dir "$tmp/ck1" \
    --timeline "$tmp/tl.json" --dump-weights "$tmp/tl.bin" >"$tmp/tl.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]]' "2 ranks with --timeline train: $(tail -n 3 "$tmp/tl.out")"
check '[[ ! -e $tmp/tl.json ]]' "several ranks: no file without the rank in its name"
for r in 0 1; do
    extra=(data "all-reduce (intra-node reduce-scatter)" "all-reduce (intra-node all-gather)")
    check 'python3 "$check_tl" 8 "$tmp/tl.rank$r.json" $r "${extra[@]}"' \
        "rank $r's timeline: $(python3 "$check_tl" 8 "$tmp/tl.rank$r.json" $r "${extra[@]}" 2>&1 |
            tail -n 5)"
    check '[[ $(grep -c "\"name\": \"evaluate\", \"cat\": \"evaluate\", \"ph\": \"B\"" \
              "$tmp/tl.rank$r.json") -eq 2 ]]' "rank $r: the two evaluations"
done
# the chief's checkpoints after epochs 1 and 2, between the steps
check '[[ $(grep -c "\"name\": \"checkpoint\", .*\"ph\": \"B\".*\"step\": -1}" \
          "$tmp/tl.rank0.json") -eq 2 && $(grep -c "\"checkpoint\"" "$tmp/tl.rank1.json") -eq 0 ]]' \
    "the chief's two checkpoints, on its track only"

check 'grep -q "\"name\": \"rank 1 (worker 1, " "$tmp/tl.rank1.json"' "rank 1's track is named"
timeout 120 mpiexec -n 2 "$mw" train "${quick[@]}" --checkpoint-dir "$tmp/ck2" \
    --dump-weights "$tmp/plain.bin" >"$tmp/plain.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && "$cmp" "$tmp/plain.bin" "$tmp/tl.bin" 0 >/dev/null' \
    "the timeline changes nothing in the training: $("$cmp" "$tmp/plain.bin" "$tmp/tl.bin" 0)"

# %r, and two fake nodes: the inter-node ring of the hierarchical all-reduce
two='{"cluster":{"worker":["node-a:2222","node-b:2222"]},"task":{"type":"worker","index":0}}'
timeout 120 mpiexec -n 2 -x TF_CONFIG="$two" "$mw" train "${quick[@]}" --checkpoint-dir "$tmp/ck3" \
    --allreduce hierarchical --timeline "$tmp/nodes-%r.trace" >"$tmp/nodes.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]]' "2 fake nodes with --timeline train: $(tail -n 3 "$tmp/nodes.out")"
for r in 0 1; do
    check 'python3 "$check_tl" 8 "$tmp/nodes-$r.trace" $r "all-reduce (inter-node ring)"' \
        "fake node $r: $(python3 "$check_tl" 8 "$tmp/nodes-$r.trace" $r \
            "all-reduce (inter-node ring)" 2>&1 | tail -n 5)"
done

# one rank: FILE itself; a missing directory: one error
timeout 120 "$mw" train "${quick[@]}" --epochs 1 --checkpoint-dir "$tmp/ck4" \
    --timeline "$tmp/one.json" >"$tmp/one.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && python3 "$check_tl" 4 "$tmp/one.json" 0 data >/dev/null' \
    "one rank writes FILE: $(python3 "$check_tl" 4 "$tmp/one.json" 0 data 2>&1 | tail -n 3)"
out=$(timeout 60 "$mw" train "${quick[@]}" --timeline "$tmp/no/such/dir/tl.json" 2>&1)
rc=$?
check '[[ $rc -eq 2 ]] && grep -q "^mwtrain: error: --timeline.*no/such/dir" <<<"$out"' \
    "a missing directory: $out"

# a straggler: 300 ms more per step on rank 2 of 3 (a step computes in well under 100 ms,
# more on a loaded machine, where the other ranks then run faster while rank 2 sleeps)
timeout 120 mpiexec -n 3 -x MW_FAULT=slow:2:300 "$mw" train "${quick[@]}" --threads 1 \
    --checkpoint-dir "$tmp/ck5" >"$tmp/slow.out" 2>&1
rc=$?
re="^Epoch [12], .*Images/s: [0-9]*, straggler: rank 2's median step \(without the all-reduce\) "
re+="[0-9.]+ ms, [0-9]+% slower than the median rank's [0-9.]+ ms$"
check '[[ $rc -eq 0 && $(grep -Ec "$re" "$tmp/slow.out") -eq 2 ]]' \
    "the straggler is named: $(grep "^Epoch" "$tmp/slow.out")"
ms=$(sed -n "s/^Epoch 1, .*rank 2's median step (without the all-reduce) \([0-9]*\).*/\1/p" \
    "$tmp/slow.out")
check '[[ -n $ms && $ms -ge 300 ]]' "its median step holds the 300 ms: ${ms:-none} ms"
finish
