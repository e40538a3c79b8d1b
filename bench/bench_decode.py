"""Frames/s of plain decord `get_batch` vs the fallback reader (`VideoDecoder.read_bins`) on the same causal bins, on clean
video (target: the reader costs at most 1.05x plain; the strict damage accounting must cost nothing there) and on a damaged copy
(plain stops or returns FFmpeg's concealment; the reader completes, and the frames it marks are counted per cause). Clean-video
rates time the reads after opening (the opening cost is printed beside them); damaged-video rates include the damage scan.

    python bench/bench_decode.py [--size 128] [--seconds 90] [--repeats 5] [--runs 40]
"""
import argparse, tempfile, time
from collections import Counter
from pathlib import Path
import numpy as np
from hoi_audit.clips import ClipPreset, encode_mp4, plan_video, render_actions
from hoi_audit.decode import (BinSpec, VideoDecoder, damage_samples, mp4_sample_offsets, overwrite_runs, observation_bins, open_decord, sample_indices,
                              summarize_substitutions)

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=128); ap.add_argument("--seconds", type=float, default=90)
    ap.add_argument("--repeats", type=int, default=5); ap.add_argument("--runs", type=int, default=40, help="64-byte runs for the second damaged copy")
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
    packets = tmp / "damaged_packets.mp4"; packets.write_bytes(clean.read_bytes())
    hit = [int(w[5]) for w in wanted[1::4]]
    damage_samples(packets, [f if f % 24 else f + 1 for f in hit])
    runs = tmp / "damaged_runs.mp4"; runs.write_bytes(clean.read_bytes()); overwrite_runs(runs, a.runs)

    def plain(path):
        vr = open_decord(path)
        t = time.perf_counter(); failed = 0
        for w in wanted:
            try: vr.get_batch(list(map(int, w))).asnumpy()
            except Exception: failed += 1; vr = open_decord(path)
        return time.perf_counter() - t, failed
    def reader(path, **kw):                      # (seconds reading, records, decoder, seconds opening)
        t0 = time.perf_counter()
        v = VideoDecoder(path, **kw)
        t = time.perf_counter()
        records = [v.read_bins(b, spec.frames_per_bin, str(k))[1] for k, b in enumerate(bins)]
        took = time.perf_counter() - t
        v.close()
        return took, records, v, t - t0

    p, r, s, iso = [], [], [], []
    for _ in range(a.repeats):                   # interleaved, so that load from other processes hits them all alike
        p.append(plain(clean)[0]); r.append(reader(clean)); s.append(reader(clean, verify="always")); iso.append(reader(clean, isolate=True))
    best = lambda runs, k=0: min(x[k] for x in runs)
    print(f"clean video {a.size}x{a.size}, {len(frames)} frames, {len(bins)} actions x {spec.n_bins} bins x {spec.frames_per_bin} frames ({n} frames per pass)")
    print(f"  plain get_batch              : {n / min(p):8.0f} frames/s (best of {a.repeats})")
    print(f"  reader (strict, on_error)    : {n / best(r):8.0f} frames/s  -> cost ratio {best(r) / min(p):.3f} (target <= 1.05); "
          f"opening {best(r, 3) * 1e3:.0f} ms (decord's reader and the frame-count probe)")
    print(f"  reader (verify='always')     : {n / best(s):8.0f} frames/s  -> cost ratio {best(s) / min(p):.3f}; "
          f"opening {best(s, 3) * 1e3:.0f} ms (with the damage scan of the whole video)")
    print(f"  reader (isolate=True)        : {n / best(iso):8.0f} frames/s  -> cost ratio {best(iso) / min(p):.3f}; "
          f"opening {best(iso, 3) * 1e3:.0f} ms (decoding in a child process; the limit holds even on a call that holds the GIL)")
    for label, path in ((f"{len(hit)} packets' payloads overwritten", packets), (f"{a.runs} runs of 64 bytes overwritten", runs)):
        tp, failed = plain(path)
        print(f"damaged video ({label})")
        print(f"  plain get_batch              : {n / tp:8.0f} frames/s, {failed} of {len(bins)} actions raised (the rest returned whatever FFmpeg concealed)")
        for rule in (False, True):
            tr, records, v, to = reader(path, accept_concealed=rule, verify="always")   # what extract's re-reading gives "on_error"
            summ = summarize_substitutions(records)
            causes = Counter((v.damage or {}).values())
            print(f"  reader ({'accept_concealed' if rule else 'strict':16s}): {n / (tr + to):8.0f} frames/s (scan included), {v.fallback_bins} bins took the fallback, "
                  f"{summ['substitutions']} samples substituted (largest offset {summ['max_offset']}), {len(summ['error_ids'])} actions with a failed bin")
            if not rule:
                print(f"    frames marked in the video ({len(v.damage or {})}), per cause: " +
                      ", ".join(f"{c} {causes.get(c, 0)}" for c in ("decode_failed", "flagged_corrupt", "predicted_from_damage")))
            print(f"    in the actions' bins: {summ['undecodable_frames']} undecodable, {summ['concealed_frames']} concealed")

if __name__ == "__main__": main()
