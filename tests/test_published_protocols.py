"Published protocols (published.PUBLISHED) on hand-made annotation files in both layouts, each answer counted by hand; the CLI."
import argparse, json, os
from pathlib import Path
import numpy as np
import pandas as pd
import pytest
from hoi_audit.core import DataError, HoiAuditError
from hoi_audit.published import add_subcommand
from hoi_audit.published import PUBLISHED, lint_published, protocol_windows, read_actions, read_video_info, window_positions

HEADER = ("narration_id,participant_id,video_id,narration_timestamp,start_timestamp,stop_timestamp,start_frame,stop_frame,"
          "narration,verb,verb_class,noun,noun_class,all_nouns,all_noun_classes\n")

def epic_row(nid, start, stop, verb, noun, fps=60):
    vid = nid.rsplit("_", 1)[0]
    ts = lambda s: f"00:{int(s // 60):02d}:{s % 60:05.2f}"
    return f"{nid},{vid[:3]},{vid},{ts(start)},{ts(start)},{ts(stop)},{round(start * fps)},{round(stop * fps)},x,v,{verb},n,{noun},['n'],[{noun}]\n"

@pytest.fixture
def files(tmp_path):
    """Validation: six actions in P01_01 (60 fps) and two in P02_01 (90 fps). Training pairs: (0,0), (1,0), (2,1), (3,3), (4,2).
    By hand: (1,1) and (0,1) are unseen pairs of seen classes (v3, v6); (3,9) has an unseen noun (v5); the rest are seen."""
    val = [("P01_01_0", 0.4, 1.0, 0, 0), ("P01_01_1", 10.0, 13.0, 1, 0), ("P01_01_2", 20.0, 20.6, 1, 1), ("P01_01_3", 30.0, 36.0, 2, 1),
           ("P01_01_4", 40.0, 41.5, 3, 9), ("P01_01_5", 50.0, 51.0, 0, 1), ("P02_01_0", 10.0, 12.0, 4, 2), ("P02_01_1", 20.0, 20.8, 0, 0)]
    (tmp_path / "val.csv").write_text(HEADER + "".join(epic_row(*r, fps=90 if r[0].startswith("P02") else 60) for r in val))
    # the same actions in RULSTM's header-less layout: frames at half the video's rate
    (tmp_path / "val_rulstm.csv").write_text("".join(
        f"{n},{n.rsplit('_', 1)[0]},{round(s * f / 2)},{round(e * f / 2)},{v},{o},0\n"
        for n, s, e, v, o in val for f in [90 if n.startswith("P02") else 60]))
    (tmp_path / "train.csv").write_text("".join(f"t{i},P03_01,{100 * i},{100 * i + 50},{v},{n},{i}\n"
                                                for i, (v, n) in enumerate([(0, 0), (1, 0), (2, 1), (3, 3), (4, 2)])))
    (tmp_path / "info.csv").write_text("video_id,duration,fps,resolution\nP01_01,100,60,x\nP02_01,100,90,x\nP03_01,100,60,x\n")
    return tmp_path

def cli(*argv):
    p = argparse.ArgumentParser(); sub = p.add_subparsers(); add_subcommand(sub)
    args = p.parse_args(["lint", *argv]); return args.func(args)

def test_both_layouts_read_to_the_same_actions(files):
    info = read_video_info(files / "info.csv")
    a, b = read_actions(files / "val.csv", info), read_actions(files / "val_rulstm.csv", info)
    assert a.narration_id.tolist() == b.narration_id.tolist() and (a.verb_class == b.verb_class).all()
    np.testing.assert_allclose(b.start_s, a.start_s, atol=1 / 45)      # one half-rate frame

def test_vjepa2_rules_counted_by_hand(files):
    r = lint_published("vjepa2-ek100", files / "val.csv", files / "train.csv", files / "info.csv")
    assert (r.n_annotated, r.n_scored) == (8, 5)                        # three filtered
    assert r.finding("pair-filter")["narration_ids"] == ["P01_01_2", "P01_01_5"]
    assert r.finding("noun-filter")["narration_ids"] == ["P01_01_4"]
    assert r.finding("window-anchor")["n_actions"] == 5 and "relative to the stop time" in r.finding("window-anchor")["message"]
    assert r.finding("padded-window")["narration_ids"] == ["P01_01_0"]  # its window runs from -3.875 s to 0 s
    assert "(evaluated at 20 checkpoints)" in r.finding("selection-on-reported-split")["message"]
    assert "dropped-without-record" not in set(r.findings.rule)        # every drop is a named filter

def test_vjepa2_windows_inside_their_actions_by_hand(files):
    a = read_actions(files / "val.csv")
    pos = window_positions(protocol_windows(PUBLISHED["vjepa2-ek100"], a), a).set_index("narration_id")
    # longer than 1 s: P01_01_1 (3 s), _3 (6 s), _4 (1.5 s), P02_01_0 (2 s); exactly 1 s (_5) ends at the start, not inside
    assert pos.index[pos.ends_inside].tolist() == ["P01_01_1", "P01_01_3", "P01_01_4", "P02_01_0"]
    np.testing.assert_allclose(pos.loc[["P01_01_1", "P01_01_3", "P01_01_4", "P02_01_0"], "observed_share"],
                               [2 / 3, 5 / 6, 1 / 3, 1 / 2], atol=1e-6)

