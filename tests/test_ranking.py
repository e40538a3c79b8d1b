"""Integration tests of hoi_audit.ranking: the goal is never read, the vectorized construction equals the loop reference and the
rules, tie-aware metrics against brute force and scipy, pins, restart, the command line and bad input."""
import argparse, dataclasses, inspect, itertools, json
from types import SimpleNamespace
import numpy as np
import pytest
from scipy.stats import rankdata
from sklearn.neighbors import NearestNeighbors
from hoi_audit.core import CANDIDATE_ORDER_SEED, DataError, HoiAuditError, PinMismatch, ProvenanceError
from hoi_audit.provenance import TrackedArray, assert_never_read
from hoi_audit.episodes import make_episodes
from hoi_audit.ranking import (GuardedLatents, add_subcommand, build_candidates, build_candidates_reference, candidate_energies,
                               heldout_pool, query_targets, rank_metrics, run_ranking, plan_statistics, standardize)
from hoi_audit.worldmodel import PersistenceModel


@pytest.fixture(scope="module")
def tiny():
    return make_episodes("tiny")


def as_namespace(ep, **replace):
    "The episodes' arrays with some replaced (an `Episodes` would validate, and refuse, a guarded stand-in)."
    fields = ("episode_id", "split", "latents", "commands", "success", "language", "length_bin")
    return SimpleNamespace(**{**{f: getattr(ep, f) for f in fields}, **replace})


def build(pool, **kw):
    return build_candidates(pool.context, pool.plans, pool.success, pool.language, pool.episode_id, **kw)


def random_pool(P=60, C=4, D=3, seed=0, duplicates=True):
    rng = np.random.default_rng(seed)
    context = rng.normal(size=(P, C, D)).astype(np.float32)
    if duplicates: context[1] = context[0]; context[5] = context[4]            # exact context ties
    plans = rng.normal(size=(P, 4, 7)).astype(np.float32)
    plans[7] = plans[8]                                                        # an exact statistics tie
    success = rng.random(P) < 0.7
    language = rng.integers(-1, 4, P)
    ids = np.array([f"x{i}" for i in range(P)])
    return context, plans, success, language, ids


# ---- the goal is never read ---------------------------------------------------------------------------------------------------

def test_construction_never_reads_the_goal_or_any_future_bin(tiny):
    guarded = GuardedLatents(tiny.latents, context_bins=4)
    pool = heldout_pool(as_namespace(tiny, latents=guarded))
    cs = build(pool)
    assert len(cs) == int(tiny.success[tiny.split == "heldout"].sum())
    assert_never_read(guarded.future)
    assert not any("goal" in p or "latent" in p for p in inspect.signature(build_candidates).parameters)   # not even passed


def test_goal_as_tracked_array_is_never_read(tiny):
    # the goal bin alone wrapped in a TrackedArray: build from a pool whose latents expose only the context
    goal = TrackedArray(tiny.latents[:, -1], "goal_latent")
    class ContextAndGoal:
        shape, dtype, ndim = tiny.latents.shape, tiny.latents.dtype, 3
        def __getitem__(self, key):
            rows, bins = (key[0], np.atleast_1d(np.arange(8)[key[1]])) if isinstance(key, tuple) else (key, np.arange(8))
            if bins.max() == 7: goal[rows]                                    # records a read of the goal
            return tiny.latents[key]
    pool = heldout_pool(as_namespace(tiny, latents=ContextAndGoal()))
    build(pool)
    assert_never_read(goal)
    query_targets(as_namespace(tiny, latents=ContextAndGoal()), pool, build(pool))   # scoring does read it: the check can fail
    with pytest.raises(ProvenanceError, match="goal_latent"): assert_never_read(goal)


def test_a_leaky_construction_is_caught(tiny):
    guarded = GuardedLatents(tiny.latents, context_bins=4)
    ep = as_namespace(tiny, latents=guarded)
    def leaky_pool(ep):   # a plausible bug: the whole latents array converted before slicing
        return np.asarray(ep.latents)[:, :4]
    leaky_pool(ep)
    with pytest.raises(ProvenanceError, match="future_latents"): assert_never_read(guarded.future)


