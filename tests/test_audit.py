"The audit: validity on planted data, restart, results JSON, the command line."
import argparse, json, shutil
import numpy as np, pandas as pd, pytest
from hoi_audit import engine, tables
from hoi_audit.queries import split_queries
from hoi_audit.core import HoiAuditError
from hoi_audit.conditions import AuditConfig, CONDITIONS
from hoi_audit.tables import four_condition_audit, intervention_2x2
from hoi_audit.commands import add_subcommands
from hoi_audit.core import DataError
from hoi_audit.results import read_results, write_results
from hoi_audit.store import ResultStore
from hoi_audit.models import TrainConfig
from hoi_audit.procedural import read_mstcn, write_mstcn
from hoi_audit.recovery import noisy_history
from hoi_audit.synthetic import synthetic_dataset, write_synthetic
from hoi_audit.grammar import bayes_accuracy

CFG = AuditConfig(n_tokens=2, train=TrainConfig(d_model=16, n_heads=2, n_layers=1, batch_size=32, lr=3e-3, epochs=10, patience=3))
PAIR = ("recognizer_ba", "gt_history")

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return read_mstcn(write_synthetic(synthetic_dataset("breakfast", "tiny", seed=0), tmp_path_factory.mktemp("a") / "breakfast"))

def noisy_recognizer(rate):
    "A stand-in recognizer of controlled quality: GT histories with a fraction `rate` of items edited (test only)."
    def fn(dataset, split, train_q, test_q, kind, config):
        return (list(noisy_history(train_q["history"], rate, len(dataset.classes), seed=split, exclude=dataset.background)),
                list(noisy_history(test_q["history"], rate, len(dataset.classes), seed=100 + split, exclude=dataset.background)))
    fn.name = f"noisy_{rate}"
    return fn

def test_perfect_recognizer_gap_covers_zero(tmp_path):
    # the video shows every action (and every class is seen in every cross-fitting fold: the small size has 52 participants)
    clean = synthetic_dataset("breakfast", "small", seed=0, dim=16, current_signal=4.0, segment_noise=0.0, frame_noise=0.2,
                              participant_shift=0.0, camera_shift=0.0)
    ds = read_mstcn(write_synthetic(clean, tmp_path / "clean"))
    res = four_condition_audit(ds, seeds=(42,), conditions=PAIR, config=CFG, store=ResultStore(tmp_path / "store"))
    gap = res.gap.iloc[0]
    assert gap["comparison"] == "gt_history - recognizer_ba" and gap["n"] == 4
    assert abs(gap["gap"]) < 2, gap.to_dict()                      # the real cross-fitted recognizer recovers every history
    assert res.history_quality.query("metric == 'history_item_acc'")["value"].min() > 0.99

def test_gt_history_approaches_bayes(tmp_path):
    syn = synthetic_dataset("breakfast", "small", seed=0, dim=16, next_signal=0.0)   # the window carries no cue of the next action
    ds = read_mstcn(write_synthetic(syn, tmp_path / "small"))
    cfg = AuditConfig(n_tokens=2, train=TrainConfig(d_model=32, n_heads=2, n_layers=1, batch_size=64, lr=2e-3, epochs=25, patience=4))
    res = four_condition_audit(ds, splits=[1], seeds=(42,), conditions=("gt_history", "context_only"), config=cfg, store=ResultStore(tmp_path / "s"))
    acc = res.table.loc["GT transcript (oracle)", "act1"] / 100
    bayes = bayes_accuracy(syn, "full_history", include_first=True)     # the query rule of queries.next_action_queries
    n = split_queries(ds, 1, window=cfg.window)[1].shape[0]
    se = np.sqrt(bayes * (1 - bayes) / n)
    assert abs(acc - bayes) <= 3 * se, (acc, bayes, se)
    # context-only sees the history and a causal state (elapsed frames carry nothing beyond the history here: durations depend on the
    # class only), so it cannot beat the Bayes accuracy of the full ordered history; the first version's elapsed fraction did
    assert res.table.loc["Context-only (oracle context)", "act1"] / 100 <= bayes + 3 * se


