"""Format the library notebooks' code with ruff (line length 100, `tools/ruff.toml`), cell by cell, keeping what the package reads.

Before ruff, `tools/shorten_lines.py` moves the trailing comments and docments that make a line too long to the line above
(a docment only to ONE line right above its parameter, where fastcore's docments reads it too) and splits long string
literals; a signature whose docments ruff would move keeps its lines. Every cell is checked to parse to the same AST as before
(a wrapped one-line docstring reads as the same words) with every docment read the same; a cell that fails keeps its text.
`--check` changes nothing and exits 1 when a notebook would change.

    python tools/format_notebooks.py            # format nbs/[0-9]*.ipynb in place, say which notebooks changed
    python tools/format_notebooks.py --check    # make check-export: the notebooks are formatted
    python tools/format_notebooks.py nbs/22_lta.ipynb   # these notebooks only
"""

from __future__ import annotations
import argparse, json, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from shorten_lines import same_meaning, shorten  # noqa: E402  (tools/ is no package)

REPO = Path(__file__).resolve().parent.parent


def formatted(notebooks: list[Path]) -> dict:
    "{notebook: its JSON text after formatting}, cells whose meaning formatting would touch kept as they are."
    books = {nb: json.loads(nb.read_text()) for nb in notebooks}
    cells = [c for book in books.values() for c in book["cells"] if c["cell_type"] == "code"]
    if cells:
        template = {k: v for k, v in next(iter(books.values())).items() if k != "cells"}
        for c, text in zip(cells, shorten(["".join(c["source"]) for c in cells], template)):
            c["source"] = text.splitlines(keepends=True)
    return {nb: json.dumps(book, indent=1, ensure_ascii=False) + "\n" for nb, book in books.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 when a notebook is not formatted",
    )
    p.add_argument(
        "notebooks",
        nargs="*",
        type=Path,
        help="these notebooks only (default: every nbs/[0-9]*.ipynb)",
    )
    args = p.parse_args(argv)
    notebooks = sorted(p.resolve() for p in args.notebooks) or sorted(
        (REPO / "nbs").glob("[0-9]*.ipynb")
    )
    changed = [
        nb
        for nb, text in formatted(notebooks).items()
        if text != nb.read_text() and (args.check or nb.write_text(text) or True)
    ]
    for nb in changed:
        print(f"{'would reformat' if args.check else 'reformatted'} {nb.relative_to(REPO)}")
    if args.check and changed:
        print("run `python tools/format_notebooks.py`, then nbdev_export", file=sys.stderr)
        return 1
    print(
        f"{len(notebooks) - len(changed)} notebook(s) formatted already"
        + ("" if args.check else f", {len(changed)} reformatted")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
