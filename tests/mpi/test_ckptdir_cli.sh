#!/usr/bin/env bash
# Checkpoint directories a restart can always use, through the command line:
#  - the leftover of a crash in the first save (ckpt-1.tmp-PID) does not strand --resume: it
#    starts from scratch with a warning, and the temporary file is removed;
#  - an index naming a missing file falls back to the real, older checkpoint; naming only
#    missing files, --resume starts fresh and eval says there is no usable checkpoint (exit 5);
#  - an index entry outside the directory is ignored with a warning, never restored;
#  - an index entry naming a FIFO is skipped, never blocks;
#  - a 5 GiB sparse file with a valid header as the newest checkpoint is rejected in well under
#    5 s and 200 MB (header first), and the previous one is used;
#  - two jobs on one directory: the second exits 2 naming the first's PID, the first finishes
#    and its checkpoints are intact (it is held with SIGSTOP while the second starts, so the
#    case does not depend on timing); eval does not take the lock; a stale lock file does not
#    block.
#   test_ckptdir_cli.sh MWTRAIN
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mw=$1
tmp=$(mktemp -d)
job=""
cleanup() { [[ -n $job ]] && kill -9 "$job" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
quick=(--epochs 1 --steps-per-epoch 3 --test-examples 50 --progress none --summary-dir '')
show() { echo "--- $1"; cat "$1"; }

# 1. a crash during the first save left only its temporary file
mkdir "$tmp/ck1"
touch "$tmp/ck1/ckpt-1.tmp-1"
"$mw" train --resume --checkpoint-dir "$tmp/ck1" "${quick[@]}" >"$tmp/1.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]]' "leftover temp file: --resume trains (exit $rc)"
check 'grep -q "warning: --resume: no usable checkpoint in .*ck1, only leftovers: ckpt-1.tmp-1 .*starting from scratch" "$tmp/1.out"' \
    "leftover temp file: a warning names it"
check 'grep -q "info: removed leftover temporary files .*ck1: ckpt-1.tmp-1" "$tmp/1.out"' \
    "leftover temp file: one info line names what was removed"
check '[[ ! -e $tmp/ck1/ckpt-1.tmp-1 && -s $tmp/ck1/ckpt-1 ]]' "temp file gone, ckpt-1 saved"
((fail)) && show "$tmp/1.out"
real="$tmp/ck1/ckpt-1" # a real checkpoint (epoch 1) for the cases below

# 2. an index naming a missing file, with a real older checkpoint: falls back to it
mkdir "$tmp/ck2"
cp "$real" "$tmp/ck2/ckpt-1"
printf 'model_checkpoint_path: "ckpt-5"\nall_model_checkpoint_paths: "ckpt-5"\n' >"$tmp/ck2/checkpoint"
"$mw" train --resume --epochs 2 --steps-per-epoch 3 --test-examples 50 --progress none \
    --summary-dir '' --checkpoint-dir "$tmp/ck2" >"$tmp/2.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]]' "index naming a missing file: exit 0 (got $rc)"
check 'grep -q "warning: checkpoint .*ck2/ckpt-5 is unusable: cannot open (No such file" "$tmp/2.out" &&
       grep -q "restoring .*ck2/ckpt-1 (epoch 1" "$tmp/2.out"' "index naming a missing file: falls back to ckpt-1"
check 'grep -q "saved checkpoint .*ck2/ckpt-6 (epoch 2" "$tmp/2.out"' "and trains on from it"
# the index names only missing files: leftovers, not checkpoints
mkdir "$tmp/ck2b"
printf 'model_checkpoint_path: "ckpt-5"\n' >"$tmp/ck2b/checkpoint"
: >"$tmp/ck2b/ckpt-3"
"$mw" eval --checkpoint-dir "$tmp/ck2b" --test-examples 50 >"$tmp/2e.out" 2>&1
rc=$?
check '[[ $rc -eq 5 ]] && grep -q "mwtrain: error: no usable checkpoint in .*ck2b, only leftovers: .*ckpt-3 (an empty file).*checkpoint (index entry ckpt-5: missing)" "$tmp/2e.out"' \
    "eval on leftovers only: exit 5 (got $rc) naming them"
"$mw" train --resume --checkpoint-dir "$tmp/ck2b" "${quick[@]}" >"$tmp/2r.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "warning: --resume: no usable checkpoint in .*ck2b, only leftovers: .*index entry ckpt-5: missing.*starting from scratch" "$tmp/2r.out"' \
    "--resume on leftovers only: starts fresh with a warning (exit $rc)"
((fail)) && show "$tmp/2.out" && show "$tmp/2e.out" && show "$tmp/2r.out"

# 3. an index entry outside the directory: ignored with a warning, never restored
mkdir "$tmp/ck3" "$tmp/elsewhere"
cp "$real" "$tmp/ck3/ckpt-1"
cp "$tmp/ck2/ckpt-6" "$tmp/elsewhere/ckpt-7" # epoch 2: restoring it would show
before=$(md5sum <"$tmp/elsewhere/ckpt-7")
printf 'model_checkpoint_path: "../elsewhere/ckpt-7"\nall_model_checkpoint_paths: "%s"\n' \
    "$tmp/elsewhere/ckpt-7" >"$tmp/ck3/checkpoint"
"$mw" eval --checkpoint-dir "$tmp/ck3" --test-examples 50 >"$tmp/3.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]]' "index entry outside: exit 0 (got $rc)"
check 'grep -q "warning: checkpoint index .*ck3/checkpoint: ignoring the entry \"../elsewhere/ckpt-7\" .*not opened" "$tmp/3.out" &&
       grep -q "warning: checkpoint index .*ignoring the entry \"$tmp/elsewhere/ckpt-7\"" "$tmp/3.out"' \
    "index entry outside: a warning for each"
check '! grep -q "restoring .*elsewhere" "$tmp/3.out" && grep -q "restoring .*ck3/ckpt-1 (epoch 1" "$tmp/3.out" &&
       grep -q "^Restored the checkpoint of epoch 1 " "$tmp/3.out"' "index entry outside: the directory's own is restored"
check '[[ $(md5sum <"$tmp/elsewhere/ckpt-7") == "$before" ]]' "the other directory's file is untouched"
((fail)) && show "$tmp/3.out"

# 4. an index entry naming a FIFO: skipped with a warning, never blocks
mkdir "$tmp/ck4"
cp "$real" "$tmp/ck4/ckpt-1"
mkfifo "$tmp/ck4/ckpt-9"
printf 'model_checkpoint_path: "ckpt-9"\n' >"$tmp/ck4/checkpoint"
timeout 60 "$mw" train --resume --epochs 2 --steps-per-epoch 3 --test-examples 50 --progress none \
    --summary-dir '' --checkpoint-dir "$tmp/ck4" >"$tmp/4.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]]' "FIFO in the index: exit 0, no hang (got $rc; 124 is the timeout)"
check 'grep -q "warning: checkpoint .*ck4/ckpt-9 is unusable: is a FIFO" "$tmp/4.out" &&
       grep -q "restoring .*ck4/ckpt-1 (epoch 1" "$tmp/4.out"' "FIFO in the index: skipped for ckpt-1"
((fail)) && show "$tmp/4.out"

# 5. a 5 GiB sparse file with a valid header as the newest checkpoint: rejected at once
mkdir "$tmp/ck5"
cp "$real" "$tmp/ck5/ckpt-1"
cp "$tmp/ck2/ckpt-6" "$tmp/ck5/ckpt-2"
head -c 16 "$real" >"$tmp/ck5/ckpt-3"
if truncate -s 5G "$tmp/ck5/ckpt-3"; then
    printf 'model_checkpoint_path: "ckpt-3"\nall_model_checkpoint_paths: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-3"\n' \
        >"$tmp/ck5/checkpoint"
    /usr/bin/time -v "$mw" eval --checkpoint-dir "$tmp/ck5" --test-examples 50 >"$tmp/5.out" 2>&1
    rc=$?
    secs=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$tmp/5.out" |
        awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
    rss_kb=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/5.out")
    echo "5 GiB sparse checkpoint: eval took ${secs:-?} s, peak RSS ${rss_kb:-?} KiB"
    check '[[ $rc -eq 0 ]]' "sparse 5 GiB checkpoint: exit 0 (got $rc)"
    check 'grep -q "warning: checkpoint .*ck5/ckpt-3 is unusable: file is 5368709120 bytes but its header and sections declare 156" "$tmp/5.out" &&
           grep -q "restoring .*ck5/ckpt-2 (epoch 2" "$tmp/5.out"' "sparse 5 GiB checkpoint: rejected naming both sizes, ckpt-2 used"
    check '[[ -n $secs ]] && awk -v s="$secs" "BEGIN { exit !(s < 5) }"' "sparse 5 GiB checkpoint: under 5 s (${secs:-?} s)"
    check '[[ -n $rss_kb ]] && ((rss_kb < 200 * 1024))' "sparse 5 GiB checkpoint: under 200 MB (${rss_kb:-?} KiB)"
    ((fail)) && show "$tmp/5.out"
else
    echo "SKIP: this file system cannot hold a 5 GiB sparse file"
fi
rm -rf "$tmp/ck5"

# 6. two jobs on one directory: the second stops before training, naming the first. The first
# resumes from a copy of a real checkpoint and is stopped (SIGSTOP) as soon as its lock file
# names it, so it certainly holds the lock while eval and the second job run.
mkdir "$tmp/ck6"
cp "$real" "$tmp/ck6/ckpt-1"
long=(train --resume --epochs 3 --steps-per-epoch 20 --checkpoint-every-epochs 1
      --test-examples 50 --progress none --summary-dir '' --checkpoint-dir "$tmp/ck6")
"$mw" "${long[@]}" >"$tmp/6a.out" 2>&1 &
job=$!
for _ in $(seq 1 1200); do
    grep -q " $job\$" "$tmp/ck6/.mwtrain.lock" 2>/dev/null && break
    sleep 0.05
done
kill -STOP "$job"
check 'grep -q " $job\$" "$tmp/ck6/.mwtrain.lock"' "the lock file names the first job's PID"
# eval only reads: no lock
"$mw" eval --checkpoint-dir "$tmp/ck6" --test-examples 50 >"$tmp/6e.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]]' "eval beside a training job: exit 0 (got $rc)"
check 'kill -0 "$job" 2>/dev/null' "the first job is still there when the second starts"
start=$(date +%s)
mpiexec -n 2 "$mw" train --resume --checkpoint-dir "$tmp/ck6" "${quick[@]}" >"$tmp/6b.out" 2>&1
rc=$?
check '[[ $rc -eq 2 ]]' "second job on the directory: exit 2 (got $rc)"
check 'grep -q "mwtrain: error: --checkpoint-dir .*ck6 is in use by another job: PID $job on host $(hostname) holds its lock .*ck6/.mwtrain.lock" "$tmp/6b.out"' \
    "second job: the message names the holder's PID and host"
check '! grep -q "^Epoch" "$tmp/6b.out" && (($(date +%s) - start < 60))' "second job: fails before training"
kill -CONT "$job"
wait "$job"
rc=$?
job=""
check '[[ $rc -eq 0 ]] && grep -q "restoring .*ck6/ckpt-1 (epoch 1" "$tmp/6a.out" &&
       [[ $(grep -c "saved checkpoint" "$tmp/6a.out") -eq 2 ]]' \
    "first job: finishes normally (exit $rc), saving epochs 2 and 3"
check '[[ -s $tmp/ck6/ckpt-1 && -s $tmp/ck6/ckpt-2 && -s $tmp/ck6/ckpt-3 ]] &&
       grep -qx "model_checkpoint_path: \"ckpt-3\"" "$tmp/ck6/checkpoint"' "first job's checkpoints intact"
"$mw" eval --checkpoint-dir "$tmp/ck6" --test-examples 50 >"$tmp/6v.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "restoring .*ck6/ckpt-3 (epoch 3" "$tmp/6v.out" && ! grep -q warning "$tmp/6v.out"' \
    "first job's latest checkpoint restores cleanly"
# a lock file left by a dead process: only its text is stale
echo "deadhost 999999" >"$tmp/ck6/.mwtrain.lock"
"$mw" train --resume --epochs 4 --steps-per-epoch 3 --test-examples 50 --progress none \
    --summary-dir '' --checkpoint-dir "$tmp/ck6" >"$tmp/6s.out" 2>&1
rc=$?
check '[[ $rc -eq 0 ]] && grep -q "saved checkpoint .*ck6/ckpt-4 (epoch 4" "$tmp/6s.out"' \
    "a stale lock file does not block (exit $rc)"
((fail)) && show "$tmp/6a.out" && show "$tmp/6b.out" && show "$tmp/6s.out"

finish
