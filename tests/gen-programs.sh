#!/bin/sh
# gen-programs.sh [--dyn DYN] [--count N] [--seed S] -- programs that tests/gen_programs.py
# writes from the grammar, each run by dyn and judged: no signal, no sanitizer report, exit
# status 0 or 1, every diagnostic located, :check agreeing between the back ends, the same
# first error on --target=ref.  Fixed seeds, so that a failure reproduces:
#   python3 tests/gen_programs.py --dyn ./dyn --seed S --count N --print K
# make check runs 150 programs on ./dyn; make check-sanitize runs more on tests/fuzz/dyn-san
# (dyn built with ASan and UBSan).  Skipped (77) without a Python 3.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
dyn=$top_builddir/dyn; count=150; seed=1
while [ $# -gt 0 ]; do
  case $1 in
    --dyn) dyn=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "gen-programs.sh: unknown argument $1"; exit 99 ;;
  esac
done
py=${PYTHON_NUMPY:-}
[ -n "$py" ] || py=$(command -v python3) || { echo "no python3: skipped"; exit 77; }
[ -x "$dyn" ] || { echo "no dyn binary at $dyn"; exit 99; }
start=$(date +%s)
TMPDIR=${TMPDIR:-/tmp} "$py" "$top_srcdir/tests/gen_programs.py" --dyn "$dyn" --seed "$seed" --count "$count" --timeout 120
st=$?
echo "gen-programs: $(( $(date +%s) - start )) s"
exit $st
