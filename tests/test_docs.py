"The offline docs build: each library notebook yields a page that shows its exported functions' signatures."
import ast, html, inspect, importlib, re, subprocess
from pathlib import Path
import pytest

def _library_notebooks(repo):
    return sorted(p for p in (repo / "nbs").glob("[0-9]*.ipynb"))

def _module_of(nb: Path) -> str:
    import json
    for cell in json.loads(nb.read_text())["cells"]:
        m = re.search(r"#\|\s*default_exp\s+(\S+)", "".join(cell["source"]))
        if m: return m.group(1)
    raise AssertionError(f"{nb.name} has no default_exp")

@pytest.fixture(scope="module")
def docs(repo=Path(__file__).resolve().parent.parent):
    "The rendered docs; built here when missing or older than a notebook (make test builds them first)."
    out = repo / "_docs"
    newest = max(p.stat().st_mtime for p in (repo / "nbs").rglob("*.ipynb"))
    if not out.exists() or min((p.stat().st_mtime for p in out.glob("*.html")), default=0) < newest:
        r = subprocess.run(["make", "docs", "VENV=" + str(Path(__import__("sys").executable).parent.parent)],
                           cwd=repo, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return out

def test_each_library_notebook_has_a_page_with_its_signatures(docs, repo):
    notebooks = _library_notebooks(repo)
    assert notebooks, "no library notebooks found"
    for nb in notebooks:
        page = docs / f"{nb.stem}.html"
        assert page.exists(), f"{nb.name} produced no page {page.name}"
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
        module = importlib.import_module(f"hoi_audit.{_module_of(nb)}")
        exported = [n for n in getattr(module, "__all__", []) if inspect.isfunction(getattr(module, n))]
        assert exported or nb.stem.startswith("0"), f"{nb.name} exports no function"
        for name in exported:
            fn = getattr(module, name)
            assert re.search(rf"def {name}\(", text), f"{page.name}: no signature for {name}"
            for param in inspect.signature(fn).parameters:
                assert param in text, f"{page.name}: the signature of {name} does not show parameter {param!r}"
