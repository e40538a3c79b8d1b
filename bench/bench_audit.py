"""Throughput of the four-condition audit at the Breakfast-sized preset (prints; not a test).

Measured: (1) training throughput (queries/s) of the default TrainConfig (2 layers, d=64, 4 video tokens of 2048-d features,
16 history tokens); (2) per-video cost of pooling window tokens and of boundary-aware / boundary-free recovery on a subset of
full-size videos (2048-d, ~2100 frames); (3) one recognizer fit. The full audit (4 splits x 3 seeds x 5 conditions) is then
EXTRAPOLATED from these rates and the preset's expected query count.

`--full DIR` MEASURES it instead: it writes the full preset's features below DIR (~14 GB in float16, once), then runs the audit
end to end with `--workers` processes sharing one result store (the store's per-unit locks split the units between them, so the
results do not depend on the number of workers), and prints the wall time and how many epochs the fits ran before early stopping.
A store left by an earlier run is reused unit by unit: pass a fresh DIR to time a cold run.

    python bench/bench_audit.py [--videos 12] [--epochs-expected 7]
    python bench/bench_audit.py --full /tmp/full_audit --workers 2
"""
import argparse, tempfile, time
from pathlib import Path
import numpy as np, torch
from hoi_audit.provenance import Block, Condition
from hoi_audit.models import TrainConfig, fit_anticipation, video_window_tokens
from hoi_audit.procedural import read_mstcn
from hoi_audit.queries import next_action_queries
from hoi_audit.recovery import WindowRecognizer, recover_history_boundary_aware, recover_history_boundary_free
from hoi_audit.synthetic import synthetic_dataset, write_synthetic
from hoi_audit.grammar import expected_queries

