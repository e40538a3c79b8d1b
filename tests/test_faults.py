"""Every fault of docs/reliability.md, a test each: bad input gets a named error (exit 2) or a documented record, no traceback reaches a
user without --debug, no process outlives its command, no output is silently replaced, and every file is whole or absent.
Each test's docstring is its row of the fault table: "fault -> behaviour" (tests/test_docs.py checks that the table lists them all)."""
import json, os, random, resource, shutil, signal, subprocess, sys, textwrap, time
from pathlib import Path
import numpy as np
import pandas as pd
import pytest
from conftest import REPO, _state, descendants, hoi_audit, write_tiny_mstcn as _mstcn
from hoi_audit.cluster import ClusterConfig, SlurmBackend, UnitShard
from hoi_audit.core import (DataError, ManifestError, OutputError, PinMismatch, ProvenanceError, sha256_array, sha256_file, verify,
                            write_bytes, write_json, write_npy)
from hoi_audit.decode import open_decord
from hoi_audit.epic import NOTE_KINDS, extract, read_narrations
from hoi_audit.procedural import read_for_command, read_mstcn, safe_name, write_mstcn
from hoi_audit.provenance import Block, Condition
from hoi_audit.results import check_results, metric_kind, write_results
from hoi_audit.runner import main
from hoi_audit.store import ResultStore, Unit
from hoi_audit.synthetic import synthetic_dataset, write_synthetic

# ------------------------------------------------------------------------------------------------------------- files and stores: whole or absent

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

# ------------------------------------------------------------------------------------------------------------- checked before anything runs: preflight and names
# Faults in a user's data folder (issue 32): each ends in one `hoi-audit: error:` naming every bad file, before any unit is computed,
# or, for a folder name that cannot key stored results, in a safe name and a note. Each test builds a tiny MS-TCN folder.

CHEAP = ["--splits", "1", "--seeds", "42", "--tokens", "2", "--epochs", "1", "--d-model", "16"]   # the cheapest audit-engine run

@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    "A tiny synthetic Breakfast-like MS-TCN folder with features (two splits)."
    return write_synthetic(synthetic_dataset("breakfast", "tiny", seed=0), tmp_path_factory.mktemp("tiny") / "breakfast")

@pytest.fixture
def data(tiny_folder, tmp_path) -> Path:
    "A private copy of the tiny folder, free to break."
    d = tmp_path / "data" / "breakfast"
    shutil.copytree(tiny_folder, d)
    return d

def shrink_dim(folder:Path, video:str, by:int=4) -> Path:
    "Rewrite one video's feature file with `by` fewer feature dimensions; return its path."
    v = read_mstcn(folder).video(video)
    v.labels                                              # reads the header: which axis is time
    x = np.load(v.feature_path)
    np.save(v.feature_path, x[:-by] if v._time_axis == 1 else x[:, :-by])
    return v.feature_path

def run(capsys, *argv) -> tuple:
    "`hoi-audit ARGV` in this process: (exit status, stdout, stderr)."
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err

def no_unit_under(out:Path) -> bool:
    return not any(p.name == "units" for p in out.rglob("units")) if out.exists() else True

def test_mixed_feature_dimension_is_named_before_any_unit(data, tmp_path, capsys):
    "feature files of two dimensions -> one error naming each D with its files, before the first unit (no sklearn/numpy traceback)"
    video = read_mstcn(data).splits[2]["test"][0]
    bad = shrink_dim(data, video)
    dim = read_mstcn(data).video(video).feature_dim
    rc, _, err = run(capsys, "audit", data, "--out", tmp_path / "o", *CHEAP[2:])
    assert rc == 2 and err.startswith("hoi-audit: error:") and "Traceback" not in err, err
    assert "feature dimensions differ between videos" in err and f"D={dim} in 1 file ({bad.name})" in err, err
    assert no_unit_under(tmp_path / "o")

@pytest.mark.parametrize("command", ["controls", "sensitivity", "horizons", "context-probes", "lta"])
def test_mixed_feature_dimension_stops_every_feature_command(command, data, tmp_path, capsys):
    "feature files of two dimensions -> every command reading one folder's features stops before its first unit, naming the file"
    bad = shrink_dim(data, read_mstcn(data).videos[-1])
    rc, _, err = run(capsys, command, data, "--out", tmp_path / "o", "--seeds", "42", "--epochs", "1")
    assert rc == 2 and "feature dimensions differ" in err and bad.name in err and "Traceback" not in err, err
    assert no_unit_under(tmp_path / "o")

def test_empty_split_bundle_is_found_before_split_1_runs(data, tmp_path, capsys):
    "an empty test.split2.bundle -> an error naming that bundle before split 1 is computed"
    (data / "splits" / "test.split2.bundle").write_text("")
    rc, _, err = run(capsys, "audit", data, "--out", tmp_path / "o", *CHEAP[2:])
    assert rc == 2 and "test.split2.bundle: empty (split 2 has no test videos)" in err, err
    assert no_unit_under(tmp_path / "o")

def test_every_problem_is_listed_at_once(tmp_path, capsys):
    "many bad label files, an empty bundle and a mixed D -> one error: the first 20 problems, each naming its file, then '... and N more'"
    videos = [f"v{i:02d}" for i in range(26)]
    labels = {v: ["SIL", "cut"] * 12 for v in videos}
    feats = {v: np.zeros((24, 8 if v != "v01" else 6), np.float32) for v in videos}   # T x D: 24 frames, D=8 (v01: 6)
    root = write_mstcn(tmp_path / "many", labels, ["SIL", "cut"], {1: {"train": videos, "test": []}}, features=feats)
    for v in videos[2:]: (root / "groundTruth" / f"{v}.txt").write_text("SIL\nstir\n" * 6)
    rc, _, err = run(capsys, "audit", root, "--out", tmp_path / "o", *CHEAP[2:])
    assert rc == 2 and "26 problems" in err and "... and 6 more" in err, err
    assert "test.split1.bundle: empty" in err and f"{root / 'groundTruth' / 'v02.txt'}: line 2 has label 'stir'" in err, err
    assert "D=8 in 1 file (v00.npy); D=6 in 1 file (v01.npy)" in err or "D=6 in 1 file (v01.npy); D=8 in 1 file (v00.npy)" in err, err
    assert no_unit_under(tmp_path / "o")

