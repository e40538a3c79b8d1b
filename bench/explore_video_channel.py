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

It writes W/<size>_<knob>_<value>/ (the features, deleted after each evaluation unless --keep) and W/explore_<size>.json (every row),
and prints the table. A value already in that JSON is not measured again.
"""
import argparse, json, shutil, time
from dataclasses import replace
from pathlib import Path
import pandas as pd
from hoi_audit.core import write_json
from hoi_audit.procedural import read_mstcn
from hoi_audit.recovery import WindowRecognizer
from hoi_audit.conditions import AuditConfig
from hoi_audit.models import TrainConfig
from hoi_audit.analysis import train_conditions, ablation_table
from hoi_audit.synthetic import write_synthetic
from hoi_audit.calibration import calibration_split

AUDIT = {  # the four_condition experiment's settings per size (as bench/calibrate_presets.py)
    "small": AuditConfig(n_tokens=2, train=TrainConfig(d_model=32, n_heads=2, n_layers=1, batch_size=64, lr=2e-3, epochs=15, patience=3)),
    "full": AuditConfig(n_tokens=4, train=TrainConfig())}
BOUNDARY = ("video_only", "recognizer_ba", "gt_history", "context_only")
FIXED = ("video_only", "gt_history")
PAPER = {"window_acc": 44.4, "video_only": 21.7, "recognizer_ba": 30.3, "gt_history": 62.3, "context_only": 58.8,
         "gt_minus_context": 3.5, "gt_zero_video": -24.4, "gt_video_share": 57.3, "fixed_video_only": 21.5, "fixed_gt_history": 47.5}


def evaluate(size: str, knob: str, value: float, work: Path, keep: bool, knobs: dict) -> dict:
    "One value of `knob` (the other knobs overridden by `knobs`): write the calibration split, measure every row, clean up."
    started = time.time()
    root = work / "_".join([size, knob, f"{value:g}", *(f"{k}{v:g}" for k, v in sorted(knobs.items()))])
    ds = read_mstcn(write_synthetic(calibration_split("breakfast", size, **{knob: value}, **knobs), root))
    config = AUDIT[size]
    row = {"size": size, "knobs": knobs, "knob": knob, "value": value,
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, required=True, help="folder for the features and explore_<size>.json")
    p.add_argument("--size", default="small", choices=sorted(AUDIT))
    p.add_argument("--knob", default="anticipation_signal", help="the FeatureSpec knob swept (e.g. relation_signal)")
    p.add_argument("--values", type=float, nargs="+", default=[0.0, 0.25, 0.5, 1.0])
    p.add_argument("--keep", action="store_true", help="keep the written features")
    p.add_argument("--set", nargs="*", default=[], metavar="KNOB=VALUE",
                   help="other FeatureSpec knobs to override (e.g. end_fade=0.6 frame_noise=2.0)")
    a = p.parse_args(argv)
    knobs = {k: float(v) for k, v in (x.split("=", 1) for x in a.set)}
    out = a.work / f"explore_{a.size}.json"
    rows = json.loads(out.read_text()) if out.exists() else []
    for v in a.values:
        if any((r["knob"], r["value"], r["knobs"]) == (a.knob, v, knobs) for r in rows): continue
        rows.append(evaluate(a.size, a.knob, v, a.work, a.keep, knobs))
        write_json(out, sorted(rows, key=lambda r: (sorted(r["knobs"].items()), r["knob"], r["value"])))
        print(f"{a.knob}={v:g}: {rows[-1]}", flush=True)
    table = pd.DataFrame(rows)
    table["knobs"] = [", ".join(f"{k}={v:g}" for k, v in sorted(r["knobs"].items())) or "frozen" for r in rows]
    table = table.sort_values(["knobs", "knob", "value"]).set_index(["knobs", "knob", "value"])
    table.loc[("paper", "", ""), :] = pd.Series(PAPER)
    pd.set_option("display.width", 250)
    print(table[list(PAPER)].round(1).to_string())
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
