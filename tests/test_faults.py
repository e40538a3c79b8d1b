"""Every fault of docs/reliability.md, a test each: bad input gets a named error (exit 2) or a documented record, no traceback reaches a
user without --debug, no process outlives its command, no output is silently replaced, and every file is whole or absent.
Each test's docstring is its row of the fault table: "fault -> behaviour" (tests/test_docs.py checks that the table lists them all)."""
import json, os, random, resource, signal, subprocess, sys, textwrap, time
from pathlib import Path
import numpy as np
import pytest
from conftest import hoi_audit
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
    "A writer killed with SIGKILL at an arbitrary moment -> the file is the old or the new one, never torn."
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
    "Two workers on one store (two SLURM array tasks) -> they split the units, each computed exactly once."
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
    "A worker killed inside a unit -> no visible unit; the next run recomputes it and nothing else."
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
    "A store unit whose manifest.json is missing -> ManifestError naming it; status says corrupt."
    store, unit = ResultStore(tmp_path), Unit({"i": 0})
    store.run([unit], lambda u, w: 1, progress=False)
    (store.unit_dir(unit) / "manifest.json").unlink()
    with pytest.raises(ManifestError, match=r"manifest\.json is missing"): store.run([unit], lambda u, w: 1, progress=False)
    assert store.status()["state"].tolist() == ["corrupt"]

def test_corrupt_manifest_is_a_clear_error(tmp_path):
    "A store unit whose manifest is not JSON, or lacks its keys -> ManifestError naming the problem."
    store, unit = ResultStore(tmp_path), Unit({"i": 0})
    store.run([unit], lambda u, w: 1, progress=False)
    (store.unit_dir(unit) / "manifest.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not valid JSON"): store.load(unit)
    (store.unit_dir(unit) / "manifest.json").write_text(json.dumps({"key": {}}))
    with pytest.raises(ManifestError, match="lacks key/config/inputs/outputs"): store.run([unit], lambda u, w: 1, progress=False)

def test_changed_config_makes_a_unit_stale(tmp_path):
    "A unit computed under another config -> stale, recomputed; never loaded as if current."
    store = ResultStore(tmp_path)
    store.run([Unit({"i": 0}, config={"lr": 0.1})], lambda u, w: 1, progress=False)
    assert store.state(Unit({"i": 0}, config={"lr": 0.2})) == "stale"
    assert store.run([Unit({"i": 0}, config={"lr": 0.2})], lambda u, w: 2, progress=False) == [2]

def test_pin_mismatch_shows_both_hashes(tmp_path):
    "An input that does not match its SHA-256 pin -> PinMismatch naming the file and both hashes."
    f = tmp_path / "split.bundle"
    f.write_text("a\nb\n")
    pinned = sha256_file(f)
    f.write_text("a\nc\n")
    with pytest.raises(PinMismatch) as e: verify(f, pinned)
    assert pinned in str(e.value) and sha256_file(f) in str(e.value) and "split.bundle" in str(e.value)
    with pytest.raises(PinMismatch, match="episode_ids"): verify(np.arange(3), sha256_array(np.arange(4)), name="episode_ids")

def test_unknown_source_in_a_condition():
    "A condition or block naming an unknown provenance source -> ProvenanceError naming it."
    with pytest.raises(ProvenanceError, match="unknown source 'groundtruth'"): Condition("gt", {"video", "groundtruth"})
    with pytest.raises(ProvenanceError, match="unknown source 'label'"): Block("history", "label", np.zeros(3))

def test_deployable_condition_refuses_oracle_block():
    "An oracle block handed to a deployable condition -> ProvenanceError naming the block."
    rec = Condition("recognizer_history", {"video", "recognizer"})
    with pytest.raises(ProvenanceError, match="'future_latent'"):
        rec.assemble([Block("window", "video", np.ones((2, 2))), Block("future_latent", "oracle", np.ones((2, 2)))])