# ---- the construction ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed,k", [(0, 512), (1, 20), (2, 15)])
def test_vectorized_equals_loop_reference(seed, k):
    args = random_pool(seed=seed)
    fast = build_candidates(*args, n_neighbors=k, chunk=7)
    slow = build_candidates_reference(*args, n_neighbors=k)
    assert fast.sha256 == slow.sha256
    np.testing.assert_array_equal(fast.candidates, slow.candidates)
    part = build_candidates_reference(*args, n_neighbors=k, queries=[3, 0])
    np.testing.assert_array_equal(part.candidates, fast.candidates[[3, 0]])


@pytest.mark.parametrize("duplicates", [False, True])
def test_prefilter_and_threads_give_the_exact_result(duplicates):
    # P = 400 turns the threshold prefilter on. 220 identical contexts: for a query among them the k-th neighbour and the
    # prefilter's threshold are both ties at distance 0, so the prefilter cannot prove its selection and the exact path runs;
    # 40 more identical contexts elsewhere are ties the prefilter keeps whole.
    context, plans, success, language, ids = random_pool(P=400, seed=7, duplicates=False)
    if duplicates: context[100:320] = context[100]; context[340:380] = context[340]
    a = build_candidates(context, plans, success, language, ids, n_neighbors=30, chunk=64)
    b = build_candidates(context, plans, success, language, ids, n_neighbors=30, prefilter=False, workers=1)
    c = build_candidates_reference(context, plans, success, language, ids, n_neighbors=30)
    assert a.sha256 == b.sha256 == c.sha256


def test_rules_against_sklearn_neighbours_and_by_hand():
    context, plans, success, language, ids = random_pool(P=80, seed=3, duplicates=False)
    k = 25
    cs = build_candidates(context, plans, success, language, ids, n_neighbors=k)
    X = context.reshape(len(context), -1)
    _, nn = NearestNeighbors(n_neighbors=k + 1).fit(X).kneighbors(X)          # the first neighbour is the point itself
    Z = standardize(plan_statistics(plans))
    for row, q in enumerate(cs.query):
        cands = cs.candidates[row]
        assert cands[cs.recorded[row]] == q and len(set(cands.tolist())) == 16
        np.testing.assert_array_equal(cs.plans[row], plans[cands])
        near = [i for i in nn[q] if i != q][:k]
        negs = [int(i) for i in cands if i != q]
        assert set(negs) <= set(near)
        fails = [i for i in near if not success[i]]
        assert sum(not success[i] for i in negs) >= min(5, len(fails))      # failures first, up to five
        # by hand: rank by (other instruction, statistics distance, index), five failures, then fill
        key = lambda i: (int(language[q] >= 0 and language[i] != language[q]), float(np.sum((Z[i] - Z[q]) ** 2)), i)
        ranked = sorted(near, key=key)
        first = [i for i in ranked if not success[i]][:5]
        expected = first + [i for i in ranked if i not in first][:15 - len(first)]
        assert sorted(negs) == sorted(expected)


def test_order_is_the_seeded_shuffle_and_the_set_is_deterministic():
    args = random_pool(seed=4)
    a, b = build_candidates(*args), build_candidates(*args)
    assert a.sha256 == b.sha256 and a.rules["order_seed"] == CANDIDATE_ORDER_SEED
    other = build_candidates(*args, seed=1)
    assert other.sha256 != a.sha256
    np.testing.assert_array_equal(np.sort(other.candidates, 1), np.sort(a.candidates, 1))   # same plans, other order
    order = np.argsort(np.random.default_rng(CANDIDATE_ORDER_SEED).random((len(a), 16)), axis=1, kind="stable")
    np.testing.assert_array_equal(a.recorded, np.argmax(order == 0, 1))
    counts = np.bincount(a.recorded, minlength=16)
    assert (counts > 0).sum() >= 10                                            # the recorded plan is spread over the positions


def test_snapping_makes_summation_order_irrelevant():
    context, plans, success, language, ids = random_pool(seed=5)
    shifted = build_candidates(context, plans, success, language, ids, chunk=1)
    assert shifted.sha256 == build_candidates(context, plans, success, language, ids, chunk=1000).sha256


