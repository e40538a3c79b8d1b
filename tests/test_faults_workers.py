"""Workers die with their command: a `kill -9` of the command (SLURM pre-emption, the OOM killer) leaves none of the processes it
started running, not a pool worker, not the multiprocessing resource tracker, not a task of submitit's local executor, not the
isolated decoder. Each test starts a command, waits until its workers are at work, records every process below it, SIGKILLs only
the command, and requires every recorded process to be gone within 5 s (a zombie of a dead parent counts as gone: init reaps it)."""
import os, signal, subprocess, sys, textwrap, time
from pathlib import Path
import pytest
from hoi_audit.cluster import ClusterConfig, SlurmBackend, UnitShard
from hoi_audit.store import ResultStore, Unit
from conftest import descendants, _state

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
