"""Unit costs of the audit engine, recognizer-fit sharing in a reproduction, and a projection of a full one (prints; not a test).

Five parts, each runnable alone (`--part`, default all):

training    One split (split 1) of the synthetic "breakfast" preset at `--size` (full: Breakfast-sized, 1712 videos of 2048-d
            features, 14 GB in float16; small, the default: 520 videos of 64-d, about 6 min on 2 shared cores; tiny: 40 videos, about
            a minute; full is not a 10-minute run: writing the preset takes about a quarter hour), audited with the
            four_condition experiment's full-scale `AuditConfig(n_tokens=4, train=TrainConfig())` (without its 2x2 cross-test, so
            that no recognizer is fitted: a unit's training is the same): for `gt_history` and `video_only`, each on a fresh store,
            `audit_records` with 1 seed, with 3 seeds one after another, and with 3 seeds over 2 worker processes. Prints the wall
            seconds, the seconds per seed (from the units' commit times; the first includes the split's queries and pooling), the
            training throughput (train queries x epochs run / s) and the ratio 3-seed / 1-seed wall time.
batching    The same split's `gt_history` network on its real inputs: milliseconds an optimizer step (AdamW, batch 64, dropout on),
            for one network as the trainer steps it, and for 1 and 3 networks stacked with torch.func (`stack_module_state` +
            `vmap(grad_and_value)`, randomness "different"): what training the seeds of a unit together would cost per step, on
            `--device` (cpu, or cuda where torch sees one). A cost measurement, not a trainer: vmap draws every seed's dropout from
            one generator, where a trainer would need a stream per seed.
recovery    The same split: the cross-fitted recognizer fit (`RecognizerHistories().recognizer`: the all-train fit and one per
            participant fold), then BA and BFR recovery of the split's train and test queries given that fit.
fits        `--reproduce-out DIR` (the --out of `hoi-audit reproduce`): every result store below DIR/store, per experiment: the
            recognizer-fit units computed there and those copied from a peer store, the recovered-history units that read a fit,
            and the fits the engine made before fits were units (one per store, dataset and split with such history units).
projection  The full reproduction's audit-engine grids on the Breakfast-sized data (hard-coded below, with their sources) times
            the per-unit costs, over 2 processes: before (every recovered-history unit fits its recognizer) and after (one fit per
            feature set and split for the whole output folder), beside the wall times measured in docs/on_a_cluster.md.
            Training costs are this run's (part training), scaled to the full split's train queries; the fit and recovery
            costs are this run's at `--size full` (part recovery); any cost not measured here is docs/on_a_cluster.md's.
stages      (issue 49) The stage table of one split of the four_condition audit at `--size` (full: the Breakfast-sized preset):
            the import, the queries, the video-window pooling (first read, then with the features in the page cache), the
            cross-fitted recognizer fit, BA and BFR recovery of the split's train and test queries by this tree and by the first
            engine's git revision `--reference` (alternating, the faster of two each; and how many histories differ), the video's
            PCA first and cached, and a gt_history unit under each engine. Prints the recovery targets.
protocol    (issue 49) Every condition four_condition trains (`--conditions`) x `--seeds` paired seeds (42, ...), each unit trained as the
            audit trains it under TrainConfig(engine=1) and under each candidate (engine 2, and `--set K=V ...` on top of it), over
            `--workers` forked processes that share the split's histories and pooled video: unit seconds, ms a step, epochs and Act@1
            with every test history, the engine-1 seed SD and the paired difference, the training-unit target. With part stages'
            figures in the same --workdir, it prints the projection of one Breakfast-sized four_condition dataset (one draw,
            4 splits, 6 conditions x 3 seeds) on 2 cores against the 20-minute target.

Everything is written below `--workdir` (default: a new temporary folder), which is printed with its size at the end. The
machine's load average is printed too: on shared cores a wall time is only as good as it.

    .venv/bin/python bench/bench_engine.py --size tiny                       # the quick check
    .venv/bin/python bench/bench_engine.py                                   # small: parts training, recovery, projection
    .venv/bin/python bench/bench_engine.py --part fits --reproduce-out OUT
    .venv/bin/python bench/bench_engine.py --part projection
    .venv/bin/python bench/bench_engine.py --part stages --size full --workdir W         # then, on the same workdir:
    .venv/bin/python bench/bench_engine.py --part protocol --size full --workdir W       # about 25 min on 2 idle cores
    .venv/bin/python bench/bench_engine.py --part protocol --size full --workdir W --set batch_size=128 lr=2e-3 dropout=0
"""
import argparse, dataclasses, json, math, multiprocessing as mp, os, sys, tempfile, time
from dataclasses import replace
from pathlib import Path
import numpy as np
import pandas as pd
sys.path.insert(0, str(Path(__file__).parent))
from hoi_audit.conditions import CONDITIONS as CONDITION_REGISTRY, TABLE1_CONDITIONS, AuditConfig, RecognizerHistories
from hoi_audit.engine import audit_records, split_audit_queries
from hoi_audit.core import PROTOCOL_SEEDS
from hoi_audit.grammar import expected_queries
from hoi_audit.models import TrainConfig
from hoi_audit.procedural import read_mstcn
from hoi_audit.store import ResultStore, stores_below
from hoi_audit.synthetic import synthetic_dataset, write_synthetic

