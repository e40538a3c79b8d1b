"The report of the committed results, as a reader sees it: one section per dataset, nothing pooled, a verdict that is the records."
import re, shutil, subprocess
from html.parser import HTMLParser
import numpy as np, pandas as pd, pytest
from hoi_audit import report, verdict
from hoi_audit.conditions import CONDITIONS
from hoi_audit.tables import METRICS
from hoi_audit.stats import LEAD_WITH_DRAWS
from conftest import REPO

COMMITTED = [REPO / "results" / "four_condition.json", REPO / "results" / "full" / "four_condition.json"]

class _Page(HTMLParser):
    "Each table (its enclosing dataset section and section id, its rows of cell text) and each verdict block's text."
    def __init__(self):
        super().__init__()
        self.sections, self.tables, self.verdicts = [], [], {}
        self.row = self.cell = self.verdict = None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section": self.sections.append((a.get("id"), a.get("data-dataset")))
        elif tag == "table":
            self.tables.append({"dataset": next((d for _, d in reversed(self.sections) if d), None),
                                "section": self.sections[-1][0], "rows": []})
        elif tag == "tr": self.row = []
        elif tag in ("td", "th"): self.cell = ""
        elif tag == "div" and "verdict" in (a.get("class") or ""): self.verdict = a["data-dataset"]; self.verdicts[self.verdict] = ""
        elif tag == "p" and self.verdict: self.verdicts[self.verdict] += " "
    def handle_endtag(self, tag):
        if tag == "section": self.sections.pop()
        elif tag in ("td", "th"): self.row.append(self.cell.strip()); self.cell = None
        elif tag == "tr": self.tables[-1]["rows"].append(self.row); self.row = None
        elif tag == "div": self.verdict = None
    def handle_data(self, data):
        if self.cell is not None: self.cell += data
        if self.verdict: self.verdicts[self.verdict] += data

@pytest.fixture(scope="module", params=COMMITTED, ids=lambda p: str(p.relative_to(REPO)))
def page(request, tmp_path_factory):
    "The report of a committed results JSON (written to a temporary folder), parsed, with the records it reads."
    out = report.write_report(request.param, tmp_path_factory.mktemp("page") / "report.html")
    parsed = _Page(); parsed.feed(out.read_text())
    return out, parsed, verdict.load_audit(request.param)["records"]

def _mean_over_splits(r:pd.DataFrame) -> float:
    "Per split the mean over seeds, then the mean over splits (Table 1's estimate), straight from the records."
    return r[r["split"] != "all"].groupby("split")["value"].mean().mean()

def test_every_table_names_its_dataset(page):
    _, p, records = page
    datasets = set(records["dataset"])
    assert len(datasets) == 2 and set(p.verdicts) == datasets
    for t in p.tables:
        if t["dataset"] is not None: assert t["dataset"] in datasets; continue   # inside its dataset's section
        header, *rows = t["rows"]
        assert header[0] == "dataset", f"table in section {t['section']!r} has no dataset column and no dataset section"
        assert sorted(r[0] for r in rows) == sorted(datasets)   # one row per dataset, no 'all'/'mean' row
    html = page[0].read_text()
    for ds in datasets: assert f'data-dataset="{ds}"><h2>Dataset: {ds}</h2>' in html

def test_no_table_value_is_a_cross_dataset_mean(page):
    "Each Table 1 cell is its own dataset's mean over splits; where the pooled mean differs, it appears in no cell there."
    _, p, records = page
    labels = {n: c.label for n, c in CONDITIONS.items()}
    scored = records[records["metric"].isin(METRICS) & ~records["condition"].str.contains("-")]
    checked = 0
    for t in p.tables:
        if not (t["section"] or "").endswith("-table1"): continue
        own = scored[scored["dataset"] == t["dataset"]]
        header, *rows = t["rows"]
        for row in rows:
            cond = next(c for c, l in labels.items() if l == row[0])
            for name, cell in zip(header[1:], row[1:]):
                metric = next(m for m in METRICS if verdict.METRIC_NAMES[m] == name)
                shown = cell.split(" [")[0]
                mine = _mean_over_splits(own[(own["condition"] == cond) & (own["metric"] == metric)])
                assert shown == f"{mine:.1f}", (t["dataset"], cond, metric)
                both = scored[(scored["condition"] == cond) & (scored["metric"] == metric)]
                pooled = both[both["split"] != "all"].groupby("split")["value"].mean().mean()   # what the old page printed
                if f"{pooled:.1f}" != f"{mine:.1f}": assert shown != f"{pooled:.1f}"
                checked += 1
    assert checked >= 2 * 3 * 4   # two datasets, three metrics, at least four conditions

