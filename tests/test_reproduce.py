"`hoi-audit reproduce` end to end: outputs under --out, SIGKILL and resume, byte-identical results, honest errors."
import json, os, shutil, subprocess, sys, time
from collections import Counter
from pathlib import Path
import nbformat
import pytest
from conftest import REPO, hoi_audit, matches_committed, sigkill_tree
from hoi_audit.runner import store_roots

DEMO = ["--only", "demo_provenance", "--quiet"]
SLOW_UNITS = ["-p", "n_train=8000"]   # ~0.3 s a unit, so that a kill lands mid-run

def test_help_lists_the_subcommands():
    r = hoi_audit("--help")
    assert r.returncode == 0 and "reproduce" in r.stdout and "status" in r.stdout

def test_sigkill_then_rerun_resumes_and_matches_an_uninterrupted_run(tmp_path):
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    exe = Path(sys.executable).parent / "hoi-audit"
    proc = subprocess.Popen([str(exe), "reproduce", "--out", str(killed), *DEMO, *SLOW_UNITS],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    units = killed / "store" / "demo_provenance" / "units"
    deadline = time.time() + 240
    while len(list(units.rglob("manifest.json"))) < 5:
        assert proc.poll() is None, "reproduce ended before it could be killed"
        assert time.time() < deadline, "no unit finished in time"
        time.sleep(0.05)
    sigkill_tree(proc)
    done_before = {p: p.stat().st_mtime_ns for p in units.rglob("manifest.json")}
    assert 5 <= len(done_before) < 48, f"the kill did not land mid-run ({len(done_before)} of 48 units done)"
    assert not (killed / "results" / "demo_provenance.json").exists()

    status = hoi_audit("status", str(killed))
    assert status.returncode == 0 and "pending" in status.stdout, status.stdout + status.stderr

    again = hoi_audit("reproduce", "--out", str(killed), *DEMO, *SLOW_UNITS)
    assert again.returncode == 0, again.stderr[-3000:]
    for manifest, mtime in done_before.items():
        assert manifest.stat().st_mtime_ns == mtime, f"{manifest.parent} was recomputed instead of skipped"
    assert len(list(units.rglob("manifest.json"))) == 48

    fresh = hoi_audit("reproduce", "--out", str(clean), *DEMO, *SLOW_UNITS)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    a = (killed / "results" / "demo_provenance.json").read_bytes()
    b = (clean / "results" / "demo_provenance.json").read_bytes()
    assert a == b, "a resumed run's results JSON differs from an uninterrupted run's"

    # everything went below --out, and the executed notebook is there
    for sub in ["figures/demo_provenance.png", "results/demo_provenance.json", "runs/demo_provenance.ipynb"]:
        assert (clean / sub).exists(), sub
    payload = json.loads(b)
    assert payload["experiment"] == "demo_provenance" and payload["scale"] == "small"
    assert payload["config"]["n_train"] == 8000, "the -p parameter did not reach the notebook"
    gap = [r for r in payload["records"] if r["metric"] == "gap_act1"][0]
    assert gap["ci_low"] > 0, "the planted privileged-history gap was not detected"

def test_unknown_parameter_is_refused(tmp_path):
    r = hoi_audit("reproduce", "--out", str(tmp_path), *DEMO, "-p", "n_trian=10")
    assert r.returncode == 2 and "n_trian" in r.stderr

def test_unknown_experiment_is_refused(tmp_path):
    r = hoi_audit("reproduce", "--out", str(tmp_path), "--only", "table99", "--quiet")
    assert r.returncode == 2 and "table99" in r.stderr and "demo_provenance" in r.stderr

def test_notebook_without_parameters_tag_is_refused(tmp_path, repo):
    "papermill would silently run the defaults of an untagged notebook: reproduce must refuse it."
    nb = nbformat.read(repo / "nbs" / "experiments" / "demo_provenance.ipynb", as_version=4)
    for cell in nb.cells: cell.metadata.pop("tags", None)
    folder = tmp_path / "nbs"; folder.mkdir()
    nbformat.write(nb, folder / "untagged.ipynb")
    r = hoi_audit("reproduce", "--out", str(tmp_path / "out"), "--notebooks", str(folder), "--quiet")
    assert r.returncode == 2 and "tagged 'parameters'" in r.stderr

def test_every_experiment_notebook_has_a_tagged_parameters_cell(repo):
    "nbdev_clean strips cell tags unless settings.ini allows them; this catches a notebook that lost its tag."
    for path in sorted((repo / "nbs" / "experiments").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, f"{path.name}: {len(tagged)} cells tagged 'parameters'"
        assert "scale" in tagged[0].source and "out_dir" in tagged[0].source, path.name

def test_status_of_a_missing_store_is_a_clear_error(tmp_path):
    r = hoi_audit("status", str(tmp_path))
    assert r.returncode == 2 and "no result store" in r.stderr

def test_failed_experiment_keeps_its_notebook_and_names_it(tmp_path, repo):
    nb = nbformat.read(repo / "nbs" / "experiments" / "demo_provenance.ipynb", as_version=4)
    nb.cells.insert(2, nbformat.v4.new_code_cell("raise ValueError('planted failure')"))
    folder = tmp_path / "nbs"; folder.mkdir()
    nbformat.write(nb, folder / "broken.ipynb")
    r = hoi_audit("reproduce", "--out", str(tmp_path / "out"), "--notebooks", str(folder), "--quiet")
    assert r.returncode == 2 and "broken" in r.stderr and "planted failure" in r.stderr
    assert (tmp_path / "out" / "runs" / "broken.failed.ipynb").exists()
    assert not (tmp_path / "out" / "runs" / "broken.ipynb").exists()


# ------------------------------------------------------------------------------------------- a fresh clone, with nothing beside it

EXPERIMENTS = sorted(p.stem for p in (REPO / "nbs" / "experiments").glob("*.ipynb"))
NOT_YET = {}  # experiment -> why its committed results cannot be regenerated yet (strict xfail: once fixed, the entry must go)
# `make fresh-clone` runs these tests on two pytest-xdist workers (`-n 2 --dist loadgroup`), each with a clone of its own, so the two
# cores run two experiments at once. Experiments that take recognizer fits or trained units from one another's stores (the output
# folder's peers: horizons' fits are controls', scope copies controls' units) run in one clone, one after another (an xdist group);
# every other experiment goes to whichever worker is free. Measured on the 2-core CI machine with both workers busy: four_condition
# 410 s, controls 179 s, decomposition 157 s, lta 133 s, scope 106 s, the others 16-90 s; 14.4 min in all against 17-18 sequentially.
# results made from files in ../shared/anchors (EPIC-KITCHENS-100's annotations, CC BY-NC, never shipped): a clone without them
# writes a record of the skip in their place, which is not the committed findings; every other results file stays byte-compared
ANCHORED = {"case_studies_anchors.json"}
SHARED_FITS = {"controls", "horizons", "scope", "sensitivity"}
def stream_marks(name:str) -> list: return [pytest.mark.xdist_group("shared_fits")] if name in SHARED_FITS else []

@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory) -> Path:
    "A copy of the working tree (tracked and untracked, not ignored files) in a folder with no ../shared: what a user clones."
    root = tmp_path_factory.mktemp("fresh") / "hoi_audit"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True); shutil.copy2(REPO / name, root / name)
    assert not (root.parent / "shared").exists() and not (root.parent.parent / "shared").exists()
    return root

