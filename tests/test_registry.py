"""One registry type (issue 34): every registry is a `core.Registry`, workers receive all of them by value, and `--plugin MODULE`
brings a user's registrations to every command and worker."""
import json, os, subprocess, sys, textwrap
from pathlib import Path
import numpy as np
import pytest
from hoi_audit.core import DataError, Registry, RegistryError, registries
from conftest import write_tiny_mstcn as _mstcn

HOI_AUDIT = Path(sys.executable).parent / "hoi-audit"

def test_registry_refuses_a_second_entry_and_names_itself_and_the_entry():
    r = Registry("test widgets")
    assert r.register("a", 1) == 1 and r.register("b", 2) == 2 and r.register("a", 1) == 1   # the same entry again: a no-op
    with pytest.raises(RegistryError, match=r"test widgets: 'a' is registered already"): r.register("a", 3)
    assert r.register("a", 3, replace=True) == 3 and list(r.items()) == [("a", 3), ("b", 2)]   # replaced in place
    with pytest.raises(KeyError, match=r"test widgets: no entry 'z'; known: a, b") as e: r["z"]
    assert isinstance(e.value, DataError) and str(e.value) == "test widgets: no entry 'z'; known: a, b"
    assert ("a" in r, "z" in r, r.get("z"), len(r), dict(r)) == (True, False, None, 2, {"a": 3, "b": 2})
    assert r.unregister("b") == 2 and list(r) == ["a"]
    with pytest.raises(TypeError): r["c"] = 4                      # read-only: `register` adds
    assert registries()[-1] is r and r.module == __name__

def test_every_registry_is_one_type_named_by_what_it_holds():
    from hoi_audit import conditions, contracts, controls, lta, models, success
    named = [(conditions.HISTORY_SOURCES, "history sources"), (conditions.CONDITIONS, "audit conditions"), (conditions.QUERY_SCHEDULES, "query schedules"),
             (controls.CONTROLS, "controls"), (models.ARCHITECTURES, "architectures"), (contracts.ROLES, "plug-in roles")]
    for registry, name in named:
        assert isinstance(registry, Registry) and registry.name == name and any(r is registry for r in registries())
    assert list(conditions.CONDITIONS)[:5] == ["video_only", "recognizer_bfr", "recognizer_ba", "gt_history", "context_only"]
    assert list(controls.CONTROLS) == ["matched", "fixed_checkpoint", "no_video_provenance", "boundary_independent"]
    assert not hasattr(success, "CONDITIONS") and not hasattr(lta, "CONDITIONS")            # one CONDITIONS: the audit's
    assert set(success.FEATURE_CONDITIONS) == set(success.FEATURE_SETS) and lta.TRANSCRIPT_SOURCES == ("recognizer", "gt")

