"""Calibrate the synthetic presets and real-label mode to the paper's numbers, print the table, draw figures/calibration.png.

Targets (hoi_audit.calibration.PAPER_TARGETS): Table 3's window-recognition accuracy (Breakfast 44.4, 50 Salads 74.7, GTEA 99.6;
within 2 points) and Table 1's Breakfast video-only Act@1 (21.7; within 3 points). The procedure is the one documented in
nbs/12d_calibration.ipynb ("Calibration"): on the calibration split (split 1 of a CALIBRATION_SEED dataset, a seeded subset of its
videos), `calibrate_feature_spec` searches `frame_noise` (GTEA: `current_signal`) for the window accuracy, then (Breakfast)
`next_signal` for the video-only Act@1 with every split-1 train video; both are measured again at the final pair, and a knob
whose target moved out of tolerance is searched again (at most three rounds).

    python bench/calibrate_presets.py                      # search every case at sizes full and small, print, draw
    python bench/calibrate_presets.py --check              # measure the frozen values only (no search)
    python bench/calibrate_presets.py --cases breakfast --sizes small
    python bench/calibrate_presets.py --check --cached-only   # the frozen values' table from the cached evaluations, no new run
    python bench/calibrate_presets.py --work W --fade-figure figures/calibration_fade.png   # the end_fade evaluations in W's cache

A rerun starts every search from the frozen values, so when they still hit their targets it costs one evaluation per knob (a
verification); it searches only where something (the anticipation model, the recognizer) moved the numbers.

Every evaluation writes its features below --work (float16 at full size), measures, records the numbers in
--work/evaluations.json and deletes the features, so a rerun reuses finished evaluations (delete that file, or change --work, to
measure again; do so when the anticipation model changes). The frozen values in the library are copied from this script's output.
"""
import argparse, json, os, shutil, sys, time
from dataclasses import replace
from pathlib import Path
import numpy as np
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from hoi_audit.core import save_figure, sha256_json
from hoi_audit.procedural import read_mstcn
from hoi_audit.recovery import WindowRecognizer
from hoi_audit.conditions import AuditConfig
from hoi_audit.tables import four_condition_audit
from hoi_audit.models import TrainConfig
from hoi_audit.features import FeatureSpec
from hoi_audit.synthetic import synthesize_features_for_labels, synthetic_dataset, write_synthetic
from hoi_audit.calibration import (CALIBRATION_SEED, CalibrationResult, PAPER_TARGETS,
                                   calibrate_feature_spec, calibration_split, real_label_calibration_videos,
                                   real_label_feature_spec)

REPO = Path(__file__).resolve().parents[1]
CASES = ("breakfast", "50salads", "gtea", "breakfast_labels", "50salads_labels", "gtea_labels")
AUDIT = {  # the four_condition experiment's settings per size (nbs/experiments/four_condition.ipynb)
    "small": AuditConfig(n_tokens=2, train=TrainConfig(d_model=32, n_heads=2, n_layers=1, batch_size=64, lr=2e-3, epochs=15, patience=3)),
    "full": AuditConfig(n_tokens=4, train=TrainConfig())}
# (train, test) videos of split 1 kept per stage; None keeps all. The window stage needs no more than the recognizer's 8000
# windows from a spread of videos; the video-only model needs every train video (a subset trains it on too few queries).
SUBSET = {("breakfast", "full"): {"window": (240, 80), "video": (None, 100)},
          ("breakfast", "small"): {"window": (None, None), "video": (None, None)},
          ("breakfast_labels", "full"): {"window": (240, 80), "video": (None, 100)},
          ("breakfast_labels", "small"): {"window": (128, 43), "video": (128, 43)}}   # the experiment's small real-label mode: 1/10 of the videos