SPLIT = 1
CONDITIONS = ("gt_history", "video_only")
FULL_TRAIN_VIDEOS = 1284            # the full preset's split 1: 3 of its 4 participant groups (synthetic_dataset("breakfast", "full"))

# Full-size unit costs from docs/on_a_cluster.md, used by the projection where this run did not measure them (at --size full).
REFERENCE = "1b64ef6"               # the last commit of the first engine (protocol 1): part stages times its recovery beside this tree's
DOC_TRAIN_S = 48                    # sensitivity: "45 to 50 s a training" (measured, workers=2, nothing else running)
DOC_FIT_S = 30 + 5 * 15             # "reading and pooling for the fits ... 0.5 min a split", "the logistic-regression solves (10 to 20 s a fit)", 5 fits
DOC_RECOVER_S = 150                 # sensitivity: "1.5 to 3.5 min a split's recognizer recovery" (measured, nothing else running)

# The full-scale grids of the audit-engine experiments on Breakfast-sized data, from docs/on_a_cluster.md ("full: units") and the
# notebooks' parameters (nbs/experiments/*.ipynb, scale == "full": 4 splits, PROTOCOL_SEEDS). `features`: the feature sets audited,
# one recognizer fit per set and split once fits are shared: the preset (float16, shared by every experiment), four_condition's
# real-label mode (float32) and the other experiments' real-label mode (float16), each in its own OUT/raw/shared folder.
# `history`: recovered-history units that read the recognizer (source "recognizer"); `measured`: docs/on_a_cluster.md's wall time.
GRID = [
    # architectures: 6 architectures x 4 splits x 3 conditions x 3 seeds; 1 BA history a split, shared by the architectures
    dict(experiment="architectures", features=("preset",), trainings=216, history=4,
         measured="about 3 h (workers=2, shared cores, two sessions)"),
    # context_probes: 2 datasets x 4 splits x 3 probes x 3 seeds; GT histories only
    dict(experiment="context_probes", features=("preset", "labels16"), trainings=72, history=0, measured="47 min (one process, shared cores)"),
    # controls, Table 2 only: 148 trained units (36 more copied from four_condition), 1 BA history per dataset and split; Table 11's
    # six other datasets (256 units, 46 min measured) are not Breakfast-sized and are left out
    dict(experiment="controls (Table 2)", features=("preset", "labels16"), trainings=148, history=8,
         measured="about 4 h with Table 11 (workers=2, three sessions)"),
    # four_condition: 2 datasets x 4 splits x (6 conditions x 3 seeds + BA and BFR histories); 8 window units (all-train fit) left out
    dict(experiment="four_condition", features=("preset", "labels32"), trainings=144, history=16,
         measured="about 2.5 to 3 h (workers=2, loaded machine, three sessions)"),
    # horizons: 5 horizons x 2 datasets x 4 splits x (3 conditions x 3 seeds + 1 BA history); the fit does not depend on the horizon
    dict(experiment="horizons", features=("preset", "labels16"), trainings=360, history=40, measured="2 h 01 min (workers=2, idle)"),
    # sensitivity: 384 trainings; per dataset and split 15 histories, 5 from the recognizer (ba, ba_last1/2/4/8), 10 GT-derived
    dict(experiment="sensitivity", features=("preset", "labels16"), trainings=384, history=40, measured="5 h 20 min (workers=2, idle, two sessions)"),
]

def full_scale_config() -> AuditConfig:
    "four_condition's full-scale config (nbs/experiments/four_condition.ipynb), without the 2x2 cross-test that needs BA histories."
    return replace(AuditConfig(n_tokens=4, train=TrainConfig()), cross_test=())

def write_dataset(size:str, workdir:Path):
    "The preset at `size`, written as the experiment writes it (float16 at full size), and read back."
    t = time.perf_counter()
    root = write_synthetic(synthetic_dataset("breakfast", size, seed=0), workdir / f"synthetic_breakfast_{size}",
                           dtype="float16" if size == "full" else "float32")
    ds = read_mstcn(root, name="synthetic_breakfast")
    print(f"preset breakfast/{size}: {len(ds.videos)} videos written in {time.perf_counter() - t:.1f} s to {root}")
    return ds

def timed_audit(ds, condition:str, seeds, workers:int, store_dir:Path) -> dict:
    "Wall time of `audit_records` on a fresh store, the seconds between unit commits, and the units' train queries x epochs run."
    config, start = full_scale_config(), time.time()
    audit_records(ds, splits=[SPLIT], seeds=seeds, conditions=[condition], store=ResultStore(store_dir), config=config, workers=workers)
    wall = time.time() - start
    units = sorted(store_dir.rglob("condition=*/seed=*/manifest.json"), key=lambda p: p.stat().st_mtime)
    ends = [start] + [p.stat().st_mtime for p in units]
    results = [json.loads((p.parent / "result.json").read_text()) for p in units]
    return {"wall": wall, "per_seed": [b - a for a, b in zip(ends, ends[1:])], "epochs": [r["epochs_run"] for r in results],
            "query_epochs": sum(r["n_train"] * r["epochs_run"] for r in results), "n_train": results[0]["n_train"]}

