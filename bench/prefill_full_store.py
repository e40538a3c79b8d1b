"""Fill the full-scale four_condition store with real-label mode's units at candidate knobs, before they are frozen (issue 33, item 6).

The full four_condition run takes 2.5 to 3 hours per draw on 2 cores; its real-label half is what the README leads with. This
computes exactly the units the experiment notebook computes for `breakfast_labels` (every generator seed of the full size, every
split, the protocol's training seeds, the same conditions, config and store folder), with `real_label_feature_spec`'s full-size
knobs of Breakfast overridden by --set. A unit is keyed by its config and its data's fingerprint, so once the same knobs are frozen in
`calibration.REAL_LABEL_FEATURES`, `hoi-audit reproduce --only four_condition --scale full --out OUT` finds these units done and
computes only the rest. Nothing here is a result: the notebook writes the results JSON.

    nice -n 19 python bench/prefill_full_store.py --out /work/item6-out --set rank_signal=0.35 feature_mean=6 --workers 2

It writes below OUT only: OUT/data (the features) and OUT/store/four_condition (the units), and says so when done.
"""
import argparse, time
from pathlib import Path
from hoi_audit import calibration
from hoi_audit.core import PROTOCOL_SEEDS
from hoi_audit.store import ExperimentPaths
from hoi_audit.models import TrainConfig
from hoi_audit.conditions import TABLE1_CONDITIONS, AuditConfig
from hoi_audit.engine import window_accuracy_records
from hoi_audit.tables import four_condition_audit
from hoi_audit.datasets import GENERATOR_SEEDS, SeededDatasets, over_generator_seeds, label_audit_dataset

CONDITIONS = TABLE1_CONDITIONS + ("context_only_elapsed_fraction",)  # as nbs/experiments/four_condition.ipynb at the full scale
CONFIG = AuditConfig(n_tokens=4, train=TrainConfig())
LABELS = "breakfast"  # the real label set four_condition audits (its breakfast_labels rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="the output root the full run will use (hoi-audit reproduce --out)")
    p.add_argument("--set", nargs="*", default=[], metavar="KNOB=VALUE", help="full-size FeatureSpec knobs to override")
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args(argv)
    knobs = {k: float(v) for k, v in (x.split("=", 1) for x in a.set)}
    calibration.REAL_LABEL_FEATURES[LABELS]["full"].update(knobs)   # what freezing the knobs will do
    paths = ExperimentPaths(a.out, "four_condition")
    started = time.time()
    ds = SeededDatasets.draw(label_audit_dataset, GENERATOR_SEEDS["full"], LABELS, "full", paths.data, 1, None)
    print(f"features of {LABELS} at {knobs}: {[d.root for d in ds.by_seed.values()]}", flush=True)
    over_generator_seeds(window_accuracy_records, ds, store=paths.store, config=CONFIG)
    four_condition_audit(ds, seeds=PROTOCOL_SEEDS, conditions=CONDITIONS, config=CONFIG, store=paths.store, workers=a.workers)
    print(f"wrote {paths.store.root} and {paths.data} ({(time.time() - started) / 3600:.1f} h)")


if __name__ == "__main__":
    main()