KNOBS = ("current_signal", "next_signal", "end_fade", "segment_noise", "frame_noise", "participant_shift", "camera_shift")
# The window-accuracy knob: frame_noise, except GTEA, whose ceiling with frame_noise -> 0 is about 96% (leave-one-subject-out
# with three train subjects: the per-participant offset, not the noise, limits it), so its signal scale is searched instead.
WINDOW_KNOB = {"gtea": "current_signal", "gtea_labels": "current_signal"}
WINDOW_BRACKET = {"gtea": (2.0, 4.0), "gtea_labels": (2.0, 4.0), "50salads": (1.4, 2.0), "50salads_labels": (1.4, 2.0)}  # default: frozen value x [1, 1.4]
VIDEO_STOP = 2 / 3   # the video search stops within this fraction of its tolerance (2 points): one evaluation is ~1.5 points noisy and costs minutes
NEXT_SPAN = 0.3   # next_signal's first bracket: [frozen value, frozen value + NEXT_SPAN] (a video-split evaluation costs minutes)


def base_spec(case:str, size:str) -> FeatureSpec:
    "The frozen knobs of a case at a size, with the calibration seed."
    if case.endswith("_labels"): return real_label_feature_spec(case[:-7], size, seed=CALIBRATION_SEED)
    return synthetic_dataset(case, size, CALIBRATION_SEED).feature_spec


class NotCached(Exception):
    "An evaluation that --cached-only may not run: the search stops there (its budget was spent)."


class Evaluator:
    "Writes a calibration split with given knobs, measures window accuracy (and video-only Act@1), caches, cleans up."
    def __init__(self, work:Path, labels:Path, cached_only:bool=False):
        self.work, self.labels, self.cached_only = work, labels, cached_only
        self.work.mkdir(parents=True, exist_ok=True)
        self.cache_path = work / "evaluations.json"
        self.cache = json.loads(self.cache_path.read_text()) if self.cache_path.exists() else {}

    def __call__(self, case:str, size:str, stage:str, spec:FeatureSpec) -> dict:
        knobs = {k: round(float(getattr(spec, k)), 6) for k in KNOBS}
        key = f"{case}/{size}/{stage}/{sha256_json({**knobs, 'dim': spec.dim, 'seed': spec.seed})[:16]}"
        if key in self.cache: return self.cache[key]
        if self.cached_only: raise NotCached(key)
        n_train, n_test = SUBSET.get((case, size), {}).get(stage, (None, None))
        folder = self.work / key.replace("/", "_")
        start = time.perf_counter()
        dtype = "float16" if size == "full" else "float32"
        if case.endswith("_labels"):
            src = self.labels / case[:-7]
            videos = real_label_calibration_videos(src, n_train, n_test)
            synthesize_features_for_labels(src, folder, spec=replace(spec, **knobs), videos=videos, dtype=dtype, link=True, overwrite=True)
        else:
            write_synthetic(calibration_split(case, size, n_train, n_test, **knobs, dim=spec.dim), folder, dtype=dtype, overwrite=True)
        ds = read_mstcn(folder, name=case)
        out = {"knobs": knobs, "n_train": len(ds.splits[1]["train"]), "n_test": len(ds.splits[1]["test"])}
        rec = WindowRecognizer().fit(ds, split=1, window=16, stride=8, seed=42)
        out["window_acc"] = rec.window_accuracy(ds, ds.splits[1]["test"])
        if stage == "video":
            res = four_condition_audit(ds, splits=[1], seeds=[42], conditions=["video_only"], config=AUDIT[size])
            out["video_only_act1"] = float(res.table["act1"].iloc[0])
        out["seconds"] = round(time.perf_counter() - start, 1)
        shutil.rmtree(folder, ignore_errors=True)
        if self.cache_path.exists(): self.cache.update(json.loads(self.cache_path.read_text()))   # another run may share --work
        self.cache[key] = out
        tmp = self.cache_path.with_suffix(f".{os.getpid()}.tmp"); tmp.write_text(json.dumps(self.cache, indent=1)); tmp.replace(self.cache_path)
        print(f"  {key}: {' '.join(f'{k}={v}' for k, v in knobs.items() if k in ('current_signal', 'frame_noise', 'next_signal'))} -> "
              f"window {out['window_acc']:.1f}" + (f", video-only {out['video_only_act1']:.1f}" if stage == "video" else "")
              + f" ({out['seconds']:.0f}s, {out['n_train']}+{out['n_test']} videos)", flush=True)
        return out


