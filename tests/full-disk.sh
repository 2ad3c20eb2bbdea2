#!/bin/sh
# full-disk.sh -- save() and dyn --calibrate on a full file system (a 64 KiB tmpfs): the
# write fails with "No space left on device", the old file is as it was, and no temporary
# is left.  Mounting needs a mount namespace (unshare -rm as any user where user
# namespaces are allowed, else unshare -m as root); without one the test skips (77).
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
dyn=$top_builddir/dyn
[ -x "$dyn" ] || { echo "no dyn binary at $dyn"; exit 99; }

if [ "$1" != --inside ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/dynfull.XXXXXX") || exit 99
  trap 'rm -rf "$work"' EXIT
  mkdir "$work/mnt"
  for how in "-r -m" "-m"; do
    # shellcheck disable=SC2086
    if unshare $how sh -c 'mount -t tmpfs -o size=64k tmpfs "$0"' "$work/mnt" 2>/dev/null; then
      # shellcheck disable=SC2086
      unshare $how sh "$0" --inside "$work/mnt"
      exit $?
    fi
  done
  echo "full-disk: cannot mount a tmpfs (no mount namespace): skipped"
  exit 77
fi

# Inside a private mount namespace: the tmpfs vanishes with it.
mnt=$2
mount -t tmpfs -o size=64k tmpfs "$mnt" || exit 99
cd "$mnt" || exit 99
export HOME="$mnt" DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1
unset XDG_CACHE_HOME
pass=0; fail=0
no_tmp() { ! find . -name '.*.tmp*' | grep -q .; }

"$dyn" -e 'save(i32([1, 2, 3]), "x.npy")' && cp x.npy old.npy || exit 99
"$dyn" -e 'save(zeros(f32[100000]), "x.npy")' > out 2> err
st=$?
if [ $st = 1 ] && grep -qF 'x.npy: write error: No space left on device' err && cmp -s x.npy old.npy && no_tmp; then
  pass=$((pass + 1))
else
  fail=$((fail + 1)); echo "FAIL save-full: status $st; x.npy changed or a temporary left"; cat err
fi
rm -f old.npy

# The calibration cache: the last good one stays when the disk fills.
if grep -q "define HAVE_LLVM 1" "$top_builddir/config.h" 2>/dev/null && "$dyn" --calibrate > out 2>&1; then
  cal=$HOME/.cache/dyn/calibration.txt
  cp "$cal" cal.good
  rm -f out err
  head -c 65536 /dev/zero > filler 2>/dev/null
  # its messages kept in memory: a file truncated for them would free room on the disk
  msg=$("$dyn" --calibrate 2>&1 > /dev/null)
  st=$?
  if [ $st = 1 ] && echo "$msg" | grep -qF "calibration.txt: write error: No space left on device" &&
     cmp -s "$cal" cal.good && no_tmp; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL calibrate-full: status $st; the cache changed or a temporary left"; echo "$msg"
  fi
fi

echo "full-disk: $pass passed, $fail failed"
[ $fail = 0 ]