def measure_training(ds, workdir:Path) -> dict:
    "Per condition: 1 seed, 3 seeds one after another, 3 seeds over 2 workers, each on a fresh store; prints the table."
    runs = {}
    print(f"\n(a) training, split {SPLIT}, full-scale TrainConfig (d=64, 2 layers, 40 epochs max, patience 5), 1 torch thread a process")
    print(f"{'condition':<11} {'run':<19} {'wall s':>8} {'per seed s':>22} {'epochs':>10} {'queries*ep/s':>13} {'x 1 seed':>9}")
    for cond in CONDITIONS:
        for label, seeds, workers in (("1 seed", PROTOCOL_SEEDS[:1], 1), ("3 seeds sequential", PROTOCOL_SEEDS, 1),
                                      ("3 seeds, 2 workers", PROTOCOL_SEEDS, 2)):
            r = runs[cond, label] = timed_audit(ds, cond, seeds, workers, workdir / "stores" / f"{cond}_{len(seeds)}x{workers}")
            per_seed = " ".join(f"{s:.1f}" for s in r["per_seed"])
            print(f"{cond:<11} {label:<19} {r['wall']:8.1f} {per_seed:>22} {','.join(map(str, r['epochs'])):>10} "
                  f"{r['query_epochs'] / r['wall']:13.0f} {r['wall'] / runs[cond, '1 seed']['wall']:9.2f}")
    n_train = runs[CONDITIONS[0], "1 seed"]["n_train"]
    unit_s = sum(runs[c, "3 seeds sequential"]["wall"] for c in CONDITIONS) / (len(CONDITIONS) * len(PROTOCOL_SEEDS))
    print(f"train queries of the split: {n_train}; a unit costs {unit_s:.1f} s (3-seed sequential wall / 3, both conditions); "
          "per seed = time between unit commits (workers: whichever finished)")
    return {"unit_s": unit_s, "n_train": n_train}

def measure_batching(ds, device:str, steps:int=60) -> dict:
    "ms per optimizer step of the split's gt_history network: one network, and 1 and 3 networks stacked and vmapped (torch.func)."
    import copy, numpy as np, torch, torch.nn.functional as F
    from torch.func import functional_call, grad_and_value, stack_module_state, vmap
    from hoi_audit.conditions import CONDITIONS
    from hoi_audit.models import AnticipationModel, _standardise, input_blocks, video_window_tokens
    config = full_scale_config()
    train_q, _ = split_audit_queries(ds, SPLIT, config)
    cond = CONDITIONS["gt_history"]
    blocks = input_blocks(ds, train_q, cond.inputs, video_tokens=video_window_tokens(ds, train_q, config.n_tokens), max_history=config.max_history)
    arrays, norm, _ = _standardise({b.name: np.asarray(b.data) for b in blocks}, np.ones(len(train_q), bool), config.train, 42)
    dev = torch.device(device)
    X = {k: (torch.as_tensor(v, dtype=torch.long) if k == "history" else torch.as_tensor((v - norm[k][0]) / norm[k][1])).to(dev)
         for k, v in arrays.items()}
    Y, n_classes = torch.as_tensor(train_q["target"].to_numpy()).to(dev), len(ds.classes)
    shapes, B = {k: tuple(v.shape[1:]) for k, v in X.items()}, config.train.batch_size
    torch.set_num_threads(config.train.threads)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    def batches(seed):
        g = torch.Generator().manual_seed(seed)
        while True:
            for i in torch.randperm(len(Y), generator=g).split(B):
                if len(i) == B: yield i.to(dev)
    def timed(step):
        for _ in range(5): step()
        sync(); t = time.perf_counter()
        for _ in range(steps): step()
        sync(); return (time.perf_counter() - t) / steps * 1e3
    torch.manual_seed(0)
    one, order = AnticipationModel(n_classes, shapes, config.train).to(dev).train(), batches(0)
    opt = torch.optim.AdamW(one.parameters(), lr=config.train.lr, weight_decay=config.train.weight_decay)
    def step_one():
        idx = next(order); loss = F.cross_entropy(one(**{k: v[idx] for k, v in X.items()}), Y[idx])
        opt.zero_grad(); loss.backward(); opt.step()
    rows = {"one network": timed(step_one)}
    for S in (1, 3):
        nets = [AnticipationModel(n_classes, shapes, config.train).to(dev).train() for _ in range(S)]
        params, buffers = stack_module_state(nets)
        base = copy.deepcopy(nets[0]).to("meta").train()
        vopt = torch.optim.AdamW(params.values(), lr=config.train.lr, weight_decay=config.train.weight_decay)
        grad = vmap(grad_and_value(lambda p, b, x, y: F.cross_entropy(functional_call(base, (p, b), (), x), y)), randomness="different")
        orders = [batches(s) for s in range(S)]
        def step_stacked():
            idx = [next(o) for o in orders]
            grads, _ = grad(params, buffers, {k: torch.stack([v[i] for i in idx]) for k, v in X.items()}, torch.stack([Y[i] for i in idx]))
            for k, p in params.items(): p.grad = grads[k]
            vopt.step()
        rows[f"{S} stacked (vmap)"] = timed(step_stacked)
    print(f"\n(a) seeds batched, split {SPLIT}, gt_history network ({', '.join(f'{k} {v}' for k, v in shapes.items())}), batch {B}, "
          f"{device}, {steps} steps, {config.train.threads} torch thread(s)")
    print(f"{'run':<20} {'ms/step':>8} {'ms/seed-step':>13} {'x one network':>14}")
    for name, ms in rows.items():
        S = int(name.split()[0]) if name[0].isdigit() else 1
        print(f"{name:<20} {ms:8.1f} {ms / S:13.1f} {ms / rows['one network']:14.2f}")
    return rows