def test_preflight_reads_feature_headers_not_values(data):
    "a NaN in a feature file -> preflight passes (headers only; the NaN check stays lazy) and the first read still names it"
    ds = read_mstcn(data)
    v = ds.video(ds.videos[0])
    x = np.load(v.feature_path); x.flat[5] = np.nan; np.save(v.feature_path, x)
    ds = read_mstcn(data)
    summary = ds.preflight()
    assert len(summary) == len(ds.videos) and summary["feature_dim"].nunique() == 1
    with pytest.raises(DataError, match="NaN/inf"): ds.video(ds.videos[0]).features()

def test_folder_name_with_non_ascii_letters_is_made_safe_and_noted(tiny_folder, tmp_path, capsys):
    "a data folder named 'données' -> the audit runs as dataset 'donnees', notes it on stderr, and records it in the results config"
    data = tmp_path / "données"
    shutil.copytree(tiny_folder, data)
    rc, _, err = run(capsys, "audit", data, "--out", tmp_path / "o", "--conditions", "recognizer_ba,gt_history", *CHEAP)
    assert rc == 0, err
    assert "hoi-audit: note: the folder name 'données'" in err and "'donnees'" in err, err
    config = json.loads((tmp_path / "o" / "results" / "four_condition.json").read_text())["config"]
    assert (config["dataset_name"], config["folder_name"]) == ("donnees", "données")

def test_folder_name_with_a_space_is_made_safe_for_label_commands(tiny_folder, tmp_path, capsys):
    "a data folder named 'my data' -> probes runs as dataset 'my_data' with a note, and its results config says so"
    data = tmp_path / "my data"
    shutil.copytree(tiny_folder, data)
    rc, _, err = run(capsys, "probes", data, "--out", tmp_path / "o", "--splits", "1", "--predictors", "majority")
    assert rc == 0 and "hoi-audit: note:" in err and "'my_data'" in err, err
    saved = json.loads((tmp_path / "o" / "results" / "decomposition.json").read_text())
    assert saved["config"]["dataset_names"]["my_data"]["folder_name"] == "my data"

@pytest.mark.parametrize("command", ["audit", "controls", "lta", "probes"])
def test_invalid_name_option_is_a_clear_error(command, data, tmp_path, capsys):
    "--name 'my data' -> a clear error suggesting a safe name, before anything is written"
    rc, _, err = run(capsys, command, data, "--out", tmp_path / "o", "--name", "my data")
    assert rc == 2 and "dataset name 'my data' cannot key stored results" in err and "e.g. 'my_data'" in err, err
    assert not (tmp_path / "o").exists()

def test_name_option_names_the_dataset(data, tmp_path, capsys):
    "--name mine on a folder 'breakfast' -> probes' records carry dataset 'mine' and its config records the folder's name"
    rc, _, err = run(capsys, "probes", data, "--out", tmp_path / "o", "--splits", "1", "--predictors", "majority", "--name", "mine")
    assert rc == 0 and "note" not in err, err
    saved = json.loads((tmp_path / "o" / "results" / "decomposition.json").read_text())
    assert saved["config"]["dataset_names"] == {"mine": {"dataset_name": "mine", "folder_name": "breakfast"}}

def test_scope_checks_every_folder_before_the_first_audit(tiny_folder, tmp_path, capsys):
    "scope over two folders, the second with an empty bundle -> an error naming it before the first folder is audited"
    first, second = tmp_path / "a b", tmp_path / "c"
    shutil.copytree(tiny_folder, first); shutil.copytree(tiny_folder, second)
    (second / "splits" / "train.split1.bundle").write_text("")
    rc, _, err = run(capsys, "scope", first, second, "--out", tmp_path / "o", *CHEAP)
    assert rc == 2 and "setting 'c'" in err and "train.split1.bundle: empty" in err and "Traceback" not in err, err
    assert "hoi-audit: note: setting 'a b' keys its stored results as 'a_b'" in err, err
    assert no_unit_under(tmp_path / "o")

def test_unreadable_label_file_is_named(data):
    "a label file that is not UTF-8 -> the preflight names it (no UnicodeDecodeError traceback)"
    video = read_mstcn(data).videos[0]
    (data / "groundTruth" / f"{video}.txt").write_bytes(b"\xff\xfe\x00bad\n")
    with pytest.raises(DataError, match=f"{video}.txt: label file is not UTF-8 text"): read_for_command(data)

def test_safe_name_folds_accents_and_replaces_the_rest():
    "names with spaces, accents, slashes or no Latin letters -> store keys (letters, digits, _.+-), distinct where the input was"
    assert [safe_name(n) for n in ("my data", "données", "a/b")] == ["my_data", "donnees", "a_b"]
    assert safe_name("数据") != safe_name("数字")

# ------------------------------------------------------------------------------------------------------------- no process outlives its command
# Workers die with their command: a `kill -9` of the command (SLURM pre-emption, the OOM killer) leaves none of the processes it
# started running, not a pool worker, not the multiprocessing resource tracker, not a task of submitit's local executor, not the
# isolated decoder. Each test starts a command, waits until its workers are at work, records every process below it, SIGKILLs only
# the command, and requires every recorded process to be gone within 5 s (a zombie of a dead parent counts as gone: init reaps it).

GONE_WITHIN_S = 5.0      # the target: after the command's kill, nothing it started is left after this long
START_TIMEOUT_S = 120.0  # generous: a loaded machine imports torch slowly

def _wait_for(condition, what:str, timeout:float=START_TIMEOUT_S, proc:subprocess.Popen|None=None):
    "Poll `condition()` until it is truthy; its value. Fails naming `what` on timeout, or when `proc` ended first."
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got: return got
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the command ended ({proc.returncode}) before {what}:\n{proc.stderr.read()[-3000:] if proc.stderr else ''}")
        if time.monotonic() > deadline: pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)

def _running(pid:int) -> bool:
    return Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)

