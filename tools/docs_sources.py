"""Write the Sphinx source tree of the documentation site (`make docs`), from the notebooks, with nbdev's own processing.

Where Quarto exists, `nbdev_docs` builds the site from the same notebooks; elsewhere `make docs` runs this script and then
`sphinx-build` (myst-nb renders the notebooks, autodoc the API entries; configuration in `docs/conf.py`). This script:

- runs nbdev's notebook processors (front matter, hidden and exported cells, `show_doc` cells after each exported definition,
  backtick links), except `exec_show_docs`, which executes every cell that imports something;
- turns each `show_doc(name)` cell into an autodoc entry (signature, docstring, the docments parameter table, a source link),
  and nbdev's links to `<doc_host><doc_baseurl>/<page>.html#<anchor>` into cross-references that Sphinx resolves and checks;
- takes the experiment pages from *executed* notebooks: `RUNS/<name>.ipynb` (what `make reproduce` writes) where its code is
  the current notebook's, otherwise it executes the experiment at the small scale (`hoi_audit.runner.reproduce`) into
  `EXECUTED/`, whose result store makes the next build skip every finished unit; the page's prose is always the current
  notebook's (`EXECUTED/prose/`), so editing text needs no rerun;
- adds the committed full-scale figures (`figures/full/*.png`) to the experiment page whose notebook names them.

Usage: python tools/docs_sources.py SRC_OUT [--runs runs] [--executed _build/reproduce]
"""
from __future__ import annotations
import argparse, configparser, importlib, json, re, shutil, sys
from pathlib import Path

from hoi_audit.core import write_text

REPO = Path(__file__).resolve().parent.parent
SECTIONS = [  # sidebar sections: (caption, entries); the library and experiment entries are filled in below
    ("Start", ["start"]),
    ("Library stages", None),
    ("Experiments", None),
    ("Running on your data", ["your_data"]),
    ("Case studies", ["case_studies"]),
    ("Running on a cluster", ["on_a_cluster"]),
    ("Reliability", ["reliability"]),
]

def _settings() -> dict:
    cfg = configparser.ConfigParser(delimiters=["="]); cfg.read(REPO / "settings.ini")
    return dict(cfg["DEFAULT"])

def page_name(nb: Path) -> str:
    "nbdev's (and Quarto's) page name: the notebook's stem without its number prefix (`00_core` -> `core`)."
    return re.sub(r"^\d+[a-z]?_", "", nb.stem)

# ---------------------------------------------------------------- nbdev's processing, without executing anything
def nbdev_process(path: Path):
    "The notebook after nbdev's docs processors (the ones `nbdev_docs` runs), except those that execute or only serve Quarto."
    from execnb.nbio import read_nb
    from nbdev.process import NBProcessor
    from nbdev.processors import FilterDefaults
    skip = {"exec_show_docs", "clean_show_doc", "insert_warning", "add_fold"}
    nb = read_nb(path)
    nb.path_ = str(path)
    procs = [p for p in FilterDefaults().procs() if p.__name__ not in skip]
    NBProcessor(nb=nb, procs=procs).process()
    return nb

class Symbols:
    "The library's symbols, from nbdev's index (`hoi_audit/_modidx.py`): nbdev's link targets -> Python names."
    def __init__(self, settings: dict):
        modidx = importlib.import_module(f"{settings['lib_path']}._modidx").d
        s = modidx["settings"]
        self.prefix = s["doc_host"].rstrip("/") + "/" + s["doc_baseurl"].strip("/") + "/"
        self.by_url = {url: name for mod in modidx["syms"].values() for name, (url, _) in mod.items()}
        self.names = {name for mod in modidx["syms"].values() for name in mod}
        self.package = settings["lib_path"]
        self.link = re.compile(r"\[`?([^\]`]+?)`?\]\(" + re.escape(self.prefix) + r"([^)\s]+)\)")

    def xrefs(self, text: str) -> str:
        "nbdev's links into the library's pages -> `{py:obj}` roles (checked by Sphinx); anything else is kept."
        def sub(m):
            name = self.by_url.get(m.group(2))
            if name is None: return m.group(0)
            return f"{{py:obj}}`{m.group(1)} <{name}>`"
        text = self.link.sub(sub, text)
        # `module.name` in backticks, which nbdev leaves as code, when the library has it
        def qualified(m):
            full = f"{self.package}.{m.group(1)}"
            return f"{{py:obj}}`{m.group(1)} <{full}>`" if full in self.names else m.group(0)
        parts = re.split(r"(```.*?```)", text, flags=re.S)   # never inside fenced code
        return "".join(p if i % 2 else re.sub(r"(?<![\[`{])`(\w+\.\w+(?:\.\w+)?)`(?![`\]])", qualified, p)
                       for i, p in enumerate(parts))

    def resolve(self, shown: str, module: str) -> str | None:
        "The full name of what `show_doc(shown)` documents in `module`."
        for full in (f"{module}.{shown}",) + tuple(sorted(n for n in self.names if n.endswith("." + shown))):
            if full in self.names: return full
        return None

