"""History recovery at the Breakfast-sized preset, before and after (prints; not a test).

Writes N full-size videos (2048-d float16 D x T files, ~2100 frames; split 1, 2/3 train, 1/3 test), then times, per video, for the
reference implementation (`hoi_audit/recovery.py` as of git revision `--ref`) and the working tree's:
(1) the reading and pooling of a `WindowRecognizer` fit that subsamples (`--max-windows`, default the full preset's kept share of
~2.4%), per train video (the LR solve, unchanged, is timed once on all windows);
(2) BA recovery and (3) BFR recovery of every boundary query, per video, with the audit's recognizer (`max_windows=8000`, the default).
Runs alternate between the implementations; the best of `--repeats` is printed, with the ratio before/after, and the working tree's
once more with BLAS free to use its threads in the classifier calls (column "BLAS thr.": the pooling alone). It counts the
queries whose BA or BFR history differs between the two (boundary queries, and fixed-time queries whose segments are clipped at t),
checks the fits give the same coefficients, then projects one split of the full audit (a cross-fitted recognizer: 1 all-train + 4
fold fits, then BA and BFR of 1712 videos).

    python bench/bench_recovery.py [--videos 12] [--ref HEAD] [--repeats 3]
"""
import argparse, contextlib, importlib.util, inspect, os, subprocess, sys, tempfile, time
from pathlib import Path
import numpy as np
sys.path.insert(0, str(Path(__file__).parent))
from bench_audit import write_full_subset
import hoi_audit
from hoi_audit import recovery
from hoi_audit.procedural import read_mstcn
from hoi_audit.queries import next_action_queries, scheduled_queries
from hoi_audit.synthetic import synthetic_dataset

def reference_module(rev:str):
    "`hoi_audit.recovery` as of git revision `rev`, imported as `hoi_audit._recovery_ref` (its relative imports resolve in the package)."
    src = subprocess.run(["git", "show", f"{rev}:hoi_audit/recovery.py"], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parent.parent).stdout
    path = Path(tempfile.mkdtemp(prefix="recovery_ref_")) / "_recovery_ref.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("hoi_audit._recovery_ref", path, submodule_search_locations=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "hoi_audit"
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module

def timed(f):
    t = time.perf_counter(); out = f(); return out, time.perf_counter() - t

