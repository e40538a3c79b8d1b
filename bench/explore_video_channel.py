"""What a video channel that carries the next action does to the audit's rows (issue 33, item 2): a map for the joint calibration.

`FeatureSpec.anticipation_signal` plants a cue of the next action at one strength over the whole segment; `relation_signal` a
cue of the step from the latest action to the next, which names the next action only together with the latest. This script
writes the Breakfast-like calibration split (split 1 of the CALIBRATION_SEED data, never the experiments' seed-0 data) at one size
for each value of one such knob (--knob), the others frozen or set (--set), and measures on it what the paper's sharpest claims
are about:

- window-recognition accuracy (Table 3, target 44.4), video-only, boundary-aware recognizer, GT-history and context-only Act@1 at
  boundary queries (Table 1: 21.7, 30.3, 62.3, 58.8: GT - context +3.5);
- what zeroing the video costs the GT-history model, and the video's grad x input share (Table 21: -24.4, 57%);
- video-only and GT Act@1 at fixed-time queries, the boundary-independent control (Table 10: 21.5, 47.5).

One split and one training seed: every number is a point on a map (about 1.5 points noisy at the small size), not a result.

    python bench/explore_video_channel.py --work /tmp/explore                 # small size, anticipation_signal 0 0.25 0.5 1.0
    python bench/explore_video_channel.py --work /tmp/explore --knob relation_signal --values 0.5 1 2
    python bench/explore_video_channel.py --work W --values 0.5 --set end_fade=0.6 frame_noise=2.0   # other knobs moved too
    python bench/explore_video_channel.py --work W --size full --values 0 0.5  # the full size (an hour or more an evaluation)
    python bench/explore_video_channel.py --work W --labels breakfast --knob rank_signal --values 0 1 2   # real-label mode

`--labels NAME` measures real-label mode instead: the real annotations of NAME (the shipped copy, or --labels-dir) on its
calibration videos (`real_label_calibration_videos`: at the small size 128 train and 43 test videos of split 1, as the
experiments' small real-label mode keeps a tenth; at the full size every train video and 100 test videos), with
`real_label_feature_spec(NAME, size)` drawn with CALIBRATION_SEED; a rank cue ranks the steps of the label folder
(`synthetic.label_successor_ranks`).

With --figure FILE it draws every row of every W/explore_*.json (both modes) against the paper's targets: video only, what zeroing
the video costs the GT model, and fixed-time video only, each against GT over context-only (`--values` may then be left out).

    python bench/explore_video_channel.py --work W --figure figures/video_channel_map.png

It writes W/[<labels>_]<size>_<knob>_<value>/ (the features, deleted after each evaluation unless --keep) and W/explore_<size>.json (every row; --labels: W/explore_<labels>_labels_<size>.json),
and prints the table. A value already in that JSON is not measured again.
"""
import argparse, json, shutil, time
from dataclasses import replace
from pathlib import Path
import numpy as np
import pandas as pd
from hoi_audit.core import write_json
from hoi_audit.procedural import read_mstcn, real_labels_root
from hoi_audit.recovery import WindowRecognizer
from hoi_audit.conditions import AuditConfig
from hoi_audit.models import TrainConfig
from hoi_audit.analysis import train_conditions, ablation_table
from hoi_audit.synthetic import write_synthetic, synthesize_features_for_labels
from hoi_audit.calibration import CALIBRATION_SEED, calibration_split, real_label_calibration_videos, real_label_feature_spec

AUDIT = {  # the four_condition experiment's settings per size (as bench/calibrate_presets.py)
    "small": AuditConfig(n_tokens=2, train=TrainConfig(d_model=32, n_heads=2, n_layers=1, batch_size=64, lr=2e-3, epochs=15, patience=3)),
    "full": AuditConfig(n_tokens=4, train=TrainConfig())}
BOUNDARY = ("video_only", "recognizer_ba", "gt_history", "context_only")
FIXED = ("video_only", "gt_history")
LABEL_SUBSET = {"small": (128, 43), "full": (None, 100)}   # real-label calibration videos of split 1 (train, test)
PAPER = {"window_acc": 44.4, "video_only": 21.7, "recognizer_ba": 30.3, "gt_history": 62.3, "context_only": 58.8,
         "gt_minus_context": 3.5, "gt_zero_video": -24.4, "gt_video_share": 57.3, "fixed_video_only": 21.5, "fixed_gt_history": 47.5}


