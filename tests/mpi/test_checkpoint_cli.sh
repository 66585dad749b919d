#!/usr/bin/env bash
# Checkpoints through the command line: a corrupt latest checkpoint falls back
# to the previous one and says so; all corrupt is one clear error (exit 5); an
# unwritable checkpoint directory fails at start-up (exit 4) and leaves the
# existing checkpoints intact; eval and export need no cluster.
#   test_checkpoint_cli.sh MWTRAIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
quick=(--steps-per-epoch 5 --test-examples 100 --summary-dir "" --progress none)

"$mw" train --epochs 2 --checkpoint-every-epochs 1 --checkpoint-dir "$tmp/ck" "${quick[@]}" \
    >"$tmp/train.out" 2>&1
rc=$?
check '[[ $rc -eq 0 && -f $tmp/ck/ckpt-1 && -f $tmp/ck/ckpt-2 ]]' "two checkpoints written"
check 'grep -qx "model_checkpoint_path: \"ckpt-2\"" "$tmp/ck/checkpoint"' "index names ckpt-2"

"$mw" eval --checkpoint-dir "$tmp/ck" --test-examples 100 >"$tmp/eval.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "^Accuracy after restoring the saved model without strategy: [0-9.]*$" "$tmp/eval.out"' \
    "eval prints the tutorial's line"

# flip one byte in the middle of the newest checkpoint
cp "$tmp/ck/ckpt-1" "$tmp/ckpt-1.orig"
size=$(stat -c %s "$tmp/ck/ckpt-2")
printf '\xff' | dd of="$tmp/ck/ckpt-2" bs=1 seek=$((size / 2)) conv=notrunc status=none
"$mw" eval --checkpoint-dir "$tmp/ck" --test-examples 100 >"$tmp/fallback.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]]' "eval falls back"
check 'grep -q "warning: .*ckpt-2" "$tmp/fallback.out" && grep -q "restoring .*ckpt-1 " "$tmp/fallback.out"' \
    "warns about ckpt-2 and restores ckpt-1"

truncate -s 100 "$tmp/ck/ckpt-1"
"$mw" eval --checkpoint-dir "$tmp/ck" --test-examples 100 >"$tmp/none.out" 2>&1
rc=$?
check '[[ $rc -eq 5 ]]' "all corrupt: exit 5 (got $rc)"
check 'grep -q "mwtrain: error: no valid checkpoint in .*tried: .*ckpt-2.*ckpt-1" "$tmp/none.out"' \
    "all corrupt: one message listing what was tried"

"$mw" eval --checkpoint-dir "$tmp/empty" >"$tmp/empty.out" 2>&1
rc=$?
check '[[ $rc -eq 5 ]] && grep -q "no checkpoint in .*empty" "$tmp/empty.out"' "eval without checkpoints"

# resume with an empty directory starts from scratch (the first start of a restartable job)
"$mw" train --epochs 1 --resume --checkpoint-dir "$tmp/fresh" "${quick[@]}" >"$tmp/fresh.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "no checkpoint in .*fresh yet; starting from scratch" "$tmp/fresh.out"' \
    "--resume on an empty directory starts from scratch"

# unwritable directory: a path below a regular file (root ignores permissions)
cp "$tmp/ckpt-1.orig" "$tmp/ck/ckpt-1"
before=$(cat "$tmp/ck/checkpoint" "$tmp/ck/ckpt-1" | md5sum)
: >"$tmp/file"
start=$(date +%s)
"$mw" train --epochs 1 --checkpoint-dir "$tmp/file/ck" "${quick[@]}" >"$tmp/unwritable.out" 2>&1
rc=$?
check '[[ $rc -eq 4 ]]' "unwritable dir: exit 4 (got $rc)"
check 'grep -q "mwtrain: error: --checkpoint-dir .*file/ck: cannot create" "$tmp/unwritable.out"' \
    "unwritable dir: the message names it"
check '! grep -q "^Epoch" "$tmp/unwritable.out"' "fails before training"
after=$(cat "$tmp/ck/checkpoint" "$tmp/ck/ckpt-1" | md5sum)
check '[[ $before == "$after" ]]' "existing checkpoints intact"

"$mw" export --checkpoint-dir "$tmp/ck" --output "$tmp/w.safetensors" >"$tmp/export.out" 2>&1
rc=$?
check '[[ $rc -eq 0 && -s $tmp/w.safetensors ]]' "export from the restored checkpoint"
"$mw" export --checkpoint-dir "$tmp/ck" >"$tmp/export2.out" 2>&1
rc=$?
check '[[ $rc -eq 2 ]] && grep -q "export needs --output FILE" "$tmp/export2.out"' "export without --output"
finish