def measure_recovery(ds) -> dict:
    "Seconds of the split's cross-fitted recognizer fit, then of BA and BFR recovery given it (train and test queries)."
    config, rh = full_scale_config(), RecognizerHistories()
    train_q, test_q = split_audit_queries(ds, SPLIT, config)
    t = time.perf_counter(); rec = rh.recognizer(ds, SPLIT, config); fit_s = time.perf_counter() - t
    t = time.perf_counter(); rh(ds, SPLIT, train_q, test_q, "ba", config); ba_s = time.perf_counter() - t
    t = time.perf_counter(); rh(ds, SPLIT, train_q, test_q, "bfr", config); bfr_s = time.perf_counter() - t
    n_videos = len(ds.splits[SPLIT]["train"]) + len(ds.splits[SPLIT]["test"])
    print(f"\n(a) recovery, split {SPLIT} ({len(rec.train_videos)} train videos, {n_videos} videos, {len(train_q)}+{len(test_q)} queries)")
    print(f"{'step':<48} {'s':>8}")
    print(f"{f'recognizer fit (all-train + {rec.folds} folds: {rec.folds + 1} LR fits)':<48} {fit_s:8.1f}")
    print(f"{'BA recovery given the fit':<48} {ba_s:8.1f}")
    print(f"{'BFR recovery given the fit':<48} {bfr_s:8.1f}")
    return {"fit_s": fit_s, "recover_s": (ba_s + bfr_s) / 2}

def fit_sharing(out:Path):
    "Per experiment below OUT/store: recognizer fits computed or copied, recovered-history units reading them, fits made before."
    rows, total = {}, {"stores": 0, "computed": 0, "copied": 0, "history": 0, "before": set()}
    for store in stores_below(out / "store"):
        exp = store.relative_to(out / "store").parts[0]
        row = rows.setdefault(exp, {"stores": 0, "computed": 0, "copied": 0, "history": 0, "before": set()})
        row["stores"] += 1
        for m in (store / "units").rglob("manifest.json"):
            manifest = json.loads(m.read_text())
            key = manifest["key"]
            if "recognizer" in key: row["copied" if "copied_from" in manifest else "computed"] += 1
            elif "history" in key and manifest["config"].get("source") == "recognizer":
                row["history"] += 1
                if "copied_from" not in manifest: row["before"].add((str(store), key["dataset"], key["split"]))
    print(f"\n(b) recognizer fits below {out / 'store'}")
    print(f"{'experiment':<30} {'stores':>6} {'fits computed':>14} {'fits copied':>12} {'history units':>14} {'fits before':>12}")
    for exp, row in sorted(rows.items()) + [("total", total)]:
        if exp != "total":
            for k in ("stores", "computed", "copied", "history"): total[k] += row[k]
            total["before"] |= row["before"]
        print(f"{exp:<30} {row['stores']:6d} {row['computed']:14d} {row['copied']:12d} {row['history']:14d} {len(row['before']):12d}")
    print("history units: recovered histories whose source is the recognizer (key history=...), computed or copied; fits before: "
          "one per store, dataset and split where such a unit was computed (each refitted in its own process)")

def full_train_queries() -> float:
    "Expected train queries of the full preset's split 1."
    return expected_queries(synthetic_dataset("breakfast", "full", seed=0), True) * FULL_TRAIN_VIDEOS

