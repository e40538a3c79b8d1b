"The report: a user's model from a separate file audited from the command line, then its report, checked section by section."
import argparse, json, re
from html.parser import HTMLParser
import numpy as np, pandas as pd, pytest
from scipy import stats
from hoi_audit import audit, report
from hoi_audit.core import DataError, write_results
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
    args = _parser(audit).parse_args(["audit", str(data), "--architecture", spec, "--conditions", "video_only,recognizer_ba,gt_history",
                                      "--splits", "1,2", "--seeds", "42", "--epochs", "6", "--window", "16", "--tokens", "2", "--out", str(root / "out")])
    assert args.func(args) == 0
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
    assert p.ids == list(report.REPORT_SECTIONS) and p.depth == 0
    assert html.startswith("<!DOCTYPE html>") and "data:image/png;base64," in html and "<script" not in html   # self-contained, static
    recs = pd.DataFrame(json.loads(results.read_text())["records"])
    gap = recs[recs["metric"] == "gap_act1"].iloc[0]
    assert f"ΔPH = {gap['value']:+.1f}" in html and f"[{gap['ci_low']:+.1f}, {gap['ci_high']:+.1f}]" in html
    from hoi_audit.core import sha256_folder
    assert sha256_folder(data) in html                                 # the data fingerprint
    assert "user model" in html and "user_model.py:make_model" in html   # the model audited
    assert "<b>not run</b>: Context-only" in html and "<b>run</b>: the 2x2" in html
    section = lambda sid: re.search(f'<section id="{sid}">(.*?)</section>', html, re.S).group(1)
    assert "history_edit_rate" in section("recovery") and "Test GT - test recognizer".lower() in section("intervention").lower()

def test_report_errors_name_the_file(tmp_path):
    with pytest.raises(DataError, match="no such results JSON"): report.write_report(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"; bad.write_text("{not json")
    with pytest.raises(DataError, match="bad.json: not a readable results JSON"): report.write_report(bad)
    other = write_results(tmp_path / "o.json", "architectures", [{"metric": "a", "value": 1.0}])
    with pytest.raises(DataError, match="experiment 'architectures'"): report.write_report(other)
