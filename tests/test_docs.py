"""The documentation site (`make docs`): built with no warning (sphinx-build -W -n), every internal link and anchor resolves,
each library notebook has a page with its API entries (signature, parameter table from the docments, a source link), each
experiment page shows an executed run with at least one figure and one table, and the site has its sections, search and
previous/next links."""
import html, importlib, inspect, json, os, re, shutil, subprocess, sys
from pathlib import Path
import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "tools"))
import docs_sources

LIBRARY = sorted((REPO / "nbs").glob("[0-9]*.ipynb"))
EXPERIMENTS = sorted(p.stem for p in (REPO / "nbs" / "experiments").glob("*.ipynb") if not p.name.startswith((".", "_")))
SECTIONS = ["Start", "Library stages", "Experiments", "Running on your data", "Case studies", "Running on a cluster", "Reliability"]
SOURCES = [*(REPO / "nbs").rglob("*.ipynb"), *(REPO / "docs").rglob("*.*"), REPO / "tools" / "docs_sources.py", REPO / "settings.ini"]

@pytest.fixture(scope="module")
def site():
    "The built site; built here when missing or older than a notebook or a docs source (make test builds it first)."
    out = REPO / "_docs"
    newest = max(p.stat().st_mtime for p in SOURCES if p.is_file() and "__pycache__" not in p.parts)
    index = out / "index.html"
    if not index.exists() or index.stat().st_mtime < newest:
        r = subprocess.run(["make", "docs", "VENV=" + str(Path(sys.executable).parent.parent)], cwd=REPO, capture_output=True, text=True)
        assert r.returncode == 0, "make docs failed (a warning is an error):\n" + r.stdout[-4000:] + r.stderr[-4000:]
    return out

def text_of(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8"))).replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"')

def module_of(nb: Path) -> str:
    for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
        m = re.search(r"#\|\s*default_exp\s+([\w.]+)", "".join(cell["source"]))
        if m: return m.group(1)
    raise AssertionError(f"{nb.name} has no default_exp")

@pytest.mark.parametrize("nb", LIBRARY, ids=lambda p: p.name)
def test_library_page_has_an_entry_per_export_with_signature_parameters_and_source(site, nb):
    page = site / f"{docs_sources.page_name(nb)}.html"
    assert page.exists(), f"{nb.name} produced no page {page.name}"
    doc = page.read_text(encoding="utf-8")
    module = importlib.import_module(f"hoi_audit.{module_of(nb)}")
    exported = [n for n in getattr(module, "__all__", []) if inspect.isfunction(getattr(module, n)) or inspect.isclass(getattr(module, n))]
    exported = [n for n in exported if getattr(getattr(module, n), "__module__", None) == module.__name__]
    for name in exported:
        full = f"{module.__name__}.{name}"
        m = re.search(rf'<dt class="sig[^"]*" id="{re.escape(full)}">(.*?)</dt>(.*?)</dd>', doc, re.S)
        assert m, f"{page.name}: no API entry for {name}"
        sig, body = m.group(1), m.group(2)
        assert re.search(r'href="_modules/[^"#]+\.html#' + re.escape(name) + '"', sig), f"{page.name}: {name} has no source link"
        obj = getattr(module, name)
        if inspect.isfunction(obj):
            for param in inspect.signature(obj).parameters:
                assert param in html.unescape(re.sub(r"<[^>]+>", "", sig)), f"{page.name}: the signature of {name} lacks {param!r}"
            from fastcore.docments import docments
            documented = [p for p, v in docments(obj, full=True).items() if p != "return" and v.get("docment")]
            if documented:
                assert 'class="docments' in body, f"{page.name}: {name} has docments but no parameter table"
                cells = html.unescape(re.sub(r"<[^>]+>", "", body))
                for p in documented: assert p in cells, f"{page.name}: the parameter table of {name} lacks {p!r}"

def test_source_links_reach_the_highlighted_source(site):
    targets = set()
    for page in site.glob("*.html"):
        targets |= set(re.findall(r'href="(_modules/[^"#]+\.html)#', page.read_text(encoding="utf-8")))
    assert targets, "no source link on any page"
    for t in sorted(targets): assert (site / t).exists(), f"source link to a missing page {t}"

def test_pages_have_titles_and_descriptions_from_the_front_matter(site):
    for nb in LIBRARY + [REPO / "nbs" / "experiments" / f"{e}.ipynb" for e in EXPERIMENTS]:
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        first = next(c for c in cells if c["cell_type"] == "markdown")
        m = re.match(r"#\s+(.+)\n+>\s*(.+)", "".join(first["source"]))
        assert m, f"{nb.name}: the first markdown cell is not '# title' and '> description'"
        title, description = m.group(1).strip(), re.sub(r"[`*]", "", m.group(2)).strip()
        page = site / (f"experiments/{nb.stem}.html" if nb.parent.name == "experiments" else f"{docs_sources.page_name(nb)}.html")
        doc = page.read_text(encoding="utf-8")
        tab = html.unescape(re.search(r"<title>(.*?)</title>", doc, re.S).group(1))
        curly = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})  # Sphinx's smart quotes
        assert re.search(r"<title>" + re.escape(html.escape(title, quote=False)), doc) or title in tab.translate(curly), (
            f"{page.name}: the tab is not titled {title!r}")
        assert re.search(r"<h1>.+</h1>", doc), f"{page.name}: no H1"
        text = text_of(page)
        assert description[:60] in " ".join(text.split()), f"{page.name}: no description from the front matter"
        meta = re.search(r'<meta content="([^"]*)" name="description"', doc) or re.search(r'<meta name="description" content="([^"]*)"', doc)
        assert meta and html.unescape(meta.group(1))[:40] == description[:40], f"{page.name}: no <meta name=description> from the front matter"
        assert "title:" not in text[:2000] and "output-file:" not in text, f"{page.name}: raw front matter shown as text"

