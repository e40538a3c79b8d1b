"""Tests of hoi_audit.scope and the diagnostic presets: the presets' exact Bayes accuracies against an independent enumeration, the
dataset card's errors, the table's gaps against the audit's own gaps and a hand-computed Student-t interval, one split without an
interval, and the command (writes only below --out, same seeds -> byte-identical results JSON)."""
import argparse, itertools, json, math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from hoi_audit.conditions import AuditConfig
from hoi_audit.tables import four_condition_audit
from hoi_audit.core import DataError, HoiAuditError
from hoi_audit.results import read_results, write_results
from hoi_audit.store import ResultStore
from hoi_audit.models import TrainConfig
from hoi_audit.procedural import read_mstcn
from hoi_audit.paper import TABLE13
from hoi_audit.scope import (CARD_FILE, DatasetCard, add_subcommand, format_scope_table, read_card, scope_results_records,
                             scope_table, write_card)
from hoi_audit.presets import preset
from hoi_audit.synthetic import synthetic_dataset, write_synthetic
from hoi_audit.grammar import AnyOrder, Choice, Seq, bayes_accuracy
from conftest import REPO

QUICK = AuditConfig(n_tokens=2, recognizer_folds=2, train=TrainConfig(d_model=16, n_heads=2, n_layers=1, batch_size=64, lr=2e-3, epochs=3, patience=2))


def bayes_by_enumeration(tasks, include_first):
    """Exact Bayes Act@1 of the full ordered history, enumerated directly: tasks is a list of (prior, transcripts) with
    transcripts equally likely; pool (history -> target -> weight) over every query and sum the best guess per history."""
    W = defaultdict(lambda: defaultdict(float))
    for prior, transcripts in tasks:
        for tr in transcripts:
            for i in range(0 if include_first else 1, len(tr)):
                W[tuple(tr[:i])][tr[i]] += prior / len(transcripts)
    return sum(max(w.values()) for w in W.values()) / sum(sum(w.values()) for w in W.values())


def assembly_transcripts(task):
    "Every order of the 4 parts times every alternative of each part (all equally likely by construction)."
    parts = task.grammar.parts
    assert isinstance(task.grammar, AnyOrder) and all(isinstance(p, Choice) and p.probs == (0.5, 0.5) for p in parts)
    return [tuple(p.options[k] for p, k in zip(order, ks)) for order in itertools.permutations(parts) for ks in itertools.product((0, 1), repeat=4)]


def epic_transcripts(task):
    steps = task.grammar.parts
    assert isinstance(task.grammar, Seq) and all(isinstance(s, Choice) and len(s.options) == 5 for s in steps)
    return list(itertools.product(*(s.options for s in steps)))


@pytest.mark.parametrize("name,enumerate_task,planted", [("assembly101", assembly_transcripts, {True: 0.231771, False: 0.302618}),
                                                         ("epic100", epic_transcripts, {True: (1 / 110 + 0.4) / 3, False: 0.2})])
def test_diagnostic_presets_have_their_documented_exact_bayes_accuracy(name, enumerate_task, planted):
    g = preset(name).grammar
    tasks = [(1 / len(g.tasks), enumerate_task(t)) for t in g.tasks]
    for include_first in (True, False):
        independent = bayes_by_enumeration(tasks, include_first)
        assert independent == pytest.approx(bayes_accuracy(preset(name), "full_history", include_first), abs=1e-12)
        assert independent == pytest.approx(planted[include_first], abs=5e-7)   # the values the notebook's table documents


def test_diagnostic_presets_have_the_papers_class_counts_and_split_shapes():
    assert [len(preset(n).grammar.classes) for n in ("assembly101", "epic100")] == [86, 331]
    epic = synthetic_dataset("epic100", "full")
    assert sorted(epic.splits) == [1] and len(epic.videos) == 704
    assert {v.participant for v in epic.videos if v.name in set(epic.splits[1]["test"])} == {f"P{i:02d}" for i in range(1, 7)}
    asm = synthetic_dataset("assembly101", "tiny")
    assert len(asm.splits) == 4 and all(not set(s["train"]) & set(s["test"]) for s in asm.splits.values())


def test_card_errors_name_the_file_and_the_problem(tmp_path):
    assert read_card(tmp_path) == DatasetCard()
    (tmp_path / CARD_FILE).write_text('{"backbone": "I3D", "scope": "primary audit"}')
    with pytest.raises(DataError, match=rf"{tmp_path / CARD_FILE}: scope must be one of"): read_card(tmp_path)
    (tmp_path / CARD_FILE).write_text('["I3D"]')
    with pytest.raises(DataError, match="card.json: a dataset card is a JSON object"): read_card(tmp_path)
    (tmp_path / CARD_FILE).write_text('{"backbone": 3}')
    with pytest.raises(DataError, match="card.json: backbone must be a string"): read_card(tmp_path)
    write_card(tmp_path, DatasetCard(backbone="TSM", scope="diagnostic"))
    assert read_card(tmp_path, scope="primary") == DatasetCard(backbone="TSM", scope="primary")   # options win


