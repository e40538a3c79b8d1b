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
    python bench/explore_video_channel.py --work W --size full --values 0 0.5  # the full size (8 to 16 min an evaluation on 2 cores, ~14 GB written and removed)
    python bench/explore_video_channel.py --work W --labels breakfast --knob rank_signal --values 0 1 2   # real-label mode
    python bench/explore_video_channel.py --work W --labels breakfast --size full --knob rank_signal --values 0.5 --split 2   # another real split
    python bench/explore_video_channel.py --work W --labels breakfast --size full --values --by-split 4   # every split of each point, and their mean

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
import torch
from hoi_audit.core import write_json
from hoi_audit.procedural import read_mstcn, real_labels_root
from hoi_audit.recovery import WindowRecognizer
from hoi_audit.conditions import AuditConfig
from hoi_audit.models import TrainConfig
from hoi_audit.analysis import train_conditions, ablation_table
from hoi_audit.features import FeatureSpec
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


def calibration_data(size: str, knobs: dict, root: Path, labels: str | None = None, labels_dir=None, split: int = 1):
    """The Breakfast-like calibration split with `knobs`, or (`labels`) real-label mode's calibration videos of that label set (of its
    real split `split`), read back."""
    if labels is None:
        if split != 1: raise ValueError(f"--split {split}: the preset's calibration data is one split (split 1); --split needs --labels")
        return read_mstcn(write_synthetic(calibration_split("breakfast", size, **knobs), root))
    src = real_labels_root(labels, labels_dir)
    videos = real_label_calibration_videos(src, *LABEL_SUBSET[size], split=split)
    spec = real_label_feature_spec(labels, size, seed=CALIBRATION_SEED, **knobs)
    dtype = "float16" if size == "full" else "float32"
    return read_mstcn(synthesize_features_for_labels(src, root, spec, videos=videos, dtype=dtype, link=True), name=f"{labels}_labels")


def raw_zero_cost(trained, feature_mean: float, condition: str = "gt_history") -> float:
    """What literal zeros of the video cost `condition`'s model had the features carried `FeatureSpec.feature_mean` more (Act@1 change).

    No retraining: the model centres its video inputs on their training mean, so for features x + o (o = `mean_offset`) a literal
    zero reaches it exactly as -o does for x. The offset is the calibration seed's (`FeatureSpec(seed=CALIBRATION_SEED)`)."""
    model, y = trained.models[condition], trained.test_q["target"].to_numpy()
    blocks = trained.test_blocks[condition]
    video = next(b for b in blocks if b.name == "video")
    o = FeatureSpec(dim=video.data.shape[-1], latent_dim=1, seed=CALIBRATION_SEED, feature_mean=feature_mean).mean_offset()
    shifted = [replace(b, data=np.broadcast_to(-o, b.data.shape).astype(b.data.dtype)) if b.name == "video" else b for b in blocks]
    with torch.no_grad():
        acc = lambda bl: 100 * float((model.model(**model.torch_inputs(bl)).argmax(1).numpy() == y).mean())
        return round(acc(shifted) - acc(blocks), 2)


def evaluate(size: str, knob: str, value: float, work: Path, keep: bool, knobs: dict, labels: str | None = None,
             labels_dir=None, raw_means=(), split: int = 1) -> dict:
    "One value of `knob` (the other knobs overridden by `knobs`): write the calibration split, measure every row, clean up."
    started = time.time()
    root = work / "_".join([*([labels] if labels else []), size, knob, f"{value:g}", *(f"{k}{v:g}" for k, v in sorted(knobs.items())),
                            *([f"split{split}"] if split != 1 else [])])
    ds = calibration_data(size, {knob: value, **knobs}, root, labels, labels_dir, split)
    config = AUDIT[size]
    row = {"size": size, **({"labels": labels} if labels else {}), **({"split": split} if split != 1 else {}), "knobs": knobs,
           "knob": knob, "value": value,
           "window_acc": WindowRecognizer().fit(ds, split=split, seed=42).window_accuracy(ds, ds.splits[split]["test"])}
    trained = train_conditions(ds, split, BOUNDARY, config, seed=42)
    at_boundary = ablation_table(trained, BOUNDARY)
    row |= {c: at_boundary.loc["full", c] for c in BOUNDARY}
    row |= {"gt_minus_context": row["gt_history"] - row["context_only"],
            "gt_zero_video": at_boundary.loc["zero_video", "gt_history"] - row["gt_history"],
            "gt_zero_video_raw": at_boundary.loc["zero_video_raw", "gt_history"] - row["gt_history"],
            "gt_video_share": at_boundary.loc["grad_x_input_video", "gt_history"]}
    if raw_means:
        row["gt_zero_video_raw_by_mean"] = {f"{m:g}": raw_zero_cost(trained, m) for m in raw_means}
    fixed = ablation_table(train_conditions(ds, split, FIXED, replace(config, schedule="boundary_independent"), seed=42), FIXED)
    row |= {f"fixed_{c}": fixed.loc["full", c] for c in FIXED}
    row["seconds"] = round(time.time() - started)
    if not keep: shutil.rmtree(root)
    return {k: (round(float(v), 2) if isinstance(v, float) else v) for k, v in row.items()}