def search_knob(spec, knob, metric, target, tol, lo, hi, max_evals, **options):
    "calibrate_feature_spec; under --cached-only a search that needs an evaluation not in the cache ends with what it measured."
    seen = []
    def measure(s):
        seen.append((getattr(s, knob), metric(s))); return seen[-1][1]
    try: return calibrate_feature_spec(spec, knob, measure, target, tol, lo, hi, max_evals=max_evals, **options)
    except NotCached:
        if not seen: raise
        value, measured = min(seen, key=lambda p: (abs(p[1] - target), p[0]))
        print(f"  {knob}: search stopped after {len(seen)} cached evaluations (--cached-only)")
        return CalibrationResult(knob, target, tol, value, measured, tuple(seen)), replace(spec, **{knob: value})


def calibrate(ev:Evaluator, case:str, size:str, search:bool, max_evals:int, max_video_evals:int, rounds:int=3) -> dict:
    """One case at one size: frame_noise (GTEA: current_signal) for window accuracy on the window split, then (Breakfast)
    next_signal for video-only Act@1 on the video split; both are measured again at the final pair, and a knob whose target
    moved out of tolerance (next_signal's cue lowers the window accuracy a little) is searched again, near its value, up to `rounds` times."""
    dataset = case.replace("_labels", "")
    spec = base_spec(case, size)
    target, tol = PAPER_TARGETS[dataset, "window_acc"]
    video = (dataset, "video_only_act1") in PAPER_TARGETS
    vt, vtol = PAPER_TARGETS.get((dataset, "video_only_act1"), (None, None))
    knob = WINDOW_KNOB.get(case, "frame_noise")
    steps, window_ok, video_ok = {}, False, False
    for rnd in range(rounds if search else 0):
        try:
            tag = "" if rnd == 0 else f"_{rnd + 1}"
            if not window_ok:
                v = getattr(spec, knob)
                lo, hi = WINDOW_BRACKET.get(case, (v, 1.4 * v)) if rnd == 0 else (0.9 * v, 1.1 * v)
                r, spec = search_knob(spec, knob, lambda s: ev(case, size, "window", s)["window_acc"], target, tol, lo, hi, max_evals)
                steps["window" + tag] = r.as_dict()
            if video and not video_ok:
                v = spec.next_signal
                lo, hi = (v, v + NEXT_SPAN) if rnd == 0 else (max(0.0, v - 0.1), v + 0.1)
                r, spec = search_knob(spec, "next_signal", lambda s: ev(case, size, "video", s)["video_only_act1"], vt, vtol, lo, hi,
                                      max_video_evals, stop_fraction=VIDEO_STOP)
                steps["video" + tag] = r.as_dict()
            final = ev(case, size, "video" if video else "window", spec)
            window_ok = abs(final["window_acc"] - target) <= tol
            video_ok = not video or abs(final["video_only_act1"] - vt) <= vtol
            if window_ok and video_ok: break
        except NotCached:              # a --cached-only replay of a search that never ran (e.g. from values frozen since)
            if rnd == 0:
                print(f"  no cached search from these starting values: the frozen values are checked instead")
                spec, steps = base_spec(case, size), {}
            break
    final = ev(case, size, "video" if video else "window", spec)
    row = {"case": case, "size": size, "dim": spec.dim, "current_signal": spec.current_signal, "frame_noise": spec.frame_noise,
           "next_signal": spec.next_signal, "end_fade": spec.end_fade, "window_target": target, "window_acc": final["window_acc"],
           "window_within": abs(final["window_acc"] - target) <= tol, "n_train": final["n_train"], "n_test": final["n_test"], "steps": steps}
    if video: row.update(video_target=vt, video_only_act1=final["video_only_act1"], video_within=abs(final["video_only_act1"] - vt) <= vtol)
    return row


