"Decoding causal bins: the damaged-packet fallback against hand-computed frames, bad input, the hang guard, determinism."
import subprocess, time
from pathlib import Path
import numpy as np
import pytest
from hoi_audit.core import DataError
from hoi_audit.decode import (BinSpec, DecodeTimeout, VideoDecoder, damage_samples, decode_range_pyav, observation_bins,
                              sample_indices, summarize_substitutions)

FPS = 12

def _clip(path, n=240, size=64):
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg", reason="video fixtures need imageio-ffmpeg (a dev dependency)")
    frames = np.zeros((n, size, size, 3), np.uint8)
    frames[..., 0] = ((np.arange(n) * 7) % 256)[:, None, None]     # frame i shows (7 i) mod 256 in red
    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{size}x{size}",
           "-r", str(FPS), "-i", "-", "-c:v", "libx264", "-preset", "ultrafast", "-g", "24", "-bf", "0", "-pix_fmt", "yuv420p",
           "-threads", "1", str(path)]
    subprocess.run(cmd, input=frames.tobytes(), check=True)
    return path

@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("clips")
    clean = _clip(d / "clean.mp4")
    damaged = d / "damaged.mp4"; damaged.write_bytes(clean.read_bytes())
    damage_samples(damaged, [107, 130])           # 107: a sampled frame of bin 2 (t = 12 s); 130: bin 3's
    return clean, damaged

def red(frame): return float(frame[..., 0].mean())

def test_clean_frames_are_the_sampled_ones(clips):
    clean, _ = clips
    with VideoDecoder(clean) as v:
        bins = observation_bins(12.0, v.fps, v.n_frames, BinSpec())
        frames, rec = v.read_bins(bins, 16, "a")
    expected = np.concatenate([sample_indices(lo, hi, 16) for lo, hi in bins])
    got = np.array([red(f) for f in frames.reshape(-1, 64, 64, 3)])
    assert np.abs(got - (expected * 7) % 256).max() < 4             # H.264 is lossy; a neighbour would be 7 off
    assert rec.substitutions == 0 and rec.ok
    assert bins[-1][1] <= 11 * FPS                                   # nothing from the one-second gap

def test_damaged_frame_is_replaced_by_its_nearest_decodable_neighbour(clips):
    clean, damaged = clips
    with VideoDecoder(damaged) as v:
        bins = observation_bins(12.0, v.fps, v.n_frames, BinSpec())
        frames, rec = v.read_bins(bins, 16, "a")
    assert sample_indices(*bins[2], 16)[5] == 107
    # 106 and 108 are both one frame away; the tie goes to the earlier frame, 106
    assert abs(red(frames[2, 5]) - (106 * 7) % 256) < 4
    assert rec.substitutions == 2 and rec.max_offset == 1 and rec.failed_bins == []
    with VideoDecoder(clean) as v: clean_frames, _ = v.read_bins(bins, 16, "a")
    np.testing.assert_array_equal(frames[:2], clean_frames[:2])

def test_fallback_is_deterministic(clips):
    _, damaged = clips
    outs = []
    for _ in range(3):
        with VideoDecoder(damaged) as v:
            frames, rec = v.read_bins(observation_bins(12.0, v.fps, v.n_frames, BinSpec()), 16, "a")
        outs.append((frames, rec.to_dict()))
    for f, r in outs[1:]:
        np.testing.assert_array_equal(f, outs[0][0]); assert r == outs[0][1]

def test_fallback_stays_inside_its_bin(clips, monkeypatch):
    _, damaged = clips
    calls = []
    def recording(path, lo, hi, fps):
        calls.append((lo, hi)); return decode_range_pyav(path, lo, hi, fps)
    with VideoDecoder(damaged, decode_range=recording) as v:
        bins = observation_bins(12.0, v.fps, v.n_frames, BinSpec())
        v.read_bins(bins, 16, "a")
    assert calls and all(c in bins for c in calls)

def test_pyav_range_drops_only_the_damaged_frame(clips):
    _, damaged = clips
    got = decode_range_pyav(damaged, 102, 117, FPS)
    assert sorted(got) == [i for i in range(102, 117) if i != 107]

def test_bad_inputs_name_the_file(tmp_path, clips):
    clean, _ = clips
    with pytest.raises(DataError, match="nope.mp4: video file not found"): VideoDecoder(tmp_path / "nope.mp4")
    truncated = tmp_path / "truncated.mp4"; truncated.write_bytes(clean.read_bytes()[: clean.stat().st_size // 2])
    with pytest.raises(DataError, match=r"truncated.mp4: cannot open the video \(a truncated mp4"): VideoDecoder(truncated)
    empty = tmp_path / "empty.mp4"; empty.write_bytes(b"")
    with pytest.raises(DataError, match="empty.mp4: the video file is empty"): VideoDecoder(empty)
    with pytest.raises(DataError, match="clean.mp4, action a9: the observation window starts at -1.00 s"):
        observation_bins(5.0, FPS, 240, BinSpec(), where=f"{clean}, action a9")

class Overstating:
    "Claims 100 frames, has 60; asking for more hangs, like decord on a container that overstates its count."
    def __init__(self, path): pass
    def __len__(self): return 100
    def get_avg_fps(self): return 10.0
    def get_batch(self, idx):
        if max(idx) >= 60: time.sleep(60)
        return np.zeros((len(idx), 2, 2, 3), np.uint8)

class ZeroFrames(Overstating):
    def __len__(self): return 0

def test_overstated_frame_count_is_clamped_not_hung(clips):
    start = time.time()
    v = VideoDecoder(clips[0], time_limit=0.2, open_reader=Overstating)
    assert v.n_frames == 60 and v.declared_frames == 100
    with pytest.raises(DataError, match="outside the video's 60 frames"): v.read_bins([(50, 70)], 4, "a3")
    assert time.time() - start < 10

def test_zero_frame_video(clips):
    with pytest.raises(DataError, match="clean.mp4: the video has no frames"): VideoDecoder(clips[0], open_reader=ZeroFrames)

def test_hung_batch_is_a_timeout(clips):
    class Hangs(Overstating):
        def get_batch(self, idx):
            if len(idx) > 1: time.sleep(60)
            return np.zeros((len(idx), 2, 2, 3), np.uint8)
    v = VideoDecoder(clips[0], time_limit=0.2, open_reader=Hangs)
    with pytest.raises(DecodeTimeout, match="clean.mp4: get_batch: no result after 0.2 s"): v.read_bins([(0, 10)], 4, "a")

def test_summary_counts_by_hand():
    from hoi_audit.decode import SubstitutionRecord as R
    s = summarize_substitutions([R("x", substitutions=3, max_offset=2), R("y", substitutions=1, max_offset=5), R("z")])
    assert (s["actions_affected"], s["substitutions"], s["max_offset"], s["affected_ids"]) == (2, 4, 5, ["x", "y"])