def _cmdline(pid:int) -> str:
    try: return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError: return "?"

def _kill_command_only(proc:subprocess.Popen, pids:list[int]) -> tuple[list[str], float]:
    """SIGKILL `proc` alone; poll its recorded descendants `pids` for up to GONE_WITHIN_S. Returns (the ones left, as
    "pid cmdline", the seconds until the last went). Whatever is left is killed afterwards, so a failing test leaves nothing."""
    proc.send_signal(signal.SIGKILL); proc.wait(timeout=30)
    start = time.monotonic()
    while time.monotonic() - start < GONE_WITHIN_S and any(_running(p) for p in pids): time.sleep(0.02)
    took, left = time.monotonic() - start, [f"{p} {_cmdline(p)[:120]}" for p in pids if _running(p)]
    for p in pids:
        try: os.kill(p, signal.SIGKILL)
        except OSError: pass
    return left, took

@pytest.fixture(scope="module")
def tiny_mstcn(tmp_path_factory) -> Path:
    "A tiny synthetic MS-TCN folder with features (the audit's input)."
    from hoi_audit.synthetic import synthetic_dataset, write_synthetic
    return Path(write_synthetic(synthetic_dataset("breakfast", "tiny", seed=0), tmp_path_factory.mktemp("faults_workers") / "breakfast"))

def _holds_a_unit(pid:int) -> bool:
    "Whether process `pid` holds a unit's lock file open: it is computing that unit (so it is past its start-up)."
    try: return any(os.readlink(fd).endswith(".lock") for fd in Path(f"/proc/{pid}/fd").iterdir())
    except OSError: return False

def _spawned_workers(pid:int) -> list[int]:
    return [p for p in descendants(pid) if "multiprocessing.spawn" in _cmdline(p)]