def projection(costs:dict):
    "Full audit-engine wall time on 2 processes, before and after fit sharing, per experiment in `reproduce`'s (alphabetical) order."
    train_s, fit_s, rec_s = costs["train_s"], costs["fit_s"], costs["recover_s"]
    print(f"\n(c) projection, full scale, 2 processes (ideal: CPU seconds / 2)")
    print(f"per-unit costs: training {train_s:.0f} s ({costs['train_source']}); recognizer fit {fit_s:.0f} s a split, "
          f"recovery {rec_s:.0f} s a history unit ({costs['recovery_source']})")
    print(f"{'experiment':<20} {'trainings':>9} {'histories':>9} {'fits before':>11} {'fits after':>10} {'before h':>9} {'after h':>8}  measured")
    done, sums = set(), [0.0, 0.0]
    for g in GRID:
        fits_before = g["history"]
        new = {(f, s) for f in g["features"] for s in range(1, 5)} - done if g["history"] else set()
        done |= new
        before = (g["trainings"] * train_s + g["history"] * (fit_s + rec_s)) / 2
        after = (g["trainings"] * train_s + g["history"] * rec_s + len(new) * fit_s) / 2
        sums[0] += before; sums[1] += after
        print(f"{g['experiment']:<20} {g['trainings']:9d} {g['history']:9d} {fits_before:11d} {len(new):10d} {before / 3600:9.2f} {after / 3600:8.2f}  {g['measured']}")
    print(f"{'total':<20} {sum(g['trainings'] for g in GRID):9d} {sum(g['history'] for g in GRID):9d} "
          f"{sum(g['history'] for g in GRID):11d} {len(done):10d} {sums[0] / 3600:9.2f} {sums[1] / 3600:8.2f}")
    print("left out: units copied between stores, Table 11 and scope's other datasets, window units, notebook-only experiments")

def projection_costs(training:dict|None, recovery:dict|None, size:str) -> dict:
    "Full-size per-unit costs: training scaled from this run by train queries, fit and recovery from this run at full size; else the docs'."
    costs = {"train_s": DOC_TRAIN_S, "train_source": "docs/on_a_cluster.md's full-size figure"}
    if training is not None:
        queries = full_train_queries()
        costs = {"train_s": training["unit_s"] * queries / training["n_train"],
                 "train_source": f"measured at size {size}, x{queries / training['n_train']:.1f} for the full split's ~{queries:.0f} train queries"}
    if recovery is not None and size == "full":
        return costs | recovery | {"recovery_source": "measured at size full"}
    return costs | {"fit_s": DOC_FIT_S, "recover_s": DOC_RECOVER_S, "recovery_source": "docs/on_a_cluster.md's full-size figures"}

# ---------------------------------------------------------------------------------------------------------------------------------
# Parts `protocol` and `stages` (issue 49): the engines side by side on one split, and what each stage of an audit costs.

PROTOCOL_CONDITIONS = TABLE1_CONDITIONS + ("context_only_elapsed_fraction",)   # every condition four_condition trains
BENCH_SEEDS = tuple(range(42, 48))                                           # >= 6 paired seeds: the protocol's 42-44 and three more
TARGETS = {"training unit": 1.6, "history recovery": 2.0}                     # x faster than the first engine, at the same metrics
DATASET_TARGET_MIN = 20                                                      # one Breakfast-sized four_condition dataset, 2 idle cores

def parse_knobs(items) -> dict:
    "`--set k=v ...` -> TrainConfig fields, each value parsed as the field's type."
    fields = {f.name: f.type for f in dataclasses.fields(TrainConfig)}
    out = {}
    for item in items or ():
        k, _, v = item.partition("=")
        if k not in fields or not _: raise SystemExit(f"--set {item!r}: expected k=v with k a TrainConfig field ({', '.join(fields)})")
        out[k] = {"int": int, "float": float, "bool": lambda s: s.lower() in ("1", "true", "yes")}.get(fields[k], str)(v)
    return out

def prepared_split(ds, workdir:Path, conditions) -> dict:
    "The split's queries, histories (recognizer fits and recoveries through a store in `workdir`, so a rerun reads them) and blocks."
    from hoi_audit.conditions import history_backend
    from hoi_audit.engine import _blocks_fn, _histories, _tests
    config = AuditConfig(n_tokens=4, train=TrainConfig())
    store = ResultStore(workdir / "stores" / "histories")
    train_q, test_q = split_audit_queries(ds, SPLIT, config)
    conds = [CONDITION_REGISTRY[c] for c in conditions]
    tests = {c.name: _tests(c, config) for c in conds}
    history_fn = history_backend(None, store)
    hist = {k: _histories(ds, SPLIT, train_q, test_q, k, config, history_fn, store) for k in sorted({k for t in tests.values() for k in t if k})}
    blocks = _blocks_fn(ds, train_q, test_q, hist, config)
    t = time.perf_counter(); blocks(conds[0], 0, conds[0].history); blocks(conds[0], 1, conds[0].history)   # pools the video tokens once
    print(f"split {SPLIT}: {len(train_q)} train / {len(test_q)} test queries; histories and video tokens ready "
          f"(pooling {time.perf_counter() - t:.1f} s)")
    groups = [ds.video(v).participant or v for v in train_q["video"]]
    return {"ds": ds, "config": config, "train_q": train_q, "test_q": test_q, "tests": tests, "blocks": blocks, "groups": groups,
            "conds": {c.name: c for c in conds}}

_PREPARED = {}