def test_pin_mismatch():
    cs = build_candidates(*random_pool(seed=6))
    tampered = dataclasses.replace(cs, candidates=cs.candidates[::-1].copy())
    with pytest.raises(PinMismatch, match="candidate set"): tampered.check(cs.sha256)
    ctx = np.zeros((len(cs), 4, 3), np.float32)
    with pytest.raises(PinMismatch): candidate_energies(PersistenceModel(), ctx, tampered, np.zeros((len(cs), 3)), pin=cs.sha256)


# ---- energies and metrics -----------------------------------------------------------------------------------------------------

def test_persistence_is_exactly_chance(tiny):
    pool = heldout_pool(tiny)
    cs = build(pool)
    goal, future = query_targets(tiny, pool, cs)
    e = candidate_energies(PersistenceModel(), pool.context[cs.query], cs, goal, future, pin=cs.sha256, batch_size=100)
    m = rank_metrics(e["endpoint"], cs.recorded).mean()
    assert (m["win_rate"], m["rank"], m["r_at_1"], m["r_at_5"]) == (0.5, 8.5, 1 / 16, 5 / 16)
    true_l1 = np.abs(pool.context[cs.query][:, -1] - goal).sum(-1)
    np.testing.assert_allclose(e["endpoint"][:, 0], true_l1, rtol=1e-6)   # the energy is the L1 distance to the goal


def brute_force(E, r):
    "Expected metrics over every ordering of the tied candidates (exact enumeration)."
    n = len(E)
    rows = []
    tied = [j for j in range(n) if E[j] == E[r]]
    for perm in itertools.permutations(tied):
        rank_of = {j: p for p, j in enumerate(perm)}
        rank = 1 + sum(E[j] < E[r] for j in range(n)) + rank_of[r]
        rows.append((rank, rank <= 1, rank <= 5, 1 / rank))
    rank, r1, r5, rr = np.mean(rows, 0)
    win = np.mean([1.0 if E[r] < E[j] else 0.5 if E[r] == E[j] else 0.0 for j in range(n) if j != r])
    return rank, r1, r5, rr, win


def test_rank_metrics_against_enumeration_and_scipy():
    rng = np.random.default_rng(0)
    E = rng.integers(0, 4, size=(40, 7)).astype(float)                        # many ties
    r = rng.integers(0, 7, 40)
    m = rank_metrics(E, r)
    for i in range(40):
        expected = brute_force(E[i], r[i])
        got = m.loc[i, ["rank", "r_at_1", "r_at_5", "reciprocal_rank", "win_rate"]].to_numpy(float)
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    np.testing.assert_allclose(m["rank"], [rankdata(E[i], method="average")[r[i]] for i in range(40)])


def test_rank_metrics_bad_input():
    with pytest.raises(DataError, match="positions"): rank_metrics(np.ones((2, 3)), np.array([0, 3]))
    with pytest.raises(DataError, match="align"): rank_metrics(np.ones((2, 3)), np.array([0]))
    with pytest.raises(DataError, match="non-finite"): rank_metrics(np.array([[1.0, np.nan]]), np.array([0]))


# ---- the protocol, restart, command line --------------------------------------------------------------------------------------

class CommandSum:
    "A model whose endpoint depends on the plan (last context latent shifted by the summed first command dimension)."
    def rollout(self, context, commands):
        return {"latents": np.repeat(context[:, -1:], commands.shape[1], 1) + commands[..., :1].sum(1, keepdims=True),
                "gate": np.zeros(commands.shape[:2])}