@pytest.mark.parametrize("name", [pytest.param(n, marks=stream_marks(n)
                                                 + ([pytest.mark.xfail(strict=True, reason=NOT_YET[n])] if n in NOT_YET else []))
                                  for n in EXPERIMENTS])
def test_fresh_clone_regenerates_the_committed_results(name, fresh_clone, tmp_path):
    """`make reproduce` (= `hoi-audit reproduce --out .`) in a clone with no ../shared and no HOI_AUDIT_LABELS: every experiment runs at the
    small scale, writes a figure and its executed notebook, and regenerates the committed JSONs byte for byte (where they were made in
    the same numeric environment; elsewhere their structure, and the test says it skipped the bytes)."""
    env = {k: v for k, v in os.environ.items() if k != "HOI_AUDIT_LABELS"}
    env.update(PYTHONPATH=str(fresh_clone), HOI_AUDIT_CACHE=str(tmp_path / "cache"))   # the clone's package, an empty cache
    results = fresh_clone / "results"
    committed = {p.name: p.read_bytes() for p in results.glob("*.json")}
    plans = lambda: [root / "plan.json" for root in store_roots(fresh_clone)]   # an engine may keep stores below its experiment's folder
    shared = lambda: (fresh_clone / "raw" / "shared").glob("*/*")   # generated inputs, written once for every experiment that reads them
    before = {p: p.stat().st_mtime_ns for p in [*results.glob("*.json"), *(fresh_clone / "figures").glob("*.png"), *plans(), *shared()]}
    r = hoi_audit("reproduce", "--only", name, "--scale", "small", "--out", ".", "--quiet", cwd=fresh_clone, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "real labels: shipped with hoi_audit" in r.stderr and "warning" not in r.stderr, r.stderr[-3000:]
    rewritten = sorted(p for p in results.glob("*.json") if before.get(p) != p.stat().st_mtime_ns)
    figures = [p for p in (fresh_clone / "figures").glob("*.png") if before.get(p) != p.stat().st_mtime_ns]
    assert figures, f"{name} wrote no figure"
    assert (fresh_clone / "runs" / f"{name}.ipynb").exists()              # the executed notebook is kept
    for folder in {p.parent for p in shared() if before.get(p) != p.stat().st_mtime_ns}:
        assert f"{folder.resolve()}/" in r.stdout, f"{name} wrote {folder} and did not say so"
    assert not (fresh_clone / "raw" / name).exists() or name in RAW_OUTPUTS, f"{name} wrote raw/{name}: generated inputs go to raw/shared/"
    assert results / f"{name}.json" in rewritten
    computed = Counter(path for path, copied in recognizer_fits(fresh_clone) if not copied)
    refits = {path: n for path, n in computed.items() if n > 1}
    assert not refits, f"{name}: recognizer fits computed again in another store of the same output folder instead of copied: {refits}"
    elsewhere = []   # results files committed from another numeric environment: bytes are not comparable, their structure is
    for p in rewritten:
        assert p.name in committed, f"{name} wrote {p.name}, which is not committed"
        if p.name in ANCHORED and "skipped" in json.loads(p.read_bytes())["config"]: continue   # no ../shared here: see ANCHORED
        if not matches_committed(p.read_bytes(), committed[p.name], p.name): elsewhere.append(p.name)
    if os.environ.get("HOI_AUDIT_EXECUTED"):   # make test: the docs build takes this executed notebook instead of running it again
        keep = Path(os.environ["HOI_AUDIT_EXECUTED"]); keep.mkdir(parents=True, exist_ok=True)
        shutil.copy2(fresh_clone / "runs" / f"{name}.ipynb", keep / f"{name}.ipynb")
    stores = sorted(p.parent for p in plans() if before.get(p) != p.stat().st_mtime_ns)   # the result stores this experiment used
    recompute_through_slurm_arrays(name, fresh_clone, stores, {p.name: p.read_bytes() for p in rewritten}, env, tmp_path)
    if elsewhere:
        pytest.skip(f"{', '.join(elsewhere)} committed from another numeric environment (core.numeric_environment): the regenerated records "
                    "have the committed structure and the SLURM recomputation this machine's bytes, but the bytes were not compared with "
                    "the committed file; regenerate them here with `make reproduce`")

def recognizer_fits(out:Path) -> list:
    "Every recognizer-fit unit (`conditions.recognizer_fit_unit`) in the stores below `out`: (its path, whether it was copied from a peer store)."
    fits = []
    for store in store_roots(out):
        for manifest in (store / "units").rglob("manifest.json"):
            path = manifest.parent.relative_to(store / "units").as_posix()
            if any(part.startswith("recognizer=") for part in path.split("/")): fits.append((path, "copied_from" in json.loads(manifest.read_text())))
    return fits

# The SLURM backend on every experiment, at the cost of two units: the in-place run above left the experiment's stores; the last two
# units it planned (its last batch) are deleted, and `reproduce --backend slurm --cluster local` (submitit's local executor) computes
# them again as one array of two tasks, two processes at once, after which the experiment reads every unit back and must write the
# committed bytes once more. Each array costs a process start per task (torch and hoi_audit imported, 30 to 50 s on the loaded
# 2-core CI machine) whatever it computes, and an experiment submits one array per batch of pending units, so recomputing the whole
# grid would cost more than the in-place run (architectures: 19 min; tests/test_cluster.py does it for demo_provenance). Measured on
# context_probes: the whole grid 354 s, 3 units spread over the grid (3 arrays) 129 s, its last 2 units (1 array) 87 s.
# experiment -> why it writes raw/<experiment>/ (generated inputs another experiment could read belong in raw/shared/, ExperimentPaths.data)
RAW_OUTPUTS = {"epic_anticipation": "its synthetic videos with damaged packets: inputs no other experiment reads"}
SLURM_UNITS = 2          # units recomputed by array tasks per experiment: the last ones it planned
# experiment -> why its units are not recomputed through the SLURM backend here (once the cause is fixed, the entry must go)
SLURM_NOT_YET = {}
SLURM_SETTINGS = "tasks = 2\ntimeout_min = 20\npoll_s = 1.0\n"

def recompute_through_slurm_arrays(name, clone, stores, expected, env, tmp_path):
    "Delete the last SLURM_UNITS units of `stores` in `clone`, recompute them with `--backend slurm --cluster local`; `expected`: results file -> bytes."
    if not stores or name in SLURM_NOT_YET: return   # no stores: computed in the notebook itself, no backend has anything to do
    grid = [(store / "units" / m["path"], m["path"].startswith("records=")) for store in stores
            for m in json.loads((store / "plan.json").read_text())]
    # a draw's records unit (`datasets.draw_records`) sums up that draw's units: it goes too, so that the deleted units are read again
    redo = [unit for unit, summary in grid if not summary][-SLURM_UNITS:]
    for unit in redo: shutil.rmtree(unit)
    for unit in (unit for unit, summary in grid if summary): shutil.rmtree(unit, ignore_errors=True)
    (tmp_path / "cluster.toml").write_text(SLURM_SETTINGS)
    r = hoi_audit("reproduce", "--only", name, "--scale", "small", "--out", ".", "--quiet", "--backend", "slurm", "--cluster", "local",
                  "--cluster-config", str(tmp_path / "cluster.toml"), cwd=clone, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    for file, data in expected.items():
        assert (clone / "results" / file).read_bytes() == data, f"{file}: {len(redo)} of its units recomputed by SLURM array tasks, it differs from the committed file"
    jobs = [j for store in stores if (store / ".cluster" / "jobs.json").exists() for j in json.loads((store / ".cluster" / "jobs.json").read_text())]
    assert jobs and all(j["state"] == "completed" for j in jobs), jobs     # the deleted units were computed by array tasks
    assert all((unit / "manifest.json").exists() for unit in redo)

def test_make_reproduce_is_the_command():
    "No environment variable or extra argument separates `make reproduce` from the README's `hoi-audit reproduce`."
    makefile = (REPO / "Makefile").read_text()
    assert "HOI_AUDIT_LABELS" not in makefile.replace("# No environment variable", "")
    r = subprocess.run(["make", "--no-print-directory", "-n", "reproduce"], cwd=REPO, capture_output=True, text=True)   # also under make test
    commands = [line for line in r.stdout.strip().splitlines() if not line.startswith("make")]
    assert r.returncode == 0 and commands[-1] == ".venv/bin/hoi-audit reproduce --scale small --out .", r.stdout

def test_the_wheel_ships_the_labels(fresh_clone, tmp_path):
    "A `pip install` gets the real labels too: the wheel built from a clone holds every shipped file, and pip says nothing about them."
    import zipfile
    from hoi_audit.procedural import SHIPPED_LABEL_PINS
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(fresh_clone)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "would be ignored" not in r.stdout + r.stderr
    names = set(zipfile.ZipFile(next(tmp_path.glob("*.whl"))).namelist())
    for dataset, files in SHIPPED_LABEL_PINS.items():
        for name in [*files, "PROVENANCE.txt"]: assert f"hoi_audit/data/labels/{dataset}/{name}" in names, (dataset, name)

def test_a_missing_dataset_is_an_error_or_a_recorded_skip(tmp_path, labels_dir):
    "decomposition with labels_dir holding only GTEA: an error naming what is missing; with skip_missing, a warning and config.skipped."
    shutil.copytree(labels_dir / "gtea", tmp_path / "labels" / "gtea")
    given = ["reproduce", "--only", "decomposition", "--quiet", "-p", f"labels_dir={tmp_path / 'labels'}", "-p", "synthetic_size=tiny"]
    r = hoi_audit(*given, "--out", str(tmp_path / "strict"))
    assert r.returncode == 2 and "no MS-TCN folder for 'breakfast' (labels_dir=" in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "strict" / "results" / "decomposition.json").exists()
    r = hoi_audit(*given, "-p", "skip_missing=true", "--out", str(tmp_path / "lenient"))
    assert r.returncode == 0, r.stderr[-2000:]
    for name in ("breakfast", "50salads"): assert f"warning: decomposition skipped {name} (labels not found)" in r.stderr
    payload = json.loads((tmp_path / "lenient" / "results" / "decomposition.json").read_text())
    assert payload["config"]["skipped"] == {"breakfast": "labels not found", "50salads": "labels not found"}
    assert {rec["dataset"] for rec in payload["records"]} == {"gtea", "synthetic_breakfast"}
