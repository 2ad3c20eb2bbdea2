#!/usr/bin/env python3
"""dyn2nb.py -- a tour chapter (examples/NN-*.dyn) as a Jupyter notebook for the dyn kernel.

    python3 build-aux/dyn2nb.py CHAPTER.dyn OUT.ipynb

The notebooks are made from the chapters, never edited by hand, so that the two cannot drift
apart (make notebooks; tests/jupyter.sh runs every one).  A run of comment lines at the margin
becomes a Markdown cell (the "# " taken off), the code up to the next such run a code cell;
blank lines around them fall away.  Comments inside code stay code.
"""
import json
import sys


def cells(text):
    out, kind, lines = [], None, []

    def flush():
        while lines and not lines[-1].strip():
            lines.pop()
        while lines and not lines[0].strip():
            lines.pop(0)
        if lines:
            body = "\n".join(lines)
            if kind == "markdown":
                out.append({"cell_type": "markdown", "metadata": {}, "source": body})
            else:
                out.append({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                            "source": body})
        lines.clear()

    for line in text.split("\n"):
        is_comment = line.startswith("#")
        if is_comment and kind != "markdown" and (not lines or not lines[-1].strip() or kind is None):
            flush()
            kind = "markdown"
        elif not is_comment and kind == "markdown" and line.strip():
            flush()
            kind = "code"
        if kind == "markdown":
            if is_comment:
                body = line[1:]
                lines.append(body[1:] if body.startswith(" ") else body)
            else:
                lines.append("")
        else:
            lines.append(line)
    flush()
    return out


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        nb = {"cells": cells(f.read()), "nbformat": 4, "nbformat_minor": 5,
              "metadata": {"kernelspec": {"name": "dyn", "display_name": "dyn", "language": "dyn"},
                           "language_info": {"name": "dyn", "file_extension": ".dyn"}}}
    for i, c in enumerate(nb["cells"]):
        c["id"] = "cell-%d" % i
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(nb, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