def calibration_data(size: str, knobs: dict, root: Path, labels: str | None = None, labels_dir=None):
    "The Breakfast-like calibration split with `knobs`, or (`labels`) real-label mode's calibration videos of that label set, read back."
    if labels is None:
        return read_mstcn(write_synthetic(calibration_split("breakfast", size, **knobs), root))
    src = real_labels_root(labels, labels_dir)
    videos = real_label_calibration_videos(src, *LABEL_SUBSET[size])
    spec = real_label_feature_spec(labels, size, seed=CALIBRATION_SEED, **knobs)
    dtype = "float16" if size == "full" else "float32"
    return read_mstcn(synthesize_features_for_labels(src, root, spec, videos=videos, dtype=dtype, link=True), name=f"{labels}_labels")


def evaluate(size: str, knob: str, value: float, work: Path, keep: bool, knobs: dict, labels: str | None = None,
             labels_dir=None) -> dict:
    "One value of `knob` (the other knobs overridden by `knobs`): write the calibration split, measure every row, clean up."
    started = time.time()
    root = work / "_".join([*([labels] if labels else []), size, knob, f"{value:g}", *(f"{k}{v:g}" for k, v in sorted(knobs.items()))])
    ds = calibration_data(size, {knob: value, **knobs}, root, labels, labels_dir)
    config = AUDIT[size]
    row = {"size": size, **({"labels": labels} if labels else {}), "knobs": knobs, "knob": knob, "value": value,
           "window_acc": WindowRecognizer().fit(ds, split=1, seed=42).window_accuracy(ds, ds.splits[1]["test"])}
    at_boundary = ablation_table(train_conditions(ds, 1, BOUNDARY, config, seed=42), BOUNDARY)
    row |= {c: at_boundary.loc["full", c] for c in BOUNDARY}
    row |= {"gt_minus_context": row["gt_history"] - row["context_only"],
            "gt_zero_video": at_boundary.loc["zero_video", "gt_history"] - row["gt_history"],
            "gt_video_share": at_boundary.loc["grad_x_input_video", "gt_history"]}
    fixed = ablation_table(train_conditions(ds, 1, FIXED, replace(config, schedule="boundary_independent"), seed=42), FIXED)
    row |= {f"fixed_{c}": fixed.loc["full", c] for c in FIXED}
    row["seconds"] = round(time.time() - started)
    if not keep: shutil.rmtree(root)
    return {k: (round(float(v), 2) if isinstance(v, float) else v) for k, v in row.items()}