@pytest.fixture(scope="module")
def gtea(tmp_path_factory):
    root = write_synthetic(synthetic_dataset("gtea", "tiny"), tmp_path_factory.mktemp("scope") / "gtea")
    write_card(root, DatasetCard(backbone="I3D", scope="diagnostic", name="gtea_tiny"))
    return root


@pytest.fixture(scope="module")
def table(gtea, tmp_path_factory):
    store = ResultStore(tmp_path_factory.mktemp("store"))
    return scope_table([gtea], max_splits=2, seeds=(42,), config=QUICK, store=store), store


def test_table_gaps_are_the_audits_own_and_the_hand_computed_interval(gtea, table):
    result, store = table
    row = result.table.loc["gtea_tiny"]
    own = four_condition_audit(read_mstcn(gtea, name="gtea_tiny"), [1, 2], (42,), ("video_only", "recognizer_bfr", "recognizer_ba", "gt_history"),
                               store, QUICK).gap.set_index(["comparison", "metric"])
    for key in ("ba", "bfr"):
        g = own.loc[(f"gt_history - recognizer_{key}", "act1")]
        assert (row[f"gap_{key}"], row[f"gap_{key}_low"], row[f"gap_{key}_high"]) == pytest.approx((g["gap"], g["ci_low"], g["ci_high"]), abs=1e-12)
    r = result.audits["gtea_tiny"].records.query("metric == 'act1'").groupby(["condition", "split"])["value"].mean()
    d = (r["gt_history"] - r["recognizer_ba"]).to_numpy()
    half = sps.t.ppf(0.975, 1) * d.std(ddof=1) / math.sqrt(2)
    assert (row["gap_ba_low"], row["gap_ba_high"]) == pytest.approx((d.mean() - half, d.mean() + half), abs=1e-9)
    assert row["gt"] - row["ba"] == pytest.approx(row["gap_ba"], abs=1e-9)
    assert (row["backbone"], row["scope"], row["n_classes"], row["n_actions"], row["n_splits"]) == ("I3D", "diagnostic", 11, 10, 2)


def test_one_split_gives_a_gap_without_an_interval(gtea, table):
    _, store = table
    row = scope_table([gtea], max_splits=1, seeds=(42,), config=QUICK, store=store).table.loc["gtea_tiny"]   # units cached by the fixture
    assert row["n_splits"] == 1 and not math.isnan(row["gap_ba"]) and math.isnan(row["gap_ba_low"]) and math.isnan(row["gap_ba_high"])
    assert format_scope_table(TABLE13).loc["EPIC-100", "ΔPH BA [95% split CI]"] == "+0.3"


def run_cli(*argv):
    parser = argparse.ArgumentParser(prog="hoi-audit")
    add_subcommand(parser.add_subparsers())
    args = parser.parse_args(["scope", *map(str, argv)])
    return args.func(args)


def test_command_takes_the_stage_path_and_writes_what_it_wrote_before(gtea, tmp_path):
    """`hoi-audit scope` goes through `stages.run_stage`: its results JSON is, byte for byte, what the command wrote before the stage path
    (`scope_results_records` of the table; the config with its seeds and max_splits, pinned by its SHA-256)."""
    from hoi_audit.core import sha256_json
    out = tmp_path / "s.json"
    assert run_cli(gtea, "--out", out, "--seeds", "42", "--max-splits", "2", "--epochs", "3", "--d-model", "16", "--tokens", "2", "--device", "cpu") == 0
    config = AuditConfig(n_tokens=2, train=TrainConfig(epochs=3, d_model=16, device="cpu"))
    result = scope_table([gtea], max_splits=2, seeds=[42], config=config, store=ResultStore(tmp_path / "store" / "scope"))   # the command's units
    cfg = {**config.as_dict(), "seeds": [42], "max_splits": 2, "interval": "paired Student-t over splits, n_splits - 1 df (none for one split)"}
    before = write_results(tmp_path / "before.json", "scope", scope_results_records(result), scale="full", config=cfg,
                           pins={"config": sha256_json(cfg)})
    assert out.read_bytes() == before.read_bytes()


def test_command_writes_only_below_out_and_is_byte_identical(gtea, tmp_path, capsys):
    before = sorted(p for p in gtea.rglob("*"))
    outs = []
    for k in (1, 2):
        out = tmp_path / f"run{k}"
        assert run_cli(gtea, "--out", out, "--seeds", "42", "--max-splits", "2", "--epochs", "3", "--d-model", "16", "--tokens", "2", "--scale", "small") == 0
        printed = capsys.readouterr().out
        assert f"wrote {out / 'results' / 'scope.json'}" in printed and f"wrote {out / 'store' / 'scope'}/" in printed
        outs.append(out)
    assert sorted(p for p in gtea.rglob("*")) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run1", "run2"]
    files = sorted(p.relative_to(outs[0]).as_posix() for p in outs[0].rglob("*") if p.is_file())
    assert [f for f in files if not f.startswith("store/scope/")] == ["results/scope.json"]      # store.CommandOutput's convention
    assert (outs[0] / "results/scope.json").read_bytes() == (outs[1] / "results/scope.json").read_bytes()
    recs = json.loads((outs[0] / "results/scope.json").read_text())["records"]
    gap = [r for r in recs if r.get("metric") == "gap_act1_ba" and r.get("setting") == "gtea_tiny"][0]
    assert (gap["scope"], gap["backbone"], gap["n"]) == ("diagnostic", "I3D", 2)


