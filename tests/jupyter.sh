#!/bin/sh
# The Jupyter kernel (python/dyn/kernel.py) and the tour as notebooks: every numbered chapter
# of examples/ made into a notebook by build-aux/dyn2nb.py and run headless by nbconvert
# with no cell in error; then a notebook of its own for what a cell shows beside text: a
# :plot drawn inline as SVG, a saved PNG shown, a small tensor as an HTML table beside the
# text the REPL prints for it, and an
# error with its place and caret after which the next cell still has the bindings.  Skips
# (77) without Jupyter (Debian python3-ipykernel and jupyter-nbconvert) or the library.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
top_builddir=${top_builddir:-$top_srcdir}
lib=$top_builddir/.libs/libdyn.so.0
[ -f "$lib" ] || { echo "jupyter: no shared libdyn: skipped"; exit 77; }
py=
for p in "${PYTHON_NUMPY:-}" /usr/bin/python3 python3; do
  if [ -n "$p" ] && "$p" -c 'import numpy, ipykernel, nbconvert, nbformat' >/dev/null 2>&1; then py=$p; break; fi
done
[ -n "$py" ] || { echo "jupyter: no Python with ipykernel and nbconvert: skipped"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/dynjupyter.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
export HOME="$work" JUPYTER_PATH="$work/share/jupyter" JUPYTER_RUNTIME_DIR="$work/runtime" \
  JUPYTER_CONFIG_DIR="$work/config" DYN_CUDA_DRIVER=/nonexistent/libcuda.so.1
# the kernel of the build tree: the installed spec's command, with the tree's module and library
mkdir -p "$work/share/jupyter/kernels/dyn"
cat > "$work/share/jupyter/kernels/dyn/kernel.json" <<JSON
{"argv": ["$py", "-m", "dyn.kernel", "-f", "{connection_file}"], "display_name": "dyn", "language": "dyn",
 "env": {"PYTHONPATH": "$top_srcdir/python", "DYN_LIBRARY": "$lib", "DYN_HW_DIR": "$top_srcdir/hw"}}
JSON
pass=0; fail=0
run_nb() {   # run_nb IN OUT [nbconvert options]: the notebook executed in place of OUT
  in=$1 out=$2; shift 2
  (cd "$work" && "$py" -m nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 \
     --ExecutePreprocessor.kernel_name=dyn "$@" --output "$out" "$in") > "$work/nbconvert.log" 2>&1
}
for ch in "$top_srcdir"/examples/0*.dyn; do
  name=$(basename "$ch" .dyn)
  "$py" "$top_srcdir/build-aux/dyn2nb.py" "$ch" "$work/$name.ipynb" || { fail=$((fail + 1)); continue; }
  if ! run_nb "$name.ipynb" "$name.out.ipynb"; then
    fail=$((fail + 1)); echo "FAIL $name: the notebook did not run"; tail -20 "$work/nbconvert.log"; continue
  fi
  if "$py" - "$work/$name.out.ipynb" <<'PY'; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $name"; fi
import json, sys
nb = json.load(open(sys.argv[1]))
code = [c for c in nb["cells"] if c["cell_type"] == "code"]
errors = [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
text = "".join("".join(o.get("text", "")) for c in code for o in c["outputs"])
assert code and not errors, errors[:1]
assert text.strip(), "no output at all"
PY
done

# what a cell shows beside text
cat > "$work/show.py" <<'PY'
import json, sys
cells = ["x[i, j]: f32[4, 6] = i * 6 + j\nx", ":plot matmul M=2..5 N=3 K=4", 'save(x, "x.png")',
         "y = x + undefined_name", "print(shape(x))"]
nb = {"cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": c,
                 "id": "c%d" % i} for i, c in enumerate(cells)],
      "nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "dyn", "display_name": "dyn"}}}
json.dump(nb, open(sys.argv[1], "w"))
PY
"$py" "$work/show.py" "$work/show.ipynb"
# a dyn built without libpng (./configure --without-png) says so where the picture would be
png=no; grep -q "define HAVE_PNG 1" "$top_builddir/config.h" 2>/dev/null && png=yes
if run_nb show.ipynb show.out.ipynb --allow-errors && "$py" - "$work/show.out.ipynb" "$png" <<'PY'; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL show"; cat "$work/nbconvert.log"; fi
import json, sys
c = [cell["outputs"] for cell in json.load(open(sys.argv[1]))["cells"]]
def text(outs): return "".join("".join(o.get("text", "")) for o in outs)
def data(o, mime): return "".join(o.get("data", {}).get(mime, ""))
shown = [o for o in c[0] if o["output_type"] == "display_data"]
assert shown and "f32[4, 6]" in data(shown[0], "text/plain") and "[18, 19, 20, 21, 22, 23]" in data(shown[0], "text/plain"), c[0]
table = data(shown[0], "text/html")
assert table.count("<tr>") == 4 and "<td>23</td>" in table and "f32[4, 6]" in table, table
assert any("<svg" in data(o, "image/svg+xml") for o in c[1]) and "wrote" not in text(c[1]), c[1]
import base64
if sys.argv[2] == "yes":
    assert any(base64.b64decode(data(o, "image/png"))[:8] == b"\x89PNG\r\n\x1a\n" for o in c[2]), c[2]
else:
    assert any("built without libpng" in "\n".join(o.get("traceback", [])) + text([o]) for o in c[2]), c[2]
err = [o for o in c[3] if o["output_type"] == "error"]
assert err and "undefined name 'undefined_name'" in "\n".join(err[0]["traceback"]), c[3]
assert any(line.strip().startswith("|") and "^" in line for line in err[0]["traceback"]), err[0]["traceback"]
assert "[4, 6]" in text(c[4]), c[4]
PY

echo "jupyter: $pass passed, $fail failed"
[ $fail = 0 ]
