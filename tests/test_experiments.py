"Every experiment notebook runs end to end at the small scale through `hoi-audit reproduce` and writes its outputs."
import json
from pathlib import Path
import pytest
from conftest import REPO, hoi_audit

EXPERIMENTS = sorted(p.stem for p in (REPO / "nbs" / "experiments").glob("*.ipynb") if p.stem != "demo_provenance")

@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_runs_small(name, tmp_path):
    r = hoi_audit("reproduce", "--only", name, "--out", str(tmp_path), "--quiet")
    assert r.returncode == 0, r.stderr[-4000:]
    payload = json.loads((tmp_path / "results" / f"{name}.json").read_text())
    assert payload["experiment"] == name and payload["scale"] == "small"
    assert payload["records"], f"{name} wrote no records"
    assert all(isinstance(rec["value"], (int, float)) or rec["value"] is None for rec in payload["records"])
    assert list((tmp_path / "figures").glob("*.png")), f"{name} wrote no figure"
    assert (tmp_path / "runs" / f"{name}.ipynb").exists()
