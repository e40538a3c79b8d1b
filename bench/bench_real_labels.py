"""First use of the shipped real labels: each of Breakfast, 50 Salads and GTEA rebuilt from the package into an empty cache
(MS-TCN folder, checked against its pins), then the second use in the same process and in a fresh one. Prints wall times per
dataset (target: the three together well under 20 s, so a first `hoi-audit` run does not stall on them).

    .venv/bin/python bench/bench_real_labels.py
"""
import subprocess, sys, tempfile, time
from pathlib import Path

def main():
    from hoi_audit.procedural import REAL_DATASETS, materialize_real_labels
    with tempfile.TemporaryDirectory() as cache:
        total = 0.0
        for name in REAL_DATASETS:
            t = time.perf_counter(); folder = materialize_real_labels(name, cache); first = time.perf_counter() - t
            t = time.perf_counter(); materialize_real_labels(name, cache); again = time.perf_counter() - t
            code = f"import time, hoi_audit.procedural as p; t = time.perf_counter(); p.materialize_real_labels({name!r}, {cache!r}); print(time.perf_counter() - t)"
            fresh = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
            n = len(list((Path(folder) / "groundTruth").iterdir()))
            print(f"{name:10s} {n:5d} label files  first use {first:6.2f} s   again in-process {again:6.3f} s   again in a fresh process {fresh:6.2f} s")
            total += first
        print(f"first use of the three: {total:.2f} s")

if __name__ == "__main__":
    main()
