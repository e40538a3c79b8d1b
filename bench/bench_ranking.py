"""Benchmark: image-goal candidate construction at the seed's scale (9,564-episode held-out pool, 7,887 queries, 512-NN).

Times `ranking.build_candidates` (vectorized: chunked float64 matrix products, argpartition, lexsort) against
`ranking.build_candidates_reference` (a per-query Python loop) and checks that both give the same candidate set (SHA-256).
The loop is slow, so by default it runs on an evenly spaced sample of queries and its wall time is extrapolated linearly to all
queries (every query costs the same: one pass over the pool); the sample's rows are compared with the same rows of the vectorized
set. `--full-reference` runs the loop on every query and compares the SHA-256 of the whole set.

    python bench/bench_ranking.py [--sample 400] [--full-reference] [--latent-dim 16]

It prints figures; it is not a test.
"""
import argparse, dataclasses, time
import numpy as np
from hoi_audit.episodes import make_episodes
from hoi_audit.ranking import build_candidates, build_candidates_reference, heldout_pool


def rows_of(cs, rows):
    "The candidate set restricted to some query rows (the reference builds exactly these)."
    return dataclasses.replace(cs, query=cs.query[rows], candidates=cs.candidates[rows], recorded=cs.recorded[rows],
                               plans=cs.plans[rows], n_failures=cs.n_failures[rows])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sample", type=int, default=400, help="queries the loop reference is timed on (extrapolated)")
    p.add_argument("--full-reference", action="store_true", help="run the loop on every query (minutes)")
    p.add_argument("--latent-dim", type=int, default=16, help="D of the embedded episodes (contexts are 4 x D)")
    args = p.parse_args(argv)

    t = time.perf_counter()
    episodes = make_episodes("full", latent_dim=args.latent_dim)
    pool = heldout_pool(episodes)
    inputs = (pool.context, pool.plans, pool.success, pool.language, pool.episode_id)
    print(f"episodes: {len(episodes)} ({time.perf_counter() - t:.1f} s to generate); held-out pool {len(pool)}, "
          f"queries {int(pool.success.sum())}, context {pool.context.shape[1]} x {pool.context.shape[2]}")

    t, c = time.perf_counter(), time.process_time()
    fast = build_candidates(*inputs)
    t_fast, c_fast = time.perf_counter() - t, time.process_time() - c
    print(f"vectorized build_candidates: {t_fast:.2f} s wall, {c_fast:.2f} s CPU  ({fast})")

    Q = len(fast)
    if args.full_reference:
        t, c = time.perf_counter(), time.process_time()
        slow = build_candidates_reference(*inputs)
        t_loop, c_loop, measured = time.perf_counter() - t, time.process_time() - c, Q
        same = slow.sha256 == fast.sha256
        print(f"loop reference, all {Q} queries: {t_loop:.1f} s wall, {c_loop:.1f} s CPU; SHA-256 {slow.sha256[:16]}... "
              f"{'equals' if same else 'DIFFERS FROM'} the vectorized {fast.sha256[:16]}...")
    else:
        rows = np.unique(np.linspace(0, Q - 1, min(args.sample, Q)).round().astype(int))
        t, c = time.perf_counter(), time.process_time()
        slow = build_candidates_reference(*inputs, queries=rows)
        t_sample, c_sample = time.perf_counter() - t, time.process_time() - c
        t_loop, c_loop, measured = t_sample * Q / len(rows), c_sample * Q / len(rows), len(rows)
        same = slow.sha256 == rows_of(fast, rows).sha256
        print(f"loop reference: {t_sample:.1f} s wall ({c_sample:.1f} s CPU) on {len(rows)} evenly spaced queries -> {t_loop:.0f} s "
              f"wall ({c_loop:.0f} s CPU) extrapolated to {Q}; "
              f"those rows' SHA-256 {'equal' if same else 'DIFFER FROM'} the vectorized rows'")
    print(f"speed-up {t_loop / t_fast:.0f}x wall, {c_loop / c_fast:.0f}x CPU (loop {'measured on all' if measured == Q else 'extrapolated'}); "
          f"candidate-set SHA-256 {fast.sha256}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
