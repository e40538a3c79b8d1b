"""Tests of hoi_audit.lta: MoC against an independent re-implementation of the reference's evaluation on hand-made cases, the
prediction files, causality of the recognized transcript, the gap's intervals, and the CLI."""
import argparse
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from hoi_audit.core import DataError
from hoi_audit.results import read_results
from hoi_audit.lta import (LTAConfig, add_subcommand, class_counts, horizon_end, lta_counts, lta_gap, mean_over_classes, moc_records,
                           observed_end, read_prediction_file, recognized_frame_labels, score_prediction_folder, write_prediction_file)
from hoi_audit.procedural import read_mstcn
from hoi_audit.recovery import WindowRecognizer
from hoi_audit.synthetic import synthetic_dataset, write_synthetic


def reference_moc(videos, obs):
    """An independent re-implementation of the reference's evaluation on label strings: per file, frames from int(obs * len(gt))
    to min(len(recog), len(gt)), correct/total per GT class pooled over files, mean over classes with total > 0 (a fraction)."""
    n_t, n_f = {}, {}
    for gt, recog in videos:
        last = min(len(recog), len(gt))
        for g, r in zip(gt[int(obs * len(gt)):last], recog[int(obs * len(gt)):last]):
            n_t.setdefault(g, 0); n_f.setdefault(g, 0)
            if g == r: n_t[g] += 1
            else: n_f[g] += 1
    accs = [n_t[c] / (n_t[c] + n_f[c]) for c in n_t if n_t[c] + n_f[c] > 0]
    return sum(accs) / len(accs)


CLASSES = ["SIL", "cut", "mix", "pour", "serve"]   # 0 is background; "serve" (4) never occurs in the ground truth below


def hand_made():
    "Three videos: one background-heavy, one where a predicted class has no GT support, one predicted too short."
    gt1 = ["SIL"] * 40 + ["cut"] * 5 + ["SIL"] * 15                       # background-heavy
    pr1 = ["SIL"] * 40 + ["SIL"] * 10 + ["cut"] * 10
    gt2 = ["cut"] * 10 + ["mix"] * 20 + ["pour"] * 10
    pr2 = ["cut"] * 10 + ["mix"] * 12 + ["serve"] * 18                      # 'serve': predicted, absent from the GT: not averaged
    gt3 = ["pour"] * 30 + ["mix"] * 20
    pr3 = ["pour"] * 25                                                     # shorter: scored up to its end only
    return [(gt1, pr1), (gt2, pr2), (gt3, pr3)]


@pytest.mark.parametrize("obs", [0.2, 0.3, 0.5])
def test_moc_matches_independent_reference(obs):
    ids = {c: i for i, c in enumerate(CLASSES)}
    counts = sum(class_counts([ids[x] for x in gt], [ids[x] for x in pr], observed_end(len(gt), obs), len(gt), len(CLASSES))
                 for gt, pr in hand_made())
    assert counts[1, 4] == 0                                        # the absent class has no support ...
    assert mean_over_classes(counts) == pytest.approx(100 * reference_moc(hand_made(), obs), abs=1e-9)


def test_moc_hand_computed_value():
    ids = {c: i for i, c in enumerate(CLASSES)}
    gt, pr = hand_made()[0]
    c = class_counts([ids[x] for x in gt], [ids[x] for x in pr], 12, 60, len(CLASSES))
    # SIL frames 12..39 (28, all right) and 45..59 (15: 45..49 right, 50..59 wrong); cut frames 40..44 (5, predicted SIL: wrong)
    assert c[:, 0].tolist() == [33, 43] and c[:, 1].tolist() == [0, 5]
    assert mean_over_classes(c) == pytest.approx(100 * (33 / 43 + 0) / 2)


def test_prediction_files_round_trip_and_errors(tmp_path):
    ds = read_mstcn(write_synthetic(synthetic_dataset("50salads", "tiny", seed=0), tmp_path / "d"), name="d")
    ids = {c: i for i, c in enumerate(ds.classes)}
    rng = np.random.default_rng(0)
    videos, pairs = ds.splits[1]["test"], []
    for name in videos:
        truth = ds.video(name).labels
        pred = np.where(rng.random(len(truth)) < 0.5, truth, rng.integers(0, len(ds.classes), len(truth)))[:horizon_end(len(truth), 0.2, 0.3)]
        path = write_prediction_file(tmp_path / "pred" / f"{name}.txt", pred, ds.classes)
        assert path.read_text().split("\n")[0] == "### Frame level recognition: ###"
        assert read_prediction_file(path, ids).tolist() == pred.tolist()
        pairs.append(([ds.classes[x] for x in truth], [ds.classes[x] for x in pred]))
    moc, _ = score_prediction_folder(ds, tmp_path / "pred", 0.2)
    assert moc == pytest.approx(100 * reference_moc(pairs, 0.2), abs=1e-9)
    (tmp_path / "pred" / f"{videos[0]}.txt").write_text("### Frame level recognition: ###\nnot_a_class\n")
    with pytest.raises(DataError, match=f"{videos[0]}.txt.*unknown class"): score_prediction_folder(ds, tmp_path / "pred", 0.2)