_SHOW_DOC = re.compile(r"^\s*show_doc\(\s*([\w.]+)\s*(?:,.*)?\)\s*$", re.S)

def _kind(full: str) -> str:
    import inspect
    mod, _, rest = full.partition(".")
    parts = full.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try: obj = importlib.import_module(".".join(parts[:i]))
        except ImportError: continue
        for p in parts[i:]: obj = getattr(obj, p)
        if inspect.isclass(obj): return "class"
        if len(parts) - i > 1: return "method"
        return "function"
    raise ImportError(full)

def _private_bases(full: str) -> list:
    "The package's private base classes of the class `full` (a long class written as one cell per part: `class C(_Part1, _Part2)`)."
    module, _, name = full.rpartition(".")
    try: cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError): return []   # a nested class: documented with its owner
    package = full.split(".")[0]
    return [b for b in cls.__mro__[1:] if b.__module__.split(".")[0] == package and b.__name__.startswith("_")]

def _api_entry(full: str, separately: set) -> str:
    "A MyST autodoc entry for `full`; a class lists its public methods, except those that have their own entry."
    kind = _kind(full)
    if kind == "class":
        opts = [":members:"]
        if _private_bases(full): opts.append(":inherited-members: object")   # a class assembled from private steps shows their methods
        excluded = sorted(n.rsplit(".", 1)[1] for n in separately if n.startswith(full + "."))
        if excluded: opts.append(":exclude-members: " + ", ".join(excluded))
        return "```{eval-rst}\n.. autoclass:: " + full + "\n" + "".join(f"   {o}\n" for o in opts) + "```"
    return "```{eval-rst}\n.. auto" + kind + ":: " + full + "\n```"

def _in_definition_order(cells):
    "nbdev inserts the `show_doc` cells of one exported cell in reverse: put each run of them back in definition order."
    i = 0
    while i < len(cells):
        j = i
        while j < len(cells) and getattr(cells[j], "has_sd", False): j += 1
        if j > i + 1: cells[i:j] = cells[i:j][::-1]
        i = max(j, i + 1)

# ---------------------------------------------------------------- one notebook -> one page
_ids = iter(range(10**9))

def _cell(cell_type, source, metadata=None, outputs=None, execution_count=None):
    c = {"cell_type": cell_type, "id": f"c{next(_ids)}", "metadata": dict(metadata or {}), "source": source}
    if cell_type == "code": c.update(outputs=list(outputs or []), execution_count=execution_count)
    return c

def _plain(o):
    if isinstance(o, dict): return {k: _plain(v) for k, v in o.items() if not k.endswith("_")}
    if isinstance(o, list): return [_plain(v) for v in o]
    return o

PAGES = {}   # notebook stem or experiment name -> its page's source path below the site root (filled by write)

def page_links(markdown: str, prefix: str) -> str:
    "`00_core` or `demo_provenance` in backticks, naming a notebook of the site -> a link to its page."
    def sub(m):
        target = PAGES.get(m.group(1))
        return f"[`{m.group(1)}`]({prefix}{target})" if target else m.group(0)
    return re.sub(r"(?<![\[`])`(\w+)`(?![`\]])", sub, markdown)