def test_run_ranking_resumes_and_is_byte_identical(tiny, tmp_path):
    calls = []
    def factory(name):
        def make(seed):
            calls.append((name, seed))
            if name == "crash": raise RuntimeError("killed mid-run")
            return PersistenceModel() if name == "persistence" else CommandSum()
        return make
    models = {"persistence": (factory("persistence"), False), "commands": (factory("commands"), True), "crash": (factory("crash"), False)}
    with pytest.raises(RuntimeError, match="killed"): run_ranking(tiny, tmp_path, models=models, seeds=[42, 43], n_boot=50)
    done = [c for c in calls if c[0] != "crash"]
    assert done == [("persistence", None), ("commands", 42), ("commands", 43)]
    calls.clear()
    models["crash"] = (factory("persistence"), False)                         # the "fixed" method
    first = run_ranking(tiny, tmp_path, models=models, seeds=[42, 43], n_boot=50)
    assert calls == [("persistence", None)]                                   # only the unit that had crashed
    calls.clear()
    again = run_ranking(tiny, tmp_path, models=models, seeds=[42, 43], n_boot=50)
    assert calls == [] and again["results"].read_bytes() == first["results"].read_bytes()
    payload = json.loads(first["results"].read_text())
    assert payload["experiment"] == "candidate_ranking" and payload["pins"]["candidate_set"] == first["candidates"].sha256
    rec = {(r.get("method"), r.get("seed"), r["energy"], r["metric"]): r for r in payload["records"] if "method" in r}
    assert rec[("persistence", None, "endpoint", "win_rate")]["value"] == 0.5
    assert {"ci_low", "ci_high"} <= set(rec[("commands", None, "endpoint", "r_at_1")])
    with pytest.raises(PinMismatch): run_ranking(tiny, tmp_path, models=models, pin="0" * 64, n_boot=50)


def test_command_line(tmp_path, capsys):
    p = argparse.ArgumentParser(); sub = p.add_subparsers(); add_subcommand(sub)
    args = p.parse_args(["ranking", "--size", "tiny", "--methods", "persistence", "--out", str(tmp_path), "--n-boot", "50", "--quiet"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "candidate set sha256" in out and "persistence" in out
    payload = json.loads((tmp_path / "results" / "candidate_ranking.json").read_text())
    assert payload["config"]["methods"] == ["persistence"]
    folder = tmp_path / "episodes"
    from hoi_audit.episodes import write_episodes
    write_episodes(make_episodes("tiny"), folder)
    args = p.parse_args(["ranking", "--episodes", str(folder), "--methods", "persistence", "--out", str(tmp_path / "user"),
                         "--n-boot", "20", "--quiet"])
    assert args.func(args) == 0
    same = json.loads((tmp_path / "user" / "results" / "candidate_ranking.json").read_text())
    assert same["pins"] == payload["pins"]                                    # the same episodes give the same pinned set
    args = p.parse_args(["ranking", "--size", "tiny", "--methods", "oracle", "--out", str(tmp_path)])
    with pytest.raises(HoiAuditError, match="unknown method"): args.func(args)
    args = p.parse_args(["ranking", "--size", "tiny", "--methods", "persistence", "--out", str(tmp_path / "f" / "r.json"), "--n-boot", "50",
                         "--quiet"])
    assert args.func(args) == 0                                              # --out FILE.json: that file, the store beside it
    assert sorted(p.name for p in (tmp_path / "f").iterdir()) == ["r.json", "store"]
    assert (tmp_path / "f" / "r.json").read_bytes() == (tmp_path / "results" / "candidate_ranking.json").read_bytes()
    assert f"wrote {tmp_path / 'f' / 'r.json'}" in capsys.readouterr().out


# ---- bad input ----------------------------------------------------------------------------------------------------------------

def test_bad_input(tiny):
    context, plans, success, language, ids = random_pool(P=15)
    with pytest.raises(DataError, match="at least 16"): build_candidates(context, plans, success, language, ids)
    context, plans, success, language, ids = random_pool()
    bad = context.copy(); bad[3, 0, 0] = np.nan
    with pytest.raises(DataError, match="non-finite"): build_candidates(bad, plans, success, language, ids)
    with pytest.raises(DataError, match="success"): build_candidates(context, plans, success[:-1], language, ids)
    with pytest.raises(DataError, match="duplicate"): build_candidates(context, plans, success, language, np.array(["a"] * len(ids)))
    with pytest.raises(DataError, match="no successful"): build_candidates(context, plans, np.zeros_like(success), language, ids)
    with pytest.raises(DataError, match="split 'heldout'"): heldout_pool(as_namespace(tiny, split=np.full(len(tiny), "train_full")))
    with pytest.raises(DataError, match="commands"): heldout_pool(as_namespace(tiny, commands=tiny.commands[:, :5]))
