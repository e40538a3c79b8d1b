"""Issue 32, EPIC-style anticipation (`hoi-audit extract`, `hoi-audit epic`): every narration of the CSV is used or carries a note
saying why not, the notes are counted, and a video that cannot be used is listed once, with its cause, not once per narration."""
import json, time
from pathlib import Path
import numpy as np
import pandas as pd
import pytest
from hoi_audit.decode import open_decord
from hoi_audit.epic import NOTE_KINDS, extract, read_narrations
from hoi_audit.runner import main

FPS = 12

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("imageio_ffmpeg", reason="the EPIC-like videos need imageio-ffmpeg (a dev dependency)")
    from hoi_audit.clips import write_epic_like
    return write_epic_like(tmp_path_factory.mktemp("epic_faults") / "videos", "tiny", seed=0, damaged_participant=None)

def folder_with(tiny, tmp_path, keep=("P01_01",), non_videos=()):
    "A videos folder holding copies of the `keep` videos and, for each of `non_videos`, a text file named as its video."
    d = tmp_path / "videos"
    for vid in keep:
        dst = d / tiny["videos"][vid]; dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes((tiny["folder"] / tiny["videos"][vid]).read_bytes())
    for vid in non_videos:
        (d / f"{vid}.mp4").parent.mkdir(parents=True, exist_ok=True)
        (d / f"{vid}.mp4").write_text("participant,verb\nP01,take\n")      # a CSV, renamed .mp4
    return d

def narrations(tiny, tmp_path, per_video:dict, edit=None) -> Path:
    "A CSV of the first `n` narrations that start at least 6 s into each video of `per_video` (video_id -> n); `edit(df)` changes it."
    df = pd.read_csv(tiny["narrations"], dtype={"narration_id": str, "participant_id": str, "video_id": str})
    late = (df.start_frame - 1) / FPS >= 6.0
    df = pd.concat([df[late & df.video_id.eq(v)].head(n) for v, n in per_video.items()], ignore_index=True)
    if edit is not None: df = edit(df)
    path = tmp_path / "narrations.csv"; df.to_csv(path, index=False)
    return path

def extract_cli(videos, csv, out, *extra):
    code = main(["extract", "--videos", str(videos), "--narrations", str(csv), "--out", str(out), *extra])
    return code, json.loads((Path(out) / "results" / "epic_extract.json").read_text())

def assert_accounted(summary, records, csv):
    "Every narration of the CSV has a record; each left-out one has a note that excludes it; the counts add up."
    ids = pd.read_csv(csv, dtype={"narration_id": str}).narration_id.tolist()
    assert [r["action_id"] for r in records] == ids
    left_out = [r for r in records if r["error"] is not None]
    assert all(any(NOTE_KINDS[n["kind"]][0] for n in r["notes"]) for r in left_out)
    assert summary["actions"] == len(ids) == summary["actions_used"] + summary["actions_excluded"]
    assert summary["actions_excluded"] == len(left_out) == sum(summary["excluded_by"].values())
    for kind, n in summary["notes"].items(): assert n == sum(any(m["kind"] == kind for m in r["notes"]) for r in records), kind

def test_stop_after_video_end_is_noted_and_counted(tiny, tmp_path, capsys):
    "a narration whose stop time lies after its video's end -> kept, its target cut, a stop_after_video_end note, counted, printed"
    def late_stop(df):
        df.loc[1, "stop_timestamp"] = "00:01:30.00"; return df          # the video is 40.42 s long
    csv = narrations(tiny, tmp_path, {"P01_01": 3}, late_stop)
    code, out = extract_cli(folder_with(tiny, tmp_path), csv, tmp_path / "o", "--with-target")
    rec = out["records"][1]
    assert code == 0 and rec["error"] is None                           # used: the oracle gets the frames that exist
    assert [n["kind"] for n in rec["notes"]] == ["stop_after_video_end"]
    assert "the stop time 90.00 s lies after the video's end (40.42 s, 485 frames at 12 fps)" in rec["notes"][0]["note"]
    assert "the target segment is cut to frames" in rec["notes"][0]["note"]
    assert [r["notes"] for r in out["records"][::2]] == [[], []]        # the others have nothing to note
    assert out["summary"]["notes"]["stop_after_video_end"] == 1 and out["summary"]["actions_used"] == 3
    assert "1 kept with a note, stop_after_video_end" in capsys.readouterr().out
    assert_accounted(out["summary"], out["records"], csv)

