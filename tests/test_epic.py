"EPIC protocol: extraction accounts for every narration and every damaged frame, provenance of the target segment, LOPO against sklearn, the CLI."
import argparse, json
from pathlib import Path
import numpy as np
import pandas as pd
import pytest
from hoi_audit.core import DataError
from hoi_audit.store import ExperimentPaths
from hoi_audit.provenance import TrackedArray, assert_never_read
from hoi_audit.decode import BinSpec, open_decord
from hoi_audit.epic import (DEPLOYABLE_SETS, EPIC_COLUMNS, add_subcommand, anticipation_protocol, extract, feature_sets,
                            lopo_scores, read_narrations)
from hoi_audit.encoder import PooledMotionEncoder
from hoi_audit import stats

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("imageio_ffmpeg", reason="the EPIC-like videos need imageio-ffmpeg (a dev dependency)")
    from hoi_audit.clips import write_epic_like
    root = tmp_path_factory.mktemp("epic")
    return write_epic_like(root / "videos", "tiny", seed=0)

def run_cli(*argv):
    p = argparse.ArgumentParser(); sub = p.add_subparsers(); add_subcommand(sub)
    args = p.parse_args(["extract", *argv]); return args.func(args)

class Recording:
    """A decord reader that logs every frame index asked of it once `read_bins` starts (its first multi-frame batch); the
    decoder's frame-count probe of the last frame, made while the video is opened, is not part of an action's reads."""
    log, armed = [], False
    def __init__(self, path): self.r = open_decord(path)
    def __len__(self): return len(self.r)
    def get_avg_fps(self): return self.r.get_avg_fps()
    def get_batch(self, idx):
        if len(idx) > 1: Recording.armed = True
        if Recording.armed: Recording.log.extend(int(i) for i in idx)
        return self.r.get_batch(idx)

def test_every_narration_is_accounted_for(tiny):
    feats = extract(tiny["folder"], tiny["narrations"], PooledMotionEncoder())
    narr = pd.read_csv(tiny["narrations"])
    assert [r.action_id for r in feats.records] == narr.narration_id.tolist()
    s = feats.summary
    assert s["actions"] == len(narr)
    # hand check: an action has a full window iff it starts at least 6 s into its video
    early = (narr.start_frame - 1) / 12 < 6.0
    assert set(s["error_ids"]) == set(narr.narration_id[early])
    assert s["actions_affected"] >= 1 and all(i.startswith(tiny["damaged"]["video_id"]) for i in s["affected_ids"])

def test_deployable_extraction_never_decodes_the_target(tiny):
    narr = read_narrations(tiny["narrations"])
    clean = narr[(narr.start_s >= 6.0) & (narr.video_id != tiny["damaged"]["video_id"])].groupby("video_id").head(2)
    for _, row in clean.iterrows():
        one = narr[narr.narration_id == row.narration_id]
        gap_start = int(np.ceil((row.start_s - 1.0) * 12 - 1e-6))       # first frame of the one-second gap
        first_target_frame = int(np.ceil(row.start_s * 12 - 1e-6))
        for with_target in (False, True):
            Recording.log, Recording.armed = [], False
            feats = extract(tiny["folder"], one, PooledMotionEncoder(), with_target=with_target,
                            decoder_kwargs={"open_reader": Recording})
            assert feats.records[0].ok
            if with_target: assert max(Recording.log) >= first_target_frame   # the recorder does see target reads
            else: assert max(Recording.log) < gap_start, (row.narration_id, max(Recording.log), gap_start)

def test_deployable_sets_never_read_the_target():
    rng = np.random.default_rng(0)
    ctx = rng.normal(size=(10, 4, 8))
    target = TrackedArray(rng.normal(size=(10, 8)), "target_segment_latent")
    forecaster = type("F", (), {"predict": lambda self, c: c[:, -1] * 0.5})()
    sets = feature_sets(ctx, forecaster, target=target, include=DEPLOYABLE_SETS)
    assert_never_read(target)
    assert set(sets) == set(DEPLOYABLE_SETS) and all(c.deployable for c, _ in sets.values())
    sets = feature_sets(ctx, forecaster, target=target)               # the oracle row does read it, and is not deployable
    assert target.was_read and not sets["oracle"][0].deployable
    assert {sets[k][1].shape[1] for k in ("persistence", "linear", "forecast", "oracle")} == {8}