def _train_unit(task) -> dict:
    "One (condition, seed, engine) unit through the engine's own unit computation (`engine._unit_compute`), its fit timed apart."
    name, seed, train = task
    from hoi_audit.engine import _unit_compute
    from hoi_audit.models import fit_anticipation
    from hoi_audit.store import Unit
    p, fit_s = _PREPARED["split"], []
    def timed_fit(*args, **kw):
        t = time.perf_counter(); model = fit_anticipation(*args, **kw); fit_s.append(time.perf_counter() - t); return model
    unit = Unit({"condition": name, "seed": seed})
    compute = _unit_compute(p["ds"], timed_fit, {unit.path: p["conds"][name]}, p["tests"], p["blocks"], p["train_q"], p["test_q"], p["groups"],
                            replace(p["config"], train=train))
    t = time.perf_counter()
    result = compute(unit, None)
    steps = result["epochs_run"] * math.ceil(len(p["train_q"]) * (1 - train.val_fraction) / train.batch_size)
    return {"condition": name, "seed": seed, "engine": train.engine, "knobs": train, "unit_s": time.perf_counter() - t,
            "fit_s": fit_s[0], "epochs": result["epochs_run"], "ms_step": fit_s[0] / max(steps, 1) * 1e3,
            "act1": {k: m["act1"] for k, m in result["metrics"].items()}}

def run_units(tasks, workers:int) -> list:
    "The tasks over `workers` forked processes (they inherit the prepared split: nothing is pooled or pickled again)."
    if workers == 1: return [_train_unit(t) for t in tasks]
    with mp.get_context("fork").Pool(workers, maxtasksperchild=4) as pool:
        return list(pool.imap_unordered(_train_unit, tasks))

def paired(rows, base, cand, cond, key) -> tuple:
    "Engine-1 mean and seed SD of Act@1 under test history `key`, and the paired (candidate - base) mean and SD over seeds."
    b = {r["seed"]: r["act1"][key] for r in rows if r["condition"] == cond and r["knobs"] == base}
    c = {r["seed"]: r["act1"][key] for r in rows if r["condition"] == cond and r["knobs"] == cand}
    seeds = sorted(b.keys() & c.keys())
    d = np.array([c[s] - b[s] for s in seeds])
    base_v = np.array([b[s] for s in seeds])
    return base_v.mean(), base_v.std(ddof=1), d.mean(), d.std(ddof=1), len(seeds)

def measure_protocol(ds, workdir:Path, conditions, seeds, candidates:list, workers:int) -> dict:
    "Every condition x seed under the first engine and each candidate TrainConfig: unit seconds, ms/step and Act@1, paired by seed."
    _PREPARED["split"] = prepared_split(ds, workdir, conditions)
    base = TrainConfig(engine=1)
    configs = [base] + candidates
    tasks = [(c, s, cfg) for c in conditions for s in seeds for cfg in configs]
    t = time.perf_counter()
    rows = run_units(tasks, workers)
    print(f"\n(e) the engines side by side, split {SPLIT}, {len(seeds)} paired seeds ({', '.join(map(str, seeds))}), {workers} processes, "
          f"{time.perf_counter() - t:.0f} s wall; first engine: TrainConfig(engine=1)")
    out = {}
    for cand in candidates:
        label = ", ".join(f"{k}={v}" for k, v in cand.as_dict().items() if getattr(base, k) != v)
        print(f"\ncandidate: {label}")
        print(f"{'condition':<30} {'test hist':<9} {'unit s 1':>8} {'unit s 2':>8} {'x':>5} {'ms/step 1':>9} {'ms/step 2':>9} {'epochs 1':>8} "
              f"{'epochs 2':>8} {'Act@1 engine 1':>15} {'dAct@1 paired':>15} {'within spread':>13}")
        unit = {k: [] for k in ("base", "cand")}
        moved = []
        for cond in conditions:
            rb = [r for r in rows if r["condition"] == cond and r["knobs"] == base]
            rc = [r for r in rows if r["condition"] == cond and r["knobs"] == cand]
            unit["base"] += [r["unit_s"] for r in rb]; unit["cand"] += [r["unit_s"] for r in rc]
            for key in rb[0]["act1"]:
                m, sd, dm, dsd, n = paired(rows, base, cand, cond, key)
                ok = abs(dm) <= sd
                if not ok: moved.append(f"{cond}/{key}")
                ub, uc = np.mean([r["unit_s"] for r in rb]), np.mean([r["unit_s"] for r in rc])
                print(f"{cond:<30} {key:<9} {ub:8.1f} {uc:8.1f} {ub / uc:5.2f} {np.mean([r['ms_step'] for r in rb]):9.2f} "
                      f"{np.mean([r['ms_step'] for r in rc]):9.2f} {np.mean([r['epochs'] for r in rb]):8.1f} {np.mean([r['epochs'] for r in rc]):8.1f} "
                      f"{m:8.2f} +/-{sd:4.2f} {dm:+8.2f} +/-{dsd:4.2f} {'yes' if ok else 'NO':>13}")
        speed = np.sum(unit["base"]) / np.sum(unit["cand"])
        print(f"all units: {np.mean(unit['base']):.1f} s -> {np.mean(unit['cand']):.1f} s a unit, x{speed:.2f} faster "
              f"(target x{TARGETS['training unit']}: {'met' if speed >= TARGETS['training unit'] else 'MISSED'}); "
              f"Act@1 moved beyond the engine-1 seed SD: {', '.join(moved) or 'none'}")
        out[label] = {"rows": [{k: v for k, v in r.items() if k != "knobs"} for r in rows if r["knobs"] in (base, cand)], "speed": speed, "unit_s": float(np.mean(unit["cand"])), "base_unit_s": float(np.mean(unit["base"])), "moved": moved,
                      "per_condition_s": {c: float(np.mean([r["unit_s"] for r in rows if r["condition"] == c and r["knobs"] == cand])) for c in conditions}}
    return out

