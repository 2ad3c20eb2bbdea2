#!/bin/sh
# compare-builds.sh -- is `make bench` unchanged by a change?  Builds OLD_REV's bench in a
# temporary git worktree (configured as this build was; ccache makes it quick), then runs
# dyn's column of the old and the new bench alternately, round after round, on the same
# shape files, and prints per section and overall the geometric mean of new/old time ratios
# (each line's ratio is the median over the rounds of the ratio within a round, so that a
# slow spell of a shared machine falls on both builds alike).
#
# usage: tests/bench/compare-builds.sh OLD_REV [BENCH ARGS...]
#   run from the top of a configured, in-tree build of the new side (its tests/bench/bench is
#   made here).  BENCH ARGS go to both bench programs (`tests/bench/bench` options and shape
#   directories, as `make bench` gives them): by default `--threads 2` and make bench's
#   directories (../shared/bench and tests/bench/shapes).  `--only dyn` and `--csv` are the
#   script's own.  ROUNDS (default 3) is how many alternating rounds; JOBS (default 2) the
#   old build's make -j.  Lines of compile and dispatch times are left out.
set -eu

if [ $# -lt 1 ] || [ "$1" = --help ] || [ "$1" = -h ]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
old_rev=$1
shift
rounds=${ROUNDS:-3}
jobs=${JOBS:-2}
top=$(git rev-parse --show-toplevel)
[ -f config.status ] && [ -f Makefile ] || { echo "compare-builds: run it from the top of a configured build" >&2; exit 2; }
git rev-parse --verify --quiet "$old_rev^{commit}" >/dev/null || { echo "compare-builds: $old_rev: no such revision" >&2; exit 2; }
if [ $# -eq 0 ]; then
  set -- --threads 2 "$top/../shared/bench" "$top/tests/bench/shapes"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/compare-builds.XXXXXX")
cleanup() {
  git -C "$top" worktree remove --force "$tmp/old" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "compare-builds: the new build's bench (this tree)"
make tests/bench/bench >"$tmp/new-build.log" 2>&1 || { tail -20 "$tmp/new-build.log" >&2; exit 1; }
echo "compare-builds: building $old_rev's bench in a temporary worktree"
git -C "$top" worktree add --detach --quiet "$tmp/old" "$old_rev"
config=$(./config.status --config)
(
  cd "$tmp/old"
  autoreconf -fi && eval "./configure $config" && make -j"$jobs" tests/bench/bench
) >"$tmp/old-build.log" 2>&1 || { tail -20 "$tmp/old-build.log" >&2; echo "compare-builds: $old_rev does not build" >&2; exit 1; }

# one bench run: build (new or old), round, then the bench's arguments
run() {
  who=$1 r=$2
  shift 2
  if [ "$who" = new ]; then bin=./tests/bench/bench hw=$top/hw; else bin=$tmp/old/tests/bench/bench hw=$tmp/old/hw; fi
  echo "compare-builds: round $r, $who"
  DYN_HW_DIR=$hw "$bin" --only dyn --csv "$tmp/$who.$r.csv" "$@" >"$tmp/$who.$r.log" 2>&1 ||
    { tail -20 "$tmp/$who.$r.log" >&2; echo "compare-builds: the $who bench failed in round $r" >&2; exit 1; }
}

r=1
while [ "$r" -le "$rounds" ]; do
  # alternate which goes first, so that neither always follows the other's warm caches
  if [ $((r % 2)) -eq 1 ]; then run new "$r" "$@"; run old "$r" "$@"; else run old "$r" "$@"; run new "$r" "$@"; fi
  r=$((r + 1))
done

# CSV rows: suite,shape,dyn_ms,...  The ratio of a line in a round is new/old; a line's
# ratio is its median over the rounds; a section's and the whole's, the geometric mean.
for r in $(seq 1 "$rounds"); do
  for who in new old; do
    awk -F, -v who="$who" -v r="$r" 'NR > 1 && $1 != "compile" && $1 != "dispatch" && $3 != "" {
      print who "\t" r "\t" $1 "\t" $2 "\t" $3 }' "$tmp/$who.$r.csv"
  done
done | awk -F'\t' -v old_rev="$old_rev" '
  { t[$1, $2, $3 "\t" $4] = $5; if (!(($3 "\t" $4) in seen)) { seen[$3 "\t" $4] = 1; key[++n] = $3 "\t" $4 }
    if ($2 > R) R = $2 }
  function median(a, m,    i, j, x) {
    for (i = 2; i <= m; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  END {
    printf "%-16s %-32s %10s\n", "section", "line", "new/old"
    for (i = 1; i <= n; i++) {
      k = key[i]; m = 0; delete v
      for (r = 1; r <= R; r++)
        if ((("new", r, k) in t) && (("old", r, k) in t) && t["old", r, k] > 0 && t["new", r, k] > 0)
          v[++m] = t["new", r, k] / t["old", r, k]
      if (!m) continue
      split(k, p, "\t"); s = p[1]; sub(/\.txt$/, "", s)
      x = median(v, m)
      printf "%-16s %-32s %10.3f\n", s, p[2], x
      if (!(s in cnt)) sec[++ns] = s
      cnt[s]++; lsum[s] += log(x); all += log(x); nall++
    }
    if (!nall) { print "compare-builds: no line both builds timed" > "/dev/stderr"; exit 1 }
    printf "\ngeometric mean of new/old dyn times (below 1: the new build is faster), %d round(s), against %s:\n", R, old_rev
    for (i = 1; i <= ns; i++) printf "  %-16s %4d lines %8.3f\n", sec[i], cnt[sec[i]], exp(lsum[sec[i]] / cnt[sec[i]])
    printf "  %-16s %4d lines %8.3f\n", "all", nall, exp(all / nall)
  }'