def test_a_fresh_worker_process_receives_every_registry_by_value(tmp_path):
    "Entries registered at run time (in a module the worker has not imported yet, and in a registry of a module of the user's) reach it."
    from hoi_audit.conditions import AuditCondition, CONDITIONS, register_condition
    from hoi_audit.cluster import _pack
    from hoi_audit.controls import CONTROLS, Control, register_control
    cond = register_condition(AuditCondition("shipped_video", "Video only, shipped", ("video", "state")))
    ctl = register_control(Control("shipped", "shipped", "none", "boundary", ("video_only", "shipped_video"), "video_only", "shipped_video"))
    own = Registry("test gadgets", module="no_such_module_of_the_user")
    own.register("g", 1)
    try: blob = _pack([], len)
    finally: CONDITIONS.unregister("shipped_video"); CONTROLS.unregister("shipped")
    (tmp_path / "blob.pkl").write_bytes(blob)
    code = textwrap.dedent(f"""
        import sys
        from hoi_audit.cluster import _unpack
        assert "hoi_audit.controls" not in sys.modules
        units, compute = _unpack(open({str(tmp_path / 'blob.pkl')!r}, "rb").read())
        from hoi_audit.conditions import CONDITIONS
        from hoi_audit.controls import CONTROLS
        print(CONDITIONS["shipped_video"].label, "|", CONTROLS["shipped"].conditions, "|", compute.__name__)
        print("hoi_audit.contracts" in sys.modules)   # the plug-in roles' module: imported, since no entry imported it
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["Video only, shipped | ('video_only', 'shipped_video') | len", "True"], r.stdout

PLUGIN = '''
import os
from hoi_audit.conditions import AuditCondition, register_condition
from hoi_audit.models import fit_anticipation, register_architecture

def fit_logged(*args, **kwargs):
    "The transformer, noting which process trained it."
    with open(os.environ["PLUGIN_LOG"], "a") as f: f.write(f"{os.getpid()}\\n")
    return fit_anticipation(*args, **kwargs)

register_architecture("logged_transformer", fit_logged)
register_condition(AuditCondition("plugin_video", "Video only, from a plug-in", ("video", "state")))
'''

def _hoi_audit(*argv, tmp_path:Path) -> subprocess.Popen:
    env = {**os.environ, "PLUGIN_LOG": str(tmp_path / "fits.log"), "COLUMNS": "400"}
    return subprocess.Popen([str(HOI_AUDIT), *map(str, argv)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

def test_plugin_registrations_reach_the_command_line_and_every_worker(tmp_path):
    "`--plugin plugin.py` (anywhere on the line) registers an architecture and a condition; two workers train with them."
    (tmp_path / "plugin.py").write_text(PLUGIN)
    data = _mstcn(tmp_path / "data")
    p = _hoi_audit("--plugin", "plugin.py", "audit", "--help", tmp_path=tmp_path)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert "plugin_video" in out                                              # --conditions lists the plug-in's condition
    p = _hoi_audit("audit", data, "--conditions", "video_only,plugin_video", "--architecture", "logged_transformer", "--workers", "2",
                   "--splits", "1", "--seeds", "42", "--epochs", "1", "--tokens", "2", "--d-model", "16", "--out", tmp_path / "out",
                   "--plugin", "plugin.py", tmp_path=tmp_path)
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, err
    records = json.loads((tmp_path / "out" / "results" / "four_condition.json").read_text())
    assert {r["condition"] for r in records["records"] if "condition" in r} == {"video_only", "plugin_video"}
    assert records["config"]["architecture"] == "logged_transformer"
    pids = (tmp_path / "fits.log").read_text().split()
    assert len(pids) == 2 and p.pid not in map(int, pids), pids              # one fit per condition, each in a worker process

def test_a_plugin_that_cannot_be_imported_is_a_named_error(tmp_path, capsys):
    from hoi_audit.runner import main
    (tmp_path / "typo.py").write_text("from hoi_audit.conditions import register_condtion\n")
    assert main(["status", str(tmp_path), f"--plugin={tmp_path / 'typo.py'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hoi-audit: error: --plugin {tmp_path / 'typo.py'}: importing") and "register_condtion" in err, err
    assert "Traceback" not in err
    assert main(["--plugin", "no_such_plugin_module", "status", str(tmp_path)]) == 2
    assert "--plugin no_such_plugin_module: cannot import module 'no_such_plugin_module'" in capsys.readouterr().err
    assert main(["status", str(tmp_path), "--plugin"]) == 2
    assert "--plugin needs a MODULE" in capsys.readouterr().err


def test_a_plugin_reaches_the_notebook_kernels_of_reproduce(tmp_path, monkeypatch):
    "`hoi-audit --plugin` -> the kernels `reproduce` starts load the plug-in too (an injected first cell), so its registrations hold there."
    from hoi_audit.plugins import plugins_environment
    from hoi_audit.runner import run_experiment
    plug = tmp_path / "kernelplug.py"
    plug.write_text("from hoi_audit.conditions import AuditCondition, register_condition\n"
                    "register_condition(AuditCondition('kernel_cond', 'from a plug-in', ('history', 'state'), 'gt'))\n")
    nbs = tmp_path / "nbs"; nbs.mkdir()
    cells = [{"id": "params", "cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "scale = 'small'\nout_dir = '.'", "outputs": [],
              "execution_count": None},
             {"id": "probe", "cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source":
              "import json, pathlib\nfrom hoi_audit.conditions import CONDITIONS\n"
              "p = pathlib.Path(out_dir) / 'results' / 'probe_plugin.json'; p.parent.mkdir(parents=True, exist_ok=True)\n"
              "p.write_text(json.dumps({'has': 'kernel_cond' in CONDITIONS}))"}]
    (nbs / "probe_plugin.ipynb").write_text(json.dumps({"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "python3",
                                            "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}))
    has = lambda out: json.loads((out / "results" / "probe_plugin.json").read_text())["has"]
    run_experiment(nbs / "probe_plugin.ipynb", tmp_path / "without", progress=False)
    for k, v in plugins_environment([str(plug)]).items(): monkeypatch.setenv(k, v)
    run_experiment(nbs / "probe_plugin.ipynb", tmp_path / "with", progress=False)
    assert (has(tmp_path / "without"), has(tmp_path / "with")) == (False, True)