def test_unwritable_output_folder(tmp_path):
    "A file where an output folder should be, or a read-only folder -> OutputError naming it."
    blocker = tmp_path / "results"
    blocker.write_text("a file where the results folder should be")
    with pytest.raises(OutputError, match="results"): write_json(blocker / "x.json", {"a": 1})
    with pytest.raises(OutputError): ResultStore(blocker / "store").run([Unit({"i": 0})], lambda u, w: 1, progress=False)
    if os.geteuid() != 0:   # root ignores permission bits
        ro = tmp_path / "ro"; ro.mkdir(); ro.chmod(0o500)
        with pytest.raises(OutputError, match="ro"): write_npy(ro / "a.npy", np.ones(2))

def test_library_imports_without_nbdev_or_fastcore():
    "The library imported without the dev tools (nbdev, fastcore, execnb) -> imports cleanly."
    code = ("import sys; sys.modules['nbdev'] = None; sys.modules['fastcore'] = None; sys.modules['execnb'] = None\n"
            "import hoi_audit.core, hoi_audit.runner\nimport pkgutil, importlib, hoi_audit\n"
            "[importlib.import_module(f'hoi_audit.{m.name}') for m in pkgutil.iter_modules(hoi_audit.__path__)]")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

# ------------------------------------------------------------------------------------------------------------- the guard (runner.main)

def _no_traceback(r): return "Traceback" not in r.stderr

def test_long_out_component_is_a_named_error(tmp_path):
    "An --out with a 256-character component -> `hoi-audit: error: PATH: File name too long`, exit 2, no traceback."
    out = tmp_path / ("x" * 256)
    r = hoi_audit("probes", "--real", "gtea", "--splits", "1", "--predictors", "majority", "--out", str(out), cwd=tmp_path)
    assert r.returncode == 2 and _no_traceback(r), r.stderr
    assert r.stderr.startswith(f"hoi-audit: error: ") and f"{out}: File name too long" in r.stderr, r.stderr

def _file_size_limit(limit:int):
    def set_limit():   # a write past `limit` bytes fails as a full disk does (EFBIG instead of ENOSPC), with SIGXFSZ ignored
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return set_limit

def test_full_disk_names_the_file_and_leaves_no_partial_file(tmp_path, labels_dir):
    "A write that fails half-way (no space: here a file-size limit) -> `hoi-audit: error: PATH: reason`, exit 2; nothing torn is left."
    out = tmp_path / "o"
    exe = Path(sys.executable).parent / "hoi-audit"
    r = subprocess.run([str(exe), "probes", "--real", "gtea", "--splits", "1", "--predictors", "majority", "--out", str(out)],
                       capture_output=True, text=True, cwd=tmp_path, preexec_fn=_file_size_limit(300))
    assert r.returncode == 2 and _no_traceback(r), r.stderr
    assert f"cannot write {out / 'results' / 'decomposition.json'}: File too large" in r.stderr, r.stderr
    assert [p for p in out.rglob("*") if p.is_file()] == []                      # the results file is absent, not half-written

