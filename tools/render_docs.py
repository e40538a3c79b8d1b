"""Offline HTML docs from nbdev's processed notebooks (`_proc/`), for machines without Quarto.

`make docs` first runs nbdev's notebook processing (what `nbdev_proc_nbs` does, minus its Quarto install step), which renders
every exported symbol's signature and parameter table with `show_doc`. This script then turns each processed notebook into
one HTML page in `_docs/`, hiding what Quarto would hide (`#| echo: false` inputs, `#| hide` cells, the directive lines) and
adding a navigation line. Where Quarto exists, `nbdev_docs` builds the full site from `_quarto.yml` instead.
"""
import json, sys
from pathlib import Path
import nbformat
from nbconvert import HTMLExporter

def _directives(source: str) -> dict:
    out = {}
    for line in source.splitlines():
        if not line.startswith("#|"): break
        key, _, value = line[2:].strip().partition(":")
        out[key.strip()] = value.strip()
    return out

def clean(nb_json: dict, nav: str) -> nbformat.NotebookNode:
    cells = []
    for cell in nb_json["cells"]:
        cell.pop("has_sd", None)
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code":
            d = _directives(source)
            if "hide" in d or d.get("include") == "false": continue
            body = "\n".join(l for l in source.splitlines() if not l.startswith("#|"))
            if d.get("echo") == "false" or not body.strip():
                if not cell.get("outputs"): continue
                cell.setdefault("metadata", {})["jupyter"] = {"source_hidden": True}
                cell.setdefault("metadata", {})["transient"] = {"remove_source": True}
                body = ""
            cell["source"] = body
        cells.append(cell)
    nb_json["cells"] = [{"cell_type": "markdown", "id": "nav", "metadata": {}, "source": nav}] + cells
    return nbformat.reads(json.dumps(nb_json), as_version=4)   # reads() joins list-of-lines sources

def main(proc="_proc", out="_docs"):
    proc, out = Path(proc), Path(out)
    notebooks = sorted(proc.rglob("*.ipynb"))
    if not notebooks: sys.exit(f"render_docs: no processed notebooks in {proc}: run nbdev's processing first (make docs)")
    out.mkdir(parents=True, exist_ok=True)
    pages = {nb: f"{nb.stem}.html" for nb in notebooks}
    nav = " · ".join(f"[{nb.stem}]({page})" for nb, page in pages.items())
    exporter = HTMLExporter(template_name="lab")
    exporter.exclude_input_prompt = exporter.exclude_output_prompt = True
    for nb_path, page in pages.items():
        nb = clean(json.loads(nb_path.read_text(encoding="utf-8")), nav)
        for cell in nb.cells:   # Quarto's remove_source has no nbconvert equivalent: drop hidden inputs here
            if cell.get("metadata", {}).get("transient", {}).get("remove_source"): cell["source"] = ""
        html, _ = exporter.from_notebook_node(nb)
        (out / page).write_text(html, encoding="utf-8")
    print(f"render_docs: {len(pages)} pages in {out}/")

if __name__ == "__main__":
    main(*sys.argv[1:])
