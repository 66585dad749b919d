#!/bin/sh
# Run format_writer, then a Python reader on the file it wrote, and compare:
# the same lines, every field equal except the last (a number), which must
# agree within TOL relative (0: exactly). A reader exit of 77 (no NumPy) skips.
# Usage: check_reader.sh WRITER MODE PYTHON READER TOL
set -u
writer=$1 mode=$2 python=$3 reader=$4 tol=$5
dir=$(mktemp -d "${TMPDIR:-/tmp}/mwfmt-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$writer" "$mode" "$dir" > "$dir/expected" || { echo "format_writer $mode failed"; exit 1; }
file=$(head -n 1 "$dir/expected")
tail -n +2 "$dir/expected" > "$dir/want"
"$python" "$reader" "$file" > "$dir/got"
rc=$?
if [ "$rc" -eq 77 ]; then cat "$dir/got"; exit 77; fi
if [ "$rc" -ne 0 ]; then echo "$reader failed (exit $rc)"; exit 1; fi
awk -v tol="$tol" '
    function abs(x) { return x < 0 ? -x : x }
    NR == FNR { want[FNR] = $0; n = FNR; next }
    {
        got = FNR
        if (!(FNR in want)) { print "extra line from the reader: " $0; bad = 1; next }
        split(want[FNR], w, " ")
        ok = NF == length(w)
        for (i = 1; ok && i < NF; i++) ok = $i == w[i]
        if (ok) ok = abs($NF - w[NF]) <= tol * (1 + abs(w[NF]))
        if (!ok) { printf "line %d: want \"%s\", got \"%s\"\n", FNR, want[FNR], $0; bad = 1 }
    }
    END {
        if (got != n) { printf "reader printed %d lines, want %d\n", got, n; bad = 1 }
        if (!bad) printf "%d lines match\n", n
        exit bad
    }' "$dir/want" "$dir/got"
