"""dyn.kernel -- a Jupyter kernel for dyn, over the dyn module (libdyn).

Each cell is dyn source, `:` commands included, run in one session for the whole notebook,
interactive as the REPL is: a bare expression prints its value.  What the cell prints is the
cell's output; an error is the cell's error, with its place and caret as the REPL shows it,
and the bindings made before it stay.  Pictures go inline: `:plot` without `> FILE.svg`
draws its chart as SVG, and a picture a cell saves (`save(X, "x.png")`) is shown under it.
A cell that ends in the name of a small 1-D or 2-D tensor shows it as an HTML table.

Run by Jupyter through a kernel spec (share/jupyter/kernels/dyn/kernel.json, which
`make install` writes):  python3 -m dyn.kernel -f CONNECTION_FILE
"""
import base64
import html
import io
import os
import re
import shutil
import sys
import tempfile

from ipykernel.kernelbase import Kernel

import dyn

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLOT = re.compile(r"^(\s*:plot\b[^>\n]*?)\s*$")
_PNG = re.compile(r'\bsave\s*\(.*"([^"]+\.png)"\s*\)')


class DynKernel(Kernel):
    implementation = "dyn"
    implementation_version = dyn.version()
    language_info = {"name": "dyn", "mimetype": "text/x-dyn", "file_extension": ".dyn",
                     "pygments_lexer": "text"}
    banner = "dyn %s: tensor programs with symbolic shapes" % dyn.version()

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dyn_session = dyn.Session(interactive=True)
        self.scratch = tempfile.mkdtemp(prefix="dyn-kernel.")
        self.plots = 0

    def do_shutdown(self, restart):
        self.dyn_session.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
        if restart:
            self.dyn_session = dyn.Session(interactive=True)
            self.scratch = tempfile.mkdtemp(prefix="dyn-kernel.")
        return {"status": "ok", "restart": restart}

    def _inline_plots(self, code):
        """The cell with each :plot that writes no file given an SVG file of the kernel's own,
        and those files in order."""
        lines, svgs = [], []
        for line in code.split("\n"):
            m = _PLOT.match(line)
            if m:
                self.plots += 1
                path = os.path.join(self.scratch, "plot%d.svg" % self.plots)
                line = "%s > %s" % (m.group(1), path)
                svgs.append(path)
            lines.append(line)
        return "\n".join(lines), svgs

    def _stream(self, name, text):
        if text:
            self.send_response(self.iopub_socket, "stream", {"name": name, "text": text})

    def _display(self, mime, data):
        self.send_response(self.iopub_socket, "display_data", {"data": {mime: data}, "metadata": {}})

    def _table(self, name, text):
        """A small 1-D or 2-D tensor bound to name as an HTML table under its type line (text:
        what the REPL prints for it); None for anything else."""
        try:
            x = self.dyn_session.value(name)
        except dyn.Error:
            return None
        if x.ndim not in (1, 2) or x.size == 0 or x.size > 400:
            return None
        rows = x.reshape(1, -1) if x.ndim == 1 else x
        cell = (lambda v: "true" if v else "false") if x.dtype == bool else (lambda v: "%.6g" % v)
        body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % cell(v) for v in r) for r in rows)
        head = html.escape(text.splitlines()[0]) if text else name
        return "<div><code>%s</code><table>%s</table></div>" % (head, body)

    def do_execute(self, code, silent, store_history=True, user_expressions=None, allow_stdin=False):
        # a cell that ends in a bare name shows its tensor as a table: the rest runs first
        lines = code.rstrip().split("\n")
        last = lines[-1].strip() if lines else ""
        if len(lines) > 1 and _NAME.match(last) and not silent:
            reply = self.do_execute("\n".join(lines[:-1]), silent, store_history, user_expressions, allow_stdin)
            if reply["status"] != "ok":
                return reply
            out, saved = io.StringIO(), sys.stdout
            sys.stdout = out
            try:
                self.dyn_session.run(last, origin="<cell %d>" % self.execution_count)
                failed = False
            except dyn.Error:
                failed = True
            finally:
                sys.stdout = saved
            if failed:      # an unbound name: run as any cell, for the error's place and caret
                return self.do_execute(last, silent, store_history, user_expressions, allow_stdin)
            table = self._table(last, out.getvalue())
            if table:
                self.send_response(self.iopub_socket, "display_data",
                                   {"data": {"text/plain": out.getvalue().rstrip("\n"), "text/html": table},
                                    "metadata": {}})
            else:
                self._stream("stdout", out.getvalue())
            return reply
        source, svgs = self._inline_plots(code)
        # what the session prints (the module writes it to sys.stdout) is the cell's output
        out, saved = io.StringIO(), sys.stdout
        sys.stdout = out
        try:
            self.dyn_session.run(source, origin="<cell %d>" % self.execution_count)
            failed = None
        except dyn.Error as e:
            failed = e
        finally:
            sys.stdout = saved
        if not silent:
            # the line :plot prints for the file it wrote stands for the picture below
            text = "".join(line for line in out.getvalue().splitlines(True)
                           if not any(line.startswith("wrote %s (" % p) for p in svgs))
            self._stream("stdout", text)
        for d in self.dyn_session.diagnostics():
            if not d["is_error"] and not silent:
                self._stream("stderr", d["text"])
        if not silent:
            for path in svgs:
                if os.path.exists(path):
                    with open(path, encoding="utf-8") as f:
                        svg = f.read()
                    self._display("image/svg+xml", svg)
            for path in _PNG.findall(code):
                if os.path.exists(path):
                    with open(path, "rb") as f:
                        self._display("image/png", base64.b64encode(f.read()).decode("ascii"))
        if failed is None:
            return {"status": "ok", "execution_count": self.execution_count, "payload": [],
                    "user_expressions": {}}
        text = "".join(d["text"] for d in failed.diagnostics) or str(failed)
        if not silent:
            self.send_response(self.iopub_socket, "error",
                               {"ename": "dyn.Error", "evalue": failed.message, "traceback": text.splitlines()})
        return {"status": "error", "execution_count": self.execution_count, "ename": "dyn.Error",
                "evalue": failed.message, "traceback": text.splitlines()}


if __name__ == "__main__":
    from ipykernel.kernelapp import IPKernelApp
    IPKernelApp.launch_instance(kernel_class=DynKernel)