def timed_call(f) -> tuple:
    t = time.perf_counter(); out = f(); return out, time.perf_counter() - t

def measure_stages(ds, workdir:Path, reference:str) -> dict:
    "Seconds of each stage of one split's audit: import, queries, pooling, the recognizer cross-fit, BA and BFR recovery (this tree and `reference`), PCA, a unit of each engine."
    import subprocess, sys
    from hoi_audit import recovery
    from hoi_audit.conditions import RecognizerHistories
    from hoi_audit.models import _reduced_video, _REDUCED, fit_anticipation, input_blocks, video_window_tokens
    from bench_recovery import reference_module
    config, rows = AuditConfig(n_tokens=4, train=TrainConfig()), {}
    rows["import hoi_audit.engine (fresh process)"] = float(subprocess.run(
        [sys.executable, "-c", "import time; t = time.perf_counter(); import hoi_audit.engine; print(time.perf_counter() - t)"],
        capture_output=True, text=True, check=True).stdout)
    (train_q, test_q), rows["queries (train + test, causality check)"] = timed_call(lambda: split_audit_queries(ds, SPLIT, config))
    pool = lambda: (video_window_tokens(ds, train_q, 4), video_window_tokens(ds, test_q, 4))
    _, rows["video-window pooling, first read (page cache as found)"] = timed_call(pool)
    (tokens, _), rows["video-window pooling (train + test)"] = timed_call(pool)   # the features in the page cache, as an audit's later reads
    rec, rows["recognizer cross-fit (all-train + folds)"] = timed_call(lambda: RecognizerHistories().recognizer(ds, SPLIT, config))
    ref = reference_module(reference)
    both = pd.concat([train_q, test_q])
    for label, fn in (("BA", "recover_history_boundary_aware"), ("BFR", "recover_history_boundary_free")):
        seconds = {"old": [], "new": []}
        for _ in range(2):   # alternating, the faster of two each: neither side pays the first read of the features alone
            old, s = timed_call(lambda: getattr(ref, fn)(ds, both, rec)); seconds["old"].append(s)
            new, s = timed_call(lambda: getattr(recovery, fn)(ds, both, rec)); seconds["new"].append(s)
        rows[f"{label} recovery, train + test (this tree)"] = min(seconds["new"])
        rows[f"{label} recovery, train + test (git {reference})"] = min(seconds["old"])
        rows[f"{label} recovery: histories that differ"] = float(sum(a != b for a, b in zip(new, old)))
    fit_rows = np.ones(len(train_q), bool)
    _REDUCED.clear()
    _, rows["video PCA + reduction, first condition of a seed"] = timed_call(lambda: _reduced_video(tokens, fit_rows, 16, 42))
    _, rows["video PCA + reduction, the next conditions (cached)"] = timed_call(lambda: _reduced_video(tokens, fit_rows, 16, 42))
    cond = CONDITION_REGISTRY["gt_history"]
    groups = [ds.video(v).participant or v for v in train_q["video"]]
    blocks = input_blocks(ds, train_q, cond.inputs, video_tokens=tokens, max_history=config.max_history)
    for engine in (1, 2):
        _REDUCED.clear()
        m, rows[f"gt_history training unit, engine {engine} (seed 42)"] = timed_call(lambda: fit_anticipation(
            cond.condition(), blocks, train_q["target"], len(ds.classes), groups, replace(config.train, engine=engine), seed=42))
        rows[f"gt_history training unit, engine {engine}: epochs"] = float(len(m.history))
    print(f"\n(d) stages of one split's audit, split {SPLIT} ({len(train_q)} train / {len(test_q)} test queries)")
    print(f"{'stage':<58} {'s':>8}")
    for k, v in rows.items(): print(f"{k:<58} {v:8.1f}")
    for label in ("BA", "BFR"):
        x = rows[f"{label} recovery, train + test (git {reference})"] / rows[f"{label} recovery, train + test (this tree)"]
        print(f"{label} recovery x{x:.2f} faster (target x{TARGETS['history recovery']}: {'met' if x >= TARGETS['history recovery'] else 'MISSED'})")
    return rows