def test_no_quarto_markup_or_off_site_self_links(site):
    for page in site.rglob("*.html"):
        doc = page.read_text(encoding="utf-8")
        assert '{target="_blank"' not in html.unescape(doc), f"{page}: Quarto link attributes shown as text"
        assert "hoi-audit.github.io" not in doc, f"{page}: a cross-reference points off-site"

@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_page_is_an_executed_run_with_a_figure_and_a_table(site, name):
    page = site / "experiments" / f"{name}.html"
    assert page.exists(), f"no page for the experiment {name}"
    doc = page.read_text(encoding="utf-8")
    images = re.findall(r'<img[^>]*src="([^"]+)"', doc)
    assert images, f"{page.name}: no figure"
    for src in images: assert (page.parent / src).resolve().exists(), f"{page.name}: figure {src} missing"
    assert "<table" in doc, f"{page.name}: no table"
    assert "This page shows an executed run" in doc, f"{page.name}: not built from an executed notebook"

def test_site_has_sections_search_contents_and_previous_next(site):
    index = (site / "index.html").read_text(encoding="utf-8")
    captions = [html.unescape(c) for c in re.findall(r'<p aria-level="2" class="caption" role="heading"><span class="caption-text">(.*?)</span>', index)]
    assert captions == SECTIONS, f"sidebar sections {captions}"
    assert (site / "search.html").exists() and (site / "searchindex.js").exists(), "no search"
    audit = (site / "tables.html").read_text(encoding="utf-8")
    assert 'class="prev-next-area' in audit or 'class="left-prev"' in audit, "no previous/next links"
    assert "bd-toc" in audit and "#a-complete-example" in audit, "no per-page contents"

def test_internal_links_and_anchors_resolve(site):
    """pytest-check-links over every page written from the notebooks and docs/ (anchors included; nothing off-site is fetched).
    Sphinx's generated pages (the highlighted source, the indexes) are link targets, checked where pages link to them."""
    pages = [p.relative_to(site).as_posix() for p in sorted(site.glob("*.html")) + sorted(site.glob("experiments/*.html"))
             if p.stem not in ("genindex", "py-modindex", "search")]
    assert len(pages) >= len(LIBRARY) + len(EXPERIMENTS) + 4
    r = check_links(site, files=pages)
    assert r.returncode == 0, "broken internal links or anchors:\n" + r.stdout[-6000:]

def test_link_check_catches_a_broken_anchor(site, tmp_path):
    copy = tmp_path / "site"
    copy.mkdir()
    shutil.copy2(site / "index.html", copy / "index.html")
    shutil.copy2(site / "tables.html", copy / "tables.html")
    (copy / "broken.html").write_text('<html><body><a href="tables.html#no-such-anchor">x</a><a href="gone.html">y</a></body></html>')
    r = check_links(copy, files=["broken.html"])
    assert r.returncode != 0 and "no-such-anchor" in r.stdout and "gone.html" in r.stdout, r.stdout[-3000:]

