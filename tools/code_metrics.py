"""The code-shape figures of issue 52, printed: module sizes, function lengths, keyword-only arguments, long lines, the formatter's
lone-`)` artefacts, imports of another module's private names, and the path of `hoi-audit audit FOLDER` through the modules.

    python tools/code_metrics.py            # the static figures of hoi_audit/*.py
    python tools/code_metrics.py --trace    # also run a tiny audit and print the modules it visits, in order
"""
import argparse, ast, contextlib, io, re, statistics, sys, tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "hoi_audit"
LIMIT = 100  # the line length tools/ruff.toml sets


def modules() -> list[Path]:
    return sorted(p for p in PKG.glob("*.py") if p.name not in ("_modidx.py", "__init__.py"))


def functions(tree) -> list:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def length(fn) -> int:
    "Lines of a function from its `def` to its last line, decorators excluded."
    return fn.end_lineno - fn.lineno + 1


def positional_past_third(fn) -> bool:
    "Whether a function takes more than three parameters that may be passed by position (self/cls not counted)."
    a = fn.args
    names = [x.arg for x in [*a.posonlyargs, *a.args] if x.arg not in ("self", "cls")]
    return len(names) > 3


def private_imports(tree, here: str) -> list[str]:
    "`from .X import _name` (or hoi_audit.X) of another module's private name."
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and (n.level == 1 or (n.module or "").startswith("hoi_audit")):
            mod = (n.module or "").removeprefix("hoi_audit").lstrip(".")
            if mod and mod != here:
                out += [f"{here} <- {mod}.{a.name}" for a in n.names if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def static() -> dict:
    lines = long = lone = 0
    fns, private, sizes = [], [], {}
    for p in modules():
        text = p.read_text()
        rows = text.splitlines()
        sizes[p.stem] = len(rows)
        lines += len(rows)
        long += sum(len(r) > LIMIT for r in rows)
        lone += sum(bool(re.match(r"^\s*\)\s*#", r)) for r in rows)
        tree = ast.parse(text)
        fns += [(p.stem, f.name, length(f), positional_past_third(f)) for f in functions(tree)]
        private += private_imports(tree, p.stem)
    lens = [f[2] for f in fns]
    return {
        "modules": len(sizes), "lines": lines, "largest": sorted(sizes.items(), key=lambda kv: -kv[1])[:6],
        "report.py": sizes.get("report"), "presets.py": sizes.get("presets"),
        "functions": len(fns), "median function lines": statistics.median(lens),
        "functions over 50 lines": sum(n > 50 for n in lens), "functions over 60 lines": sum(n > 60 for n in lens),
        "longest": sorted(((f"{m}.{n}", k) for m, n, k, _ in fns), key=lambda x: -x[1])[:8],
        "functions with >3 positional parameters": sum(f[3] for f in fns),
        f"lines over {LIMIT} characters": f"{long} ({100 * long / lines:.1f} %)",
        "lone ')' with a trailing comment": lone,
        "imports of another module's private names": len(private), "private imports": private,
    }


# the functions whose direct calls are the audit's path: the handler, and the one stage path it hands over to (an older tree has
# only the handler; the stage path's own functions count as steps too, so the two trees' paths compare)
PATH_OWNERS = {"audit_command", "run_stage", "run_datasets", "stage_setup", "write_stage"}


def trace() -> dict:
    "Run `hoi-audit audit` on a tiny planted folder (one split, one seed, two epochs) and record the modules its calls enter, in order."
    from hoi_audit.synthetic import synthetic_dataset, write_synthetic
    from hoi_audit.runner import main

    tmp = Path(tempfile.mkdtemp())
    folder = write_synthetic(synthetic_dataset("breakfast", "tiny", seed=0), tmp / "tiny")
    seq, steps = [], []   # every module change; the direct callees of the `audit` handler (the stage's own steps)

    def prof(frame, event, arg):
        if event != "call": return
        mod = frame.f_globals.get("__name__", "")
        if not mod.startswith("hoi_audit."): return
        if not seq or seq[-1] != mod: seq.append(mod)
        caller = frame.f_back
        if caller is not None and caller.f_code.co_name in PATH_OWNERS and not frame.f_code.co_name.startswith("<"):
            steps.append(f"{mod.removeprefix('hoi_audit.')}.{frame.f_code.co_name}")

    sys.setprofile(prof)
    try:
        with contextlib.redirect_stdout(io.StringIO()):   # the audit's own tables are not the figures
            main(["audit", str(folder), "--out", str(tmp / "out"), "--splits", "1", "--seeds", "42", "--epochs", "2"])
    finally:
        sys.setprofile(None)
    seq = [m.removeprefix("hoi_audit.") for m in seq]
    first = list(dict.fromkeys(seq))
    returns = len(seq) - len(first)   # entries into a module after having left it
    path = [st.split(".")[0] for st in steps]
    path = [m for i, m in enumerate(path) if i == 0 or path[i - 1] != m]
    return {"the audit's steps (the handler's and the stage path's direct calls), in order": steps,
            "its modules, in order": path, "its returns to a module it left": len(path) - len(dict.fromkeys(path)),
            "modules any call enters, in order of first entry": first, "cross-module calls": len(seq) - 1,
            "cross-module calls into a module entered before": returns}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", action="store_true", help="also trace a tiny `hoi-audit audit` through the modules")
    ap.add_argument("--quiet", action="store_true", help="leave out the lists (private imports, longest functions)")
    args = ap.parse_args()
    for k, v in static().items():
        if args.quiet and isinstance(v, list) and k not in ("largest",): v = len(v) if k == "private imports" else v[:3]
        print(f"{k}: {v}")
    if args.trace:
        for k, v in trace().items(): print(f"{k}: {v}")