def page(nb_path: Path, symbols: Symbols, module: str | None = None, executed: Path | None = None, prefix: str = "") -> dict:
    """The MyST notebook of one page: `nb_path` processed by nbdev (or `executed`, the executed copy of it), with a title
    and a description from its front matter, API entries for its `show_doc` cells and checked cross-references."""
    nb = nbdev_process(executed or nb_path)
    fm = getattr(nb, "frontmatter_", {}) or {}
    title = fm.get("title") or page_name(nb_path)
    head = f"# {title}\n"
    if fm.get("description"): head += "\n{.page-description}\n" + fm["description"] + "\n"
    _in_definition_order(nb.cells)
    cells = [_cell("markdown", head)]
    if module: cells.append(_cell("markdown", "```{py:module} " + module + "\n```"))
    shown = [m.group(1) for c in nb.cells if c.cell_type == "code" and (m := _SHOW_DOC.match(c.source or ""))]
    separately = {symbols.resolve(s, module or "") for s in shown} - {None}
    for c in nb.cells:
        if c.cell_type == "raw": continue   # nbdev's front matter (already the title above)
        src = c.source or ""
        if c.cell_type == "markdown":
            cells.append(_cell("markdown", page_links(symbols.xrefs(src), prefix)))
            continue
        m = _SHOW_DOC.match(src) if c.cell_type == "code" else None
        if m:
            full = symbols.resolve(m.group(1), module or "")
            if full: cells.append(_cell("markdown", _api_entry(full, separately))); continue
        d = getattr(c, "directives_", {}) or {}
        tags = list(c.get("metadata", {}).get("tags", []))
        if d.get("echo:") == ["false"]: tags.append("remove-input")
        if d.get("output:") == ["false"]: tags.append("remove-output")
        if d.get("include:") == ["false"]: continue
        if "injected-parameters" in tags:   # papermill's: say what this run was, without its machine's paths
            params = nb.metadata.get("papermill", {}).get("parameters", {})
            shown = ", ".join(f"`{k}={v!r}`" for k, v in params.items() if k != "out_dir")
            cells.append(_cell("markdown", f"{{.run-parameters}}\nThis page shows an executed run ({shown or 'the defaults'})."))
            continue
        outputs = [_links_in_output(o, symbols) for o in _plain(list(c.get("outputs", [])))]
        cells.append(_cell("code", src, {"tags": tags} if tags else {}, outputs, c.get("execution_count")))
    meta = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}, "language_info": {"name": "python"}}
    if fm.get("description"): meta["myst"] = {"html_meta": {"description": re.sub(r"[`*]", "", fm["description"])}}   # myst-nb: front matter
    return {"cells": cells, "metadata": meta,
            "nbformat": 4, "nbformat_minor": 5}

def _links_in_output(o, symbols):
    md = o.get("data", {}).get("text/markdown")
    if md is not None:
        o["data"]["text/markdown"] = symbols.xrefs("".join(md) if isinstance(md, list) else md)
    return o

# ---------------------------------------------------------------- experiments: executed notebooks
def _code(nb: dict) -> list:
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in nb["cells"]
            if c["cell_type"] == "code" and "injected-parameters" not in c.get("metadata", {}).get("tags", [])]

def is_current(executed: Path, source: Path) -> bool:
    "Is `executed` a complete papermill run of the notebook `source` as it is now (same code, no failed cell)?"
    try: run = json.loads(executed.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError): return False
    if any(o.get("output_type") == "error" for c in run["cells"] for o in c.get("outputs", [])): return False
    return _code(run) == _code(json.loads(source.read_text(encoding="utf-8")))

def with_current_prose(executed: Path, source: Path, dest: Path) -> Path:
    """A copy of the current run `executed` (see `is_current`: the same code as `source`) at `dest`, with the prose of `source` as it
    is now: its markdown cells, and the run's code cells with their outputs in their places. Editing a notebook's text must not need
    hours of rerunning to reach its page."""
    run, src = (json.loads(p.read_text(encoding="utf-8")) for p in (executed, source))
    lead, groups = [], []   # each code cell of the run with papermill's parameters cell, if it follows it; one before any code
    for c in (c for c in run["cells"] if c["cell_type"] == "code"):
        if "injected-parameters" in c.get("metadata", {}).get("tags", []): (groups[-1] if groups else lead).append(c)
        else: groups.append([c])
    groups, cells = iter(groups), lead
    for c in src["cells"]: cells += next(groups) if c["cell_type"] == "code" else [c]
    return write_text(dest, json.dumps(dict(run, cells=cells), indent=1))

def executed_experiments(notebooks: dict, runs: Path, build: Path) -> dict:
    "Experiment name -> its executed notebook: from `runs` where current, else executed now at the small scale into `build`."
    chosen, stale = {}, []
    for name, src in notebooks.items():
        for candidate in (runs / f"{name}.ipynb", build / "runs" / f"{name}.ipynb"):
            if is_current(candidate, src): chosen[name] = candidate; break
        else: stale.append(name)
    if stale:
        from hoi_audit.runner import reproduce
        print(f"docs: executing {', '.join(stale)} at the small scale into {build} (make reproduce would give {runs}/)", flush=True)
        for done in reproduce(out=build, scale="small", only=stale, progress=False):
            chosen[done["experiment"]] = Path(done["notebook"])
    return {name: chosen[name] for name in notebooks}

