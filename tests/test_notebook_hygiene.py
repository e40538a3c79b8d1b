"Notebook rules that the docs build and papermill depend on, checked without running anything."
import ast, json, re
from pathlib import Path
import pytest
from conftest import REPO

LIBRARY = sorted((REPO / "nbs").glob("[0-9]*.ipynb"))
EXPORT = re.compile(r"^#\|\s*(export|exports|exporti|exec_doc)\b", re.M)

def mixed_import_cells(path: Path) -> list[str]:
    "Non-exported code cells that import and also do something else: nbdev's doc processing would execute them."
    bad = []
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] != "code": continue
        src = "".join(cell["source"])
        if EXPORT.search(src) or re.search(r"^#\|\s*eval:\s*false", src, re.M): continue
        try: tree = ast.parse("\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!"))))
        except SyntaxError: continue
        has_import = any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree))
        only_imports = all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in tree.body)
        if has_import and not only_imports: bad.append(f"cell {i}: {src.splitlines()[0][:70]!r}")
    return bad

@pytest.mark.parametrize("nb", LIBRARY, ids=lambda p: p.name)
def test_no_cell_mixes_imports_with_code(nb):
    assert not mixed_import_cells(nb), f"{nb.name}: move these imports into an import-only cell: {mixed_import_cells(nb)}"

@pytest.mark.parametrize("nb", LIBRARY, ids=lambda p: p.name)
def test_library_notebook_declares_its_module(nb):
    cells = json.loads(nb.read_text())["cells"]
    assert re.search(r"#\|\s*default_exp\s+\w+", "".join(cells[0]["source"])), f"{nb.name}: first cell must be #| default_exp"

NUMBERED = re.compile(r"^(\d+)([a-z]?)_")

def stage_key(nb: Path) -> tuple:
    "A library notebook's place in the stage map: its number, then its letter (17a_conditions < 17b_engine < 17c_tables < 18_controls)."
    m = NUMBERED.match(nb.name)
    return (int(m[1]), m[2])

def module_keys() -> dict:
    "module -> the stage key of the notebook that exports it."
    out = {}
    for nb in LIBRARY:
        m = re.search(r"#\|\s*default_exp\s+(\w+)", "".join(json.loads(nb.read_text())["cells"][0]["source"]))
        if m: out[m[1]] = stage_key(nb)
    return out

def named_modules(tree: ast.AST, modules: dict) -> list[tuple[str, str]]:
    """(module, how) for every package module the code names: a `from`/`import` anywhere (module level or inside a function), and
    `importlib.import_module`/`__import__` of a string. A module built from parts (an f-string naming hoi_audit) is reported as '?'."""
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            mod = n.module or ""
            if n.level == 1 or mod == "hoi_audit" or mod.startswith("hoi_audit."):
                base = mod.removeprefix("hoi_audit").lstrip(".")
                if base: out.append((base.split(".")[0], "import"))
                else: out += [(a.name, "import") for a in n.names if a.name in modules]
        elif isinstance(n, ast.Import):
            out += [(a.name.split(".")[1], "import") for a in n.names if a.name.startswith("hoi_audit.")]
        elif isinstance(n, ast.Call) and n.args and (getattr(n.func, "attr", None) == "import_module" or getattr(n.func, "id", None) in ("import_module", "__import__")):
            arg = n.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("hoi_audit."):
                out.append((arg.value.split(".")[1], "importlib"))
            elif isinstance(arg, ast.JoinedStr) and any(isinstance(v, ast.Constant) and "hoi_audit" in str(v.value) for v in arg.values):
                out.append(("?", "importlib of a module built from a string"))
    return out