def draw(work: Path, figure: Path):
    "Every map point of W/explore_*.json against the paper's targets (target +/- tolerance as a box), in three panels."
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hoi_audit.core import save_figure
    rows = pd.DataFrame([r | {"mode": "real labels" if r.get("labels") else "preset", "source": f.name}
                         for f in sorted(work.glob("explore_*.json")) for r in json.loads(f.read_text())])
    cues = {k: c for k, c in zip(("anticipation_signal", "relation_signal", "rank_signal"), ("#e67e22", "#8e44ad", "#16a085"))}
    cue = np.where(rows["value"] > 0, rows["knob"], "none")
    x = rows["gt_minus_context"]
    fit = np.polyfit(x, rows["gt_zero_video"], 1)
    panels = [("video_only", "video only Act@1 (boundary queries)", (21.7, 3.0)),
              ("gt_zero_video", "zeroing the video in the GT model (Act@1 change)", (-24.4, 5.0)),
              ("fixed_video_only", "video only Act@1 (fixed-time queries)", (21.5, 3.0))]
    fig, axes = plt.subplots(1, 3, figsize=(16, 6.2))
    for ax, (col, label, (paper, tol)) in zip(axes, panels):
        ax.add_patch(plt.Rectangle((3.5 - 2.0, paper - tol), 4.0, 2 * tol, color="#c0392b", alpha=0.15, lw=0))
        ax.scatter([3.5], [paper], marker="*", s=220, color="#c0392b", zorder=4, label="paper (target +/- tolerance)")
        for mode, marker in (("preset", "o"), ("real labels", "^")):
            for c in ("none", *cues):
                for moved in (False, True):   # hollow: other knobs moved from their frozen values (--set)
                    keep = (rows["mode"] == mode) & (cue == c) & (rows["knobs"].map(bool) == moved)
                    if keep.any():
                        color = cues.get(c, "#7f8c8d")
                        ax.scatter(x[keep], rows.loc[keep, col], marker=marker, s=40, zorder=3, edgecolors=color,
                                   facecolors="none" if moved else color,
                                   label=f"{mode}, {'no cue' if c == 'none' else c.replace('_signal', ' cue')}"
                                         + (", other knobs moved" if moved else ""))
        if col == "gt_zero_video":
            xs = np.linspace(min(x.min(), 0), max(x.max(), 5), 2)
            ax.plot(xs, -xs, ls="--", color="k", lw=1, label="zeroing costs what the video adds (y = -x)")
            ax.plot(xs, np.polyval(fit, xs), color="#2c3e50", lw=1, label=f"least squares: slope {fit[0]:.2f}")
        ax.set_xlabel("GT history - context only (Act@1, boundary queries)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=5, frameon=False)
    fig.suptitle(f"What a planted video cue does to the paper's sharpest targets: {len(rows)} calibration-split points "
                 f"(one split, one training seed each); zeroing the video costs {-fit[0]:.2f} points per point of GT over context-only, "
                 f"the paper {24.4 / 3.5:.1f}", fontsize=10)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    save_figure(figure, fig)
    print(f"wrote {figure} ({len(rows)} points; zero-video slope {fit[0]:.2f})")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, required=True, help="folder for the features and explore_<size>.json")
    p.add_argument("--size", default="small", choices=sorted(AUDIT))
    p.add_argument("--knob", default="anticipation_signal", help="the FeatureSpec knob swept (e.g. relation_signal)")
    p.add_argument("--values", type=float, nargs="*", default=None, help="knob values (default 0 0.25 0.5 1; none with --figure)")
    p.add_argument("--keep", action="store_true", help="keep the written features")
    p.add_argument("--set", nargs="*", default=[], metavar="KNOB=VALUE",
                   help="other FeatureSpec knobs to override (e.g. end_fade=0.6 frame_noise=2.0)")
    p.add_argument("--labels", default=None, help="real-label mode on this label set (e.g. breakfast) instead of the preset")
    p.add_argument("--labels-dir", type=Path, default=None, help="a folder of MS-TCN label folders (default: the shipped labels)")
    p.add_argument("--figure", type=Path, default=None, help="draw every row of W/explore_*.json into this PNG")
    a = p.parse_args(argv)
    if a.values is None: a.values = [] if a.figure else [0.0, 0.25, 0.5, 1.0]
    knobs = {k: float(v) for k, v in (x.split("=", 1) for x in a.set)}
    out = a.work / (f"explore_{a.labels}_labels_{a.size}.json" if a.labels else f"explore_{a.size}.json")
    rows = json.loads(out.read_text()) if out.exists() else []
    measured = 0
    for v in a.values:
        if any((r["knob"], r["value"], r["knobs"]) == (a.knob, v, knobs) for r in rows): continue
        measured += 1
        rows.append(evaluate(a.size, a.knob, v, a.work, a.keep, knobs, a.labels, a.labels_dir))
        write_json(out, sorted(rows, key=lambda r: (sorted(r["knobs"].items()), r["knob"], r["value"])))
        print(f"{a.knob}={v:g}: {rows[-1]}", flush=True)
    if a.figure:
        draw(a.work, a.figure)
    if not rows: return
    table = pd.DataFrame(rows)
    table["knobs"] = [", ".join(f"{k}={v:g}" for k, v in sorted(r["knobs"].items())) or "frozen" for r in rows]
    table = table.sort_values(["knobs", "knob", "value"]).set_index(["knobs", "knob", "value"])
    table.loc[("paper", "", ""), :] = pd.Series(PAPER)
    pd.set_option("display.width", 250)
    print(table[list(PAPER)].round(1).to_string())
    if measured: print(f"wrote {out}")


if __name__ == "__main__":
    main()
