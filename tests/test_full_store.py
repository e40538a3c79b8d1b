"""The full-scale store carries a run from one sitting to the next (issue 50): a run stopped by its budget, continued in a fresh
clone that holds only what git commits of the store (no data, no model weights, nothing of the first machine), gives results
byte-identical to one uninterrupted run, and finished draws are read back without their data being written again."""
import os, shutil, subprocess, time
from functools import partial
from pathlib import Path
import pandas as pd
import pytest
from hoi_audit.core import BUDGET_ENV, BudgetSpent
from hoi_audit.results import write_results
from hoi_audit.conditions import AuditConfig
from hoi_audit.datasets import SeededDatasets, draw_records, preset_audit_dataset
from hoi_audit.engine import audit_records, history_quality, window_accuracy_records
from hoi_audit.models import TrainConfig
from hoi_audit.store import ExperimentPaths

REPO = Path(__file__).resolve().parents[1]
CFG = AuditConfig(n_tokens=2, train=TrainConfig(d_model=16, n_heads=2, n_layers=1, batch_size=32, lr=3e-3, epochs=6, patience=3))
PAIR = ("recognizer_ba", "gt_history")
ARM = "HOI_AUDIT_TEST_STOP_IN"  # this test's own switch: the draw in which the budget runs out


def _steps(store):
    def stop(dataset):  # spends the budget in the middle of the draw named by $ARM: after its window accuracy, before its audit
        if os.environ.get(ARM) == dataset.name:
            os.environ[BUDGET_ENV] = str(time.time() - 1)
        return pd.DataFrame({"dataset": [dataset.name], "metric": ["stop"], "value": [0.0]})
    return {"window": partial(window_accuracy_records, splits=[1], store=store, config=CFG), "stop": stop,
            "audit": partial(audit_records, splits=[1], seeds=(42,), conditions=PAIR, store=store, config=CFG),
            "quality": partial(history_quality, splits=[1], conditions=PAIR, store=store, config=CFG)}


def _run(out: Path) -> Path:
    "The full-scale layout below `out`: two lazy draws, each draw's records through the store, its features released; the results JSON."
    paths = ExperimentPaths(out, "demo", "full")
    family = SeededDatasets.draw(preset_audit_dataset, (0, 1), "gtea", "tiny", paths.data, lazy=True)
    got = draw_records(family, _steps(paths.store), paths.store, {"audit": CFG.as_dict()}, "demo", release=True)
    records = [{**r, "step": step} for step, frame in got.items() for r in frame.to_dict("records")]
    return write_results(paths.results, "demo", records, scale="full", config={"audit": CFG.as_dict()})


def _committed_copy(src: Path, dst: Path) -> list:
    "What `git add` takes of `src` under the repository's .gitignore, copied to `dst` (a fresh clone of it); the files' paths."
    subprocess.run(["git", "init", "-q", str(src)], check=True)
    shutil.copy(REPO / ".gitignore", src / ".gitignore")
    files = subprocess.run(["git", "-C", str(src), "ls-files", "--others", "--exclude-standard"], check=True,
                           capture_output=True, text=True).stdout.split()
    files = [f for f in files if f != ".gitignore"]
    for f in files:
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / f, dst / f)
    return files


@pytest.fixture
def no_budget():
    "No deadline before the test, and none after it: a deadline the test spends must not reach the next test of this process."
    before = {k: os.environ.pop(k, None) for k in (BUDGET_ENV, ARM)}
    yield
    for k, v in before.items():
        os.environ.pop(k, None)
        if v is not None:
            os.environ[k] = v


def test_a_stopped_run_continues_in_a_fresh_clone_byte_for_byte(tmp_path, no_budget):
    whole = _run(tmp_path / "whole").read_bytes()

    first = tmp_path / "first"
    os.environ[ARM] = "synthetic_gtea_g1"  # the second draw runs out of budget half-way
    with pytest.raises(BudgetSpent, match="was not started"):
        _run(first)
    del os.environ[ARM], os.environ[BUDGET_ENV]
    assert not (first / "results" / "full" / "demo.json").exists()  # no results JSON before its units are complete
    store = first / "results" / "full" / "store" / "demo" / "units"
    assert (store / "records=demo" / "dataset=synthetic_gtea" / "generator_seed=0" / "result.json").exists()
    assert not (store / "records=demo" / "dataset=synthetic_gtea" / "generator_seed=1").exists()
    assert (store / "dataset=synthetic_gtea_g1" / "split=1" / "metric=window_acc").exists()  # the stopped draw's finished unit

    fresh = tmp_path / "fresh"
    files = _committed_copy(first, fresh)
    assert files and all("results/full/store/" in f for f in files)
    assert not any("recognizer=" in f or "/." in f or f.endswith("timing.json") for f in files)  # no weights, nothing local
    assert not (fresh / "raw").exists()  # no data: the finished draw is never written again
    assert _run(fresh).read_bytes() == whole
    written = [p.name for p in (fresh / "raw" / "shared").iterdir()]
    assert len(written) == 1, written  # only the stopped draw was written again (and its features released)
    assert not any((fresh / "raw" / "shared" / w / "features").exists() for w in written)


def test_reproduce_with_a_spent_budget_stops_cleanly_and_says_what_is_pending(tmp_path, no_budget, capsys):
    "The command: a budget spent before the first unit stops the experiment between units, writes no results and no failure."
    from hoi_audit.runner import main
    assert main(["reproduce", "--only", "four_condition", "--out", str(tmp_path), "--budget", "0.001s", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "four_condition: stopped, the budget is spent" in out and "the same command continues" in out
    assert not (tmp_path / "results" / "four_condition.json").exists()
    assert (tmp_path / "runs" / "four_condition.stopped.ipynb").exists()
    assert not list((tmp_path / "store").rglob(".failed/*"))  # nothing recorded as failed
    assert BUDGET_ENV not in os.environ  # the deadline does not outlive the command
