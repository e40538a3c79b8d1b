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

NUMBERED = re.compile(r"^(\d+)[a-z]?_")

def module_numbers() -> dict:
    "module -> the number of the notebook that exports it."
    out = {}
    for nb in LIBRARY:
        m = re.search(r"#\|\s*default_exp\s+(\w+)", "".join(json.loads(nb.read_text())["cells"][0]["source"]))
        if m: out[m[1]] = int(NUMBERED.match(nb.name)[1])
    return out

def upward_imports(nb: Path, numbers: dict) -> list[str]:
    "Module-level `from hoi_audit.x import` / `from .x import` in exported cells that name a module of a higher-numbered notebook."
    bad, mine = [], int(NUMBERED.match(nb.name)[1])
    for cell in json.loads(nb.read_text())["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] != "code" or not EXPORT.search(src): continue
        for m in re.finditer(r"^from (?:hoi_audit\.|\.)(\w+) import", src, re.M):   # not indented: module level
            if numbers.get(m[1], -1) > mine: bad.append(f"{m[1]} ({numbers[m[1]]})")
        for m in re.finditer(r"^from (?:hoi_audit|\.) import ([\w, ]+)", src, re.M):
            bad += [f"{x} ({numbers[x]})" for x in (n.strip() for n in m[1].split(",")) if numbers.get(x, -1) > mine]
    return bad

@pytest.mark.parametrize("nb", LIBRARY, ids=lambda p: p.name)
def test_stages_read_in_dependency_order(nb):
    "A notebook's module imports (at module level) only modules of lower-numbered notebooks, so the stage map reads in order."
    assert NUMBERED.match(nb.name), f"{nb.name}: a library notebook's name starts with its number"
    assert not upward_imports(nb, module_numbers()), f"{nb.name} imports later stages: {upward_imports(nb, module_numbers())}"

def test_notebook_numbers_are_unique():
    numbers = [NUMBERED.match(nb.name)[1] for nb in LIBRARY]
    assert len(numbers) == len(set(numbers)), sorted(numbers)
