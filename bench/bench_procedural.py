"""Breakfast-scale reading: generate a synthetic MS-TCN folder the size of Breakfast (1,712 videos, 2048-d features,
about 3.6M frames), then, in a fresh process, read it, check every video's features, build every next-action query and
gather every query's observation window. Prints wall times and the peak RSS of the reading process (target <= 1.5 GB).

    .venv/bin/python bench/bench_procedural.py                      # full size, float32 (~29 GB on disk, ~10 min to write)
    .venv/bin/python bench/bench_procedural.py --size small         # a quick look
    .venv/bin/python bench/bench_procedural.py --root DIR --keep    # keep the folder for other benches
"""
import argparse, json, resource, shutil, subprocess, sys, time
from pathlib import Path

def generate(root: Path, size: str, dtype: str):
    from hoi_audit.synthetic import synthetic_dataset, write_synthetic
    t = time.perf_counter()
    ds = synthetic_dataset("breakfast", size=size, seed=0)
    write_synthetic(ds, root, dtype=dtype, progress=True)
    return time.perf_counter() - t

def read_and_query(root: Path) -> dict:
    import numpy as np
    from hoi_audit.procedural import read_mstcn
    from hoi_audit.queries import next_action_queries
    t0 = time.perf_counter()
    ds = read_mstcn(root)
    summary = ds.validate(check_features=True)          # every label file, every feature file checked for NaN/inf
    t1 = time.perf_counter()
    queries = next_action_queries(ds)
    t2 = time.perf_counter()
    checksum = 0.0
    for video, rows in queries.groupby("video", sort=False):   # one video's features mapped at a time
        feats = ds.video(video).features()
        for start, end in zip(rows["window_start"], rows["window_end"]):
            checksum += float(np.asarray(feats[start:end]).mean())
        del feats
    t3 = time.perf_counter()
    return {"videos": len(ds.videos), "frames": int(summary["n_frames"].sum()), "feature_dim": int(summary["feature_dim"].iloc[0]),
            "queries": len(queries), "read_validate_s": t1 - t0, "queries_s": t2 - t1, "windows_s": t3 - t2,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "checksum": checksum}

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="full", choices=["tiny", "small", "full"])
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    ap.add_argument("--root", default="/tmp/hoi_audit_bench_breakfast")
    ap.add_argument("--keep", action="store_true", help="keep the generated folder")
    ap.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    root = Path(args.root)
    if args.measure_only:
        print(json.dumps(read_and_query(root))); return
    gen_s = generate(root, args.size, args.dtype)
    disk_gb = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / 1e9
    print(f"generate  breakfast/{args.size} {args.dtype}: {gen_s:8.1f} s, {disk_gb:.1f} GB on disk")
    out = subprocess.run([sys.executable, __file__, "--measure-only", "--root", str(root)], capture_output=True, text=True)
    if out.returncode: sys.exit(out.stderr)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"dataset   {r['videos']} videos, {r['frames']:,} frames, {r['feature_dim']}-d, {r['queries']:,} next-action queries")
    print(f"read + validate every video (NaN/inf scan of all features): {r['read_validate_s']:8.1f} s")
    print(f"build every query (labels only):                           {r['queries_s']:8.1f} s")
    print(f"gather every query's observation window:                   {r['windows_s']:8.1f} s")
    print(f"peak RSS of the reading process: {r['peak_rss_mb']:.0f} MB (target <= 1500 MB)")
    if not args.keep: shutil.rmtree(root)

if __name__ == "__main__":
    main()