def draw(rows:list, path:Path):
    "Measured metric vs knob for every search (one panel per case and target; full and small sizes), target band shaded."
    keys = list(dict.fromkeys((r["case"], stage) for r in rows for stage in ("window", "video") if stage in r["steps"]))
    def rounds(r, stage): return [v for k, v in r["steps"].items() if k.split("_")[0] == stage]
    ncol = (len(keys) + 1) // 2
    fig, axes = plt.subplots(2, ncol, figsize=(3.6 * ncol, 6.6), squeeze=False)
    for ax, (case, stage) in zip(axes.ravel(), keys):
        metric = {"window": "window_acc", "video": "video_only_act1"}[stage]
        target, tol = PAPER_TARGETS[case.replace("_labels", ""), metric]
        ax.axhspan(target - tol, target + tol, color="#f5c242", alpha=0.35, lw=0)
        ax.axhline(target, color="#b8860b", lw=1)
        for r in rows:
            if r["case"] != case or not rounds(r, stage): continue
            color = {"full": "#3b6ea8", "small": "#c0392b"}[r["size"]]
            for i, step in enumerate(rounds(r, stage)):
                pts = sorted(step["curve"])
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-" if i == 0 else "s--", color=color, ms=4, lw=1,
                        label=f"{r['size']} ({r['dim']}-d)" + (f", round {i + 1}" if i else ""))
                ax.set_xlabel(step["knob"], fontsize=8)
            final = r["window_acc"] if stage == "window" else r["video_only_act1"]
            ax.plot([r[rounds(r, stage)[-1]["knob"]]], [final], "*", color=color, ms=13, mec="k", mew=0.5)
        ax.set_title(f"{case}: {'window accuracy' if stage == 'window' else 'video-only Act@1'}", fontsize=9)
        if ax.get_ylim()[1] > 100: ax.set_ylim(top=100.3)
        ax.tick_params(labelsize=7); ax.legend(fontsize=7)
    for ax in axes.ravel()[len(keys):]: ax.axis("off")
    fig.suptitle("Calibration split (split 1, calibration seed): measured vs knob; star: frozen value, final check; band: paper target ± tolerance", fontsize=10)
    fig.tight_layout()
    save_figure(path, fig)
    plt.close(fig)


