"""Strip outputs and execution counts from notebooks (solutions/ and notebooks/ are committed clean).

    python -m tools.strip_outputs solutions notebooks      # rewrite files that have outputs
    python -m tools.strip_outputs --check solutions        # exit 1 naming files that have outputs
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import nbformat


def notebooks_under(paths: list[str]) -> list[pathlib.Path]:
    found = []
    for p in map(pathlib.Path, paths):
        items = [p] if p.suffix == ".ipynb" else sorted(p.rglob("*.ipynb"))
        found += [q for q in items if ".ipynb_checkpoints" not in q.parts]
    return found


def has_outputs(nb) -> bool:
    return any(c.get("outputs") or c.get("execution_count") for c in nb.cells if c.cell_type == "code")


def strip(nb) -> bool:
    """Clear outputs in place; True if anything changed."""
    changed = has_outputs(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return changed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--check", action="store_true", help="only report notebooks with outputs")
    args = ap.parse_args(argv)
    dirty = []
    for path in notebooks_under(args.paths):
        nb = nbformat.read(path, as_version=4)
        if args.check:
            if has_outputs(nb):
                dirty.append(path)
        elif strip(nb):
            nbformat.write(nb, path)
            print(f"stripped {path}")
    for path in dirty:
        print(f"{path}: has outputs; run `python -m tools.strip_outputs {path}`")
    return 1 if dirty else 0


if __name__ == "__main__":
    sys.exit(main())