def test_the_verdict_is_the_records(page):
    "Every decimal number in each verdict is one of its dataset's record values (gap, interval, scores, recovery)."
    _, p, records = page
    for ds, text in p.verdicts.items():
        r = records[records["dataset"] == ds]
        gap = r[(r["metric"] == "gap_act1") & (r["condition"] == "gt_history-recognizer_ba")].iloc[0]
        act1 = lambda c: _mean_over_splits(r[(r["condition"] == c) & (r["metric"] == "act1")])
        test = lambda m: _mean_over_splits(r[(r["condition"] == "recognizer_ba") & (r["metric"] == m) & (r["part"] == "test")])
        expected = [f"{gap['value']:+.1f}", f"{act1('gt_history'):.1f}", f"{act1('recognizer_ba'):.1f}",
                    f"{gap['ci_low']:+.1f}", f"{gap['ci_high']:+.1f}", f"{act1('context_only'):.1f}",
                    f"{test('history_edit_rate'):.3f}", f"{test('history_item_acc'):.3f}"]
        k = int(gap["n_generator_seeds"]) if "n_generator_seeds" in gap and gap["n_generator_seeds"] == gap["n_generator_seeds"] else 1
        # 2 draws: the interval over the (draw, split) units, and the one over the draws' means beside it; from LEAD_WITH_DRAWS draws
        # on, the gap's interval is the draws' (printed once) and n counts the draws
        if 1 < k < LEAD_WITH_DRAWS: expected += [f"{gap['ci_low_draws']:+.1f}", f"{gap['ci_high_draws']:+.1f}"]
        assert sorted(re.findall(r"[-+]?\d+\.\d+", text)) == sorted(expected), ds
        excludes = gap["ci_low"] > 0 or gap["ci_high"] < 0
        n = (f"n = {int(gap['n'])} splits" if k == 1 else f"n = {int(gap['n'])} units ({k} generator seeds x {int(gap['n']) // k} splits)"
             if k < LEAD_WITH_DRAWS else f"n = {k} generator seeds (a unit is a draw's mean over its splits)")
        assert k < LEAD_WITH_DRAWS or int(gap["n"]) == k
        assert f"the interval {'excludes' if excludes else 'includes'} 0" in text and n in text
        ran = set(r["condition"])
        run, not_run = re.search(r"Controls run: (.*?)\. Not run: (.*?)\. ", text).groups()
        assert {CONDITIONS[c].label for c in verdict.control_rows() if c in ran} == set(run.split("; "))
        assert {CONDITIONS[c].label for c in verdict.control_rows() if c not in ran} == set(not_run.split("; "))

def test_integers_print_as_integers(page):
    _, p, _ = page
    for t in p.tables:
        header, *rows = t["rows"]
        for col in ("n", "n_splits"):
            if col in header: assert all(re.fullmatch(r"\d+|–", row[header.index(col)]) for row in rows), t["section"]

def test_the_page_renders_in_a_browser(page, tmp_path):
    "Headless Chromium draws the page: a PNG that is not one flat colour."
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None: pytest.skip("chromium is not installed (apt-get install -y chromium): the page was not rendered")
    png = tmp_path / "report.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={png}", "--window-size=1400,3000",
                    page[0].resolve().as_uri()], check=True, capture_output=True, timeout=120)
    assert png.is_file() and png.stat().st_size > 10_000
    from PIL import Image
    pixels = np.asarray(Image.open(png).convert("RGB"))
    assert pixels.shape[:2] == (3000, 1400) and len(np.unique(pixels.reshape(-1, 3), axis=0)) > 10   # text, tables, a figure