class Overstating:
    "decord over a real video that claims 600 frames where 485 decode (as a container that overstates its count)."
    def __init__(self, path): self.r = open_decord(path)
    def __len__(self): return 600
    def get_avg_fps(self): return self.r.get_avg_fps()
    def get_batch(self, idx):
        if max(idx) >= len(self.r): raise IndexError(f"frame {max(idx)} out of bound")
        return self.r.get_batch(idx)

def test_windows_beyond_the_last_decodable_frame_are_noted(tiny, tmp_path):
    "context window / target past the last decodable frame -> window_past_end or target_outside_video (left out), or target_clipped (kept)"
    csv = narrations(tiny, tmp_path, {"P01_01": 3})
    narr = read_narrations(csv)
    narr.loc[0, ["start_s", "stop_s"]] = [44.0, 46.0]     # window [38 s, 43 s): frames 456..515, past the 485 that decode
    narr.loc[1, ["start_s", "stop_s"]] = [38.0, 45.0]     # window fits; the target runs to frame 540 (< 600 declared): cut at 485
    narr.loc[2, ["start_s", "stop_s"]] = [41.0, 44.0]     # window fits (ends at frame 480); the target starts at frame 492
    feats = extract(folder_with(tiny, tmp_path), narr, None, with_target=True, decoder_kwargs={"open_reader": Overstating})
    kinds = [[n["kind"] for n in r.notes] for r in feats.records]
    assert kinds == [["window_past_end", "target_clipped"], ["target_clipped"], ["target_outside_video", "target_clipped"]]
    assert feats.ok.tolist() == [False, True, False]
    assert "the video declares 600 frames; those from 485 on do not decode" in feats.records[0].notes[0]["note"]
    assert "after the last decodable frame (485 of the 600 frames the video declares decode)" in feats.records[1].notes[0]["note"]
    s = feats.summary
    assert s["excluded_by"]["window_past_end"] == s["excluded_by"]["target_outside_video"] == 1 and s["notes"]["target_clipped"] == 3
    assert_accounted(s, [r.to_dict() for r in feats.records], csv)

def test_non_video_is_listed_once_with_its_cause(tiny, tmp_path, capsys):
    "a text file named .mp4 -> one failed_videos entry with FFmpeg's reason; its narrations carry a short pointer, not the cause"
    csv = narrations(tiny, tmp_path, {"P01_01": 2, "P02_01": 5})
    code, out = extract_cli(folder_with(tiny, tmp_path, non_videos=["P02_01"]), csv, tmp_path / "o", "--encoder", "none")
    failed = out["summary"]["failed_videos"]
    assert code == 1 and [(f["video_id"], f["actions"]) for f in failed] == [("P02_01", 5)]
    assert "P02_01.mp4: cannot open the video: Invalid data found when processing input" in failed[0]["cause"]
    gone = [r for r in out["records"] if r["action_id"].startswith("P02_01")]
    assert all(r["notes"] == [{"kind": "video_failed", "note": r["error"]}] for r in gone)
    assert all("Invalid data" not in r["error"] and "failed_videos" in r["error"] for r in gone)   # the cause is not repeated
    printed = capsys.readouterr().out
    assert printed.count("Invalid data found when processing input") == 1 and "  P02_01 (5 narration(s)): " in printed
    assert "7 narrations: 2 used, 5 left out (video_failed 5)" in printed
    assert_accounted(out["summary"], out["records"], csv)