def test_lopo_matches_sklearn_reference():
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import LeaveOneGroupOut, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    rng = np.random.default_rng(1)
    y = rng.integers(0, 4, 120); g = np.repeat(np.arange(6), 20)
    X = np.eye(4)[y] + rng.normal(size=(120, 4))
    scores, seen = lopo_scores(X, y, g)
    ref = cross_val_predict(make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)), X, y, groups=g, cv=LeaveOneGroupOut())
    np.testing.assert_array_equal(scores.argmax(1), ref)
    assert seen.all()
    assert abs(stats.topk_accuracy(y, scores, k=1) - (ref == y).mean()) < 1e-12

def test_protocol_on_planted_signal():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 6, 300); g = np.repeat(np.arange(5), 60)
    ctx = rng.normal(size=(300, 4, 6)); target = np.eye(6)[y] * 3 + rng.normal(size=(300, 6))
    forecaster = type("F", (), {"predict": lambda self, c: c[:, -1]})()
    res = anticipation_protocol(feature_sets(ctx, forecaster, target=target), y, g, n_boot=50)
    assert res.table.loc["oracle", "top1_accuracy"] > 0.9                 # the target shows the verb
    assert res.table.loc["persistence", "top1_accuracy"] < 0.35           # noise: chance is 1/6
    d = res.records.query("comparison == 'forecast-persistence' and metric == 'delta_top1_accuracy' and subset == 'all'")
    assert abs(d.value.iloc[0]) < 1e-12                                   # forecast == persistence here
    assert res.seen_fraction == 1.0

def test_damaged_video_record_names_its_corrupted_frames(tiny):
    "The ground truth: frames whose pixels differ from the undamaged encode (clips.corrupted_frames). Strict and loose rules."
    narr = read_narrations(tiny["narrations"])
    corrupted = set(tiny["damaged"]["corrupted"])
    strict = extract(tiny["folder"], narr, None, with_target=True)
    loose = extract(tiny["folder"], narr, None, with_target=True, accept_concealed=True)
    for feats in (strict, loose):
        met = {i for r in feats.records for i in r.undecodable + r.concealed}
        assert met == corrupted                                 # every corrupted frame is met by some action, nothing else is named
        assert all(r.action_id.startswith(tiny["damaged"]["video_id"]) for r in feats.records if r.undecodable or r.concealed)
    s, l = strict.summary, loose.summary
    failed = set(tiny["damaged"]["frames"])                     # the damaged packets fail to decode; the rest of their GOPs is concealed
    assert (s["undecodable_frames"], s["concealed_frames"], s["rule"]) == (len(corrupted), len(corrupted - failed), "strict")
    assert (l["undecodable_frames"], l["concealed_frames"], l["rule"]) == (len(failed), len(corrupted - failed), "accept_concealed")
    assert s["damage_causes"] == {"decode_failed": len(failed), "flagged_corrupt": 0, "predicted_from_damage": len(corrupted - failed)}
    assert s["substitutions"] > l["substitutions"] > 0
    # no frame the strict rule returns is a corrupted one: its pixels equal the undamaged frame of some clean index of the same bin
    video = tiny["folder"] / tiny["videos"][tiny["damaged"]["video_id"]]
    import tempfile
    from hoi_audit.clips import write_epic_like
    with tempfile.TemporaryDirectory() as d:
        clean = write_epic_like(d, "tiny", seed=0, damaged_participant=None)
        from hoi_audit.decode import decode_with_damage
        ref, _ = decode_with_damage(Path(d) / clean["videos"][tiny["damaged"]["video_id"]], 12)
    lookup = {f.tobytes(): i for i, f in ref.items()}
    for k, r in enumerate(strict.records):
        if not r.undecodable or not r.ok: continue
        used = {lookup.get(f.tobytes()) for f in strict.context[k].reshape(-1, *strict.context.shape[-3:])}
        assert None not in used and not used & corrupted, r.action_id

