"""One output convention for every `hoi-audit` subcommand (`store.CommandOutput`): `--out DIR` writes DIR/results/<experiment>.json,
DIR/figures/ and DIR/store/<experiment>/; `--out FILE.json` is the results file, with figures and store in its folder. Nothing is
written anywhere else (each command runs from an empty working folder, and every file that appears is accounted for), and the
command prints every file (or store folder) it wrote."""
from pathlib import Path
import pytest
from conftest import hoi_audit
from hoi_audit.runner import build_parser

def files_under(root:Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}

def run_in_sandbox(tmp_path, *argv):
    "Run `hoi-audit ARGV` from an empty working folder in tmp_path; return the result and every file created or changed in tmp_path."
    cwd = tmp_path / "cwd"; cwd.mkdir(exist_ok=True)
    before = files_under(tmp_path)
    r = hoi_audit(*argv, cwd=cwd)
    changed = sorted(p for p, m in files_under(tmp_path).items() if before.get(p) != m)
    return r, changed

def printed_paths(stdout:str) -> list[Path]:
    "The paths a command reports: `wrote PATH` lines (stage commands) and the indented listing of `reproduce`."
    out = []
    for line in stdout.splitlines():
        words = line.split()
        if len(words) == 2 and (words[0] == "wrote" or line.startswith("  ")): out.append(Path(words[1].rstrip("/")))
    return out

def check_convention(r, changed, out:Path, experiment:str, extra:tuple=()):
    "Every changed file sits where the convention puts it and was printed (itself, or the store folder holding it)."
    assert r.returncode == 0, r.stderr[-3000:]
    if out.suffix == ".json":
        folder, results = out.parent, [out] + [out.with_name(f"{out.stem}.{e}.json") for e in extra]
    else:
        folder, results = out, [out / "results" / f"{e}.json" for e in (experiment, *extra)]
    store, figures = folder / "store" / experiment, folder / "figures"
    assert set(results) <= set(changed), f"expected results files {results}, got {changed}"
    printed = printed_paths(r.stdout)
    for p in changed:
        beside = p.name.endswith(".report.html") and p.with_name(p.name[:-len(".report.html")] + ".json") in results   # hoi-audit audit's report
        assert p in results or beside or p.is_relative_to(store) or p.parent == figures, f"{p}: written outside the --out convention"
        assert any(p == q or p.is_relative_to(q) for q in printed), f"{p} was written but not printed:\n{r.stdout}"
    return changed

@pytest.fixture(params=["folder", "file"])
def out_mode(request): return request.param

def out_path(tmp_path, mode, name="mine.json"):
    return tmp_path / "o" if mode == "folder" else tmp_path / "o" / name

# ------------------------------------------------------------------------------------------------------------- stage commands

def test_probes(tmp_path, out_mode):
    out = out_path(tmp_path, out_mode)
    r, changed = run_in_sandbox(tmp_path, "probes", "--real", "gtea", "--splits", "1", "--predictors", "majority", "--out", str(out))
    check_convention(r, changed, out, "decomposition")
    assert len(changed) == 1                                    # label-only: no store, no figure

def test_success(tmp_path, out_mode):
    out = out_path(tmp_path, out_mode)
    r, changed = run_in_sandbox(tmp_path, "success", "--size", "tiny", "--seeds", "42", "--horizons", "4", "--forecaster-steps", "20",
                                "--n-boot", "50", "--quiet", "--out", str(out))
    check_convention(r, changed, out, "success_probes")
    assert any(p.name == "plan.json" for p in changed)         # the store is there, so a rerun resumes

def test_ranking(tmp_path, out_mode):
    out = out_path(tmp_path, out_mode)
    r, changed = run_in_sandbox(tmp_path, "ranking", "--size", "tiny", "--methods", "persistence", "--n-boot", "50", "--quiet",
                                "--out", str(out))
    check_convention(r, changed, out, "candidate_ranking")

def test_audit(tmp_path, out_mode):
    from hoi_audit.procedural import read_mstcn
    from hoi_audit.synthetic import synthetic_dataset, write_synthetic
    data = write_synthetic(synthetic_dataset("breakfast", "tiny", seed=0), tmp_path / "data" / "breakfast")
    out = out_path(tmp_path, out_mode)
    r, changed = run_in_sandbox(tmp_path, "audit", str(data), "--conditions", "recognizer_ba,gt_history", "--splits", "1", "--seeds", "42",
                                "--tokens", "2", "--epochs", "1", "--d-model", "16", "--out", str(out))
    check_convention(r, [p for p in changed if not p.is_relative_to(tmp_path / "data")], out, "four_condition", extra=("intervention_2x2",))

def test_stage_commands_need_an_out(tmp_path):
    for command in ("probes", "success", "ranking", "audit"):
        r = hoi_audit(command, cwd=tmp_path)
        assert r.returncode == 2 and "--out" in r.stderr, (command, r.stderr)
    assert not list(tmp_path.iterdir())

def test_a_file_where_a_folder_is_needed_is_refused(tmp_path):
    (tmp_path / "taken").write_text("x")
    r = hoi_audit("probes", "--real", "gtea", "--out", str(tmp_path / "taken"), cwd=tmp_path)
    assert r.returncode == 2 and "taken: --out must be a folder or a .json path" in r.stderr

# ------------------------------------------------------------------------------------------------------------- reproduce, status

