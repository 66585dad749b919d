# Sourced by the language-model benchmarks (tests/bench/bench_lm.sh, bench_llama.sh): reading
# the programs' throughput lines, medians, ratios and the matrix work's GFLOP/s.
#   tps            mwtrain's epoch-2 tokens/s (stdin)
#   num KEY        the last KEY=<number> (stdin)
#   median X...    the median of the numbers (0 for none: a skipped peer)
#   last X...      the last of the numbers, "skipped" for none
#   ratio A B      A / B as "1.23x", "-" when B is 0 (a skipped peer)
#   gf X           X tokens/s as GFLOP/s and the share of $ceiling, at $flop FLOP per token
#   fastest M1 M2 "X NAME"...   the line naming the fastest peer (X tokens/s, 0: skipped) and
#                  mwtrain's ratios to it, M1 as 1 rank x 2 threads and M2 under mpirun -n 2
tps() { sed -n 's/^Epoch 2,.*Tokens\/s: \([0-9.]*\).*/\1/p' | tail -n 1; }
num() { sed -n "s/.*$1=\\([0-9.]*\\).*/\\1/p" | tail -n 1; }
median() {
    (($#)) || { echo 0; return; }
    printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}
last() { (($#)) && echo "${@: -1}" || echo skipped; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf (b > 0 ? "%.2fx" : "-"), a / b}'; }
gf() {
    awk -v x="$1" -v f="$flop" -v c="$ceiling" \
        'BEGIN {printf "%5.1f GFLOP/s, %3.0f%% of the ceiling", x * f / 1e9, 100 * x * f / 1e9 / c}'
}
fastest() {
    local m1=$1 m2=$2 best
    shift 2
    best=$(printf '%s\n' "$@" | sort -g | tail -n 1)
    if [[ ${best%% *} == 0 ]]; then
        echo "  fastest peer: none (every peer skipped)"
        return
    fi
    printf '  fastest peer: %s, %.0f tokens/s; mwtrain / it: %s (1 rank x 2 threads), %s (mpirun -n 2)\n' \
        "${best#* }" "${best%% *}" "$(ratio "$m1" "${best%% *}")" "$(ratio "$m2" "${best%% *}")"
}
