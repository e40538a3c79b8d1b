"""What segment-level recognition errors (`FeatureSpec.confusion`) do to GTEA's window accuracy and its privileged-history gap (issue 33, item 2).

GTEA's window recognizer is near perfect (Table 3: 99.6), and with segment-independent noise the boundary-aware history equals the
annotated one: the full results read a GT - BA gap of exactly 0.0, where the paper has +4.0 [+1.4, +6.6]. `confusion` makes a share
of the action segments show their most similar action, whole, so the recovered history has wrong items while the windows of every
other segment stay easy. This measures, on the calibration seed's whole GTEA-like dataset (the preset, or real-label mode), at the
full size, for each confusion value: the window accuracy over every split (`engine.window_accuracy_records`) and Table 13's row
(`scope.scope_table`: GT, BA, the gap and its interval) over every split with one training seed (42) unless --seeds says more.

    python bench/explore_confusion.py --work W --case gtea --values 0 0.02 0.04 0.08
    python bench/explore_confusion.py --work W --case gtea_labels --values 0.04 --seeds 42 43 44
    python bench/explore_confusion.py --work W --case gtea --values 0.0125 --seed 1000 1001 1002 1003 --seeds 42 43 44 --set equal_norms=1

It writes W/features/ and W/store/ (removed after each value) and W/explore_confusion.json (every row, reused by a rerun), and
prints the table.
"""
import argparse, json, shutil, time
from pathlib import Path
import pandas as pd
from hoi_audit.core import write_json
from hoi_audit.store import ResultStore
from hoi_audit.engine import window_accuracy_records
from hoi_audit.scope import scope_table
from hoi_audit.calibration import CALIBRATION_SEED
from window_by_split import CONFIG, dataset, knob_text, parse_set


def measure(case: str, value: float, seed: int, seeds: list, work: Path, rows: list, out: Path, knobs: dict | None = None) -> dict:
    "One row: GTEA's window accuracy and Table 13's row at one confusion value on one draw (`knobs`: other knobs moved)."
    key = {"case": case, "size": "full", "confusion": round(float(value), 6), "seed": seed, "train_seeds": list(seeds),
           "knobs": dict(sorted((knobs or {}).items()))}
    for r in rows:
        if {k: r.get(k, {}) for k in key} == key: return r
    started = time.time()
    ds = dataset(case, "full", "confusion", value, seed, work / "features", knobs)
    store = ResultStore(work / "store" / f"{case}_confusion{value:g}_seed{seed}")
    window = window_accuracy_records(ds, store=store, config=CONFIG)
    row = scope_table({case: ds}, seeds=seeds, config=CONFIG, store=store).table.iloc[0]
    out_row = key | {"window_acc": round(float(window["value"].mean()), 2),
                     **{k: round(float(row[k]), 2) for k in ("gt", "ba", "video", "gap_ba", "gap_ba_low", "gap_ba_high") if k in row},
                     "seconds": round(time.time() - started)}
    shutil.rmtree(ds.root, ignore_errors=True)
    shutil.rmtree(store.root, ignore_errors=True)
    rows.append(out_row)
    write_json(out, rows)
    print(out_row, flush=True)
    return out_row


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--case", default="gtea", help="gtea (the preset) or gtea_labels (real-label mode)")
    p.add_argument("--values", type=float, nargs="+", required=True, help="confusion values")
    p.add_argument("--seed", type=int, nargs="+", default=[CALIBRATION_SEED], help="generator seeds (default: the calibration seed)")
    p.add_argument("--seeds", type=int, nargs="+", default=[42], help="training seeds")
    p.add_argument("--set", nargs="*", default=[], metavar="KNOB=VALUE", help="other knobs moved from their frozen values")
    a = p.parse_args(argv)
    knobs = parse_set(a.set)
    a.work.mkdir(parents=True, exist_ok=True)
    out = a.work / "explore_confusion.json"
    rows = json.loads(out.read_text()) if out.exists() else []
    for v in a.values:
        for g in a.seed: measure(a.case, v, g, a.seeds, a.work, rows, out, knobs)
    print(pd.DataFrame([r | {"knobs": knob_text(r.get("knobs", {}))} for r in rows]).drop(columns=["size"]).to_string(index=False))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
