"Faults and bad input for the core: torn writes, concurrent stores, damaged manifests, pins, provenance, unwritable outputs."
import json, os, random, signal, subprocess, sys, textwrap, time
from pathlib import Path
import numpy as np
import pytest
from hoi_audit.core import (ManifestError, OutputError, PinMismatch, ProvenanceError, sha256_array, sha256_file, verify,
                            write_bytes, write_json, write_npy)
from hoi_audit.provenance import Block, Condition
from hoi_audit.store import ResultStore, Unit

WRITER = textwrap.dedent("""
    import sys
    from hoi_audit.core import write_bytes
    path, size = sys.argv[1], int(sys.argv[2])
    i = 0
    while True:
        i += 1
        write_bytes(path, bytes([i % 251]) * size)
""")

@pytest.mark.parametrize("delay", [0.3, 0.55, 0.8, 1.1, 1.4])
def test_sigkill_mid_write_leaves_old_or_new(tmp_path, delay):
    "A writer killed with SIGKILL at an arbitrary moment leaves a complete file, never a torn one."
    target, size = tmp_path / "big.bin", 4 << 20
    write_bytes(target, bytes([0]) * size)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target), str(size)])
    time.sleep(delay + random.random() * 0.05)
    proc.send_signal(signal.SIGKILL); proc.wait()
    data = target.read_bytes()
    assert len(data) == size, f"torn file: {len(data)} of {size} bytes"
    assert data.count(data[:1]) == size, "torn file: mixed content from two writes"

def _store_worker(root: Path, log: Path, go: Path, ready: Path) -> str:
    return textwrap.dedent(f"""
        import os, time
        from pathlib import Path
        from hoi_audit.store import ResultStore, Unit
        Path({str(ready)!r}).touch()
        while not Path({str(go)!r}).exists(): time.sleep(0.01)
        def compute(unit, workdir):
            with open({str(log)!r}, "a") as f: f.write(f"{{unit.path}} {{os.getpid()}}\\n")
            time.sleep(0.15)
            return {{"value": unit.key["i"] * 10}}
        units = [Unit({{"i": i}}, inputs={{"x": str(i)}}) for i in range(12)]
        out = ResultStore({str(root)!r}).run(units, compute, progress=False)
        assert out == [{{"value": i * 10}} for i in range(12)], out
    """)

def test_two_processes_share_a_store_without_clobbering(tmp_path):
    "Two workers on one store (two SLURM array tasks) split the units and compute each exactly once."
    root, log, go = tmp_path / "store", tmp_path / "log.txt", tmp_path / "go"
    procs = []
    for k in range(2):
        ready = tmp_path / f"ready{k}"
        procs.append((subprocess.Popen([sys.executable, "-c", _store_worker(root, log, go, ready)]), ready))
    deadline = time.time() + 60
    while not all(r.exists() for _, r in procs):
        assert time.time() < deadline, "workers did not start"
        time.sleep(0.02)
    go.touch()
    for p, _ in procs: assert p.wait(timeout=120) == 0
    lines = [l.split() for l in log.read_text().splitlines()]
    computed = [unit for unit, _ in lines]
    assert sorted(computed) == sorted(f"i={i}" for i in range(12)), f"a unit was computed twice or never: {computed}"
    assert len({pid for _, pid in lines}) == 2, "one worker did all the work: the store serialised the two processes"
    assert (ResultStore(root).status()["state"] == "done").all()

def test_killed_unit_is_pending_then_recomputed(tmp_path):
    "A worker killed inside a unit leaves no visible unit; the next run recomputes it and nothing else."
    root = tmp_path / "store"
    script = textwrap.dedent(f"""
        import os, signal
        from hoi_audit.store import ResultStore, Unit
        def compute(unit, workdir):
            (workdir / "partial.npy").write_bytes(b"half")
            if unit.key["i"] == 2: os.kill(os.getpid(), signal.SIGKILL)
            return unit.key["i"]
        ResultStore({str(root)!r}).run([Unit({{"i": i}}) for i in range(4)], compute, progress=False)
    """)
    assert subprocess.run([sys.executable, "-c", script]).returncode == -signal.SIGKILL
    store = ResultStore(root)
    units = [Unit({"i": i}) for i in range(4)]
    assert [store.state(u) for u in units] == ["done", "done", "pending", "pending"]
    before = {u.path: sha256_file(store.unit_dir(u) / "manifest.json") for u in units[:2]}
    calls = []
    assert store.run(units, lambda u, w: calls.append(u.key["i"]) or u.key["i"], progress=False) == [0, 1, 2, 3]
    assert calls == [2, 3]
    assert before == {u.path: sha256_file(store.unit_dir(u) / "manifest.json") for u in units[:2]}
    assert not list((root / ".tmp").iterdir()), "the killed writer's scratch folder was not cleaned"

