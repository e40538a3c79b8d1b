"Tests of hoi_audit.success: provenance (the forecast set never reads a future latent), the hard test set, metrics vs sklearn, resume, the CLI."
import argparse, json
from itertools import permutations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, brier_score_loss, log_loss, roc_auc_score
from sklearn.linear_model import SGDClassifier
from sklearn.preprocessing import StandardScaler

from hoi_audit.core import DataError, PinMismatch, ProvenanceError
from hoi_audit.results import read_results
from hoi_audit.provenance import TrackedArray, assert_never_read
from hoi_audit.episodes import Episodes, make_episodes, write_episodes
from hoi_audit.success import (FEATURE_CONDITIONS, FEATURE_SETS, ProbeInputs, add_subcommand, assemble, feature_blocks, fit_probe,
                               forecast_features, hard_test_pairs, probe_inputs, run_success_probes)
from hoi_audit.worldmodel import PersistenceModel, train_forecaster


@pytest.fixture(scope="module")
def ep():
    return make_episodes("tiny", seed=0)


@pytest.fixture(scope="module")
def run(ep, tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    return out, run_success_probes(ep, out, seeds=(42, 43), horizons=(2, 4), forecaster_steps=60, n_boot=50, progress=False)


@pytest.mark.parametrize("horizon", [1, 2, 4])
def test_forecast_set_never_reads_future_latents(ep, horizon):
    model = train_forecaster(ep, "jepa", seed=42, steps=5, batch_size=32)
    inp = probe_inputs(ep, horizon)
    future = TrackedArray(inp.future_latents, "future_latents")
    guarded = ProbeInputs(inp.visible, inp.future_commands, future)
    fc = forecast_features(model, guarded.visible, guarded.future_commands)
    deployable = [fs for fs in FEATURE_SETS if FEATURE_CONDITIONS[fs].deployable]
    blocks = feature_blocks(guarded, fc, deployable)
    for fs in deployable: assemble(fs, blocks)
    assert_never_read(future)
    assemble("oracle", feature_blocks(guarded, fc, ["oracle"]))
    with pytest.raises(ProvenanceError, match="future_latents"):     # the oracle set does read them: the tracker can fail
        assert_never_read(future)


def test_oracle_blocks_are_refused_by_every_deployable_set(ep):
    inp = probe_inputs(ep, 4)
    blocks = feature_blocks(inp, forecast_features(PersistenceModel(), inp.visible, inp.future_commands))
    oracle_blocks = [b for b in blocks["oracle"] if b.source == "oracle"]
    assert {b.name for b in oracle_blocks} == {"true_endpoint", "true_delta"}
    for fs in ("context", "action", "context_action", "forecast"):
        with pytest.raises(ProvenanceError, match="true_endpoint"):
            FEATURE_CONDITIONS[fs].assemble(blocks[fs] + oracle_blocks)
    assert not FEATURE_CONDITIONS["oracle"].deployable


def test_feature_values_hand_checked(ep):
    inp = probe_inputs(ep, 2)
    X = assemble("oracle", feature_blocks(inp, None, ["oracle"]))
    D = ep.latent_dim
    np.testing.assert_allclose(X[:, :D], ep.latents[:, 5])                           # last visible = bin 5 at H = 2
    np.testing.assert_allclose(X[:, D:2 * D], ep.latents[:, :6].astype(float).mean(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(X[:, 2 * D:2 * D + 7], ep.commands[:, 6:].astype(float).mean(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(X[:, -2 * D:-D], ep.latents[:, -1])
    np.testing.assert_allclose(X[:, -D:], ep.latents[:, -1] - ep.latents[:, 5], rtol=1e-5, atol=1e-6)


def test_probe_is_the_specified_sklearn_pipeline():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4)); y = X[:, 0] + rng.normal(size=300) > 1.0
    scaler = StandardScaler().fit(X[:200])
    ref = SGDClassifier(loss="log_loss", class_weight="balanced", average=True, random_state=43).fit(scaler.transform(X[:200]), y[:200].astype(int))
    np.testing.assert_allclose(fit_probe(X[:200], y[:200], X[200:], seed=43), ref.predict_proba(scaler.transform(X[200:]))[:, 1])


def test_hard_pairs_are_optimal_against_brute_force(ep):
    held = ep.split_of("heldout")
    for trial in range(3):
        rng = np.random.default_rng(trial)
        fail, succ = rng.choice(np.flatnonzero(~held.success), 3, replace=False), rng.choice(np.flatnonzero(held.success), 5, replace=False)
        mini = held.subset(np.r_[fail, succ])
        mini = Episodes(mini.episode_id, mini.split, mini.latents, mini.commands, mini.success, np.full(8, 3, np.int64), np.zeros(8, np.int64))
        cost = lambda f, s: float(np.linalg.norm(mini.latents[f, 0].astype(float) - mini.latents[s, 0].astype(float)))
        brute = min(sum(cost(f, s) for f, s in zip(range(3), p)) for p in permutations(range(3, 8), 3))
        assert abs(hard_test_pairs(mini)["distance"].sum() - brute) < 1e-6


def test_hard_pairs_read_no_prediction_and_only_the_initial_latent(ep):
    held = ep.split_of("heldout")
    pairs = hard_test_pairs(held)
    later = Episodes(held.episode_id, held.split, np.concatenate([held.latents[:, :1], held.latents[::-1, 1:]], 1),
                     held.commands[::-1], held.success, held.language, held.length_bin)
    assert hard_test_pairs(later)[["failure", "success"]].equals(pairs[["failure", "success"]])
    assert len(pairs) == int((~held.success).sum()) and pairs["success"].nunique() == len(pairs)
    assert (held.success[pairs["success"]]).all() and (~held.success[pairs["failure"]]).all()


def test_results_json_records_and_metrics_match_sklearn(ep, run):
    out, r = run
    payload = read_results(out / "results" / "success_probes.json")
    rec = payload["records"]
    per_seed = rec[rec["seed"].notna()]
    assert set(per_seed["test_set"]) == {"full", "hard"} and set(per_seed["feature_set"]) == set(FEATURE_SETS)
    assert set(per_seed["metric"]) == {"auroc", "auprc", "balanced_accuracy", "brier", "nll", "ece"}
    assert len(per_seed) == 2 * 5 * 2 * 2 * 6                                  # horizons x sets x seeds x test sets x metrics
    from hoi_audit.store import ExperimentPaths, Unit
    held = ep.split_of("heldout")
    store = ExperimentPaths(out, "success_probes").store
    unit_dir = store.root / "units" / "horizon=4" / "feature_set=forecast" / "seed=43"
    p = np.load(unit_dir / "p_heldout.npy")
    row = lambda m, t="full": per_seed.query("horizon == 4 and feature_set == 'forecast' and seed == 43 and test_set == @t and metric == @m")["value"].item()
    assert abs(row("auroc") - roc_auc_score(held.success, p)) < 1e-9
    assert abs(row("auprc") - average_precision_score(held.success, p)) < 1e-9
    assert abs(row("brier") - brier_score_loss(held.success, p)) < 1e-9
    assert abs(row("nll") - log_loss(held.success, np.clip(p, np.finfo(float).eps, 1 - np.finfo(float).eps))) < 1e-6
    hard = np.sort(np.r_[r["pairs"]["failure"], r["pairs"]["success"]])
    assert abs(row("auroc", "hard") - roc_auc_score(held.success[hard], p[hard])) < 1e-9
    comp = r["comparison"].query("primary and test_set == 'full' and metric == 'auroc'")
    assert len(comp) == 1 and comp["ci_low"].item() <= comp["value"].item() <= comp["ci_high"].item()


def test_resume_skips_finished_units_and_gives_identical_bytes(ep, run, monkeypatch):
    out, r = run
    first = (out / "results" / "success_probes.json").read_bytes()
    import hoi_audit.success as success
    monkeypatch.setattr(success, "train_forecaster", lambda *a, **k: (_ for _ in ()).throw(AssertionError("retrained")))
    monkeypatch.setattr(success, "fit_probe", lambda *a, **k: (_ for _ in ()).throw(AssertionError("refit")))
    run_success_probes(ep, out, seeds=(42, 43), horizons=(2, 4), forecaster_steps=60, n_boot=50, progress=False)
    assert (out / "results" / "success_probes.json").read_bytes() == first


def test_cli_on_a_user_folder_and_bad_folder(ep, tmp_path):
    folder = write_episodes(ep, tmp_path / "episodes")
    p = argparse.ArgumentParser(); sub = p.add_subparsers(); add_subcommand(sub)
    out = tmp_path / "o" / "s.json"
    args = p.parse_args(["success", "--episodes", str(folder), "--out", str(out), "--seeds", "44", "--horizons", "1",
                         "--forecaster-steps", "20", "--n-boot", "20", "--quiet"])
    assert args.func(args) == 0
    payload = json.loads(out.read_text())
    assert payload["experiment"] == "success_probes" and "outcome_audit" in payload["pins"] and payload["scale"] == "full"
    assert sorted(p.name for p in out.parent.iterdir()) == ["s.json", "store"]        # --out FILE.json: the store beside it, nothing else
    assert (out.parent / "store" / "success_probes" / "plan.json").is_file()
    (folder / "labels.csv").write_text((folder / "labels.csv").read_text().replace(",0\n", ",1\n", 1))
    with pytest.raises(PinMismatch, match="labels.csv"):
        args.func(args)


def test_one_forecaster_per_seed_by_default(ep, run):
    out, r = run
    from hoi_audit.store import ExperimentPaths
    units = ExperimentPaths(out, "success_probes").store.root / "units" / "stage=forecaster"
    assert sorted(p.name for p in units.iterdir()) == ["seed=42", "seed=43"]
    a, b = (np.load(units / f"seed={s}" / "H4_heldout_endpoint.npy") for s in (42, 43))
    assert not np.allclose(a, b)                                      # two trained models, not one copied
    cfg = read_results(out / "results" / "success_probes.json")["config"]["forecaster"]
    assert cfg["seed"] == "per probe seed"


def test_hard_set_intervals_resample_pairs(ep, run):
    "The hard-set interval is the cluster bootstrap over pairs (a hand-built cluster id per pair), not over episodes."
    from hoi_audit.store import ExperimentPaths
    from hoi_audit.stats import PROBE_METRICS, bootstrap_interval
    from hoi_audit.success import seed_mean_metric
    out, r = run
    held, pairs = ep.split_of("heldout"), r["pairs"]
    hard = np.sort(np.r_[pairs["failure"], pairs["success"]])
    pair_id = {int(f): i for i, f in enumerate(pairs["failure"])} | {int(s): i for i, s in enumerate(pairs["success"])}
    clusters = np.array([pair_id[int(i)] for i in hard])
    store = ExperimentPaths(out, "success_probes").store.root / "units" / "horizon=4" / "feature_set=forecast"
    ps = [np.load(store / f"seed={s}" / "p_heldout.npy")[hard] for s in (42, 43)]
    y = held.success.astype(int)[hard]
    stat = seed_mean_metric(PROBE_METRICS["auroc"], 2)
    by_pairs = bootstrap_interval((y, *ps), stat, n_boot=50, seed=0, clusters=clusters)
    by_episodes = bootstrap_interval((y, *ps), stat, n_boot=50, seed=0)
    row = r["summary"].query("horizon == 4 and feature_set == 'forecast' and test_set == 'hard' and metric == 'auroc'").iloc[0]
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((by_pairs.low, by_pairs.high), abs=1e-12)
    assert (row["ci_low"], row["ci_high"]) != pytest.approx((by_episodes.low, by_episodes.high), abs=1e-12)