def dataset_projection(stages:dict, reference:str, protocol:dict|None, splits:int=4, seeds:int=3, workers:int=2):
    """One Breakfast-sized four_condition dataset (one draw, `splits` splits): per split the queries, the recognizer fit and both recoveries in
    the driver (serial, as the engine runs them), then 6 conditions x `seeds` units over `workers` processes, each pooling the video once."""
    for engine, tree in ((1, f"git {reference}"), (2, "this tree")):
        unit = (next(iter(protocol.values()))["unit_s" if engine == 2 else "base_unit_s"] if protocol
                else stages[f"gt_history training unit, engine {engine} (seed 42)"])
        serial = (stages["queries (train + test, causality check)"] + stages["recognizer cross-fit (all-train + folds)"]
                  + stages[f"BA recovery, train + test ({tree})"] + stages[f"BFR recovery, train + test ({tree})"])
        split_s = serial + stages["video-window pooling (train + test)"] + len(PROTOCOL_CONDITIONS) * seeds * unit / workers
        minutes = splits * split_s / 60
        tag = f"(target <= {DATASET_TARGET_MIN} min: {'met' if minutes <= DATASET_TARGET_MIN else 'MISSED'})" if engine == 2 else "(the first engine)"
        print(f"one Breakfast-sized four_condition dataset, engine {engine}: {minutes:.1f} min on {workers} cores {tag}; a split: "
              f"{serial:.0f} s serial (fit, recoveries), {unit:.1f} s a unit ({'part protocol' if protocol else 'gt_history, part stages'})")

def report_written(workdir:Path):
    size = sum(p.stat().st_size for p in workdir.rglob("*") if p.is_file())
    print(f"\nwrote {size / 2**20:.1f} MiB below {workdir}: {', '.join(sorted(p.name for p in workdir.iterdir())) or 'nothing'}")

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("all", "training", "batching", "recovery", "fits", "projection", "protocol", "stages"), default="all",
                    help="all: the first five; protocol and stages (the engines side by side, the stage table) run when named")
    ap.add_argument("--seeds", type=int, default=len(BENCH_SEEDS), help="paired seeds of part protocol (--first-seed, the next, ...)")
    ap.add_argument("--first-seed", type=int, default=BENCH_SEEDS[0], help="the first seed of part protocol")
    ap.add_argument("--conditions", nargs="+", default=list(PROTOCOL_CONDITIONS), help="conditions of part protocol")
    ap.add_argument("--workers", type=int, default=2, help="processes of part protocol")
    ap.add_argument("--set", nargs="*", metavar="K=V", help="TrainConfig knobs of one more candidate, on top of engine 2 (part protocol)")
    ap.add_argument("--reference", default=REFERENCE, help="git revision of the first engine's recovery (part stages)")
    ap.add_argument("--size", choices=("tiny", "small", "full"), default="small", help="preset size of parts training and recovery")
    ap.add_argument("--reproduce-out", type=Path, help="a `hoi-audit reproduce --out` folder (part fits)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where part batching steps the networks")
    ap.add_argument("--workdir", type=Path, help="where data and stores are written (default: a new temporary folder)")
    a = ap.parse_args()
    parts = {"training", "batching", "recovery", "fits", "projection"} if a.part == "all" else {a.part}
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="bench_engine_"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; workdir {workdir}")
    training = recovery = None
    if parts & {"training", "batching", "recovery"}:
        ds = write_dataset(a.size, workdir)
        if "training" in parts: training = measure_training(ds, workdir)
        if "batching" in parts: measure_batching(ds, a.device)
        if "recovery" in parts: recovery = measure_recovery(ds)
    if "fits" in parts:
        if a.reproduce_out: fit_sharing(a.reproduce_out)
        elif a.part == "fits": raise SystemExit("--part fits needs --reproduce-out DIR")
        else: print("\n(b) skipped: no --reproduce-out")
    if "projection" in parts: projection(projection_costs(training, recovery, a.size))
    if a.part in ("protocol", "stages"):   # each part keeps its figures in the workdir; the projection needs both
        ds = write_dataset(a.size, workdir)
        seeds = tuple(range(a.first_seed, a.first_seed + a.seeds))
        default = seeds == BENCH_SEEDS and tuple(a.conditions) == PROTOCOL_CONDITIONS   # another grid keeps its own file: the projection reads the default's
        saved = {p: workdir / f"bench_{p}{'' if p == 'stages' or default else '_' + '_'.join(a.conditions) + f'_seeds{seeds[0]}-{seeds[-1]}'}.json"
                 for p in ("stages", "protocol")}
        if a.part == "stages":
            saved["stages"].write_text(json.dumps(measure_stages(ds, workdir, a.reference)))
        else:
            candidates = [TrainConfig()] + ([replace(TrainConfig(), **parse_knobs(a.set))] if a.set else [])
            saved["protocol"].write_text(json.dumps(measure_protocol(ds, workdir, a.conditions, seeds, candidates, a.workers)))
        if default and all(f.exists() for f in saved.values()):
            dataset_projection(json.loads(saved["stages"].read_text()), a.reference, json.loads(saved["protocol"].read_text()))
        else:
            print(f"\nthe dataset projection needs both parts: run --part {'protocol' if a.part == 'stages' else 'stages'} with --workdir {workdir}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    report_written(workdir)

if __name__ == "__main__":
    main()