def test_missing_video_is_listed_once(tiny, tmp_path):
    "a narration whose video is not in the folder -> one failed_videos entry (not found, the paths tried); each narration points to it"
    csv = narrations(tiny, tmp_path, {"P01_01": 1, "P03_01": 3})
    code, out = extract_cli(folder_with(tiny, tmp_path), csv, tmp_path / "o")
    (f,) = out["summary"]["failed_videos"]
    assert (f["video_id"], f["problem"], f["actions"], f["video"]) == ("P03_01", "not found", 3, None)
    assert f["cause"].startswith("video P03_01 not found; looked for ")
    assert [r["error"] for r in out["records"][1:]] == ["video P03_01 not found; this narration was not read "
                                                        "(the cause is listed once, in failed_videos)"] * 3
    assert_accounted(out["summary"], out["records"], csv)

def test_every_failing_video_is_printed_up_to_twenty(tiny, tmp_path, capsys):
    "23 unusable videos -> the first 20 printed, each with its cause, then a count of the rest; all 23 in the record"
    def many_missing(df):
        extra = pd.concat([df.iloc[[0]]] * 23, ignore_index=True)
        extra["video_id"] = [f"P{i:02d}_09" for i in range(23)]; extra["participant_id"] = [f"P{i:02d}" for i in range(23)]
        extra["narration_id"] = [f"P{i:02d}_09_0" for i in range(23)]
        return pd.concat([df, extra], ignore_index=True)
    csv = narrations(tiny, tmp_path, {"P01_01": 1}, many_missing)
    code, out = extract_cli(folder_with(tiny, tmp_path), csv, tmp_path / "o")
    printed = capsys.readouterr().out.splitlines()
    listed = [l for l in printed if l.startswith("  P") and "_09 (1 narration(s)): video P" in l]
    assert code == 1 and len(listed) == 20 and "  ... and 3 more video(s) (all in the record's summary, failed_videos)" in printed
    assert "23 video(s) could not be used (each listed once, with its cause):" in printed
    assert len(out["summary"]["failed_videos"]) == 23
    assert_accounted(out["summary"], out["records"], csv)

class HangsOnBatches:
    "decord, except that a batch of more than one frame never returns (a decoder stuck on the video)."
    def __init__(self, path): self.r = open_decord(path)
    def __len__(self): return len(self.r)
    def get_avg_fps(self): return self.r.get_avg_fps()
    def get_batch(self, idx):
        if len(idx) > 1: time.sleep(30)
        return self.r.get_batch(idx)

def test_decode_timeout_lists_the_video_once(tiny, tmp_path):
    "a decoder that hangs -> the video listed once (its cause: the timeout); its narrations point to it; one time limit, not one each"
    csv = narrations(tiny, tmp_path, {"P01_01": 5})
    start = time.time()
    feats = extract(folder_with(tiny, tmp_path), csv, None, time_limit=0.3, decoder_kwargs={"open_reader": HangsOnBatches})
    assert time.time() - start < 10
    s = feats.summary
    (f,) = s["failed_videos"]
    assert f["problem"] == "timed out" and "no result after 0.3 s (decoder hung)" in f["cause"] and f["actions"] == 5
    assert f"at narration {feats.records[0].action_id}" in f["cause"]
    assert all(r.notes[0]["kind"] == "video_failed" and "timed out" in r.error for r in feats.records)
    assert_accounted(s, [r.to_dict() for r in feats.records], csv)

