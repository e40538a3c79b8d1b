import os, signal, subprocess, sys, time
from pathlib import Path
import pytest

REPO = Path(__file__).resolve().parent.parent

@pytest.fixture
def repo() -> Path:
    return REPO

@pytest.fixture
def labels_dir() -> Path:
    "The real MS-TCN labels (../shared/data/labels); set HOI_AUDIT_LABELS (CI and the Makefile do)."
    value = os.environ.get("HOI_AUDIT_LABELS")
    if not value: pytest.skip("HOI_AUDIT_LABELS is not set: the real-label tests need ../shared/data/labels (make test sets it)")
    path = Path(value)
    if not path.is_dir(): pytest.skip(f"HOI_AUDIT_LABELS={value} is not a folder: the real-label tests need the shared labels")
    return path

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