# --- validity against planted or exact values -------------------------------------------------------------------------------
def bayes_under_channel(grammar, classes, confusion, samples=4000, seed=0):
    """Reference: Bayes Act@1 of the next action given a history read through a recognizer channel (`confusion[true, read]`, each item
    independently), by Monte Carlo over the grammar's queries and the channel, with the exact posterior over the grammar's histories."""
    from hoi_audit.grammar import query_weights
    W = query_weights(grammar, "full_history", include_first=True)
    cid = {c: i for i, c in enumerate(classes)}
    hists = list(W)
    targets = sorted({y for w in W.values() for y in w})
    mass = np.array([[W[h].get(y, 0.0) for y in targets] for h in hists])
    by_len = {}
    for i, h in enumerate(hists): by_len.setdefault(len(h), []).append(i)
    ids = [np.array([cid[a] for a in h], dtype=int) for h in hists]
    log_c = np.log(np.maximum(confusion, 1e-300))
    rng = np.random.default_rng(seed)
    total = 0.0
    for i in rng.choice(len(hists), size=samples, p=mass.sum(1) / mass.sum()):
        read = np.array([rng.choice(len(classes), p=confusion[x]) for x in ids[i]], dtype=int)
        same = by_len[len(read)]
        loglik = np.array([log_c[ids[j], read].sum() for j in same])
        post = np.exp(loglik - loglik.max()) @ mass[same]
        total += post.max() / post.sum()
    return total / samples

def merged_groups(classes, background, size):
    "A recognizer that cannot tell apart the actions within each group of `size` consecutive classes: it reports the group's first."
    actions = [c for c in range(len(classes)) if c not in set(background)]
    return {**{c: c for c in range(len(classes))}, **{a: actions[i - i % size] for i, a in enumerate(actions)}}

class MergedRecognizer:
    "A user's recognizer through the history-source protocol: the planted confusion applied to the annotated history."
    def __init__(self, mapping): self.mapping, self.name = mapping, f"merged({sorted(set(mapping.values()))})"
    def __call__(self, dataset, split, train_q, test_q, config):
        read = lambda q: [tuple(self.mapping[a] for a in h) for h in q["history"]]
        return read(train_q), read(test_q)

def test_planted_gap_is_recovered(tmp_path):
    "No video cue, a recognizer channel with a known confusion: the audit's gap interval covers the exact gap."
    from hoi_audit.conditions import AuditCondition, HistorySource, register_history_source, HISTORY_SOURCES
    syn = synthetic_dataset("breakfast", "small", seed=0, dim=16, next_signal=0.0)
    ds = read_mstcn(write_synthetic(syn, tmp_path / "small"))
    mapping = merged_groups(ds.classes, ds.background, 6)
    confusion = np.zeros((len(ds.classes), len(ds.classes))); confusion[list(mapping), list(mapping.values())] = 1
    exact = 100 * (bayes_accuracy(syn, "full_history", include_first=True) - bayes_under_channel(syn.grammar, ds.classes, confusion))
    # the Monte Carlo reference agrees with a direct computation for this deterministic channel (Bayes of the merged history)
    from hoi_audit.grammar import query_weights
    merged = {}
    for h, w in query_weights(syn, "full_history", include_first=True).items():
        d = merged.setdefault(tuple(mapping[ds.classes.index(a)] for a in h), {})
        for y, v in w.items(): d[y] = d.get(y, 0) + v
    direct = sum(max(w.values()) for w in merged.values()) / sum(sum(w.values()) for w in merged.values())
    assert abs(exact - 100 * (bayes_accuracy(syn, "full_history", include_first=True) - direct)) < 1.0
    register_history_source(HistorySource("planted_merge6", "recognizer confusing groups of 6 actions", "recognizer", MergedRecognizer(mapping)))
    try:
        conds = (AuditCondition("history_gt", "GT history only", ("history",), "gt"),
                 AuditCondition("history_planted", "planted recognizer history only", ("history",), "planted_merge6"))
        cfg = AuditConfig(train=TrainConfig(d_model=32, n_heads=2, n_layers=1, batch_size=64, lr=2e-3, epochs=40, patience=6))
        res = four_condition_audit(ds, seeds=(42,), conditions=conds, config=cfg, store=ResultStore(tmp_path / "s"))
    finally:   # leave the registries as they were: a later test in this worker reads every registered condition
        for name in ("history_gt", "history_planted"):
            if name in CONDITIONS: CONDITIONS.unregister(name)
        HISTORY_SOURCES.unregister("planted_merge6")
    gap = res.gap.query("metric == 'act1'").iloc[0]
    assert gap["comparison"] == "history_gt - history_planted"
    assert gap["ci_low"] <= exact <= gap["ci_high"], (exact, gap.to_dict())
    assert gap["ci_high"] - gap["ci_low"] < 10, gap.to_dict()                    # 4 splits, t(3): informative, not vacuous