def upward_imports(nb: Path, keys: dict) -> list[str]:
    "Exported code that imports (at any depth, or through importlib) a module of a later notebook, or one it cannot name."
    bad, mine = [], stage_key(nb)
    for cell in json.loads(nb.read_text())["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] != "code" or not EXPORT.search(src): continue
        for mod, how in named_modules(ast.parse(src), keys):
            if mod == "?" or keys.get(mod, (-1, "")) > mine: bad.append(f"{mod} ({how}, stage {keys.get(mod)})")
    return bad

@pytest.mark.parametrize("nb", LIBRARY, ids=lambda p: p.name)
def test_stages_read_in_dependency_order(nb):
    """A notebook's module imports only modules of earlier notebooks: at module level, inside functions, and through importlib,
    so the stage map reads in order at run time too (no circle is closed by a late import)."""
    assert NUMBERED.match(nb.name), f"{nb.name}: a library notebook's name starts with its number"
    assert not upward_imports(nb, module_keys()), f"{nb.name} imports later stages: {upward_imports(nb, module_keys())}"

def test_the_dependency_check_sees_late_and_string_imports():
    "The check above can fail: a function-level import, an importlib string and an f-string module are each caught."
    keys = {"core": (0, ""), "report": (19, ""), "tables": (17, "c")}
    code = ("def f():\n    from hoi_audit.report import write_report\n"
            "def g():\n    importlib.import_module('hoi_audit.report')\n"
            "def h(name):\n    importlib.import_module(f'hoi_audit.{name}')\n")
    found = named_modules(ast.parse(code), keys)
    assert found == [("report", "import"), ("report", "importlib"), ("?", "importlib of a module built from a string")]
    assert [m for m, _ in found if m == "?" or keys.get(m, (-1, "")) > keys["tables"]] == ["report", "report", "?"]

def test_notebook_numbers_are_unique():
    keys = [stage_key(nb) for nb in LIBRARY]
    assert len(keys) == len(set(keys)), sorted(keys)

def test_the_formatter_keeps_every_docment_on_its_parameters_line():
    "tools/format_notebooks.py formats a cell only when its AST and its docments are unchanged: a split docment line is refused."
    import importlib.util
    spec = importlib.util.spec_from_file_location("format_notebooks", REPO / "tools" / "format_notebooks.py")
    fmt = importlib.util.module_from_spec(spec); spec.loader.exec_module(fmt)
    before = "def f(a:int, # the count\n      b:str|None=None, # the name\n     ) -> int: # the result\n    return a\n"
    layout = "def f(\n    a: int,  # the count\n    b: str | None = None,  # the name\n) -> int:  # the result\n    return a\n"
    moved = "def f(\n    a: int,  # the count\n    b: str\n    | None = None,  # the name\n) -> int:  # the result\n    return a\n"
    split_return = "def f(a: int, b=None) -> tuple[\n    int\n]:  # the result\n    return a\n"
    assert fmt.same_meaning(before, layout)
    assert not fmt.same_meaning(before, moved)                                 # b's docment left b's line
    assert not fmt.same_meaning(before, before.replace("return a", "return b"))  # another AST
    assert not fmt.same_meaning("def f(a) -> tuple[int]:  # the result\n    return a\n", split_return)

EXPERIMENTS = sorted((REPO / "nbs" / "experiments").glob("[!._]*.ipynb"))

def direct_feature_writers(path: Path) -> list[str]:
    "Calls of the shared feature writers an experiment should reach through `hoi_audit.datasets` (which fixes the dtype per size)."
    src = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
    return sorted(set(re.findall(r"\b(shared_synthetic|shared_label_features)\s*\(", src)))

@pytest.mark.parametrize("nb", EXPERIMENTS, ids=lambda p: p.name)
def test_experiments_read_datasets_through_one_place(nb):
    "One feature dtype per size everywhere: two experiments must not build the same real-label dataset in two dtypes (issue 33)."
    assert not direct_feature_writers(nb), f"{nb.name} calls {direct_feature_writers(nb)}: use datasets.preset_audit_dataset / label_audit_dataset"

def test_the_feature_writer_check_can_fail(tmp_path):
    nb = tmp_path / "x.ipynb"
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "source": ["root = shared_label_features(src, d, spec)\n"]}]}))
    assert direct_feature_writers(nb) == ["shared_label_features"]

# Every number in an experiment's prose comes from a record (issue 50): prose quotes results through `stats.Quote` in generated
# Markdown cells, never typed into a markdown cell. A notebook not converted yet keeps at most the typed numbers it has (the count
# only goes down: lower it as prose is converted); a converted notebook, and every new one, has none.
EXPERIMENTS = sorted((REPO / "nbs" / "experiments").glob("*.ipynb"))
TYPED = re.compile(r"(?<![\w.])[+\-−]?\d+\.\d+(?![\w.])")   # a decimal number: 27.7, +25.3, −24.4, 0.48 (not 2.4.14)
TYPED_NUMBERS_LEFT = {}  # every experiment converted (issue 50): an entry here would hold a notebook's remaining count

def typed_numbers(path: Path) -> list[str]:
    "The decimal numbers typed into the markdown cells of a notebook (inline code spans, which name settings, excluded)."
    cells = json.loads(path.read_text())["cells"]
    return [n for c in cells if c["cell_type"] == "markdown" for n in TYPED.findall(re.sub(r"`[^`]*`", "", "".join(c["source"])))]

@pytest.mark.parametrize("nb", EXPERIMENTS, ids=lambda p: p.name)
def test_experiment_prose_types_no_new_numbers(nb):
    found, allowed = typed_numbers(nb), TYPED_NUMBERS_LEFT.get(nb.stem, 0)
    assert len(found) <= allowed, (f"{nb.name}: {len(found)} numbers typed into its prose ({found[:8]} ...), {allowed} allowed: "
                                   "quote them from the results records (stats.Quote in a generated Markdown cell)")
    assert len(found) == allowed, f"{nb.name}: {len(found)} typed numbers left: lower TYPED_NUMBERS_LEFT[{nb.stem!r}] to {len(found)}"

def test_the_typed_number_check_sees_decimals_not_versions():
    text = "gap +27.7 [+25.3, +30.2], −24.4 and 0.48; nbdev 2.4.14, `frame_noise=2.2`, 4 splits, 89%"
    assert TYPED.findall(re.sub(r"`[^`]*`", "", text)) == ["+27.7", "+25.3", "+30.2", "−24.4", "0.48"]