def test_command_rejects_mismatched_per_folder_options(gtea, tmp_path):
    with pytest.raises(HoiAuditError, match="--scope: 3 values for 1 folders"):
        run_cli(gtea, "--out", tmp_path / "x", "--scope", "primary,diagnostic,primary")
    with pytest.raises(DataError, match="scope must be one of"):
        run_cli(gtea, "--out", tmp_path / "x", "--scope", "main")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("name", ["assembly101", "epic100"])
def test_diagnostic_presets_write_deterministically_and_within_their_grammar(name, tmp_path):
    ds = synthetic_dataset(name, "tiny", seed=5)
    a, b = write_synthetic(ds, tmp_path / "a"), write_synthetic(synthetic_dataset(name, "tiny", seed=5), tmp_path / "b")
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    data = read_mstcn(a)
    support = {(task, tr) for task, tr, _ in ds.grammar.distribution()}
    for spec in ds.videos:
        assert data.video(spec.name).participant == spec.participant
        acts = tuple(data.classes[c] for c in data.video(spec.name).transcript if c not in data.background)
        assert (spec.task, acts) in support, (spec.name, acts)


def test_committed_full_scale_scope_against_a_reference_interval_the_planted_bayes_and_controls():
    """results/full/scope.json (Tables 4 and 13 at the paper's sizes, every split, 3 seeds): every gap is the paired Student-t (scipy)
    of its split means, and the EPIC-100-like setting's one split has none; where recovery is exact (boundary-aware history on both
    GTEA settings: edit rate 0) the gap is exactly 0; the Breakfast-like preset's GT row sits under the full history's exact Bayes
    accuracy; the BA, BFR and GT units of the six settings are the controls' Table 11 units (copied, not trained again)."""
    root = REPO / "results" / "full"
    r = read_results(root / "scope.json")
    assert r["scale"] == "full" and set(r["config"]["sizes"].values()) == {"full"} and r["config"]["seeds"] == [42, 43, 44]
    d = r["records"]
    acc = d.query("metric == 'act1' and seed == seed")
    per = acc.groupby(["setting", "condition", "split"])["value"].mean()
    assert len(set(acc["setting"])) == 8
    for kind in ("ba", "bfr"):
        for _, g in d[d["metric"] == f"gap_act1_{kind}"].iterrows():
            diff = (per.loc[(g["setting"], "gt_history")] - per.loc[(g["setting"], f"recognizer_{kind}")]).to_numpy()
            assert len(diff) == g["n"] == (1 if g["setting"] == "synthetic_epic100" else 5 if "50salads" in g["setting"] else 4)
            assert g["value"] == pytest.approx(diff.mean(), abs=1e-9)
            if len(diff) == 1: assert math.isnan(g["ci_low"]) and math.isnan(g["ci_high"]); continue
            lo, hi = sps.t.interval(0.95, len(diff) - 1, loc=diff.mean(), scale=sps.sem(diff)) if diff.std() > 0 else (diff.mean(),) * 2
            assert (g["ci_low"], g["ci_high"]) == pytest.approx((lo, hi), abs=1e-9)
    edits = d.query("metric == 'history_edit_rate' and condition == 'recognizer_ba'").groupby("setting")["value"].max()
    gaps = d.query("metric == 'gap_act1_ba'").set_index("setting")["value"]
    assert {"synthetic_gtea", "gtea_labels"} <= set(edits[edits == 0].index)
    assert all(gaps[s] == 0 for s in edits[edits == 0].index)
    bayes = r["config"]["bayes_full_history_include_first"]["synthetic_breakfast"]
    assert bayes == pytest.approx(100 * bayes_accuracy(synthetic_dataset("breakfast", "full", seed=0), "full_history", include_first=True), abs=1e-5)
    assert bayes - 2.5 <= per.loc[("synthetic_breakfast", "gt_history")].mean() <= bayes + 1.0
    controls = read_results(root / "controls.json")["records"].query("control == 'boundary_information' and metric == 'act1'")
    ours = acc.query("condition != 'video_only' and setting in @controls.dataset.unique()").set_index(["setting", "condition", "split", "seed"])["value"]
    theirs = controls.set_index(["dataset", "condition", "split", "seed"])["value"]
    assert len(ours) == len(theirs) == 6 * 3 * 3 * 4 + 2 * 3 * 3 and ours.sort_index().to_dict() == theirs.sort_index().to_dict()