def draw_fade(cache:dict, path:Path):
    """The end_fade evaluations (every cached video-split evaluation of the Breakfast cases): window accuracy vs video-only Act@1,
    one panel per case and size, each point labelled with its end_fade / frame_noise / next_signal; the box is both targets' tolerance."""
    panels = sorted({tuple(k.split("/")[:2]) for k in cache if k.split("/")[2] == "video"})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.0), squeeze=False)
    (wt, wtol), (vt, vtol) = PAPER_TARGETS["breakfast", "window_acc"], PAPER_TARGETS["breakfast", "video_only_act1"]
    for ax, (case, size) in zip(axes[0], panels):
        ax.add_patch(plt.Rectangle((wt - wtol, vt - vtol), 2 * wtol, 2 * vtol, color="#f5c242", alpha=0.35, lw=0))
        ax.plot([wt], [vt], "+", color="#b8860b", ms=12)
        for k, v in cache.items():
            if k.split("/")[:3] != [case, size, "video"]: continue
            kn = v["knobs"]
            ax.scatter(v["window_acc"], v["video_only_act1"], c=[kn.get("end_fade", 0.0)], cmap="viridis", vmin=0, vmax=0.5, s=30, edgecolor="k", lw=0.4)
            ax.annotate(f"{kn.get('end_fade', 0):g}/{kn['frame_noise']:.2f}/{kn['next_signal']:.2f}", (v["window_acc"], v["video_only_act1"]), fontsize=6,
                        xytext=(3, 2), textcoords="offset points")
        ax.set_title(f"{case}, {size}", fontsize=9); ax.set_xlabel("window accuracy (%)", fontsize=8); ax.set_ylabel("video-only Act@1 (%)", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.suptitle("end_fade calibration (labels: end_fade / frame_noise / next_signal; colour: end_fade; box: paper targets ± tolerance)", fontsize=9)
    fig.tight_layout()
    save_figure(path, fig)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from {CASES}")
    ap.add_argument("--sizes", default="full,small", help="comma-separated: full (2048-d), small (64-d)")
    ap.add_argument("--check", action="store_true", help="measure the frozen values only, no search")
    ap.add_argument("--max-evals", type=int, default=6, help="evaluations per window-knob search")
    ap.add_argument("--max-video-evals", type=int, default=4, help="evaluations per next_signal search (each writes the whole split-1 train set)")
    ap.add_argument("--rounds", type=int, default=3, help="search rounds per case (a knob whose target moved is searched again)")
    ap.add_argument("--cached-only", action="store_true", help="replay the evaluations in --work/evaluations.json only (a search needing a new one stops)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/hoi_audit_calibration"), help="temporary features and the evaluation cache")
    ap.add_argument("--labels", type=Path, default=Path(os.environ.get("HOI_AUDIT_LABELS", REPO.parent / "shared" / "data" / "labels")),
                    help="real MS-TCN label folders (breakfast/, 50salads/, gtea/)")
    ap.add_argument("--figure", type=Path, default=REPO / "figures" / "calibration.png")
    ap.add_argument("--json", type=Path, help="also write the rows (with every search step) here")
    ap.add_argument("--fade-figure", type=Path, help="only draw the end_fade evaluations in --work's cache to this PNG, and stop")
    a = ap.parse_args()
    ev = Evaluator(a.work, a.labels, a.cached_only)
    if a.fade_figure:
        draw_fade({k: v for k, v in ev.cache.items() if k.split("/")[0] in ("breakfast", "breakfast_labels")}, a.fade_figure)
        print("figure:", a.fade_figure); return
    rows = []
    for size in a.sizes.split(","):
        for case in a.cases.split(","):
            if case.endswith("_labels") and not (a.labels / case[:-7] / "mapping.txt").is_file():
                print(f"{case}: skipped, no labels in {a.labels / case[:-7]}"); continue
            print(f"{case} / {size}:", flush=True)
            rows.append(calibrate(ev, case, size, not a.check, a.max_evals, a.max_video_evals, a.rounds))
    print()
    print(f"{'case':<17} {'size':<5} {'dim':>4} {'current_signal':>14} {'frame_noise':>11} {'next_signal':>11} {'end_fade':>8} {'win target':>10} {'win meas.':>9} {'ok':>3}"
          f" {'VO target':>9} {'VO meas.':>8} {'ok':>3}  videos")
    for r in rows:
        vo = (f" {r['video_target']:>9.1f} {r['video_only_act1']:>8.1f} {'yes' if r['video_within'] else 'NO':>3}"
              if "video_only_act1" in r else f" {'':>9} {'':>8} {'':>3}")
        print(f"{r['case']:<17} {r['size']:<5} {r['dim']:>4} {r['current_signal']:>14.4f} {r['frame_noise']:>11.4f} {r['next_signal']:>11.4f} {r['end_fade']:>8.2f} {r['window_target']:>10.1f}"
              f" {r['window_acc']:>9.1f} {'yes' if r['window_within'] else 'NO':>3}{vo}  {r['n_train']}+{r['n_test']}")
    print("\nFor the notebook (nbs/12d_calibration.ipynb, the calibration table):\n")
    print("| case | size | D | current_signal | frame_noise | next_signal | end_fade | window acc. (target) | video-only Act@1 (target) | videos (train+test) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        vo = f"{r['video_only_act1']:.1f} ({r['video_target']})" if "video_only_act1" in r else ""
        print(f"| `{r['case']}` | {r['size']} | {r['dim']} | {round(r['current_signal'], 6)!r} | {round(r['frame_noise'], 6)!r} | {round(r['next_signal'], 6)!r} | {round(r['end_fade'], 6)!r} | "
              f"{r['window_acc']:.1f} ({r['window_target']}) | {vo} | {r['n_train']}+{r['n_test']} |")
    if a.json: a.json.write_text(json.dumps(rows, indent=1))
    if not a.check and (not a.cached_only or all(r["steps"] for r in rows)):   # a partial replay leaves the figure alone
        draw(rows, a.figure)
        print("figure:", a.figure)


if __name__ == "__main__":
    main()