def test_rulstm_rules_counted_by_hand(files):
    r = lint_published("rulstm-ek100", files / "val_rulstm.csv", files / "train.csv", files / "info.csv")
    assert (r.n_annotated, r.n_scored) == (8, 8)                        # RULSTM scores every action
    # 90 fps: 30 half-rate frames are 2/3 s, so both P02 windows end 0.667 s before their starts. The action at 0.4 s (half-frame
    # 12): its frames 1 s and 3.5 s before the start (-18, -93) are below 1 and padded with the earliest one at or above 1, 0.25 s
    # before the start (frame 4, 0.133 s): its window ends 0.267 s before the start and starts before the video
    assert r.finding("window-anchor")["narration_ids"] == ["P01_01_0", "P02_01_0", "P02_01_1"]
    assert r.finding("padded-window")["narration_ids"] == ["P01_01_0"]
    assert "(evaluated at 100 checkpoints)" in r.finding("selection-on-reported-split")["message"]
    assert not {"pair-filter", "noun-filter", "missing-window"} & set(r.findings.rule)

def test_neither_layout_and_missing_fps_are_clear_errors(files):
    (files / "bad.csv").write_text("clip,start,end\nP01_01,1,2\n")
    with pytest.raises(DataError, match=r"bad.csv: neither the EPIC-100 CSV layout .* nor RULSTM's header-less layout"):
        lint_published("vjepa2-ek100", files / "bad.csv", files / "train.csv", files / "info.csv")
    with pytest.raises(DataError, match="give the videos' fps"):
        lint_published("rulstm-ek100", files / "val_rulstm.csv", files / "train.csv")
    with pytest.raises(DataError, match="unknown published protocol 'avt'"):
        lint_published("avt", files / "val.csv", files / "train.csv")

def test_cli_protocol(files, capsys):
    out = files / "out"
    assert cli("--protocol", "vjepa2-ek100", "--annotations", str(files / "val.csv"), "--train-annotations", str(files / "train.csv"),
               "--out", str(out)) == 1
    report = json.loads((out / "results" / "lint.json").read_text())
    assert report["protocol"]["name"] == "vjepa2-ek100" and report["n_scored"] == 5
    printed = capsys.readouterr().out
    assert "[pair-filter] 2 action(s)" in printed and str(out / "results" / "lint.json") in printed   # says what it wrote
    assert [p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()] == ["results/lint.json"]   # and only there
    with pytest.raises(HoiAuditError, match="drop --windows"):
        cli("--protocol", "rulstm-ek100", "--annotations", str(files / "val.csv"), "--windows", "w.csv", "--out", str(out))

ANCHORS = Path(os.environ.get("HOI_AUDIT_ANCHORS") or Path(__file__).resolve().parents[2] / "shared" / "anchors")
REAL = {"val": ANCHORS / "epic-kitchens-100" / "EPIC_100_validation.csv", "info": ANCHORS / "epic-kitchens-100" / "EPIC_100_video_info.csv",
        "val_rulstm": ANCHORS / "rulstm-ek100" / "validation.csv", "train": ANCHORS / "rulstm-ek100" / "training.csv"}

@pytest.mark.skipif(not all(p.is_file() for p in REAL.values()), reason=f"EPIC-KITCHENS-100's files are not in {ANCHORS} (never shipped)")
def test_real_counts_match_an_independent_count():
    "On the real files, where they are: the lint's counts against plain pandas on the raw CSVs, with no hoi_audit reader."
    ev, tr = pd.read_csv(REAL["val"]), pd.read_csv(REAL["train"], header=None)
    pairs = set(zip(tr[4], tr[5]))
    seen = np.array([(v, n) in pairs for v, n in zip(ev.verb_class, ev.noun_class)])
    secs = lambda s: pd.to_timedelta(s).dt.total_seconds()
    longer = ((secs(ev.stop_timestamp) - secs(ev.start_timestamp)).round(3) > 1.0).to_numpy()
    r = lint_published("vjepa2-ek100", REAL["val"], REAL["train"], REAL["info"])
    assert r.n_annotated - r.n_scored == (~seen).sum() == 372
    a = read_actions(REAL["val"], read_video_info(REAL["info"]))
    pos = window_positions(protocol_windows(PUBLISHED["vjepa2-ek100"], a), a)
    assert pos.ends_inside[seen].sum() == (longer & seen).sum()            # every scored action longer than 1 s: 7,659
    info = pd.read_csv(REAL["info"]).set_index("video_id").fps
    va = pd.read_csv(REAL["val_rulstm"], header=None)
    fast = (va[1].map(info) > 60).sum()                                     # 30 half-rate frames are under 1 s only above 60 fps
    rr = lint_published("rulstm-ek100", REAL["val_rulstm"], REAL["train"], REAL["info"])
    assert fast == 42 and rr.finding("window-anchor")["n_actions"] == fast + 20   # + the 20 early actions padded with a later frame
    assert rr.n_scored == len(va) == 9668