class Silent:
    "A decord stand-in over 480 frames that raises only on frame 300, and returns frames 100..119 (concealed) without complaint."
    def __init__(self, path): pass
    def __len__(self): return 480
    def get_avg_fps(self): return 12.0
    def get_batch(self, idx):
        if 300 in set(idx): raise RuntimeError("Thread worker: Error sending packet")
        return np.stack([np.full((2, 2, 3), i % 256, np.uint8) for i in idx])

SILENT_DAMAGE = {300: "decode_failed", **{i: "predicted_from_damage" for i in range(100, 120)}}

def test_narrations_read_before_the_damage_was_found_are_read_again(tiny):
    "With verify='on_error' damage is found by the first action whose batch fails; an earlier action that met damage is re-read."
    narr = read_narrations(tiny["narrations"])
    rows = narr[narr.video_id == "P01_01"].head(2).copy()
    rows["start_s"] = [14.0, 30.0]             # windows [8 s, 13 s) = frames 96..155 (meets 100..119) and frames 288..347 (meets 300)
    kw = {"open_reader": Silent, "scan": lambda path, fps: dict(SILENT_DAMAGE),
          "decode_range": lambda path, lo, hi, fps: ({i: np.full((2, 2, 3), i % 256, np.uint8) for i in range(lo, hi) if i != 300},
                                                     {i: c for i, c in SILENT_DAMAGE.items() if lo <= i < hi})}
    feats = extract(tiny["folder"], rows, None, decoder_kwargs=kw)
    first, second = feats.records
    assert first.undecodable == list(range(100, 120)) and first.substitutions > 0    # found although its own batch never failed
    assert second.undecodable == [300]
    assert not {int(v) for v in np.unique(feats.context[0][..., 0, 0, 0])} & set(range(100, 120))

def test_cli_writes_records_and_flags_errors(tiny, tmp_path):
    code = run_cli("--videos", str(tiny["folder"]), "--narrations", str(tiny["narrations"]), "--out", str(tmp_path / "o"))
    out = json.loads((tmp_path / "o" / "results" / "epic_extract.json").read_text())
    assert code == 1 and out["summary"]["actions_with_errors"] > 0          # the early actions are reported, not dropped
    assert out["summary"]["undecodable_frames"] > 0 and out["records"][0].keys() >= {"undecodable", "concealed", "damage_causes"}
    with np.load(tmp_path / "o" / "raw" / "epic_extract" / "latents.npz") as z:
        assert z["context"].shape[:2] == (out["summary"]["actions"], 4) and z["ok"].sum() == out["summary"]["actions"] - out["summary"]["actions_with_errors"]

def test_cli_missing_video_and_bad_csv(tiny, tmp_path):
    narr = pd.read_csv(tiny["narrations"])
    narr.loc[0, "video_id"] = "P99_01"; narr.loc[0, "participant_id"] = "P99"
    narr.to_csv(tmp_path / "n.csv", index=False)
    run_cli("--videos", str(tiny["folder"]), "--narrations", str(tmp_path / "n.csv"), "--out", str(tmp_path / "o"))
    rec = json.loads((tmp_path / "o" / "results" / "epic_extract.json").read_text())["records"][0]
    assert "P99_01 not found" in rec["error"] and rec["action_id"] == narr.narration_id[0]
    narr.drop(columns="verb_class").to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(DataError, match=r"bad.csv: missing EPIC-100 column\(s\) \['verb_class'\]"):
        run_cli("--videos", str(tiny["folder"]), "--narrations", str(tmp_path / "bad.csv"), "--out", str(tmp_path / "o2"))