def test_counts_add_up_across_faults(tmp_path):
    """a damaged video, a non-video, a missing video, early windows, a late stop -> every narration used or noted, counts add up,
    the features' `ok` matches the record"""
    pytest.importorskip("imageio_ffmpeg")
    from hoi_audit.clips import write_epic_like
    data = write_epic_like(tmp_path / "v", "tiny", seed=0)          # P02_01 has damaged packets
    (tmp_path / "v" / data["videos"]["P04_01"]).write_text("not a video\n")
    df = pd.read_csv(data["narrations"], dtype={"narration_id": str, "participant_id": str, "video_id": str})
    gone = df[df.video_id.eq("P03_01")].assign(video_id="P09_01", participant_id="P09")
    gone["narration_id"] = gone.narration_id.str.replace("P03_01", "P09_01")
    df = pd.concat([df, gone], ignore_index=True)
    df.loc[df.video_id.eq("P01_01").idxmax() + 13, "stop_timestamp"] = "00:02:00.00"
    csv = tmp_path / "n.csv"; df.to_csv(csv, index=False)
    code, out = extract_cli(tmp_path / "v", csv, tmp_path / "o")
    s = out["summary"]
    assert_accounted(s, out["records"], csv)
    assert sorted(f["video_id"] for f in s["failed_videos"]) == ["P04_01", "P09_01"]
    assert s["excluded_by"]["video_failed"] == (df.video_id.isin(["P04_01", "P09_01"])).sum()
    assert s["excluded_by"]["window_before_start"] > 0 and s["notes"]["stop_after_video_end"] == 1 and s["actions_affected"] > 0
    with np.load(tmp_path / "o" / "raw" / "epic_extract" / "latents.npz") as z:
        assert z["ok"].sum() == s["actions_used"] and len(z["ok"]) == s["actions"]

def test_epic_command_lists_a_failed_video_once(tiny, tmp_path, capsys):
    "`hoi-audit epic` with a non-video among the videos -> scored on the rest; the video once in the summary and on screen; notes written"
    csv = narrations(tiny, tmp_path, {"P01_01": 6, "P03_01": 6, "P04_01": 3})
    out = tmp_path / "e.json"
    code = main(["epic", "--videos", str(folder_with(tiny, tmp_path, keep=("P01_01", "P03_01"), non_videos=["P04_01"])),
                 "--narrations", str(csv), "--out", str(out), "--model", "hoi_audit.worldmodel:PersistenceModel",
                 "--seeds", "42", "--n-boot", "20", "--no-oracle"])
    assert code == 0
    config = json.loads(out.read_text())["config"]
    s = config["substitution_summary"]
    assert [(f["video_id"], f["actions"]) for f in s["failed_videos"]] == [("P04_01", 3)]
    assert (s["actions_used"], s["excluded_by"]["video_failed"]) == (12, 3)
    lost = pd.read_csv(csv, dtype={"narration_id": str}).query("video_id == 'P04_01'").narration_id.tolist()
    assert sorted(config["notes"]) == sorted(config["excluded"]) == sorted(lost)
    assert all(n == [{"kind": "video_failed", "note": config["excluded"][k]}] for k, n in config["notes"].items())
    printed = capsys.readouterr().out
    assert printed.count("Invalid data found when processing input") == 1 and "15 narrations: 12 used, 3 left out" in printed

def test_all_videos_unusable_is_one_error_naming_each(tiny, tmp_path, capsys):
    "no usable video -> extract writes the record and exits 1; epic exits 2 with one message naming each video and its cause"
    csv = narrations(tiny, tmp_path, {"P01_01": 2, "P02_01": 2})
    videos = folder_with(tiny, tmp_path, keep=(), non_videos=["P01_01", "P02_01"])
    (videos / "P01_01.mp4").rename(videos / "P01_01.MP4")
    code, out = extract_cli(videos, csv, tmp_path / "o")
    assert code == 1 and out["summary"]["actions_used"] == 0 and len(out["summary"]["failed_videos"]) == 2
    capsys.readouterr()
    code = main(["epic", "--videos", str(videos), "--narrations", str(csv), "--out", str(tmp_path / "e.json"),
                 "--model", "hoi_audit.worldmodel:PersistenceModel", "--seeds", "42", "--n-boot", "20", "--no-oracle"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "needs two participants with usable actions" in err
    assert err.count("Invalid data found when processing input") == 2 and "  P01_01 (2 narration(s))" in err