def test_missing_manifest_is_a_clear_error(tmp_path):
    store, unit = ResultStore(tmp_path), Unit({"i": 0})
    store.run([unit], lambda u, w: 1, progress=False)
    (store.unit_dir(unit) / "manifest.json").unlink()
    with pytest.raises(ManifestError, match=r"manifest\.json is missing"): store.run([unit], lambda u, w: 1, progress=False)
    assert store.status()["state"].tolist() == ["corrupt"]

def test_corrupt_manifest_is_a_clear_error(tmp_path):
    store, unit = ResultStore(tmp_path), Unit({"i": 0})
    store.run([unit], lambda u, w: 1, progress=False)
    (store.unit_dir(unit) / "manifest.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not valid JSON"): store.load(unit)
    (store.unit_dir(unit) / "manifest.json").write_text(json.dumps({"key": {}}))
    with pytest.raises(ManifestError, match="lacks key/config/inputs/outputs"): store.run([unit], lambda u, w: 1, progress=False)

def test_changed_config_makes_a_unit_stale(tmp_path):
    store = ResultStore(tmp_path)
    store.run([Unit({"i": 0}, config={"lr": 0.1})], lambda u, w: 1, progress=False)
    assert store.state(Unit({"i": 0}, config={"lr": 0.2})) == "stale"
    assert store.run([Unit({"i": 0}, config={"lr": 0.2})], lambda u, w: 2, progress=False) == [2]

def test_pin_mismatch_shows_both_hashes(tmp_path):
    f = tmp_path / "split.bundle"
    f.write_text("a\nb\n")
    pinned = sha256_file(f)
    f.write_text("a\nc\n")
    with pytest.raises(PinMismatch) as e: verify(f, pinned)
    assert pinned in str(e.value) and sha256_file(f) in str(e.value) and "split.bundle" in str(e.value)
    with pytest.raises(PinMismatch, match="episode_ids"): verify(np.arange(3), sha256_array(np.arange(4)), name="episode_ids")

def test_unknown_source_in_a_condition():
    with pytest.raises(ProvenanceError, match="unknown source 'groundtruth'"): Condition("gt", {"video", "groundtruth"})
    with pytest.raises(ProvenanceError, match="unknown source 'label'"): Block("history", "label", np.zeros(3))

def test_deployable_condition_refuses_oracle_block():
    rec = Condition("recognizer_history", {"video", "recognizer"})
    with pytest.raises(ProvenanceError, match="'future_latent'"):
        rec.assemble([Block("window", "video", np.ones((2, 2))), Block("future_latent", "oracle", np.ones((2, 2)))])

def test_unwritable_output_folder(tmp_path):
    blocker = tmp_path / "results"
    blocker.write_text("a file where the results folder should be")
    with pytest.raises(OutputError, match="results"): write_json(blocker / "x.json", {"a": 1})
    with pytest.raises(OutputError): ResultStore(blocker / "store").run([Unit({"i": 0})], lambda u, w: 1, progress=False)
    if os.geteuid() != 0:   # root ignores permission bits
        ro = tmp_path / "ro"; ro.mkdir(); ro.chmod(0o500)
        with pytest.raises(OutputError, match="ro"): write_npy(ro / "a.npy", np.ones(2))

def test_library_imports_without_nbdev_or_fastcore():
    code = ("import sys; sys.modules['nbdev'] = None; sys.modules['fastcore'] = None; sys.modules['execnb'] = None\n"
            "import hoi_audit.core, hoi_audit.runner\nimport pkgutil, importlib, hoi_audit\n"
            "[importlib.import_module(f'hoi_audit.{m.name}') for m in pkgutil.iter_modules(hoi_audit.__path__)]")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