def test_sigkill_of_audit_with_workers_leaves_no_worker_and_no_resource_tracker(tiny_mstcn, tmp_path):
    "kill -9 of `hoi-audit audit --workers 2` mid-unit -> its 2 pool workers and the resource tracker are gone within 5 s."
    exe = Path(sys.executable).parent / "hoi-audit"
    out = tmp_path / "out"
    proc = subprocess.Popen([str(exe), "audit", str(tiny_mstcn), "--conditions", "recognizer_ba,gt_history", "--splits", "1",
                             "--seeds", "42,43,44", "--tokens", "2", "--epochs", "500", "--d-model", "16", "--workers", "2",
                             "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    pids = []
    try:
        _wait_for(lambda: len(ws := _spawned_workers(proc.pid)) == 2 and all(map(_holds_a_unit, ws)), "2 pool workers computing units",
                  proc=proc)
        pids = descendants(proc.pid)
        assert any("resource_tracker" in _cmdline(p) for p in pids), [_cmdline(p) for p in pids]   # what the issue saw left
        left, took = _kill_command_only(proc, pids)
    finally:
        if proc.poll() is None: proc.kill(); proc.wait()
        for p in pids:
            try: os.kill(p, signal.SIGKILL)
            except OSError: pass
    assert not left, f"still running {GONE_WITHIN_S:g} s after the command's SIGKILL: {left}"
    print(f"pool: {len(pids)} processes gone {took:.2f} s after the kill")

def test_ctrl_c_of_audit_with_workers_stops_at_once(tiny_mstcn, tmp_path):
    "Ctrl-C (SIGINT to the process group) of `hoi-audit audit --workers 2` mid-unit -> `hoi-audit: error: interrupted`, exit 130 within seconds, no traceback, no process left."
    exe = Path(sys.executable).parent / "hoi-audit"
    proc = subprocess.Popen([str(exe), "audit", str(tiny_mstcn), "--conditions", "recognizer_ba,gt_history", "--splits", "1",
                             "--seeds", "42,43,44", "--tokens", "2", "--epochs", "500", "--d-model", "16", "--workers", "2",
                             "--out", str(tmp_path / "out")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    pids = []
    try:
        _wait_for(lambda: len(ws := _spawned_workers(proc.pid)) == 2 and all(map(_holds_a_unit, ws)), "2 pool workers computing units",
                  proc=proc)
        pids = descendants(proc.pid)
        os.killpg(proc.pid, signal.SIGINT); started = time.monotonic()
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - started
        deadline = time.monotonic() + GONE_WITHIN_S
        while time.monotonic() < deadline and any(_running(p) for p in pids): time.sleep(0.05)
        left = [f"{p} {_cmdline(p)[:120]}" for p in pids if _running(p)]
    finally:
        if proc.poll() is None: proc.kill(); proc.wait()
        for p in pids:
            try: os.kill(p, signal.SIGKILL)
            except OSError: pass
    assert proc.returncode == 130 and "hoi-audit: error: interrupted" in err and "Traceback" not in err, err[-3000:]
    assert took < 10, f"the command took {took:.1f} s to stop (it waited for its running units)"
    assert not left, left

SUBMITIT_COMMAND = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from hoi_audit.cluster import ClusterConfig, SlurmBackend
    from hoi_audit.store import ResultStore, Unit
    MARKER = sys.argv[2]   # travels with `compute` (by value): the task's own argv is submitit's
    def compute(unit, workdir):
        Path(MARKER).touch(); time.sleep(600)   # a unit at work for ten minutes
    ResultStore(sys.argv[1]).run([Unit({"i": 0}), Unit({"i": 1})], compute, progress=False,
                                 backend=SlurmBackend(ClusterConfig(cluster="local", tasks=1, poll_s=0.2)))
""")

def test_sigkill_of_command_leaves_no_task_of_submitits_local_executor(tmp_path):
    "kill -9 of a command running `--backend slurm --cluster local` -> its array task and submitit's controller are gone within 5 s."
    marker = tmp_path / "computing"
    proc = subprocess.Popen([sys.executable, "-c", SUBMITIT_COMMAND, str(tmp_path / "store"), str(marker)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    pids = []
    try:
        _wait_for(marker.exists, "the array task computing its unit", proc=proc)
        pids = descendants(proc.pid)
        assert any("submitit.local._local" in _cmdline(p) for p in pids), [_cmdline(p) for p in pids]   # the controller
        assert any("submitit.core._submit" in _cmdline(p) for p in pids), [_cmdline(p) for p in pids]   # the task
        left, took = _kill_command_only(proc, pids)
    finally:
        if proc.poll() is None: proc.kill(); proc.wait()
    assert not left, f"still running {GONE_WITHIN_S:g} s after the command's SIGKILL: {left}"
    print(f"submitit local: {len(pids)} processes gone {took:.2f} s after the kill")

class _Submitted(Exception): pass

def test_tasks_on_a_real_slurm_cluster_are_not_tied_to_the_submitting_command(tmp_path, monkeypatch):
    "the submitting command dies with a real SLURM cluster -> its array tasks are not told to die with it (they are requeued and resumed)."
    import hoi_audit.cluster as cluster
    submitted = {}
    class Executor:
        def map_array(self, fn, args): submitted[len(submitted)] = fn; raise _Submitted()
    monkeypatch.setattr(cluster, "_executor", lambda cfg, folder: Executor())
    for name in ("slurm", "local"):
        with pytest.raises(_Submitted):
            ResultStore(tmp_path / name).run([Unit({"i": 0})], lambda u, w: 0, progress=False, backend=SlurmBackend(ClusterConfig(cluster=name)))
    slurm, local = submitted[0], submitted[1]
    assert isinstance(slurm, UnitShard) and slurm.owner is None
    assert local.owner == os.getpid()   # submitit's local executor: the tasks are this process's, and die with it

DECODER_COMMAND = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from hoi_audit.decode import DecodeProcess
    def hangs(path): Path(sys.argv[1]).touch(); time.sleep(600)   # a reader stuck for ten minutes
    proc = DecodeProcess("any.mp4", hangs)
    proc.call("open")   # waits for ever
""")

def test_sigkill_of_caller_leaves_no_decoder_child(tmp_path):
    "kill -9 of a process waiting on its isolated decoder (DecodeProcess) stuck in a call -> the decoder child is gone within 5 s."
    marker = tmp_path / "opening"
    proc = subprocess.Popen([sys.executable, "-c", DECODER_COMMAND, str(marker)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    pids = []
    try:
        _wait_for(marker.exists, "the decoder child inside its reader", proc=proc)
        pids = descendants(proc.pid)
        assert len(pids) == 1, [_cmdline(p) for p in pids]   # the forked decoder
        left, took = _kill_command_only(proc, pids)
    finally:
        if proc.poll() is None: proc.kill(); proc.wait()
    assert not left, f"still running {GONE_WITHIN_S:g} s after the caller's SIGKILL: {left}"
    print(f"decoder: gone {took:.2f} s after the kill")

# ------------------------------------------------------------------------------------------------------------- EPIC: recorded, not raised
# Issue 32, EPIC-style anticipation (`hoi-audit extract`, `hoi-audit epic`): every narration of the CSV is used or carries a note
# saying why not, the notes are counted, and a video that cannot be used is listed once, with its cause, not once per narration.

FPS = 12

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("imageio_ffmpeg", reason="the EPIC-like videos need imageio-ffmpeg (a dev dependency)")
    from hoi_audit.clips import write_epic_like
    return write_epic_like(tmp_path_factory.mktemp("epic_faults") / "videos", "tiny", seed=0, damaged_participant=None)

def folder_with(tiny, tmp_path, keep=("P01_01",), non_videos=()):
    "A videos folder holding copies of the `keep` videos and, for each of `non_videos`, a text file named as its video."
    d = tmp_path / "videos"
    for vid in keep:
        dst = d / tiny["videos"][vid]; dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes((tiny["folder"] / tiny["videos"][vid]).read_bytes())
    for vid in non_videos:
        (d / f"{vid}.mp4").parent.mkdir(parents=True, exist_ok=True)
        (d / f"{vid}.mp4").write_text("participant,verb\nP01,take\n")      # a CSV, renamed .mp4
    return d

def narrations(tiny, tmp_path, per_video:dict, edit=None) -> Path:
    "A CSV of the first `n` narrations that start at least 6 s into each video of `per_video` (video_id -> n); `edit(df)` changes it."
    df = pd.read_csv(tiny["narrations"], dtype={"narration_id": str, "participant_id": str, "video_id": str})
    late = (df.start_frame - 1) / FPS >= 6.0
    df = pd.concat([df[late & df.video_id.eq(v)].head(n) for v, n in per_video.items()], ignore_index=True)
    if edit is not None: df = edit(df)
    path = tmp_path / "narrations.csv"; df.to_csv(path, index=False)
    return path

def extract_cli(videos, csv, out, *extra):
    code = main(["extract", "--videos", str(videos), "--narrations", str(csv), "--out", str(out), *extra])
    return code, json.loads((Path(out) / "results" / "epic_extract.json").read_text())

def assert_accounted(summary, records, csv):
    "Every narration of the CSV has a record; each left-out one has a note that excludes it; the counts add up."
    ids = pd.read_csv(csv, dtype={"narration_id": str}).narration_id.tolist()
    assert [r["action_id"] for r in records] == ids
    left_out = [r for r in records if r["error"] is not None]
    assert all(any(NOTE_KINDS[n["kind"]][0] for n in r["notes"]) for r in left_out)
    assert summary["actions"] == len(ids) == summary["actions_used"] + summary["actions_excluded"]
    assert summary["actions_excluded"] == len(left_out) == sum(summary["excluded_by"].values())
    for kind, n in summary["notes"].items(): assert n == sum(any(m["kind"] == kind for m in r["notes"]) for r in records), kind

def test_stop_after_video_end_is_noted_and_counted(tiny, tmp_path, capsys):
    "a narration whose stop time lies after its video's end -> kept, its target cut, a stop_after_video_end note, counted, printed"
    def late_stop(df):
        df.loc[1, "stop_timestamp"] = "00:01:30.00"; return df          # the video is 40.42 s long
    csv = narrations(tiny, tmp_path, {"P01_01": 3}, late_stop)
    code, out = extract_cli(folder_with(tiny, tmp_path), csv, tmp_path / "o", "--with-target")
    rec = out["records"][1]
    assert code == 0 and rec["error"] is None                           # used: the oracle gets the frames that exist
    assert [n["kind"] for n in rec["notes"]] == ["stop_after_video_end"]
    assert "the stop time 90.00 s lies after the video's end (40.42 s, 485 frames at 12 fps)" in rec["notes"][0]["note"]
    assert "the target segment is cut to frames" in rec["notes"][0]["note"]
    assert [r["notes"] for r in out["records"][::2]] == [[], []]        # the others have nothing to note
    assert out["summary"]["notes"]["stop_after_video_end"] == 1 and out["summary"]["actions_used"] == 3
    assert "1 kept with a note, stop_after_video_end" in capsys.readouterr().out
    assert_accounted(out["summary"], out["records"], csv)

class Overstating:
    "decord over a real video that claims 600 frames where 485 decode (as a container that overstates its count)."
    def __init__(self, path): self.r = open_decord(path)
    def __len__(self): return 600
    def get_avg_fps(self): return self.r.get_avg_fps()
    def get_batch(self, idx):
        if max(idx) >= len(self.r): raise IndexError(f"frame {max(idx)} out of bound")
        return self.r.get_batch(idx)

def test_windows_beyond_the_last_decodable_frame_are_noted(tiny, tmp_path):
    "context window / target past the last decodable frame -> window_past_end or target_outside_video (left out), or target_clipped (kept)"
    csv = narrations(tiny, tmp_path, {"P01_01": 3})
    narr = read_narrations(csv)
    narr.loc[0, ["start_s", "stop_s"]] = [44.0, 46.0]     # window [38 s, 43 s): frames 456..515, past the 485 that decode
    narr.loc[1, ["start_s", "stop_s"]] = [38.0, 45.0]     # window fits; the target runs to frame 540 (< 600 declared): cut at 485
    narr.loc[2, ["start_s", "stop_s"]] = [41.0, 44.0]     # window fits (ends at frame 480); the target starts at frame 492
    feats = extract(folder_with(tiny, tmp_path), narr, None, with_target=True, decoder_kwargs={"open_reader": Overstating})
    kinds = [[n["kind"] for n in r.notes] for r in feats.records]
    assert kinds == [["window_past_end", "target_clipped"], ["target_clipped"], ["target_outside_video", "target_clipped"]]
    assert feats.ok.tolist() == [False, True, False]
    assert "the video declares 600 frames; those from 485 on do not decode" in feats.records[0].notes[0]["note"]
    assert "after the last decodable frame (485 of the 600 frames the video declares decode)" in feats.records[1].notes[0]["note"]
    s = feats.summary
    assert s["excluded_by"]["window_past_end"] == s["excluded_by"]["target_outside_video"] == 1 and s["notes"]["target_clipped"] == 3
    assert_accounted(s, [r.to_dict() for r in feats.records], csv)

def test_non_video_is_listed_once_with_its_cause(tiny, tmp_path, capsys):
    "a text file named .mp4 -> one failed_videos entry with FFmpeg's reason; its narrations carry a short pointer, not the cause"
    csv = narrations(tiny, tmp_path, {"P01_01": 2, "P02_01": 5})
    code, out = extract_cli(folder_with(tiny, tmp_path, non_videos=["P02_01"]), csv, tmp_path / "o", "--encoder", "none")
    failed = out["summary"]["failed_videos"]
    assert code == 1 and [(f["video_id"], f["actions"]) for f in failed] == [("P02_01", 5)]
    assert "P02_01.mp4: cannot open the video: Invalid data found when processing input" in failed[0]["cause"]
    gone = [r for r in out["records"] if r["action_id"].startswith("P02_01")]
    assert all(r["notes"] == [{"kind": "video_failed", "note": r["error"]}] for r in gone)
    assert all("Invalid data" not in r["error"] and "failed_videos" in r["error"] for r in gone)   # the cause is not repeated
    printed = capsys.readouterr().out
    assert printed.count("Invalid data found when processing input") == 1 and "  P02_01 (5 narration(s)): " in printed
    assert "7 narrations: 2 used, 5 left out (video_failed 5)" in printed
    assert_accounted(out["summary"], out["records"], csv)

def test_missing_video_is_listed_once(tiny, tmp_path):
    "a narration whose video is not in the folder -> one failed_videos entry (not found, the paths tried); each narration points to it"
    csv = narrations(tiny, tmp_path, {"P01_01": 1, "P03_01": 3})
    code, out = extract_cli(folder_with(tiny, tmp_path), csv, tmp_path / "o")
    (f,) = out["summary"]["failed_videos"]
    assert (f["video_id"], f["problem"], f["actions"], f["video"]) == ("P03_01", "not found", 3, None)
    assert f["cause"].startswith("video P03_01 not found; looked for ")
    assert [r["error"] for r in out["records"][1:]] == ["video P03_01 not found; this narration was not read "
                                                        "(the cause is listed once, in failed_videos)"] * 3
    assert_accounted(out["summary"], out["records"], csv)

def test_every_failing_video_is_printed_up_to_twenty(tiny, tmp_path, capsys):
    "23 unusable videos -> the first 20 printed, each with its cause, then a count of the rest; all 23 in the record"
    def many_missing(df):
        extra = pd.concat([df.iloc[[0]]] * 23, ignore_index=True)
        extra["video_id"] = [f"P{i:02d}_09" for i in range(23)]; extra["participant_id"] = [f"P{i:02d}" for i in range(23)]
        extra["narration_id"] = [f"P{i:02d}_09_0" for i in range(23)]
        return pd.concat([df, extra], ignore_index=True)
    csv = narrations(tiny, tmp_path, {"P01_01": 1}, many_missing)
    code, out = extract_cli(folder_with(tiny, tmp_path), csv, tmp_path / "o")
    printed = capsys.readouterr().out.splitlines()
    listed = [l for l in printed if l.startswith("  P") and "_09 (1 narration(s)): video P" in l]
    assert code == 1 and len(listed) == 20 and "  ... and 3 more video(s) (all in the record's summary, failed_videos)" in printed
    assert "23 video(s) could not be used (each listed once, with its cause):" in printed
    assert len(out["summary"]["failed_videos"]) == 23
    assert_accounted(out["summary"], out["records"], csv)

class HangsOnBatches:
    "decord, except that a batch of more than one frame never returns (a decoder stuck on the video)."
    def __init__(self, path): self.r = open_decord(path)
    def __len__(self): return len(self.r)
    def get_avg_fps(self): return self.r.get_avg_fps()
    def get_batch(self, idx):
        if len(idx) > 1: time.sleep(30)
        return self.r.get_batch(idx)

def test_decode_timeout_lists_the_video_once(tiny, tmp_path):
    "a decoder that hangs -> the video listed once (its cause: the timeout); its narrations point to it; one time limit, not one each"
    csv = narrations(tiny, tmp_path, {"P01_01": 5})
    start = time.time()
    feats = extract(folder_with(tiny, tmp_path), csv, None, time_limit=0.3, decoder_kwargs={"open_reader": HangsOnBatches})
    assert time.time() - start < 25                 # one 0.3 s limit, not the decoder's 30 s hang (loose: CI runs tests beside each other)
    s = feats.summary
    (f,) = s["failed_videos"]
    assert f["problem"] == "timed out" and "no result after 0.3 s (decoder hung)" in f["cause"] and f["actions"] == 5
    assert f"at narration {feats.records[0].action_id}" in f["cause"]
    assert all(r.notes[0]["kind"] == "video_failed" and "timed out" in r.error for r in feats.records)
    assert_accounted(s, [r.to_dict() for r in feats.records], csv)

def test_counts_add_up_across_faults(tmp_path):
    """a damaged video, a non-video, a missing video, early windows, a late stop -> every narration used or noted, counts add up,
    the features' `ok` matches the record"""
    pytest.importorskip("imageio_ffmpeg")
    from hoi_audit.clips import write_epic_like
    data = write_epic_like(tmp_path / "v", "tiny", seed=0)          # P02_01 has damaged packets
    (tmp_path / "v" / data["videos"]["P04_01"]).write_text("not a video\n")
    df = pd.read_csv(data["narrations"], dtype={"narration_id": str, "participant_id": str, "video_id": str})
    gone = df[df.video_id.eq("P03_01")].assign(video_id="P09_01", participant_id="P09")
    gone["narration_id"] = gone.narration_id.str.replace("P03_01", "P09_01")
    df = pd.concat([df, gone], ignore_index=True)
    df.loc[df.video_id.eq("P01_01").idxmax() + 13, "stop_timestamp"] = "00:02:00.00"
    csv = tmp_path / "n.csv"; df.to_csv(csv, index=False)
    code, out = extract_cli(tmp_path / "v", csv, tmp_path / "o")
    s = out["summary"]
    assert_accounted(s, out["records"], csv)
    assert sorted(f["video_id"] for f in s["failed_videos"]) == ["P04_01", "P09_01"]
    assert s["excluded_by"]["video_failed"] == (df.video_id.isin(["P04_01", "P09_01"])).sum()
    assert s["excluded_by"]["window_before_start"] > 0 and s["notes"]["stop_after_video_end"] == 1 and s["actions_affected"] > 0
    with np.load(tmp_path / "o" / "raw" / "epic_extract" / "latents.npz") as z:
        assert z["ok"].sum() == s["actions_used"] and len(z["ok"]) == s["actions"]

def test_epic_command_lists_a_failed_video_once(tiny, tmp_path, capsys):
    "`hoi-audit epic` with a non-video among the videos -> scored on the rest; the video once in the summary and on screen; notes written"
    csv = narrations(tiny, tmp_path, {"P01_01": 6, "P03_01": 6, "P04_01": 3})
    out = tmp_path / "e.json"
    code = main(["epic", "--videos", str(folder_with(tiny, tmp_path, keep=("P01_01", "P03_01"), non_videos=["P04_01"])),
                 "--narrations", str(csv), "--out", str(out), "--model", "hoi_audit.worldmodel:PersistenceModel",
                 "--seeds", "42", "--n-boot", "20", "--no-oracle"])
    assert code == 0
    config = json.loads(out.read_text())["config"]
    s = config["substitution_summary"]
    assert [(f["video_id"], f["actions"]) for f in s["failed_videos"]] == [("P04_01", 3)]
    assert (s["actions_used"], s["excluded_by"]["video_failed"]) == (12, 3)
    lost = pd.read_csv(csv, dtype={"narration_id": str}).query("video_id == 'P04_01'").narration_id.tolist()
    assert sorted(config["notes"]) == sorted(config["excluded"]) == sorted(lost)
    assert all(n == [{"kind": "video_failed", "note": config["excluded"][k]}] for k, n in config["notes"].items())
    printed = capsys.readouterr().out
    assert printed.count("Invalid data found when processing input") == 1 and "15 narrations: 12 used, 3 left out" in printed

def test_all_videos_unusable_is_one_error_naming_each(tiny, tmp_path, capsys):
    "no usable video -> extract writes the record and exits 1; epic exits 2 with one message naming each video and its cause"
    csv = narrations(tiny, tmp_path, {"P01_01": 2, "P02_01": 2})
    videos = folder_with(tiny, tmp_path, keep=(), non_videos=["P01_01", "P02_01"])
    (videos / "P01_01.mp4").rename(videos / "P01_01.MP4")
    code, out = extract_cli(videos, csv, tmp_path / "o")
    assert code == 1 and out["summary"]["actions_used"] == 0 and len(out["summary"]["failed_videos"]) == 2
    capsys.readouterr()
    code = main(["epic", "--videos", str(videos), "--narrations", str(csv), "--out", str(tmp_path / "e.json"),
                 "--model", "hoi_audit.worldmodel:PersistenceModel", "--seeds", "42", "--n-boot", "20", "--no-oracle"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "needs two participants with usable actions" in err
    assert err.count("Invalid data found when processing input") == 2 and "  P01_01 (2 narration(s))" in err

# ------------------------------------------------------------------------------------------------------------- reports check what they read
# Faults in the results JSON that `hoi-audit report` reads: each is one named error (exit 2) naming the file, the record and the field.

AUDIT = json.loads((REPO / "results" / "four_condition.json").read_text())
INTERVENTION = json.loads((REPO / "results" / "intervention_2x2.json").read_text())
COMMITTED = sorted(p for p in (REPO / "results").rglob("*.json") if "store" not in p.relative_to(REPO / "results").parts)  # results files, not the committed full-scale store (results/full/store)

def _index(payload, prefix):
    "The first record whose metric starts with `prefix`."
    return next(i for i, r in enumerate(payload["records"]) if r["metric"].startswith(prefix))

def _report(tmp_path, capsys, edit=None, text=None, intervention=None):
    "Write the committed audit (edited by `edit`, or `text` verbatim) to tmp_path, run `hoi-audit report` on it: (exit, stderr, path)."
    path = tmp_path / "audit.json"
    payload = json.loads(json.dumps(AUDIT))
    payload.pop("intervention_ref", None)   # the 2x2, when a test needs it, is the file beside (`intervention`)
    if edit: edit(payload)
    path.write_text(text if text is not None else json.dumps(payload))
    if intervention is not None: (tmp_path / "audit.intervention_2x2.json").write_text(json.dumps(intervention))
    rc = main(["report", str(path)])
    return rc, capsys.readouterr().err, path

def _refused(tmp_path, capsys, record_prefix, field, value, expected):
    "Set `field` of the first `record_prefix` record to `value` (or delete it: ...), check exit 2 and a message naming all three."
    i = _index(AUDIT, record_prefix)
    def edit(p):
        if value is ...: del p["records"][i][field]
        else: p["records"][i][field] = value
    rc, err, path = _report(tmp_path, capsys, edit)
    assert rc == 2 and err.startswith("hoi-audit: error: ") and "Traceback" not in err
    assert str(path) in err and f"record {i} (metric " in err and f"field {field!r}" in err and expected in err, err
    assert not path.with_name("audit.report.html").exists()   # nothing written from bad input
    return err

def test_string_value_is_named(tmp_path, capsys):
    "a string where a number belongs ('0.5') -> exit 2 naming the record and field 'value', not a pandas traceback"
    _refused(tmp_path, capsys, "act1", "value", "0.5", 'is "0.5"; expected a finite number')

def test_accuracy_above_100_is_refused(tmp_path, capsys):
    "an accuracy of 250 -> exit 2: expected a percentage in [0, 100]"
    _refused(tmp_path, capsys, "act1", "value", 250, "expected a percentage in [0, 100]")

def test_null_value_is_refused(tmp_path, capsys):
    "null where a number belongs -> exit 2: expected a finite number"
    _refused(tmp_path, capsys, "act5", "value", None, "is null; expected a finite number")

def test_boolean_value_is_refused(tmp_path, capsys):
    "a boolean where a number belongs (JSON true is no score) -> exit 2"
    _refused(tmp_path, capsys, "verb1", "value", True, "is true; expected a finite number")

def test_missing_value_is_named(tmp_path, capsys):
    "a record without 'value' -> exit 2: field 'value' missing"
    _refused(tmp_path, capsys, "act1", "value", ..., "field 'value' missing")

def test_missing_split_is_named(tmp_path, capsys):
    "an audit record without 'split' (the report groups by it) -> exit 2: field 'split' missing"
    _refused(tmp_path, capsys, "act1", "split", ..., "field 'split' missing")

def test_gap_without_n_is_named(tmp_path, capsys):
    "a gap record without its 'n' (the verdict reads it) -> exit 2: field 'n' missing"
    _refused(tmp_path, capsys, "gap_", "n", ..., "field 'n' missing; expected a non-negative integer")

def test_negative_n_is_refused(tmp_path, capsys):
    "a negative n -> exit 2: expected a non-negative integer"
    _refused(tmp_path, capsys, "gap_", "n", -3, "is -3; expected a non-negative integer")

def test_fractional_n_is_refused(tmp_path, capsys):
    "n = 2.5 -> exit 2: expected a non-negative integer"
    _refused(tmp_path, capsys, "gap_", "n", 2.5, "expected a non-negative integer")

def test_ci_low_above_ci_high_is_refused(tmp_path, capsys):
    "ci_low > ci_high -> exit 2: expected ci_low <= ci_high"
    _refused(tmp_path, capsys, "gap_", "ci_low", 99.0, "expected ci_low <= ci_high")

def test_value_outside_its_interval_is_refused(tmp_path, capsys):
    "a gap outside [ci_low, ci_high] -> exit 2: expected within its interval"
    _refused(tmp_path, capsys, "gap_", "value", -50.0, "expected within its interval")

def test_gap_beyond_100_points_is_refused(tmp_path, capsys):
    "a gap of 150 points (with a matching interval) -> exit 2: expected a difference in [-100, 100]"
    i = _index(AUDIT, "gap_")
    def edit(p): p["records"][i].update(value=150.0, ci_low=140.0, ci_high=160.0)
    rc, err, path = _report(tmp_path, capsys, edit)
    assert rc == 2 and str(path) in err and f"record {i} (metric 'gap_" in err and "difference of percentages in [-100, 100]" in err

def test_half_an_interval_is_refused(tmp_path, capsys):
    "ci_high null beside a numeric ci_low -> exit 2: both numbers or both null"
    _refused(tmp_path, capsys, "gap_", "ci_high", None, "expected both numbers, or both null")

def test_negative_edit_rate_is_refused(tmp_path, capsys):
    "a negative history edit rate -> exit 2: expected a non-negative number"
    _refused(tmp_path, capsys, "history_edit_rate", "value", -0.1, "expected a non-negative number")

def test_item_accuracy_is_a_fraction(tmp_path, capsys):
    "a history item accuracy of 1.5 (a fraction) -> exit 2: expected a fraction in [0, 1]"
    _refused(tmp_path, capsys, "history_item_acc", "value", 1.5, "expected a fraction in [0, 1]")

def test_label_not_a_string_is_refused(tmp_path, capsys):
    "a condition that is a list -> exit 2: expected a non-empty string"
    _refused(tmp_path, capsys, "act1", "condition", ["gt_history"], "expected a non-empty string")

def test_unknown_metric_is_type_checked_only(tmp_path, capsys):
    "an unknown metric with a number -> accepted (no range); with a string -> exit 2"
    extra = {"dataset": "d", "split": 1, "condition": "gt_history", "metric": "my_plugin_score", "value": 1234.5}
    rc, err, path = _report(tmp_path, capsys, lambda p: p["records"].append(extra))
    assert rc == 0 and path.with_name("audit.report.html").is_file(), err
    n = len(AUDIT["records"])
    rc, err, path = _report(tmp_path, capsys, lambda p: p["records"].append(extra | {"value": "high"}))
    assert rc == 2 and str(path) in err and f"record {n} (metric 'my_plugin_score'): field 'value'" in err

def test_missing_or_changed_referenced_2x2_is_refused(tmp_path, capsys):
    "the 2x2 the results JSON references (intervention_ref) is missing or changed -> exit 2 naming the file, no report written"
    ref = lambda p: p.update(intervention_ref={"path": "iv.json", "sha256": "0" * 64})
    rc, err, path = _report(tmp_path, capsys, ref)
    assert rc == 2 and str(tmp_path / "iv.json") in err and "no such file" in err, err
    (tmp_path / "iv.json").write_text(json.dumps(INTERVENTION))
    rc, err, path = _report(tmp_path, capsys, ref)
    assert rc == 2 and str(tmp_path / "iv.json") in err and "SHA-256" in err, err
    assert not path.with_name("audit.report.html").exists()

def test_records_not_a_list_is_refused(tmp_path, capsys):
    "records an object instead of a list -> exit 2 naming the field 'records'"
    rc, err, path = _report(tmp_path, capsys, lambda p: p.update(records={"0": p["records"][0]}))
    assert rc == 2 and str(path) in err and "field 'records'" in err and "expected a list of records" in err

def test_record_not_an_object_is_refused(tmp_path, capsys):
    "a record that is a number -> exit 2 naming the record"
    rc, err, path = _report(tmp_path, capsys, lambda p: p["records"].insert(0, 7))
    assert rc == 2 and str(path) in err and "record 0 is 7; expected an object with metric and value" in err

def test_empty_records_are_refused(tmp_path, capsys):
    "an empty records list -> exit 2: expected at least one record"
    rc, err, path = _report(tmp_path, capsys, lambda p: p.update(records=[]))
    assert rc == 2 and str(path) in err and "field 'records' is []" in err

def test_missing_section_is_refused(tmp_path, capsys):
    "a payload without 'scale' -> exit 2: not a results JSON, missing ['scale']"
    rc, err, path = _report(tmp_path, capsys, lambda p: p.pop("scale"))
    assert rc == 2 and str(path) in err and "missing ['scale']" in err

def test_wrong_experiment_is_refused(tmp_path, capsys):
    "results JSON of an experiment no registered stage writes -> exit 2 naming the file, the experiment and the stages' results"
    rc, err, path = _report(tmp_path, capsys, lambda p: p.update(experiment="nobody"))
    assert rc == 2 and str(path) in err and "no registered stage writes experiment 'nobody'" in err and "four_condition" in err

def test_config_train_not_an_object_is_refused(tmp_path, capsys):
    "config.train a list (the report reads its settings) -> exit 2 naming config field 'train'"
    rc, err, path = _report(tmp_path, capsys, lambda p: p["config"].update(train=[40]))
    assert rc == 2 and str(path) in err and "config: field 'train' is [40]; expected an object" in err

def test_truncated_file_is_named(tmp_path, capsys):
    "a truncated results JSON -> exit 2: not a readable results JSON, naming the file"
    rc, err, path = _report(tmp_path, capsys, text=json.dumps(AUDIT)[:500])
    assert rc == 2 and str(path) in err and "not a readable results JSON" in err and "Traceback" not in err

def test_every_problem_is_listed_up_to_20(tmp_path, capsys):
    "25 bad records -> one error listing 20 problems and counting the other 5"
    def edit(p):
        for r in p["records"][:25]: r["value"] = "x"
    rc, err, path = _report(tmp_path, capsys, edit)
    assert rc == 2 and "(25 problems)" in err and "record 19 (metric" in err and "record 20 (metric" not in err
    assert "... and 5 more problems" in err

def test_bad_2x2_beside_the_audit_is_named(tmp_path, capsys):
    "a bad value in the 2x2 results beside the audit -> exit 2 naming that file, its record and field"
    iv = json.loads(json.dumps(INTERVENTION))
    i = _index(iv, "contrast_")
    iv["records"][i]["n"] = -1
    rc, err, path = _report(tmp_path, capsys, intervention=iv)
    assert rc == 2 and "audit.intervention_2x2.json" in err and f"record {i} (metric 'contrast_act1'): field 'n' is -1" in err

def test_committed_audit_still_reports(tmp_path, capsys):
    "the committed audit and its 2x2 -> exit 0 and the report written"
    rc, err, path = _report(tmp_path, capsys, intervention=INTERVENTION)
    assert rc == 0 and err == "" and path.with_name("audit.report.html").is_file()

@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(REPO / "results")))
def test_committed_results_validate(path):
    "every committed results/*.json -> valid, and every metric in it has a kind (none is unknown)"
    payload = json.loads(path.read_text())
    check_results(payload, path)
    check_results(payload, path, writing=True)   # and `write_results` would write it again
    assert not {r["metric"] for r in payload["records"] if metric_kind(r["metric"], r) is None}

def test_a_refused_record_is_never_written(tmp_path):
    "a stage writing an accuracy of 250 -> DataError naming the file and the record; no file where there was none, an old file unchanged"
    good = write_results(tmp_path / "old.json", "four_condition", AUDIT["records"][:3])
    before = good.read_bytes()
    for path in (good, tmp_path / "new.json"):
        with pytest.raises(DataError, match=r"not written, not a valid results JSON \(1 problem\):\n  record 1 \(metric '\w+'\): field 'value' is 250.0"):
            write_results(path, "four_condition", AUDIT["records"][:1] + [AUDIT["records"][1] | {"value": 250.0}])
    assert good.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]