def test_horizon_conventions():
    for n in range(50, 400, 7):
        for a in (0.2, 0.3):
            for b in (0.1, 0.2, 0.3, 0.5):
                r, s = horizon_end(n, a, b), horizon_end(n, a, b, "split")
                assert r == min(int((a + b) * n), n) and s == min(int(a * n) + int(b * n), n) and abs(r - s) <= 1
    assert (horizon_end(330, 0.2, 0.5), horizon_end(330, 0.2, 0.5, "split")) == (230, 231)   # 0.2 + 0.5 is 0.7 - 1e-16 in floating point


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("lta")
    return read_mstcn(write_synthetic(synthetic_dataset("50salads", "tiny", seed=0), root / "d"), name="salads_tiny")


def test_recognized_transcript_never_reads_the_future(tiny):
    rec = WindowRecognizer().fit(tiny, split=1)
    video = tiny.video(tiny.splits[1]["test"][0])
    cut = observed_end(video.n_frames, 0.2)
    class Poisoned:   # reading any feature at or after the cut raises
        name, n_frames = video.name, video.n_frames
        def features(self):
            f = np.array(video.features())
            class Guard:
                shape = f.shape
                def __getitem__(self, idx):
                    stop = idx.stop if isinstance(idx, slice) else None
                    if stop is None or stop > cut: raise AssertionError(f"read {idx} past the cut {cut}")
                    return f[idx]
            return Guard()
    assert recognized_frame_labels(rec, Poisoned(), cut).tolist() == recognized_frame_labels(rec, video, cut).tolist()


def test_gap_and_intervals(tiny):
    counts = lta_counts(tiny, splits=[1, 2, 3], seeds=(42,), config=LTAConfig(epochs=2, observe=(0.2,), predict=(0.3,)))
    recs = moc_records(counts).pivot_table(index="split", columns="condition", values="value")
    gap = lta_gap(counts, n_boot=200).iloc[0]
    d = recs["gt"] - recs["recognizer"]
    half = sps.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
    assert gap["gap"] == pytest.approx(d.mean()) and gap["ci_low"] == pytest.approx(d.mean() - half) and gap["ci_high"] == pytest.approx(d.mean() + half)
    assert gap["ci_low_video"] <= gap["gap"] + 1e-9 or gap["ci_high_video"] >= gap["gap"] - 1e-9
    assert lta_gap(counts, n_boot=200).equals(lta_gap(counts, n_boot=200))          # deterministic


def test_cli(tiny, tmp_path, capsys):
    parser = argparse.ArgumentParser(); sub = parser.add_subparsers(); add_subcommand(sub)
    out = tmp_path / "lta.json"
    args = parser.parse_args(["lta", str(tiny.root), "--out", str(out), "--predictions", str(tmp_path / "pred"), "--splits", "1",
                              "--seeds", "42", "--epochs", "2", "--observe", "0.2", "--predict", "0.1,0.5", "--n-boot", "50", "--scale", "small"])
    assert args.func(args) == 0
    res = read_results(out)
    assert res["config"]["horizon_end"] == "int((observe + beta) * n)"
    assert set(res["records"]["metric"]) == {"moc", "moc_gap"}
    files = sorted((tmp_path / "pred" / "gt" / "obs0.2_pred0.5").glob("*.txt"))
    assert [f.stem for f in files] == sorted(tiny.splits[1]["test"])
    moc, _ = score_prediction_folder(tiny, files[0].parent, 0.2)
    rec = res["records"].query("metric == 'moc' and condition == 'gt' and beta == 0.5")["value"].item()
    assert moc == pytest.approx(rec)
    args = parser.parse_args(["lta", str(tiny.root), "--score", str(files[0].parent), "--observed", "0.2"])
    assert args.func(args) == 0 and f"MoC {moc:.2f}" in capsys.readouterr().out


def test_cli_takes_the_stage_path_and_writes_what_it_wrote_before(tiny, tmp_path, capsys):
    """`hoi-audit lta` goes through `stages.run_stage`: its results JSON is, byte for byte, what the command wrote before the stage path
    (`lta_results_records`, `results_config` with the seeds and a renamed dataset's names, pinned by the settings' SHA-256)."""
    from hoi_audit.core import sha256_json
    from hoi_audit.results import write_results
    from hoi_audit.store import ResultStore
    from hoi_audit.procedural import name_config
    from hoi_audit.lta import lta_results_records, results_config, run_lta
    parser = argparse.ArgumentParser(); sub = parser.add_subparsers(); add_subcommand(sub)
    out = tmp_path / "o"
    args = parser.parse_args(["lta", str(tiny.root), "--out", str(out), "--splits", "1", "--seeds", "43", "--epochs", "2", "--predict", "0.5",
                              "--n-boot", "40", "--scale", "small"])
    assert args.func(args) == 0
    store = ResultStore(out / "store" / "lta")
    assert f"wrote {out / 'results' / 'lta.json'}\nwrote {store.root}/" in capsys.readouterr().out
    config, data = LTAConfig(epochs=2, predict=(0.5,)), read_mstcn(tiny.root)   # read as the command reads it: named as its folder
    result = run_lta(data, [1], [43], config, store, n_boot=40)          # the command's units, from its store
    before = write_results(tmp_path / "before.json", "lta", lta_results_records(result, data.name), scale="small",
                           config=results_config(config, seeds=[43], **name_config(data)), pins={"config": sha256_json(config.as_dict())})
    assert (out / "results" / "lta.json").read_bytes() == before.read_bytes()