def test_cli_out_convention_writes_only_below_out_and_lists_every_file(tiny, tmp_path, capsys, monkeypatch):
    "--out DIR or --out FILE.json (store.CommandOutput): nothing is written anywhere else, and every written file is printed."
    monkeypatch.chdir(tmp_path)                                   # a stray relative write would land here
    before = {p for p in tmp_path.rglob("*")}
    run_cli("--videos", str(tiny["folder"]), "--narrations", str(tiny["narrations"]), "--out", str(tmp_path / "mine" / "record.json"),
            "--encoder", "none")
    written = {p for p in tmp_path.rglob("*") if p.is_file()} - before
    assert written == {tmp_path / "mine" / "record.json", tmp_path / "mine" / "raw" / "epic_extract" / "bins.npz"}
    printed = [l.removeprefix("wrote ") for l in capsys.readouterr().out.splitlines() if l.startswith("wrote ")]
    assert sorted(printed) == sorted(str(p) for p in written)
    assert json.loads((tmp_path / "mine" / "record.json").read_text())["summary"]["actions"] == len(pd.read_csv(tiny["narrations"]))
    (tmp_path / "afile").write_text("x")
    from hoi_audit.core import OutputError
    with pytest.raises(OutputError, match="afile: --out must be a folder or a .json path"):
        run_cli("--videos", str(tiny["folder"]), "--narrations", str(tiny["narrations"]), "--out", str(tmp_path / "afile"))


@pytest.mark.parametrize("mode", ["folder", "file"])
def test_epic_cli_out_convention_writes_only_below_out_and_lists_every_file(tiny, tmp_path, capsys, monkeypatch, mode):
    "`hoi-audit epic`: --out DIR gives DIR/results/epic_anticipation.json, --out FILE.json that file; nothing else, all printed."
    monkeypatch.chdir(tmp_path)
    before = {p for p in tmp_path.rglob("*")}
    out = tmp_path / "mine" if mode == "folder" else tmp_path / "mine" / "e.json"
    p = argparse.ArgumentParser(); sub = p.add_subparsers(); add_subcommand(sub)
    args = p.parse_args(["epic", "--videos", str(tiny["folder"]), "--narrations", str(tiny["narrations"]), "--out", str(out),
                         "--forecaster", "hoi_audit.worldmodel:PersistenceModel", "--n-boot", "20", "--no-oracle"])
    assert args.func(args) == 0
    written = {p for p in tmp_path.rglob("*") if p.is_file()} - before
    assert written == {out / "results" / "epic_anticipation.json" if mode == "folder" else out}
    printed = [l.removeprefix("wrote ") for l in capsys.readouterr().out.splitlines() if l.startswith("wrote ")]
    # stages.run_stage names the run's store last, though this stage keeps no unit there (nothing is created)
    store = str(ExperimentPaths(out if mode == "folder" else out.parent, "epic_anticipation").store.root) + "/"
    assert printed in ([str(p) for p in written], [str(p) for p in written] + [store]) and not Path(store).exists()
    payload = json.loads(next(iter(written)).read_text())
    assert "oracle" not in {r.get("feature_set") for r in payload["records"]}          # --no-oracle: the target is never encoded

def test_epic_on_the_embedded_clips_takes_model_and_writes_only_below_out(tmp_path, capsys, monkeypatch):
    """Issue 31: `hoi-audit epic --size tiny --model SPEC --out DIR` needs no videos of one's own: the embedded EPIC-like clips are
    written below DIR, every file is listed; --videos without --narrations is an error."""
    monkeypatch.chdir(tmp_path)
    p = argparse.ArgumentParser(); sub = p.add_subparsers(); add_subcommand(sub)
    out = tmp_path / "mine"
    args = p.parse_args(["epic", "--size", "tiny", "--out", str(out), "--model", "hoi_audit.worldmodel:PersistenceModel",
                         "--seeds", "42", "--n-boot", "20", "--no-oracle"])
    assert args.func(args) == 0
    written = {q for q in tmp_path.rglob("*") if q.is_file()}
    assert all(q.is_relative_to(out) for q in written) and out / "results" / "epic_anticipation.json" in written
    printed = {Path(l.removeprefix("wrote ")) for l in capsys.readouterr().out.splitlines() if l.startswith("wrote ")}
    store = ExperimentPaths(out, "epic_anticipation").store.root   # named by stages.run_stage; this stage keeps nothing there
    assert printed - {store} == written and not store.exists()
    payload = json.loads((out / "results" / "epic_anticipation.json").read_text())
    assert payload["config"]["forecaster"] == "hoi_audit.worldmodel:PersistenceModel" and payload["config"]["seeds"] == [42]
    args = p.parse_args(["epic", "--videos", str(tmp_path), "--out", str(tmp_path / "other")])
    with pytest.raises(DataError, match="--videos and --narrations together"): args.func(args)
