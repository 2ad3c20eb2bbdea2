#!/bin/sh
# debian/'s split against make install: every file `make install` puts under /usr is taken
# by exactly one package's debian/PACKAGE.install, or named in debian/not-installed, and every
# line of those files takes something, so that a file added to the install cannot be left out
# of the .deb packages, nor shipped in two.  The install goes to a temporary DESTDIR with
# Debian's paths (prefix /usr, a multiarch libdir); no root and no dpkg are needed.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
deb=$top_srcdir/debian
[ -f "$deb/control" ] || { echo "debian.sh: no debian/ directory; skipped"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/dyndeb.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
no() { fail=$((fail + 1)); echo "FAIL $*"; }
ma=MULTIARCH

(unset MAKEFLAGS MFLAGS; ${MAKE:-make} -s -C "$top_builddir" install DESTDIR="$work/tmp" prefix=/usr \
  libdir=/usr/lib/$ma dyn_pythondir=/usr/lib/python3/dist-packages) > "$work/make.log" 2>&1 ||
  { echo "FAIL make install DESTDIR=... prefix=/usr:"; tail -20 "$work/make.log"; exit 1; }
(cd "$work/tmp" && find . ! -type d | sed 's|^\./||' | sort) > "$work/files"
[ -s "$work/files" ] || { echo "FAIL make install installed nothing"; exit 1; }

# The packages of debian/control, and the patterns of their .install files (and of
# not-installed), with dh's substitution of the multiarch triplet.
pkgs=$(sed -n 's/^Package: *//p' "$deb/control")
for p in $pkgs; do
  if [ -f "$deb/$p.install" ]; then ok; else no "debian/control's $p has no debian/$p.install"; continue; fi
  sed -e '/^#/d' -e '/^ *$/d' -e "s/\${DEB_HOST_MULTIARCH}/$ma/g" -e "s|^|$p.install |" "$deb/$p.install"
done > "$work/patterns"
[ -f "$deb/not-installed" ] &&
  sed -e '/^#/d' -e '/^ *$/d' -e "s/\${DEB_HOST_MULTIARCH}/$ma/g" -e 's|^|not-installed |' \
    "$deb/not-installed" >> "$work/patterns"
for f in "$deb"/*.install; do
  p=$(basename "$f" .install)
  echo "$pkgs" | grep -qx "$p" || no "debian/$p.install is for no package of debian/control"
done

# A pattern takes a file it matches as a glob, or any file under a directory it matches.
while read -r f; do
  owners=$(while read -r p pat; do
    # shellcheck disable=SC2254
    case $f in $pat|$pat/*) echo "$p" ;; esac
  done < "$work/patterns" | tr '\n' ' ')
  case $owners in
    "") no "/$f is installed but taken by no debian/*.install, nor named in debian/not-installed" ;;
    *" "*" "*) no "/$f is taken by more than one of: $owners" ;;
    *) ok ;;
  esac
done < "$work/files"
while read -r p pat; do
  taken=$(while read -r f; do
    # shellcheck disable=SC2254
    case $f in $pat|$pat/*) echo x; break ;; esac
  done < "$work/files")
  [ -n "$taken" ] && ok || no "debian/$p's $pat takes nothing that make install installs"
done < "$work/patterns"
echo "debian: $pass passed, $fail failed"
[ $fail = 0 ]