def full_scale_cells(name: str, executed: Path, dest: Path) -> list:
    "A section with the committed full-scale figures that this experiment's notebook names."
    nb = json.loads(executed.read_text(encoding="utf-8"))
    text = "\n".join(("".join(c["source"]) if isinstance(c["source"], list) else c["source"]) + json.dumps(c.get("outputs", []))
                      for c in nb["cells"])
    figures = [f for f in sorted((REPO / "figures" / "full").glob("*.png"))
               if re.search(r"[\"'/]" + re.escape(f.stem) + r"(\.png)?[\"']", text) or f.stem.startswith(name)]
    if not figures: return []
    dest.mkdir(parents=True, exist_ok=True)
    body = ["## Full-scale figures\n", "The committed figures of the full-scale run (`make reproduce SCALE=full`), from `figures/full/`; "
            "their numbers are in `results/full/`.\n"]
    for f in figures:
        shutil.copy2(f, dest / f.name)
        body.append(f"```{{figure}} full/{f.name}\n:alt: {f.stem}, full scale\n\n`figures/full/{f.name}`\n```\n")
    return [_cell("markdown", "\n".join(body))]

# ---------------------------------------------------------------- the source tree
def toctree(caption: str, entries: list) -> str:
    return "```{toctree}\n:caption: " + caption + "\n:hidden:\n\n" + "\n".join(entries) + "\n```"

def write(out: Path, runs: Path, build: Path):
    settings = _settings()
    symbols = Symbols(settings)
    nbs = REPO / settings.get("nbs_path", "nbs")
    if out.exists(): shutil.rmtree(out)
    (out / "experiments").mkdir(parents=True)
    for extra in (REPO / "docs").glob("*.md"): shutil.copy2(extra, out / extra.name)

    library_nbs = sorted(nbs.glob("[0-9]*.ipynb"))
    index_text = (nbs / "index.ipynb").read_text(encoding="utf-8")
    def mentioned(name):
        i = index_text.find(f"`{name}`")
        return (i if i >= 0 else len(index_text), name)
    notebooks = {p.stem: p for p in sorted((nbs / "experiments").glob("*.ipynb"), key=lambda p: mentioned(p.stem))
                 if not p.name.startswith((".", "_"))}
    PAGES.update({nb.stem: f"{page_name(nb)}.ipynb" for nb in library_nbs})
    PAGES.update({name: f"experiments/{name}.ipynb" for name in notebooks})

    library = []
    for nb in library_nbs:
        m = re.search(r"#\|\s*default_exp\s+([\w.]+)", nb.read_text(encoding="utf-8"))
        module = f"{settings['lib_path']}.{m.group(1)}" if m else None
        (out / f"{page_name(nb)}.ipynb").write_text(json.dumps(page(nb, symbols, module), indent=1), encoding="utf-8")
        library.append(page_name(nb))

    experiments = []
    for name, executed in executed_experiments(notebooks, runs, build).items():
        executed = with_current_prose(executed, notebooks[name], build / "prose" / f"{name}.ipynb")
        doc = page(notebooks[name], symbols, executed=executed, prefix="../")
        doc["cells"] += full_scale_cells(name, executed, out / "experiments" / "full")
        (out / "experiments" / f"{name}.ipynb").write_text(json.dumps(doc, indent=1), encoding="utf-8")
        experiments.append(f"experiments/{name}")

    index = page(nbs / "index.ipynb", symbols)
    fill = {"Library stages": library, "Experiments": experiments}
    index["cells"].append(_cell("markdown", "\n\n".join(toctree(c, e if e is not None else fill[c]) for c, e in SECTIONS)))
    (out / "index.ipynb").write_text(json.dumps(index, indent=1), encoding="utf-8")
    print(f"docs: {len(library)} library pages, {len(experiments)} experiment pages, index -> {out}/")

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", type=Path, help="the Sphinx source folder to (re)write")
    p.add_argument("--runs", type=Path, default=REPO / "runs", help="executed experiment notebooks of make reproduce")
    p.add_argument("--executed", type=Path, default=REPO / "_build" / "reproduce", help="where missing ones are executed")
    a = p.parse_args()
    write(a.out.resolve(), a.runs.resolve(), a.executed.resolve())
