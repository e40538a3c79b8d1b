"""Format the library notebooks' code with ruff (line length 100, `tools/ruff.toml`), cell by cell, keeping what the package reads.

A cell keeps its layout when formatting would move a parameter's docment (`name:type=default, # what it is`) off the line the
parameter starts on: fastcore's docments, which build every `--help` line and the API pages, read the comment on that line. Every
formatted cell is checked to parse to the same AST as before. `--check` changes nothing and exits 1 when a notebook would change.

    python tools/format_notebooks.py            # format nbs/[0-9]*.ipynb in place, say which notebooks changed
    python tools/format_notebooks.py --check    # make check-export: the notebooks are formatted
    python tools/format_notebooks.py nbs/22_lta.ipynb   # these notebooks only
"""
from __future__ import annotations
import argparse, ast, io, json, shutil, subprocess, sys, tempfile, tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _code(src: str) -> str:
    "The cell's Python (IPython magics and shell lines blanked, so that line numbers hold)."
    return "\n".join("" if l.lstrip().startswith(("%", "!")) else l for l in src.splitlines())


def docment_lines(src: str) -> dict:
    "{(def or class, parameter or field): the comment on the line where it starts}: what docments reads."
    tree = ast.parse(_code(src))
    comments = {}
    for tok in tokenize.generate_tokens(io.StringIO(_code(src)).readline):
        if tok.type == tokenize.COMMENT: comments[tok.start[0]] = tok.string
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]:
                out[(node.name, arg.arg)] = comments.get(arg.lineno)
            r = node.returns   # docments reads the return's comment on its line: it must stay one line
            out[(node.name, "return")] = (comments.get(r.lineno), r.end_lineno - r.lineno) if r else None
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    out[(node.name, item.target.id)] = comments.get(item.lineno)
    return out


def same_meaning(before: str, after: str) -> bool:
    "Formatting changed only the layout: the same AST and every docment on its parameter's line."
    try:
        return ast.dump(ast.parse(_code(before))) == ast.dump(ast.parse(_code(after))) and docment_lines(before) == docment_lines(after)
    except SyntaxError:
        return False


def formatted(notebooks: list[Path], ruff: str) -> dict:
    "{notebook: its JSON text after formatting}, cells whose meaning formatting would touch kept as they are."
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        copies = []
        for nb in notebooks:
            copy = Path(tmp) / nb.name
            shutil.copyfile(nb, copy); copies.append(copy)
        subprocess.run([ruff, "format", "--quiet", "--config", str(REPO / "tools" / "ruff.toml"), *map(str, copies)], check=True, cwd=tmp)
        for nb, copy in zip(notebooks, copies):
            old, new = json.loads(nb.read_text()), json.loads(copy.read_text())
            for c_old, c_new in zip(old["cells"], new["cells"]):
                if c_old["cell_type"] == "code" and same_meaning("".join(c_old["source"]), "".join(c_new["source"])):
                    c_old["source"] = c_new["source"]
            out[nb] = json.dumps(old, indent=1, ensure_ascii=False) + "\n"
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 when a notebook is not formatted")
    p.add_argument("notebooks", nargs="*", type=Path, help="these notebooks only (default: every nbs/[0-9]*.ipynb)")
    args = p.parse_args(argv)
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    notebooks = sorted(p.resolve() for p in args.notebooks) or sorted((REPO / "nbs").glob("[0-9]*.ipynb"))
    changed = [nb for nb, text in formatted(notebooks, ruff).items() if text != nb.read_text() and (args.check or nb.write_text(text) or True)]
    for nb in changed: print(f"{'would reformat' if args.check else 'reformatted'} {nb.relative_to(REPO)}")
    if args.check and changed:
        print("run `python tools/format_notebooks.py`, then nbdev_export", file=sys.stderr)
        return 1
    print(f"{len(notebooks) - len(changed)} notebook(s) formatted already" + ("" if args.check else f", {len(changed)} reformatted"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
