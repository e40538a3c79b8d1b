"The report: a user's model from a separate file audited from the command line, then its report, checked section by section."
import argparse, json, re
from html.parser import HTMLParser
import numpy as np, pandas as pd, pytest
from scipy import stats
import hoi_audit
from hoi_audit import report
from hoi_audit.conditions import CONDITIONS
from hoi_audit.runner import main
from hoi_audit.core import DataError, sha256_file
from hoi_audit.results import write_results
from hoi_audit.synthetic import synthetic_dataset, write_synthetic
from conftest import REPO

class _Sections(HTMLParser):
    "Every <section id=...> and whether the page parses with balanced sections."
    def __init__(self): super().__init__(); self.ids, self.depth = [], 0
    def handle_starttag(self, tag, attrs):
        if tag == "section": self.ids.append(dict(attrs)["id"]); self.depth += 1
    def handle_endtag(self, tag):
        if tag == "section": self.depth -= 1

def _parser(module):
    p = argparse.ArgumentParser(); module.add_subcommand(p.add_subparsers()); return p

@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    "`hoi-audit audit DATA --architecture tests/user_model.py:make_model` on the tiny preset, two splits, one seed."
    root = tmp_path_factory.mktemp("rep")
    data = write_synthetic(synthetic_dataset("breakfast", "tiny", seed=0), root / "breakfast")
    spec = f"{REPO / 'tests' / 'user_model.py'}:make_model"
    assert main(["audit", str(data), "--architecture", spec, "--conditions", "video_only,recognizer_ba,gt_history",   # the
                 "--splits", "1,2", "--seeds", "42", "--epochs", "6", "--window", "16", "--tokens", "2",   # command line,
                 "--out", str(root / "out")]) == 0                                           # wherever its handler lives
    return data, root / "out" / "results" / "four_condition.json", spec

def test_user_model_audit_from_the_command_line(audited):
    data, results, spec = audited
    payload = json.loads(results.read_text())
    assert payload["config"]["architecture"] == spec
    recs = pd.DataFrame(payload["records"])
    assert set(recs["condition"]) >= {"video_only", "recognizer_ba", "gt_history", "gt_history-recognizer_ba"}
    per = recs[recs["metric"] == "act1"].pivot_table(index="split", columns="condition", values="value")
    gap = recs[(recs["metric"] == "gap_act1")].iloc[0]
    d = per["gt_history"] - per["recognizer_ba"]                      # the gap is the paired t interval of the per-split differences
    lo, hi = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=d.std(ddof=1) / np.sqrt(len(d)))
    assert gap["value"] == pytest.approx(d.mean(), abs=1e-8) and (gap["ci_low"], gap["ci_high"]) == pytest.approx((lo, hi), abs=1e-8)
    assert (results.parent / "intervention_2x2.json").is_file()

def test_report_has_every_section_and_the_numbers(audited, capsys):
    data, results, spec = audited
    args = _parser(report).parse_args(["report", str(results), "--data", str(data)])
    assert args.func(args) == 0
    page = results.with_name("four_condition.report.html")
    assert f"wrote {page}" in capsys.readouterr().out
    html = page.read_text()
    p = _Sections(); p.feed(html)
    payload = json.loads(results.read_text())
    ds = payload["records"][0]["dataset"]                              # one dataset: one dataset section, its steps inside
    assert p.ids == list(report.REPORT_SECTIONS) + [f"dataset-{ds}"] + [f"{ds}-{k}" for k in report.DATASET_SECTIONS]
    assert p.depth == 0
    assert html.startswith("<!DOCTYPE html>") and "data:image/png;base64," in html and "<script" not in html   # self-contained, static
    recs = pd.DataFrame(payload["records"])
    gap = recs[recs["metric"] == "gap_act1"].iloc[0]
    assert f"ΔPH = {gap['value']:+.1f}" in html and f"[{gap['ci_low']:+.1f}, {gap['ci_high']:+.1f}]" in html
    from hoi_audit.core import sha256_file
    from hoi_audit.procedural import layout_fingerprint
    assert layout_fingerprint(data) in html    # the data fingerprint: the audit's own pins.data, which --data recomputes
    assert payload["pins"]["config"] in html and sha256_file(results) in html   # the config the audit pinned, the file
    assert f"hoi_audit {hoi_audit.__version__}" in html
    assert "user model" in html and "user_model.py:make_model" in html   # the model audited
    assert "<b>not run</b>: Context-only" in html and "<b>run</b>: the 2x2" in html
    section = lambda sid: re.search(f'<section id="{sid}">(.*?)</section>', html, re.S).group(1)
    assert "history_edit_rate" in section(f"{ds}-recovery") and "edit distance / annotated length (can exceed 1)" in html
    assert "normalised" not in html
    assert "test GT - test recognizer" in section(f"{ds}-intervention")
    verdict = re.search(f'<div class="verdict" data-dataset="{ds}">(.*?)</div>', html, re.S).group(1)
    assert ("excludes 0" in verdict) == (gap["ci_low"] > 0 or gap["ci_high"] < 0) and f"n = {int(gap['n'])} splits" in verdict