def test_killed_audit_resumes_and_results_are_byte_identical(tiny, tmp_path, monkeypatch):
    store = ResultStore(tmp_path / "store")
    kw = dict(splits=[1, 2], seeds=(42,), conditions=("video_only",) + PAIR, config=CFG, store=store, history_fn=noisy_recognizer(0.3))
    first = four_condition_audit(tiny, **kw)
    victim = [u for u in (tmp_path / "store" / "units").rglob("manifest.json") if "condition=gt_history" in str(u) and "split=2" in str(u)]
    shutil.rmtree(victim[0].parent)                  # as if the run had been killed before this unit finished
    calls = []
    from hoi_audit import models
    real_fit = models.ARCHITECTURES["transformer"]
    models.ARCHITECTURES.register("transformer", lambda cond, *a, **k: calls.append(cond.name) or real_fit(cond, *a, **k), replace=True)
    try: again = four_condition_audit(tiny, **kw)
    finally: models.ARCHITECTURES.register("transformer", real_fit, replace=True)
    assert calls == ["gt_history"]
    pd.testing.assert_frame_equal(first.records, again.records)
    recs = tables.audit_results_records(again)
    a = write_results(tmp_path / "a.json", "four_condition", recs, config=CFG.as_dict())
    b = write_results(tmp_path / "b.json", "four_condition", tables.audit_results_records(first), config=CFG.as_dict())
    assert a.read_bytes() == b.read_bytes()

def test_intervention_uses_fixed_checkpoints(tiny, tmp_path):
    store = ResultStore(tmp_path / "store")
    res = four_condition_audit(tiny, splits=[1, 2], seeds=(42,), conditions=PAIR, config=CFG, store=store, history_fn=noisy_recognizer(0.5))
    iv = intervention_2x2(tiny, splits=[1, 2], seeds=(42,), config=CFG, store=store, history_fn=noisy_recognizer(0.5))
    assert iv.table.shape == (2, 2) and not iv.table.isna().any().any()
    per = iv.records.query("metric == 'act1'").pivot_table(index="split", columns=["train_history", "test_history"], values="value")
    c = iv.contrast.set_index("train_history").loc["ba"]
    assert c["contrast"] == pytest.approx((per[("ba", "gt")] - per[("ba", "ba")]).mean())
    assert iv.table.loc["Recognizer", "Test: recognizer"] == pytest.approx(res.table.loc["Recognizer history, boundary-aware", "act1"])

def _cli(*argv):
    p = argparse.ArgumentParser(); sub = p.add_subparsers(); add_subcommands(sub)
    args = p.parse_args(["audit", *argv])
    return args.func(args)

def test_cli_writes_both_results(tiny, tmp_path, capsys):
    out = tmp_path / "results" / "four_condition.json"
    assert _cli(str(tiny.root), "--conditions", "video_only,recognizer_ba,gt_history", "--splits", "1,2", "--seeds", "42",
                "--out", str(out), "--tokens", "2", "--epochs", "2", "--d-model", "16") == 0
    printed = capsys.readouterr().out
    assert "Act.@1" in printed and "GT transcript (oracle)" in printed
    r = read_results(out)
    assert r["experiment"] == "four_condition"
    recs = r["records"]
    assert set(recs["metric"]) == {"act1", "act5", "verb1", "gap_act1", "gap_act5", "gap_verb1", "history_edit_rate", "history_item_acc"}
    assert set(recs.loc[recs["metric"].str.startswith("history_"), "part"]) == {"train", "test"}
    gap = recs[recs["metric"] == "gap_act1"].iloc[0]
    assert gap["ci_low"] <= gap["value"] <= gap["ci_high"]
    assert ((recs["value"] >= 0) & (recs["value"] <= 100)).loc[~recs["metric"].str.startswith("gap")].all()
    iv_path = out.with_name("four_condition.intervention_2x2.json")   # a .json --out: the 2x2 and the store sit beside it
    iv = read_results(iv_path)
    assert iv["experiment"] == "intervention_2x2" and set(iv["records"]["test_history"]) == {"ba", "gt", "gt-ba"}
    assert (out.parent / "store" / "four_condition" / "units").is_dir()
    assert f"wrote {out}" in printed and f"wrote {iv_path}" in printed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]          # nothing outside the folder --out named