def check_links(folder: Path, files=None) -> subprocess.CompletedProcess:
    "pytest-check-links over `files` of `folder`; tests/link_parse_cache.py parses each target page once (2.7 min -> 0.5 min on the site)."
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "link_parse_cache", "--rootdir", str(folder), "--check-links",
            "--check-anchors", "--links-ext=html", "--check-links-ignore", r"https?://.*", "--check-links-ignore", r"mailto:.*", *(files or ["."])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(args, cwd=folder, capture_output=True, text=True, env=env)

def test_an_experiment_run_is_current_only_with_the_same_code(tmp_path):
    src = REPO / "nbs" / "experiments" / f"{EXPERIMENTS[0]}.ipynb"
    nb = json.loads(src.read_text(encoding="utf-8"))
    injected = {"cell_type": "code", "id": "p", "metadata": {"tags": ["injected-parameters"]}, "source": "scale = 'small'", "outputs": [],
                "execution_count": 1}
    run = dict(nb, cells=nb["cells"][:2] + [injected] + nb["cells"][2:])
    (tmp_path / "run.ipynb").write_text(json.dumps(run))
    assert docs_sources.is_current(tmp_path / "run.ipynb", src)
    code = next(c for c in run["cells"] if c["cell_type"] == "code" and c["id"] != "p")
    code["source"] = "".join(code["source"]) + "\nx = 1"
    (tmp_path / "run.ipynb").write_text(json.dumps(run))
    assert not docs_sources.is_current(tmp_path / "run.ipynb", src), "an edited notebook's old run was taken as current"
    assert not docs_sources.is_current(tmp_path / "missing.ipynb", src)

def test_an_experiment_page_takes_the_current_prose_and_the_runs_outputs(tmp_path):
    """A run made before the notebook's text was edited: the page shows the new text, the run's outputs and its parameters cell."""
    src = REPO / "nbs" / "experiments" / f"{EXPERIMENTS[0]}.ipynb"
    nb = json.loads(src.read_text(encoding="utf-8"))
    codes = [k for k, c in enumerate(nb["cells"]) if c["cell_type"] == "code"]
    injected = {"cell_type": "code", "id": "p", "metadata": {"tags": ["injected-parameters"]}, "source": "scale = 'small'", "outputs": [],
                "execution_count": 1}
    ran = [dict(c, outputs=[{"output_type": "stream", "name": "stdout", "text": f"cell {k}"}]) if c["cell_type"] == "code" else c
           for k, c in enumerate(nb["cells"])]
    run = dict(nb, cells=ran[:codes[0] + 1] + [injected] + ran[codes[0] + 1:])
    (tmp_path / "run.ipynb").write_text(json.dumps(run))
    edited = json.loads(json.dumps(nb))
    md = next(c for c in edited["cells"] if c["cell_type"] == "markdown")
    md["source"] = "The text as edited after the run."
    edited["cells"].append({"cell_type": "markdown", "id": "new", "metadata": {}, "source": "A paragraph added after the run."})
    (tmp_path / "src.ipynb").write_text(json.dumps(edited))
    out = docs_sources.with_current_prose(tmp_path / "run.ipynb", tmp_path / "src.ipynb", tmp_path / "prose" / "page.ipynb")
    cells = json.loads(out.read_text())["cells"]
    assert [c["source"] for c in cells if c["cell_type"] == "markdown"] == [c["source"] for c in edited["cells"] if c["cell_type"] == "markdown"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code[1]["id"] == "p" and [c["outputs"][0]["text"] for c in code if c["id"] != "p"] == [f"cell {k}" for k in codes]
    assert len(cells) == len(edited["cells"]) + 1 and [f.name for f in (tmp_path / "prose").iterdir()] == ["page.ipynb"]   # no temporary left


def test_fault_table_lists_every_fault_test():
    "docs/reliability.md's fault table is what tools/fault_table.py writes from tests/test_faults.py: a row per test, no row without one."
    import fault_table
    page = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
    assert fault_table.render(page) == page, "docs/reliability.md is out of date: run python tools/fault_table.py"
    named = set(re.findall(r"\| `(test_\w+)` \|", page))
    tests = {n for n in re.findall(r"^def (test_\w+)", (REPO / "tests" / "test_faults.py").read_text(), flags=re.M)}
    assert named == tests and len(tests) >= 33, (sorted(named ^ tests), len(tests))
