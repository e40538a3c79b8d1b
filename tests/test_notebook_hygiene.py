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