def test_bad_input(tiny, tmp_path):
    labels_only = read_mstcn(write_mstcn(tmp_path / "lab", {"P01_cam01_P01_x": [0, 1, 1, 2], "P02_cam01_P02_x": [0, 2, 1]},
                                         ["SIL", "a", "b"], {1: {"train": ["P01_cam01_P01_x"], "test": ["P02_cam01_P02_x"]}}))
    with pytest.raises(DataError, match="needs features"): four_condition_audit(labels_only, seeds=(42,))
    with pytest.raises(DataError, match="no split"): four_condition_audit(tiny, splits=[9], seeds=(42,))
    with pytest.raises(DataError, match="unknown condition"): four_condition_audit(tiny, conditions=("oracle_magic",))
    with pytest.raises(Exception, match="unknown condition"): _cli(str(tiny.root), "--conditions", "nope", "--out", str(tmp_path / "o"))

def test_two_workers_on_one_store_give_the_single_worker_results(tiny, tmp_path):
    "The documented way to use k cores: k copies of the same command on one store. Units are split, results are unchanged."
    import subprocess, sys
    from pathlib import Path
    exe = Path(sys.executable).parent / "hoi-audit"
    argv = [str(tiny.root), "--conditions", "recognizer_ba,gt_history", "--splits", "1,2", "--seeds", "42,43", "--tokens", "2",
            "--epochs", "3", "--d-model", "16"]
    single = subprocess.run([str(exe), "audit", *argv, "--out", str(tmp_path / "one" / "r.json"), "--store", str(tmp_path / "s1")],
                            capture_output=True, text=True)
    assert single.returncode == 0, single.stderr[-2000:]
    workers = [subprocess.Popen([str(exe), "audit", *argv, "--out", str(tmp_path / f"w{i}" / "r.json"), "--store", str(tmp_path / "s2")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    for w in workers:
        _, err = w.communicate(timeout=600)
        assert w.returncode == 0, err[-2000:]
    units = sorted(p.parent.relative_to(tmp_path / "s2") for p in (tmp_path / "s2").rglob("condition=*/seed=*/manifest.json"))
    assert len(units) == 2 * 2 * 2                                      # conditions x splits x seeds, nothing extra
    for name in ("r.json", "r.intervention_2x2.json"):
        reference = (tmp_path / "one" / name).read_bytes()
        assert (tmp_path / "w0" / name).read_bytes() == reference == (tmp_path / "w1" / name).read_bytes(), name

def test_workers_give_the_same_records(tiny, tmp_path):
    kw = dict(splits=[1, 2], seeds=(42, 43), conditions=PAIR, config=CFG)
    one = four_condition_audit(tiny, store=ResultStore(tmp_path / "one"), **kw)
    two = four_condition_audit(tiny, store=ResultStore(tmp_path / "two"), workers=2, **kw)
    pd.testing.assert_frame_equal(one.all_records, two.all_records)
    pd.testing.assert_frame_equal(one.gap, two.gap)

class FailsOnSeed43:
    "A picklable architecture whose seed 43 raises, to show that a failing unit is named and the others finish."
    def __init__(self, fit): self.fit = fit
    def __call__(self, *args, seed, **kw):
        if seed == 43: raise RuntimeError("seed 43 diverged")
        return self.fit(*args, seed=seed, **kw)

def test_a_failing_unit_is_named_and_the_others_are_done(tiny, tmp_path, monkeypatch):
    store = ResultStore(tmp_path / "store")
    monkeypatch.setattr(engine, "architecture", lambda name, _fit=engine.architecture: FailsOnSeed43(_fit(name)))
    with pytest.raises(HoiAuditError, match="seed 43 diverged"):
        four_condition_audit(tiny, splits=[1], seeds=(42, 43), conditions=PAIR, config=CFG, store=store, history_fn=noisy_recognizer(0.3), workers=2)
    assert store.status()["state"].value_counts().to_dict() == {"done": 2 + 1, "failed": 2}   # seed 42 of both conditions, the BA history
    with pytest.raises(ValueError, match="workers must be"): four_condition_audit(tiny, seeds=(42,), workers=0)

def test_finished_audit_reopens_without_reading_features(tiny, tmp_path, monkeypatch):
    import os, shutil
    ds = read_mstcn(shutil.copytree(tiny.root, tmp_path / "data"), name=tiny.name)   # a copy: its features are rewritten below
    kw = dict(splits=[1], seeds=(42,), conditions=("video_only", "gt_history"), config=CFG, store=ResultStore(tmp_path / "store"))
    first = four_condition_audit(ds, **kw)
    def no_pooling(*a, **k): raise AssertionError("pooled window tokens although every unit is done")
    monkeypatch.setattr(engine, "video_window_tokens", no_pooling)
    pd.testing.assert_frame_equal(four_condition_audit(ds, **kw).all_records, first.all_records)
    # the same content with another modification time (written again, or on another machine): the same inputs, nothing pooled
    f = ds.video(ds.splits[1]["test"][0]).feature_path
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    pd.testing.assert_frame_equal(four_condition_audit(ds, **kw).all_records, first.all_records)
    # another content changes the video units' identity: they are stale and must pool again
    np.save(f, np.load(f) + 1)
    with pytest.raises(AssertionError, match="pooled window tokens"): four_condition_audit(ds, **kw)

def test_committed_full_scale_results_against_the_planted_ceiling_and_a_reference_interval():
    """results/full/four_condition.json (the Breakfast-sized preset): its rows sit where the generator puts them, its gap is the
    paired Student-t interval of its own per-split records (scipy as the reference), and its video-only row on the calibration target."""
    from pathlib import Path
    from scipy import stats as st
    from hoi_audit.calibration import PAPER_TARGETS
    path = Path(__file__).resolve().parents[1] / "results" / "full" / "four_condition.json"
    r = read_results(path)
    assert r["scale"] == "full"
    recs = r["records"].query("dataset == 'synthetic_breakfast'")
    per_split = recs.query("metric == 'act1' and seed == seed").groupby(["condition", "split"])["value"].mean().unstack("split")
    row = per_split.mean(axis=1)
    bayes = 100 * bayes_accuracy(synthetic_dataset("breakfast", "full", seed=0), "full_history", include_first=True)
    # no model of the history and a causal state beats the exact Bayes accuracy in expectation; a fitted one comes within 2.5 points
    assert bayes - 2.5 <= row["context_only"] <= bayes + 1.0 and bayes - 2.5 <= row["gt_history"] <= bayes + 1.0
    assert abs(row["gt_history"] - row["context_only"]) <= 1.5             # the planted window adds nothing the history does not say
    assert row["context_only_elapsed_fraction"] - row["context_only"] >= 2.0  # the oracle length is worth points: the old leak
    target, tol = PAPER_TARGETS[("breakfast", "video_only_act1")]
    assert abs(row["video_only"] - target) <= tol
    # the gap leads with the draws (stats.LEAD_WITH_DRAWS): per (draw, split) unit the seeds' mean, per draw the units' mean, and the
    # Student-t interval over the draws' means
    unit = recs.query("metric == 'act1' and seed == seed").groupby(["condition", "generator_seed", "split"])["value"].mean()
    per_draw = (unit.loc["gt_history"] - unit.loc["recognizer_ba"]).groupby("generator_seed").mean().values
    assert len(per_draw) == len(r["config"]["generator_seeds"]) >= 2
    lo, hi = st.t.interval(0.95, len(per_draw) - 1, loc=per_draw.mean(), scale=st.sem(per_draw))
    gap = recs.query("metric == 'gap_act1' and condition == 'gt_history-recognizer_ba'").iloc[0]
    assert (gap["value"], gap["ci_low"], gap["ci_high"], gap["n"]) == pytest.approx((per_draw.mean(), lo, hi, len(per_draw)), abs=1e-6)

def test_device_cpu_is_the_default_and_a_missing_gpu_is_named_before_any_unit(tiny, tmp_path):
    "--device cpu writes the bytes no flag writes (a CPU config keeps its identity); --device cuda without a GPU is a clear error, nothing written."
    import subprocess, sys, torch
    from pathlib import Path
    exe = Path(sys.executable).parent / "hoi-audit"
    argv = [str(tiny.root), "--conditions", "video_only,gt_history", "--splits", "1", "--seeds", "42", "--tokens", "2", "--epochs", "2",
            "--d-model", "16"]
    env = {k: v for k, v in __import__("os").environ.items() if k != "HOI_AUDIT_DEVICE"}
    runs = {flag: subprocess.run([str(exe), "audit", *argv, *flag, "--out", str(tmp_path / (flag[-1] if flag else "none"))],
                                 capture_output=True, text=True, env=env) for flag in ((), ("--device", "cpu"))}
    for r in runs.values(): assert r.returncode == 0, r.stderr[-2000:]
    name = "results/four_condition.json"
    assert (tmp_path / "none" / name).read_bytes() == (tmp_path / "cpu" / name).read_bytes()
    assert "device" not in read_results(tmp_path / "cpu" / name)["config"]["train"]
    if torch.cuda.is_available(): return
    r = subprocess.run([str(exe), "audit", *argv, "--device", "cuda", "--out", str(tmp_path / "cuda")], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "hoi-audit: error:" in r.stderr and "no CUDA device" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "cuda").exists()

USER_NET = '''import numpy as np, torch
from pathlib import Path
from torch import nn
class Net(nn.Module):
    def __init__(self, shapes, n_classes):
        super().__init__(); self.lin = nn.Linear(shapes["state"][0], n_classes)
    def forward(self, video=None, history=None, **vectors): return self.lin(vectors["state"])
def make(shapes, n_classes, seed):
    "A network initialised from a pretrained file beside this one."
    torch.manual_seed(seed); net = Net(shapes, n_classes)
    with torch.no_grad(): net.lin.weight.mul_(float(np.load(Path(__file__).parent / "init.npy")[0]))
    return net
'''

def test_a_user_network_with_new_weights_is_retrained_and_an_unchanged_one_reused(tiny, tmp_path):
    "Issue 31: `audit --model file.py:factory` units are named by the network's code and checkpoints, not by its spec alone."
    from dataclasses import replace
    user = tmp_path / "user"; user.mkdir()
    (user / "net.py").write_text(USER_NET)
    cfg = replace(CFG, architecture=f"{user}/net.py:make")
    kw = dict(splits=[1], seeds=(42,), conditions=("context_only",), config=cfg)
    np.save(user / "init.npy", np.array([1.0]))
    old = four_condition_audit(tiny, store=ResultStore(tmp_path / "same"), **kw).all_records
    np.save(user / "init.npy", np.array([25.0]))        # retrained: new weights, the same file
    rerun = four_condition_audit(tiny, store=ResultStore(tmp_path / "same"), **kw).all_records
    fresh = four_condition_audit(tiny, store=ResultStore(tmp_path / "fresh"), **kw).all_records
    pd.testing.assert_frame_equal(rerun, fresh)
    assert not rerun.equals(old), "the network with new weights was scored from the old units"
    manifests = sorted((tmp_path / "same").rglob("condition=*/seed=*/manifest.json"))
    stamps = [p.stat().st_mtime_ns for p in manifests]
    pd.testing.assert_frame_equal(four_condition_audit(tiny, store=ResultStore(tmp_path / "same"), **kw).all_records, rerun)
    assert [p.stat().st_mtime_ns for p in manifests] == stamps and stamps, "an unchanged network was retrained"

def test_every_user_network_is_checked_before_any_unit(tiny, tmp_path):
    "Issue 31: `audit --model` runs check_anticipator on the user's network first: a broken one is a named error, nothing is written."
    import subprocess, sys
    from pathlib import Path
    exe, user = Path(sys.executable).parent / "hoi-audit", Path(__file__).parent / "user_model.py"
    r = subprocess.run([str(exe), "audit", str(tiny.root), "--conditions", "gt_history", "--splits", "1", "--seeds", "42", "--epochs", "2",
                        "--model", f"{user}:wrong_width", "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode == 2 and "hoi-audit: error:" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "wrong_width" in r.stderr and "shape" in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "out").exists()

def test_a_user_network_from_a_file_trains_in_worker_processes(tiny, tmp_path):
    "A factory loaded from a file (plugins.load_object) reaches spawned workers by value: --workers 2 gives the one-process records."
    from dataclasses import replace
    from pathlib import Path
    cfg = replace(CFG, architecture=f"{Path(__file__).parent / 'user_model.py'}:make_model")
    kw = dict(splits=[1], seeds=(42, 43), conditions=("gt_history",), config=cfg)
    one = four_condition_audit(tiny, store=ResultStore(tmp_path / "one"), **kw).all_records
    two = four_condition_audit(tiny, store=ResultStore(tmp_path / "two"), workers=2, **kw).all_records
    pd.testing.assert_frame_equal(one, two)

def test_engine_2_moves_no_condition_beyond_the_seed_spread(tiny, tmp_path):
    """The cheaper engine (TrainConfig.engine 2: trimmed batches, another dropout stream, fused AdamW) against the first, paired by seed:
    per condition and test history, Act@1 averaged over the four splits moves by at most the first engine's seed SD (six seeds)."""
    from dataclasses import replace
    from hoi_audit.conditions import TABLE1_CONDITIONS
    seeds = tuple(range(42, 48))
    act1 = {}
    for version in (1, 2):
        cfg = replace(CFG, train=replace(CFG.train, engine=version))
        rec = engine.audit_records(tiny, seeds=seeds, conditions=TABLE1_CONDITIONS, config=cfg, store=ResultStore(tmp_path / f"e{version}"))
        act1[version] = rec.query("metric == 'act1'").groupby(["condition", "test_history", "seed"])["value"].mean()
    assert act1[1].index.equals(act1[2].index) and len(act1[1]) == len(seeds) * 7      # 5 conditions, 2 of them also cross-tested
    spread = act1[1].groupby(level=[0, 1]).std(ddof=1)
    moved = (act1[2] - act1[1]).groupby(level=[0, 1]).mean()
    table = pd.DataFrame({"engine1_sd": spread, "paired_mean_diff": moved})
    assert (table["paired_mean_diff"].abs() <= table["engine1_sd"]).all(), table
    assert (table["engine1_sd"] > 0).all(), table            # the seeds do differ: the comparison is not vacuous


def test_the_command_and_a_notebook_write_the_same_audit_through_its_stage(tiny, tmp_path, capsys):
    "hoi-audit audit and `run_stage('audit', ...)` from a notebook are one path: the same records, 2x2 and reference, byte for byte."
    from dataclasses import replace
    from hoi_audit.conditions import training_options
    from hoi_audit.stages import STAGES, run_stage
    from hoi_audit.store import ExperimentPaths
    assert STAGES["audit"].results_name == "four_condition"
    argv = ["--conditions", "recognizer_ba,gt_history", "--splits", "1,2", "--seeds", "42", "--tokens", "2", "--epochs", "2", "--d-model", "16"]
    assert _cli(str(tiny.root), *argv, "--out", str(tmp_path / "cli")) == 0
    cli = tmp_path / "cli" / "results"
    assert sorted(p.name for p in cli.iterdir()) == ["four_condition.json", "four_condition.report.html", "intervention_2x2.json"]
    spec, config = training_options(splits="1,2", seeds="42", tokens=2, epochs=2, d_model=16)   # as the command reads its options
    paths = ExperimentPaths(tmp_path / "nb", "four_condition", spec.scale)
    run = run_stage("audit", replace(spec, store=paths.store), tiny, paths, config=config, conditions=["recognizer_ba", "gt_history"])
    nb = tmp_path / "nb" / "results" / "full"
    assert sorted(p.name for p in nb.iterdir() if p.is_file()) == ["four_condition.json", "intervention_2x2.json"]   # a notebook writes no page
    for name in ("four_condition.json", "intervention_2x2.json"):
        assert (nb / name).read_bytes() == (cli / name).read_bytes(), name
    assert read_results(nb / "four_condition.json")["intervention_ref"]["path"] == "intervention_2x2.json"
    assert list(run.results) == [tiny.name] and run.results[tiny.name].window is None