def test_unexpected_exception_is_one_line_and_exit_3(tmp_path, monkeypatch, capsys):
    "A bug (an exception the package did not name) -> one line `hoi-audit: error: internal error: ...`, exit 3; --debug adds the traceback."
    import hoi_audit.runner as runner
    monkeypatch.setattr(runner, "store_status", lambda path: {}["split"])
    assert runner.main(["status", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert err == "hoi-audit: error: internal error: KeyError: 'split' (run again with --debug for the traceback)\n", err
    assert runner.main(["status", str(tmp_path), "--debug"]) == 3
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.endswith("hoi-audit: error: internal error: KeyError: 'split'\n")
    monkeypatch.setenv("HOI_AUDIT_DEBUG", "1")
    assert runner.main(["status", str(tmp_path)]) == 3 and "Traceback" in capsys.readouterr().err

def test_exit_statuses_are_documented():
    "A user asking what the exit status means -> `hoi-audit --help` lists 0 ok, 1 findings, 2 usage or data error, 3 internal error."
    r = hoi_audit("--help")
    assert r.returncode == 0
    for line in ("0  success", "1  findings", "2  usage or data error", "3  internal error"): assert line in r.stdout, r.stdout

@pytest.mark.parametrize("option", [["--epochs", "0"], ["--window", "-5"], ["--tokens", "0"], ["--d-model", "7"], ["--seeds", "-1"],
                                    ["--splits", "x"]], ids=lambda o: " ".join(o))
def test_bad_option_value_is_a_named_error(tmp_path, capsys, option):
    "A bad option value (--epochs 0, --window -5, --tokens 0, --d-model 7, --seeds -1, --splits x) -> exit 2 with the check's message, no traceback."
    from hoi_audit.runner import main
    data = _mstcn(tmp_path / "data")
    status = main(["audit", str(data), "--conditions", "video_only", "--splits", "1", "--seeds", "42", "--epochs", "1", "--tokens", "2",
                   "--d-model", "16", "--out", str(tmp_path / "o"), *option])
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err and "internal error" not in err, err
    assert err.startswith("hoi-audit: error: ") and option[1].lstrip("-") in err.splitlines()[0], err

# ------------------------------------------------------------------------------------------------------------- one writer per output

HOLD = textwrap.dedent("""
    import sys, time
    from hoi_audit.runner import build_parser, output_claim
    with output_claim(build_parser().parse_args(sys.argv[1:])):
        print("held", flush=True); time.sleep(120)
""")

def _claims(out:Path) -> list: return sorted(out.glob(".hoi-audit.*.claim"))

def test_concurrent_run_with_other_settings_is_refused(tmp_path):
    "Two runs with different settings into one --out at the same time -> the second is refused (exit 2), naming the first; no file replaced."
    out, probes = tmp_path / "o", ["probes", "--real", "gtea", "--splits", "1", "--out"]
    first = subprocess.Popen([sys.executable, "-c", HOLD, *probes, str(out), "--predictors", "majority"], stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "held"
        r = hoi_audit(*probes, str(out), "--predictors", "bigram", cwd=tmp_path)
        assert r.returncode == 2 and _no_traceback(r), r.stderr
        assert f"{out}: another run with other settings is writing probes here (pid {first.pid}" in r.stderr, r.stderr
        assert not (out / "results").exists()                                   # refused before anything was computed
        r = hoi_audit(*probes, str(out / "mine.json"), "--predictors", "bigram", cwd=tmp_path)   # another results file: independent
        assert r.returncode == 0, r.stderr
    finally: first.kill(); first.wait()

def test_concurrent_run_with_the_same_settings_shares_the_output(tmp_path):
    "Two runs with the same settings into one --out -> both run (they share the store, the results are the same bytes)."
    out, probes = tmp_path / "o", ["probes", "--real", "gtea", "--splits", "1", "--predictors", "majority", "--out"]
    first = subprocess.Popen([sys.executable, "-c", HOLD, *probes, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "held"
        r = hoi_audit(*probes, str(out), cwd=tmp_path)
        assert r.returncode == 0 and (out / "results" / "decomposition.json").exists(), r.stderr
        assert len(_claims(out)) == 1                                           # the first run's claim, still held
    finally: first.kill(); first.wait()

def test_claim_of_a_killed_run_does_not_block_the_next(tmp_path):
    "A run killed with SIGKILL while it holds its output -> its claim holds no lock; the next run (other settings) proceeds and removes it."
    out, probes = tmp_path / "o", ["probes", "--real", "gtea", "--splits", "1", "--out"]
    first = subprocess.Popen([sys.executable, "-c", HOLD, *probes, str(out), "--predictors", "majority"], stdout=subprocess.PIPE, text=True)
    assert first.stdout.readline().strip() == "held"
    first.send_signal(signal.SIGKILL); first.wait()
    assert len(_claims(out)) == 1
    r = hoi_audit(*probes, str(out), "--predictors", "bigram", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert _claims(out) == []

# ------------------------------------------------------------------------------------------------------------- bad data, named

def _mstcn(root:Path, n_videos:int=6, frames:int=60, dim:int=8) -> Path:
    "A tiny MS-TCN folder with features: SIL + 3 actions, split 1 (4 train, 2 test)."
    from hoi_audit.procedural import write_mstcn
    rng = np.random.default_rng(0)
    classes = ["SIL", "take_cup", "pour_milk", "stir_milk"]
    labels = {f"v{i}": [0] * 10 + [1] * 15 + [2] * 15 + [3] * (frames - 40) for i in range(n_videos)}
    names = list(labels)
    return write_mstcn(root, labels, classes, {1: {"train": names[:4], "test": names[4:]}},
                       features={v: rng.normal(size=(frames, dim)).astype(np.float32) for v in names}, feature_layout="DxT")

def _audit(data:Path, out:Path, capsys) -> tuple[int, str]:
    from hoi_audit.runner import main
    status = main(["audit", str(data), "--conditions", "video_only", "--splits", "1", "--seeds", "42", "--epochs", "1",
                   "--tokens", "2", "--d-model", "16", "--out", str(out)])
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return status, err

def _break_label(root:Path):
    p = root / "groundTruth" / "v1.txt"; lines = p.read_text().splitlines(); lines[20] = "pour_mlik"; p.write_text("\n".join(lines) + "\n")

def _break_length(root:Path):
    np.save(root / "features" / "v2.npy", np.zeros((8, 30), np.float32))

def _break_nan(root:Path):
    a = np.load(root / "features" / "v4.npy"); a[:, 33] = np.nan; np.save(root / "features" / "v4.npy", a)

def _break_npy(root:Path):
    (root / "features" / "v3.npy").write_bytes(b"not an array")

def _break_bundle(root:Path):
    with open(root / "splits" / "test.split1.bundle", "a") as f: f.write("v9.txt\n")

def _break_leak(root:Path):
    with open(root / "splits" / "test.split1.bundle", "a") as f: f.write("v0.txt\n")

def _break_mapping(root:Path): (root / "mapping.txt").unlink()

def _break_feature_file(root:Path): (root / "features" / "v5.npy").unlink()

@pytest.mark.parametrize("fault, expected", [
    (_break_label, "groundTruth/v1.txt: line 21 has label 'pour_mlik', which is not in the mapping"),
    (_break_length, "features/v2.npy: feature/label length mismatch"),
    (_break_nan, "features/v4.npy: 8 NaN/inf feature values, the first at frame 33"),
    (_break_npy, "features/v3.npy: not a readable .npy array"),
    (_break_bundle, "test.split1.bundle: 1 videos have no label file"),
    (_break_leak, "split 1 lists 1 videos in both train and test"),
    (_break_mapping, "mapping.txt: mapping file not found"),
    (_break_feature_file, "videos have labels but no feature file, e.g. v5.npy"),
], ids=["unknown_label", "length_mismatch", "nan_features", "unreadable_npy", "bundle_names_missing_video", "train_test_leak",
        "missing_mapping", "missing_feature_file"])
def test_bad_mstcn_input_is_a_named_error(tmp_path, capsys, fault, expected):
    "Bad MS-TCN input (unknown label, length mismatch, NaN/inf features, unreadable .npy, a bundle naming a missing video, a train/test leak, no mapping.txt, a missing feature file) -> exit 2 naming the file and the problem."
    data = _mstcn(tmp_path / "data")
    fault(data)
    status, err = _audit(data, tmp_path / "o", capsys)
    assert status == 2 and err.startswith("hoi-audit: error: ") and expected in err, err

def test_missing_dataset_folder_is_a_named_error(tmp_path, capsys):
    "A data folder that does not exist -> exit 2: `PATH: dataset folder not found`; nothing written."
    status, err = _audit(tmp_path / "nowhere", tmp_path / "o", capsys)
    assert status == 2 and f"{tmp_path / 'nowhere'}: dataset folder not found" in err, err
    assert not (tmp_path / "o").exists()
