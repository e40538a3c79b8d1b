import json, os, signal, subprocess, sys, time
from pathlib import Path
import pytest

REPO = Path(__file__).resolve().parent.parent

@pytest.fixture
def repo() -> Path:
    return REPO

SHARED_LABELS = REPO.parent / "shared" / "data" / "labels"   # the shared copy the shipped labels were packed from (a dev checkout only)

@pytest.fixture(scope="session", autouse=True)
def labels_cache(tmp_path_factory) -> Path:
    "A fresh cache for the shipped labels per test session (unless HOI_AUDIT_CACHE is set): tests never write into ~/.cache."
    from hoi_audit.procedural import CACHE_ENV, LABELS_ENV, real_labels_dir
    if not os.environ.get(CACHE_ENV): os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("hoi_audit_cache"))
    # Transitional: a few tests (test_queries, test_synthetic) still find the real labels through HOI_AUDIT_LABELS and skip without it.
    # Pointing it at the shipped labels keeps them running (on what a user gets) until they call procedural.real_labels_root; then
    # delete these two lines. Tests of the shipped path itself clear the variable (monkeypatch, or a subprocess environment).
    if not os.environ.get(LABELS_ENV): os.environ[LABELS_ENV] = str(real_labels_dir())
    return Path(os.environ[CACHE_ENV])

@pytest.fixture(scope="session")
def labels_dir(labels_cache) -> Path:
    "The folder holding the real breakfast/, 50salads/ and gtea/ MS-TCN folders: the labels shipped with the package (HOI_AUDIT_LABELS overrides)."
    from hoi_audit.procedural import real_labels_dir
    return real_labels_dir()

@pytest.fixture(scope="session")
def real_labels(labels_dir):
    "name -> the real labels as a ProceduralDataset (shipped with the package; HOI_AUDIT_LABELS overrides)."
    from hoi_audit.procedural import read_mstcn
    return lambda name, **kwargs: read_mstcn(labels_dir / name, **kwargs)

@pytest.fixture
def shared_labels() -> Path:
    "The shared copy of the real labels (../shared/data/labels), only for the tests that compare the shipped tables with it."
    if not SHARED_LABELS.is_dir(): pytest.skip(f"{SHARED_LABELS} is absent: nothing to compare the shipped labels with")
    return SHARED_LABELS

def same_protocol_or_xfail(root, names):
    """A check across two committed full-scale files holds only when one code made both: where either predates the code (issue 50's
    regeneration goes file by file), the test stops here as an expected failure that names the file, after its own-file checks."""
    from hoi_audit.results import predating
    old = [f"{r['name']}.json (protocol {r['protocol']})" for r in predating(root, names)]
    if old: pytest.xfail(f"{', '.join(old)} predates the code: its units are not the regenerated files' until it is regenerated too")

def descendants(pid: int) -> list[int]:
    "Every process below `pid` (papermill's kernel runs in its own session, so a process-group kill misses it)."
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try: fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError: continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child); todo.append(child)
    return out

def sigkill_tree(proc: subprocess.Popen):
    "SIGKILL a process and everything it started, as a scheduler killing a job would."
    pids = [proc.pid] + descendants(proc.pid)
    for pid in pids:
        try: os.kill(pid, signal.SIGKILL)
        except ProcessLookupError: pass
    proc.wait(timeout=30)
    deadline = time.time() + 10
    while time.time() < deadline and any(Path(f"/proc/{p}").exists() and "zombie" not in _state(p) for p in pids[1:]):
        time.sleep(0.05)

def _state(pid):
    try: return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split("\n")[0].lower()
    except (OSError, IndexError): return "zombie"

def hoi_audit(*args, **kw) -> subprocess.CompletedProcess:
    "Run the installed `hoi-audit` console script (the one a user calls)."
    exe = Path(sys.executable).parent / "hoi-audit"
    return subprocess.run([str(exe), *args], capture_output=True, text=True, **kw)

def structure(payload:dict) -> dict:
    """A results JSON without its numbers: what must agree across numeric environments. Pins that hash trained weights or float features
    (a config entry named `*_pins`, e.g. epic_anticipation's `forecaster_pins`) differ with the arithmetic, so only their keys count."""
    numbers = {"value", "ci_low", "ci_high"}
    config = {k: sorted(v) if k.endswith("_pins") else v for k, v in payload["config"].items()}
    return {"experiment": payload["experiment"], "scale": payload["scale"], "config": config,
            "records": [{k: v for k, v in r.items() if k not in numbers} for r in payload["records"]]}

def matches_committed(got:bytes, committed:bytes, name:str) -> bool:
    """Assert a regenerated results file `name` is the committed one: byte for byte where both were made in the same numeric environment,
    in their `structure` elsewhere (the file carries its environment, so another machine cannot write the committed bytes). True when
    the bytes were compared."""
    mine, theirs = json.loads(got), json.loads(committed)
    if mine.get("environment") == theirs.get("environment"):
        assert got == committed, f"{name} regenerated here differs from the committed file"
        return True
    assert structure(mine) == structure(theirs), f"{name}: regenerated in another numeric environment, its records differ in more than their numbers"
    return False

def write_tiny_mstcn(root:Path, n_videos:int=6, frames:int=60, dim:int=8) -> Path:
    "A tiny MS-TCN folder with features: SIL + 3 actions, split 1 (4 train, 2 test); a cheap audit runs on it in seconds."
    import numpy as np
    from hoi_audit.procedural import write_mstcn
    rng = np.random.default_rng(0)
    classes = ["SIL", "take_cup", "pour_milk", "stir_milk"]
    labels = {f"v{i}": [0] * 10 + [1] * 15 + [2] * 15 + [3] * (frames - 40) for i in range(n_videos)}
    names = list(labels)
    return write_mstcn(root, labels, classes, {1: {"train": names[:4], "test": names[4:]}},
                       features={v: rng.normal(size=(frames, dim)).astype(np.float32) for v in names}, feature_layout="DxT")
