"""Frames/s of plain decord `get_batch` vs the fallback reader (`VideoDecoder.read_bins`) on the same causal bins, on clean
video (target: the fallback reader costs at most 1.05x plain) and on a damaged copy (plain stops; the reader completes).

    python bench/bench_decode.py [--size 128] [--seconds 90] [--repeats 5]
"""
import argparse, tempfile, time
from pathlib import Path
import numpy as np
from hoi_audit.clips import ClipPreset, encode_mp4, plan_video, render_actions
from hoi_audit.decode import BinSpec, VideoDecoder, damage_samples, observation_bins, open_decord, sample_indices

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=128); ap.add_argument("--seconds", type=float, default=90)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    preset = ClipPreset(n_participants=1, actions_per_video=int(a.seconds / 2.75), n_verbs=12, size=a.size)
    rng = np.random.default_rng(0)
    plan = plan_video(preset, rng)
    frames = render_actions(plan["verbs"], plan["durations"], plan["scene"], preset, rng)
    tmp = Path(tempfile.mkdtemp())
    clean = encode_mp4(frames, tmp / "clean.mp4", preset.fps)
    spec = BinSpec()
    starts = np.arange(spec.observe_from, len(frames) / preset.fps - 0.5, 2.0)
    bins = [observation_bins(t, preset.fps, len(frames), spec) for t in starts]
    wanted = [np.concatenate([sample_indices(lo, hi, spec.frames_per_bin) for lo, hi in b]) for b in bins]
    n = sum(len(w) for w in wanted)
    damaged = tmp / "damaged.mp4"; damaged.write_bytes(clean.read_bytes())
    hit = [int(w[5]) for w in wanted[1::4]]
    damage_samples(damaged, [f if f % 24 else f + 1 for f in hit])

    def plain(path):
        vr = open_decord(path)
        t = time.perf_counter(); failed = 0
        for w in wanted:
            try: vr.get_batch(list(map(int, w))).asnumpy()
            except Exception: failed += 1; vr = open_decord(path)
        return time.perf_counter() - t, failed
    def reader(path):
        v = VideoDecoder(path)
        t = time.perf_counter(); subs = 0
        for b in bins: subs += v.read_bins(b, spec.frames_per_bin)[1].substitutions
        return time.perf_counter() - t, subs, v.fallback_bins

    p = [plain(clean)[0] for _ in range(a.repeats)]; r = [reader(clean)[0] for _ in range(a.repeats)]
    print(f"clean video {a.size}x{a.size}, {len(frames)} frames, {len(bins)} actions x {spec.n_bins} bins x {spec.frames_per_bin} frames ({n} frames per pass)")
    print(f"  plain get_batch : {n / min(p):8.0f} frames/s (best of {a.repeats})")
    print(f"  fallback reader : {n / min(r):8.0f} frames/s  -> cost ratio {min(r) / min(p):.3f} (target <= 1.05)")
    tp, failed = plain(damaged); tr, subs, fb = reader(damaged)
    print(f"damaged video ({len(hit)} damaged packets)")
    print(f"  plain get_batch : {n / tp:8.0f} frames/s, {failed} of {len(bins)} actions raised")
    print(f"  fallback reader : {n / tr:8.0f} frames/s, completed; {fb} bins took the fallback, {subs} frames substituted")

if __name__ == "__main__": main()