def _with(results, tmp_path, **extra):
    "A copy of a committed results JSON, with top-level keys added as the audit will record them."
    payload = json.loads(results.read_text()) | extra
    out = tmp_path / "four_condition.json"; out.write_text(json.dumps(payload)); return out

def test_report_reads_what_the_results_json_records(tmp_path):
    "conditions, the embedded 2x2, pins.config_sha256 and per-dataset pins.data are read from the JSON itself."
    small = REPO / "results" / "four_condition.json"
    payload = json.loads(small.read_text())
    datasets = sorted({r["dataset"] for r in payload["records"]})
    conditions = {name: {"label": f"{c.label} [recorded]", "inputs": list(c.inputs), "history": c.history,
                         "sources": sorted(c.sources()), "deployable": c.deployable} for name, c in CONDITIONS.items()}
    iv = json.loads((REPO / "results" / "intervention_2x2.json").read_text())["records"]
    pins = {"config_sha256": "c0" * 32, "data": {ds: f"{i:x}" * 64 for i, ds in enumerate(datasets, 10)}}
    html = report.write_report(_with(small, tmp_path, conditions=conditions, intervention={"records": iv}, pins=pins)).read_text()
    assert "GT transcript (oracle) [recorded]" in html and "read from the results JSON&#x27;s conditions" in html
    assert "embedded in four_condition.json" in html and "c0" * 32 in html
    assert all(f"{i:x}" * 64 in html for i, _ in enumerate(datasets, 10))
    assert "not recorded" not in html.split('<section id="verdict">')[0].split("data fingerprint")[1]

def test_report_refuses_a_changed_2x2(tmp_path):
    "A 2x2 referenced with a SHA-256 that is not the file's: a DataError naming the file."
    small = REPO / "results" / "four_condition.json"
    (tmp_path / "iv.json").write_text((REPO / "results" / "intervention_2x2.json").read_text())
    ok = _with(small, tmp_path, intervention_ref={"path": "iv.json", "sha256": sha256_file(tmp_path / "iv.json")})
    assert "iv.json, referenced by four_condition.json, SHA-256 checked" in report.write_report(ok).read_text()
    changed = _with(small, tmp_path, intervention_ref={"path": "iv.json", "sha256": "0" * 64})
    with pytest.raises(DataError, match=r"iv.json: SHA-256 [0-9a-f]{64} is not the 0{64}"): report.write_report(changed)

def test_report_errors_name_the_file(tmp_path):
    with pytest.raises(DataError, match="no such results JSON"): report.write_report(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"; bad.write_text("{not json")
    with pytest.raises(DataError, match="bad.json: not a readable results JSON"): report.write_report(bad)
    other = write_results(tmp_path / "o.json", "architectures", [{"metric": "a", "value": 1.0}])
    with pytest.raises(DataError, match="experiment 'architectures'"): report.write_report(other)

def test_report_of_another_stage_has_its_pins_settings_and_section(tmp_path, capsys):
    "`hoi-audit report` on a registered stage's results (the committed lta.json): a page with its pins, settings and every record."
    lta = json.loads((REPO / "results" / "lta.json").read_text())
    page = tmp_path / "lta.html"
    assert main(["report", str(REPO / "results" / "lta.json"), "--out", str(page)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {page}"
    html = page.read_text()
    assert html.count('<section id="stage-lta">') == 1 and html.count("<table") == 1 + len({r["metric"] for r in lta["records"]})
    for name, pin in lta["pins"].items():
        assert f"<b>{name}</b>: <code>{pin}</code>" in html
    moc = [r for r in lta["records"] if r["metric"] == "moc"]
    table = html.split('id="metric-moc">')[1].split("</table>")[0]
    assert table.count("<tr") == len(moc) + 1 and re.findall(r"<th>(.*?)</th>", table)[-1] == "value"   # each record a row, its value last
    assert f"<td>{moc[0]['value']:.6f}</td>" in table
    assert report.report_path(REPO / "results" / "lta.json").name == "lta.report.html"
