"""Core overheads: atomic writes, SHA-256 pins, and the result store's per-unit cost (prints figures; not a test).

    .venv/bin/python bench/bench_core.py
"""
import tempfile, time
from pathlib import Path
import numpy as np
from hoi_audit.core import sha256_array, sha256_file, write_bytes, write_json, write_npy
from hoi_audit.store import ResultStore, Unit

def timed(fn, repeat=1):
    t = time.perf_counter()
    for _ in range(repeat): fn()
    return (time.perf_counter() - t) / repeat

def main():
    tmp = Path(tempfile.mkdtemp())
    big = np.random.default_rng(0).normal(size=(4096, 2048)).astype(np.float32)   # 32 MiB, one long video's I3D features
    mb = big.nbytes / 2**20
    t = timed(lambda: write_npy(tmp / "a.npy", big), 5)
    print(f"atomic write_npy   {mb:6.1f} MiB  {t*1e3:8.1f} ms  {mb/t:8.0f} MiB/s (temp file + fsync + rename)")
    t = timed(lambda: np.save(tmp / "b.npy", big), 5)
    print(f"plain np.save      {mb:6.1f} MiB  {t*1e3:8.1f} ms  {mb/t:8.0f} MiB/s (no fsync)")
    t = timed(lambda: sha256_array(big), 5)
    print(f"sha256_array       {mb:6.1f} MiB  {t*1e3:8.1f} ms  {mb/t:8.0f} MiB/s")
    t = timed(lambda: sha256_file(tmp / "a.npy"), 5)
    print(f"sha256_file        {mb:6.1f} MiB  {t*1e3:8.1f} ms  {mb/t:8.0f} MiB/s")
    t = timed(lambda: write_json(tmp / "small.json", {"a": list(range(100))}), 200)
    print(f"atomic write_json  small       {t*1e3:8.2f} ms per file")

    n = 300
    units = [Unit({"split": s, "condition": c, "seed": seed}, inputs={"x": "0" * 64})
             for s in range(1, 6) for c in range(20) for seed in (42, 43, 44)][:n]
    store = ResultStore(tmp / "store")
    t_first = timed(lambda: store.run(units, lambda u, w: {"act1": 1.0}, progress=False))
    t_skip = timed(lambda: store.run(units, lambda u, w: 1 / 0, progress=False))
    print(f"result store       {n} units   {t_first/n*1e3:8.2f} ms per computed unit (trivial compute), "
          f"{t_skip/n*1e3:.2f} ms per skipped unit")

if __name__ == "__main__":
    main()