def measure(impl, root, names, train_v, max_windows:int) -> dict:
    "Per-video seconds of a subsampling fit's reading, BA and BFR with module `impl`, on a fresh dataset (features checked first, untimed)."
    ds = read_mstcn(root)
    for v in names: np.asarray(ds.video(v).features()[:1])      # the NaN check of the first read, and the page cache, untimed
    q = next_action_queries(ds, names, window=32)
    subset = (lambda: impl._training_windows(ds, train_v, 16, 8, "mean", max_windows, 42)) if "max_windows" in \
        inspect.signature(impl._training_windows).parameters else (lambda: impl._training_windows(ds, train_v, 16, 8, "mean"))
    _, fit_s = timed(subset)                                    # the fit's reading and pooling (its LR solve is timed once, below)
    rec = impl.WindowRecognizer().fit(ds, train_v, window=16, stride=8, seed=42)   # the audit's recognizer: up to 8000 windows
    ba, ba_s = timed(lambda: impl.recover_history_boundary_aware(ds, q, rec))
    bfr, bfr_s = timed(lambda: impl.recover_history_boundary_free(ds, q, rec))
    fixed = scheduled_queries(ds, names, start=64, every=60)     # segments clipped at t: BA labels partial segments
    return {"fit": fit_s / len(train_v), "ba": ba_s / len(names), "bfr": bfr_s / len(names), "n_fit": rec.n_train_windows,
            "n_classes": len(rec.model.classes_), "queries": (len(q), len(fixed)),
            "histories": {"BA boundary": list(ba), "BFR boundary": list(bfr),
                          "BA fixed-time": list(impl.recover_history_boundary_aware(ds, fixed, rec)),
                          "BFR fixed-time": list(impl.recover_history_boundary_free(ds, fixed, rec))},
            "coef": rec.model[-1].coef_}

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--videos", type=int, default=12, help="full-size videos written")
    ap.add_argument("--ref", default="HEAD", help="git revision of the reference recovery.py (default: the committed one)")
    ap.add_argument("--max-windows", type=int, default=0,
                    help="training windows kept by the timed fit reading (0: the full preset's share, 8000 of ~1284 x 260 train windows)")
    ap.add_argument("--repeats", type=int, default=3, help="alternating runs of each implementation (the best is printed)")
    a = ap.parse_args()
    syn = synthetic_dataset("breakfast", "full", seed=0)
    (root, names, train_v), write_s = timed(lambda: write_full_subset(syn, a.videos))
    frames = [read_mstcn(root).video(v).n_frames for v in names]
    print(f"wrote {len(names)} full-size videos ({len(train_v)} train, {np.mean(frames):.0f} frames on average) in {write_s:.0f}s; "
          f"reference: recovery.py at {a.ref}")
    n_windows = sum(len(recovery.window_starts(read_mstcn(root).video(v).n_frames)) for v in train_v)
    max_windows = a.max_windows or max(2, round(n_windows * 8000 / (1284 * n_windows / len(train_v))))
    impls = {"before": reference_module(a.ref), "after": recovery, "BLAS thr.": recovery}
    runs = {k: [] for k in impls}
    for _ in range(a.repeats):
        for k, impl in impls.items():
            with contextlib.ExitStack() as stack:
                if k == "BLAS thr.":   # the classifier calls with BLAS's own thread count
                    original, recovery._one_blas_thread = recovery._one_blas_thread, contextlib.nullcontext
                    stack.callback(setattr, recovery, "_one_blas_thread", original)
                runs[k].append(measure(impl, root, names, train_v, max_windows))
    best = {k: {m: min(r[m] for r in rs) for m in ("fit", "ba", "bfr")} for k, rs in runs.items()}
    first = runs["after"][0]
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (after the runs); {a.repeats} runs each, alternating, best shown")
    print(f"timed fit reading keeps {max_windows} of {n_windows} train windows; the recovery recognizer is fitted on "
          f"{first['n_fit']} windows ({first['n_classes']} classes); {first['queries'][0]} boundary queries, {first['queries'][1]} fixed-time")
    print(f"{'per video':<34}{'before':>10}{'after':>10}{'ratio':>8}{'BLAS thr.':>11}{'ratio':>8}")
    for m, label in (("fit", "fit windows (per train video)"), ("ba", "BA (boundary queries)"), ("bfr", "BFR (boundary queries)")):
        b, f, t = best["before"][m], best["after"][m], best["BLAS thr."][m]
        print(f"{label:<34}{b * 1e3:>8.1f}ms{f * 1e3:>8.1f}ms{b / f:>7.2f}x{t * 1e3:>9.1f}ms{b / t:>7.2f}x")
    reference = runs["before"][0]["histories"]
    for kind, hist in reference.items():
        differ = max(sum(x != y for x, y in zip(r["histories"][kind], hist)) for rs in runs.values() for r in rs)
        print(f"{kind} histories differing from the reference's: {differ} of {len(hist)}")
    same_c = all(np.array_equal(r["coef"], runs["before"][0]["coef"]) for rs in runs.values() for r in rs)
    print(f"same fitted coefficients: {same_c}")
    ds = read_mstcn(root)
    _, lr_s = timed(lambda: recovery.WindowRecognizer(max_windows=10**9).fit(ds, train_v, window=16, stride=8, seed=42))
    print(f"one fit on all {n_windows} windows (reading + LR solve): {lr_s:.1f}s; at 8000 windows the solve is a fixed cost of each fit, "
          "the same before and after")
    n_videos, n_train, fold_train = 1712, 1284, 963        # Breakfast full: 3 of 4 participant groups train; a fold fits 3/4 of those
    reads = n_train + 4 * fold_train                       # video reads of one split's 5 fits (the LR solve on 8000 windows is extra)
    for k in ("before", "after"):
        b = best[k]
        print(f"{k:>6} projected split: 5 fits' reading {reads * b['fit'] / 60:.1f} min (their LR solves extra), BA {n_videos * b['ba']:.0f} s, "
              f"BFR {n_videos * b['bfr']:.0f} s; 4 splits {4 * (reads * b['fit'] + n_videos * (b['ba'] + b['bfr'])) / 3600:.2f} h")

if __name__ == "__main__":
    main()