def write_full_subset(syn, n_videos:int, folder:Path|None=None) -> tuple:
    "Write `n_videos` full-size videos of split 1 (2/3 train, 1/3 test) in float16, with a split 1 of just them: (root, names, train names)."
    split = syn.splits[1]
    names = split["train"][: n_videos - n_videos // 3] + split["test"][: n_videos // 3]
    root = (folder or Path(tempfile.mkdtemp(prefix="bench_audit_"))) / "b"
    write_synthetic(syn, root, dtype="float16", videos=names)
    for f in (root / "splits").glob("*.bundle"): f.unlink()    # the subset's own split: its written videos only
    (root / "splits" / "train.split1.bundle").write_text("".join(f"{v}.txt\n" for v in names if v in split["train"]))
    (root / "splits" / "test.split1.bundle").write_text("".join(f"{v}.txt\n" for v in names if v in split["test"]))
    return root, names, [v for v in names if v in split["train"]]

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--videos", type=int, default=12, help="full-size videos written for the per-video rates")
    ap.add_argument("--train-queries", type=int, default=2000, help="queries in the throughput fit")
    ap.add_argument("--epochs-expected", type=float, default=7,
                    help="epochs a fit runs before early stopping (for the extrapolation; the measured full run stops video conditions at 7)")
    ap.add_argument("--full", type=Path, help="measure the full audit end to end below this folder instead of extrapolating")
    ap.add_argument("--workers", type=int, default=2, help="processes sharing the store in --full mode")
    ap.add_argument("--size", default="full", help="preset size in --full mode (tiny: a one-minute check of the bench itself)")
    a = ap.parse_args()
    if a.full: return measure_full(a.full, a.workers, a.size)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads available; training uses TrainConfig.threads=1")

    # (1) training throughput at full dimensions
    cfg = TrainConfig()
    n, rng = a.train_queries, np.random.default_rng(0)
    blocks = [Block("video", "video", rng.normal(size=(n, 4, 2048)).astype(np.float32)),
              Block("history", "oracle", np.sort(rng.integers(0, 48, (n, 16)), axis=1))]
    y = rng.integers(0, 48, n)
    fit_cfg = TrainConfig(epochs=2, patience=10, val_fraction=0.0)
    t = time.perf_counter()
    fit_anticipation(Condition("gt", {"video", "oracle"}, deployable=False), blocks, y, 48, config=fit_cfg, seed=42)
    qps = 2 * n / (time.perf_counter() - t)
    print(f"training throughput (d=64, 2 layers, 4x2048 video + 16 history tokens): {qps:.0f} queries/s")

    # (2) per-video costs on full-size videos
    syn = synthetic_dataset("breakfast", "full", seed=0)
    t = time.perf_counter()
    root, names, train_v = write_full_subset(syn, a.videos)
    write_s = (time.perf_counter() - t) / len(names)
    ds = read_mstcn(root)
    q = next_action_queries(ds, names, window=32)
    t = time.perf_counter(); video_window_tokens(ds, q, 4); pool_s = (time.perf_counter() - t) / len(names)
    t = time.perf_counter(); rec = WindowRecognizer().fit(ds, train_v, window=16, stride=8, seed=42); fit_rec_s = time.perf_counter() - t
    t = time.perf_counter(); recover_history_boundary_aware(ds, q, rec); ba_s = (time.perf_counter() - t) / len(names)
    t = time.perf_counter(); recover_history_boundary_free(ds, q, rec); bfr_s = (time.perf_counter() - t) / len(names)
    print(f"per video: write {write_s:.2f}s, pool tokens {pool_s:.3f}s, BA recovery {ba_s:.3f}s, BFR recovery {bfr_s:.3f}s; "
          f"recognizer fit on {len(train_v)} videos {fit_rec_s:.1f}s (it reads every train video's windows, then subsamples 8000)")

    # (3) extrapolation to the full audit
    n_videos, per_video = len(syn.videos), expected_queries(syn, True)
    n_queries = n_videos * per_video
    train_q = 0.75 * n_queries * 0.85           # 3 of 4 participant groups train; 15% of train videos validate
    fit_s = cfg.epochs and a.epochs_expected * train_q / qps
    fits = 4 * 3 * 5
    per_split_prep = n_videos * (pool_s + ba_s + bfr_s) + fit_rec_s * 0.75 * n_videos / max(len(train_v), 1)   # the fit reads every train video's windows: linear
    total = fits * fit_s + 4 * per_split_prep
    print(f"full preset: {n_videos} videos, ~{n_queries:.0f} queries; one fit ~{fit_s:.0f}s ({a.epochs_expected:g} epochs x {train_q:.0f} queries)")
    print(f"EXTRAPOLATED full audit (4 splits x 3 seeds x 5 conditions = {fits} fits, sequential, 1 thread each): "
          f"{total / 3600:.1f} h ({fits * fit_s / 3600:.1f} h training + {4 * per_split_prep / 60:.0f} min features/recovery); "
          f"about half if two units run at once on the 2 cores; writing the features once: {n_videos * write_s / 60:.0f} min")

def _audit_worker(root, store_dir):
    from hoi_audit.conditions import AuditConfig
    from hoi_audit.tables import four_condition_audit
    from hoi_audit.core import PROTOCOL_SEEDS
    from hoi_audit.store import ResultStore
    four_condition_audit(read_mstcn(root, name="synthetic_breakfast"), seeds=PROTOCOL_SEEDS, config=AuditConfig(n_tokens=4, train=TrainConfig()),
                         store=ResultStore(store_dir))

def measure_full(folder:Path, workers:int, size:str):
    import json, multiprocessing as mp
    import pandas as pd
    root = folder / f"synthetic_breakfast_{size}"
    t = time.perf_counter()
    if not (root / "mapping.txt").exists(): write_synthetic(synthetic_dataset("breakfast", size, seed=0), root, dtype="float16")
    write_s = time.perf_counter() - t
    t = time.perf_counter()
    procs = [mp.get_context("spawn").Process(target=_audit_worker, args=(root, folder / "store")) for _ in range(workers)]
    for p in procs: p.start()
    for p in procs: p.join()
    audit_s = time.perf_counter() - t
    if any(p.exitcode for p in procs): raise SystemExit(f"a worker failed: exit codes {[p.exitcode for p in procs]}")
    rows = [{**json.loads((r.parent / "manifest.json").read_text())["key"], **json.loads(r.read_text())}
            for r in (folder / "store").rglob("condition=*/seed=*/result.json")]
    runs = pd.DataFrame(rows).groupby("condition")[["epochs_run", "best_epoch", "n_train"]].agg(["min", "median", "max"])
    print(f"features written in {write_s / 60:.1f} min (0 if they were there)")
    print(f"MEASURED full audit ({size} preset, 4 splits x 3 seeds x 5 conditions, {len(rows)} fits, {workers} workers): {audit_s / 60:.1f} min")
    print(runs.to_string())

if __name__ == "__main__":
    main()