def test_reproduce(tmp_path):
    out = tmp_path / "o"
    r, changed = run_in_sandbox(tmp_path, "reproduce", "--only", "demo_provenance", "--quiet", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert all(p.is_relative_to(out) for p in changed), [p for p in changed if not p.is_relative_to(out)]
    printed = printed_paths(r.stdout)
    for p in changed:                                             # results, figures, the executed notebook, the store
        assert any(p == q or p.is_relative_to(q) for q in printed), f"{p} was written but not printed:\n{r.stdout}"
    assert {out / "results" / "demo_provenance.json", out / "runs" / "demo_provenance.ipynb"} <= set(changed)
    assert "real labels: " in r.stderr                            # which labels the experiments read is said
    r = hoi_audit("reproduce", "--out", str(tmp_path / "x.json"), "--quiet", cwd=tmp_path)
    assert r.returncode == 2 and "--out takes a folder" in r.stderr

def test_status_writes_nothing(tmp_path):
    from hoi_audit.store import ResultStore, Unit
    ResultStore(tmp_path / "store" / "toy").run([Unit({"i": 1})], lambda u, w: 1, progress=False)
    r, changed = run_in_sandbox(tmp_path, "status", str(tmp_path))
    assert r.returncode == 0 and changed == []

# ------------------------------------------------------------------------------------------------------------- coverage

def test_check_writes_nothing_and_says_pass_or_fail(tmp_path):
    "`hoi-audit check ROLE SPEC` (issue 31) runs a role's checker alone: a table, exit 0 when every check holds, 1 when one fails; no file."
    user = tmp_path / "user"; user.mkdir()
    (user / "wm.py").write_text("import numpy as np\nclass Still:\n    def rollout(self, context, commands):\n"
                                "        return {'latents': np.repeat(context[:, -1:], commands.shape[1], 1)}\n"
                                "def make(seed=42): return Still()\ndef bad(seed=42): return 3\n")
    r, changed = run_in_sandbox(tmp_path, "check", "world_model", f"{user}/wm.py:make")
    assert r.returncode == 0 and changed == [] and "pass: every check holds" in r.stdout, r.stdout + r.stderr
    r, changed = run_in_sandbox(tmp_path, "check", "world_model", f"{user}/wm.py:bad")
    assert r.returncode == 1 and changed == [] and "FAIL" in r.stdout and "has no method rollout" in r.stdout, r.stdout + r.stderr

COVERED = {"probes", "success", "ranking", "audit", "reproduce", "status", "plan", "check"}   # tested above
ELSEWHERE = {"extract": "tests/test_epic.py::test_cli_out_convention_writes_only_below_out_and_lists_every_file (it needs rendered clips)",
             "epic": "tests/test_epic.py::test_epic_cli_out_convention_writes_only_below_out_and_lists_every_file",
             "lint": "tests/test_lint.py::test_cli_exit_codes_and_report",
             "lta": "tests/test_lta.py::test_cli",
             "scope": "tests/test_scope.py::test_command_writes_only_below_out_and_is_byte_identical",
             "report": "tests/test_report.py::test_user_model_audit_from_the_command_line (audit, then report beside its results)",
             # controls and the three sweeps are registered stages: one path (stages.run_stage), tested through each command
             "controls": "tests/test_controls.py::test_cli_results_are_deterministic_and_stay_below_out",
             "sensitivity": "tests/test_controls.py::test_cli_results_are_deterministic_and_stay_below_out",
             "horizons": "tests/test_controls.py::test_cli_results_are_deterministic_and_stay_below_out",
             "context-probes": "tests/test_controls.py::test_cli_results_are_deterministic_and_stay_below_out"}

@pytest.mark.parametrize("scale,below", [("small", "store"), ("full", "results/full/store")])
def test_plan_writes_only_its_store_below_out(tmp_path, scale, below):
    """`hoi-audit plan` lists the grid without computing: it writes nothing but the store's plan (and locks) below --out, and says
    where; at the full scale that is the committed store below results/full (issue 50: plan read DIR/store there and found nothing)."""
    out = tmp_path / "o"
    r, changed = run_in_sandbox(tmp_path, "plan", "demo_provenance", "--out", str(out), "--scale", scale)
    assert r.returncode == 0, r.stderr[-3000:]
    store = out / below / "demo_provenance"
    assert store / "plan.json" in changed and all(p.is_relative_to(store) for p in changed), changed
    assert not any(p.parent.name == "done" or p.suffix == ".pkl" for p in changed), "plan computed units"
    assert f"48 units (48 pending)" in r.stdout and str(store) in r.stdout, r.stdout

def test_every_subcommand_is_covered():
    "A new subcommand must get an output-convention test here (or an entry in ELSEWHERE naming its test)."
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    # the toy protocol of nbs/96_new_protocol.ipynb is a subcommand only where hoi_audit.new_protocol was imported (tested end to end there)
    shown = set(sub.choices) - {"toy"}
    assert shown == COVERED | set(ELSEWHERE), shown ^ (COVERED | set(ELSEWHERE))

def test_every_handler_reads_its_docments_as_fastcore_does():
    "cli.parameter_docs (the library's reader: fastcore is dev-only) agrees with fastcore's docments on every subcommand's handler."
    from fastcore.docments import docments
    from hoi_audit.cli import parameter_docs
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        handler = p.get_default("_handler")
        ours = {k: v.docment for k, v in parameter_docs(handler).items()}
        assert ours == {k: v.docment for k, v in docments(handler, full=True, returns=False, args_kwargs=True).items()}, name
        assert all(ours[k] for k, v in parameter_docs(handler).items() if v.kind not in (v.kind.VAR_KEYWORD, v.kind.VAR_POSITIONAL)), name

def test_every_registered_stage_is_the_subcommand_its_entry_builds():
    "A stage registered in `stages.STAGES` is a subcommand (its name), and the handler it runs is the entry's: one registration makes both."
    from hoi_audit.stages import STAGES
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert {"lta", "controls"} <= set(STAGES), list(STAGES)
    for name, stage in STAGES.items():
        assert name in sub.choices and sub.choices[name].get_default("_handler") is stage.command, name