def frozen_frame_noise(size: str, labels: str | None) -> float:
    "The frozen frame noise of the calibration data of a mode and size (the spread of a feature dimension outside the signal's)."
    if labels:
        return real_label_feature_spec(labels, size).frame_noise
    return calibration_split("breakfast", size, n_train=1, n_test=1).feature_spec.frame_noise


def draw(work: Path, figure: Path):
    "Every map point of W/explore_*.json against the paper's targets (target +/- tolerance as a band), in four panels."
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hoi_audit.core import save_figure
    rows = pd.DataFrame([r | {"mode": ("real labels" if r.get("labels") else "preset") + (", full size" if r["size"] == "full" else "")}
                         for f in sorted(work.glob("explore_*.json")) if f.name != "explore_confusion.json"   # GTEA's rows, not map points
                         for r in json.loads(f.read_text())
                         if r.get("split", 1) == 1])   # the map is the calibration split's; other real splits check it (--split)
    cues = {k: c for k, c in zip(("anticipation_signal", "relation_signal", "rank_signal"), ("#e67e22", "#8e44ad", "#16a085"))}
    markers = {"preset": "o", "real labels": "^", "preset, full size": "s", "real labels, full size": "D"}
    cue = np.where(rows["value"] > 0, rows["knob"], "none")
    x = rows["gt_minus_context"]
    fit = np.polyfit(x, rows["gt_zero_video"], 1)
    panels = [("video_only", "video only Act@1 (boundary queries)", (21.7, 3.0)),
              ("gt_zero_video", "zeroing the video at its training mean: GT model's Act@1 change", (-24.4, 5.0)),
              ("fixed_video_only", "video only Act@1 (fixed-time queries)", (21.5, 3.0))]
    fig, axes = plt.subplots(2, 2, figsize=(15, 12))
    axes = axes.ravel()
    for ax, (col, label, (paper, tol)) in zip(axes, panels):
        ax.add_patch(plt.Rectangle((3.5 - 2.0, paper - tol), 4.0, 2 * tol, color="#c0392b", alpha=0.15, lw=0))
        ax.scatter([3.5], [paper], marker="*", s=220, color="#c0392b", zorder=4, label="paper (target +/- tolerance)")
        for mode, marker in markers.items():
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
    # literal zeros: the cost against the mean the features carry, in spreads of a feature dimension (frame noise)
    ax = axes[3]
    ax.axhspan(-24.4 - 5.0, -24.4 + 5.0, color="#c0392b", alpha=0.15, lw=0)
    ax.axhline(-24.4, color="#c0392b", lw=1.5, label="paper's zero video (target +/- tolerance)")
    ax.axvspan(0.7, 1.3, color="#7f8c8d", alpha=0.15, lw=0, label="non-negative features: mean about 0.7 to 1.3 spreads")
    raw = rows[rows.get("gt_zero_video_raw_by_mean", pd.Series(index=rows.index, dtype=object)).notna()] \
        if "gt_zero_video_raw_by_mean" in rows else rows.iloc[0:0]
    for _, r in raw.iterrows():
        spread = r["knobs"].get("frame_noise") or frozen_frame_noise(r["size"], r.get("labels") if isinstance(r.get("labels"), str) else None)
        by_mean = sorted((float(m), v) for m, v in r["gt_zero_video_raw_by_mean"].items())
        means, costs = [0.0] + [m for m, _ in by_mean], [r["gt_zero_video_raw"]] + [v for _, v in by_mean]
        c = cues.get(r["knob"], "#7f8c8d") if r["value"] > 0 else "#7f8c8d"
        bold = not r["knobs"] and r["value"] == 0
        ax.plot(np.sqrt(2 / np.pi) * np.array(means) / spread, costs, marker=markers[r["mode"]], color=c, ms=5 if bold else 3,
                lw=2 if bold else 0.6, alpha=1 if bold else 0.5, label=f"{r['mode']}, no cue, frozen knobs" if bold else None)
    ax.set_xscale("symlog", linthresh=0.5)
    ax.set_xlabel("the features' mean per dimension, in spreads of a dimension (sqrt(2/pi) x feature_mean / frame_noise)")
    ax.set_ylabel("literal zeros of the video: GT model's Act@1 change")
    ax.set_title("every map point, thin; the features carry a mean only in this panel", fontsize=9)
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(alpha=0.3)
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=4, frameon=False)
    fig.suptitle(f"What a planted video channel does to the paper's sharpest targets: {len(rows)} calibration-split points (one split, one "
                 f"training seed each).\nAt its training mean, zeroing the video costs {-fit[0]:.2f} points per point of GT over context-only "
                 f"(the paper {24.4 / 3.5:.1f}); literal zeros cost what the features' mean sets", fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    save_figure(figure, fig)
    print(f"wrote {figure} ({len(rows)} points; zero-video slope {fit[0]:.2f})")


SPLIT_COLUMNS = ("window_acc", "video_only", "recognizer_ba", "gt_minus_context", "gt_zero_video", "literal_zero", "fixed_video_only")


def by_split(rows: list, feature_mean: float) -> pd.DataFrame:
    """The points measured on more than one real split (--split), a row per split and their mean: how far split 1 speaks for the
    splits the experiments average over. `literal_zero` is the literal-zero cost at `feature_mean` (a --raw-means value)."""
    key = lambda r: (r.get("labels", ""), r["size"], r["knob"], r["value"], tuple(sorted(r["knobs"].items())))
    groups = {}
    for r in rows: groups.setdefault(key(r), []).append(r)
    out = []
    for k, group in sorted(groups.items()):
        if len(group) < 2: continue
        for r in sorted(group, key=lambda r: r.get("split", 1)):
            lit = r.get("gt_zero_video_raw_by_mean", {}).get(f"{feature_mean:g}", np.nan)
            out.append({"point": f"{k[0]} {k[1]}, {k[2]} {k[3]:g}" + "".join(f", {a}={b:g}" for a, b in k[4]),
                        "split": str(r.get("split", 1)), **{c: r[c] for c in SPLIT_COLUMNS if c != "literal_zero"}, "literal_zero": lit})
        mean = pd.DataFrame(out[-len(group):])[list(SPLIT_COLUMNS)].mean(skipna=False)   # a split without the value: no mean
        out.append({"point": out[-1]["point"], "split": f"mean of {len(group)}", **mean.to_dict()})
    table = pd.DataFrame(out)
    return table.set_index(["point", "split"])[list(SPLIT_COLUMNS)].round(1) if len(table) else table


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
    p.add_argument("--raw-means", type=float, nargs="*", default=[],
                   help="also measure literal zeros of the video as if the features carried this feature_mean more (no retraining)")
    p.add_argument("--split", type=int, default=1,
                   help="real-label mode: evaluate on this real split (1: the calibration split; 2.. to see how far split 1 speaks for the rest)")
    p.add_argument("--figure", type=Path, default=None, help="draw every row of W/explore_*.json into this PNG")
    p.add_argument("--by-split", type=float, default=None, metavar="FEATURE_MEAN",
                   help="also print the points measured on several splits, per split and their mean, literal zeros at this feature_mean")
    a = p.parse_args(argv)
    if a.values is None: a.values = [] if a.figure else [0.0, 0.25, 0.5, 1.0]
    knobs = {k: float(v) for k, v in (x.split("=", 1) for x in a.set)}
    out = a.work / (f"explore_{a.labels}_labels_{a.size}.json" if a.labels else f"explore_{a.size}.json")
    rows = json.loads(out.read_text()) if out.exists() else []
    measured = 0
    for v in a.values:
        if any((r["knob"], r["value"], r["knobs"], r.get("split", 1)) == (a.knob, v, knobs, a.split) for r in rows): continue
        measured += 1
        rows.append(evaluate(a.size, a.knob, v, a.work, a.keep, knobs, a.labels, a.labels_dir, a.raw_means, a.split))
        write_json(out, sorted(rows, key=lambda r: (sorted(r["knobs"].items()), r["knob"], r["value"], r.get("split", 1))))
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
    if a.by_split is not None:
        print(by_split(rows, a.by_split).to_string())
    if measured: print(f"wrote {out}")


if __name__ == "__main__":
    main()
