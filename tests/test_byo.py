"""Bring your own: a world model, encoder and forecaster from a separate file run through all three protocols from the command
line, and every embedded world model runs through every protocol (the EPIC null-plan fix)."""
import argparse, json
from pathlib import Path
import numpy as np
import pandas as pd
import pytest
from hoi_audit import epic, ranking, success
from hoi_audit.contracts import ContractError, as_context_forecaster, build, check_world_model
from hoi_audit.core import HoiAuditError
from hoi_audit.results import read_results
from hoi_audit.encoder import train_context_forecaster
from hoi_audit.episodes import COMMAND_DIM, make_episodes
from hoi_audit.worldmodel import LinearExtrapolationModel, PersistenceModel, train_forecaster

USER = Path(__file__).parent / "user_worldmodel.py"


def cli(module, *argv):
    p = argparse.ArgumentParser(); sub = p.add_subparsers(); module.add_subcommand(sub)
    args = p.parse_args([*argv]); return args.func(args)


@pytest.fixture(scope="module")
def ep():
    return make_episodes("tiny", seed=0)


@pytest.fixture(scope="module")
def epic_data(tmp_path_factory):
    pytest.importorskip("imageio_ffmpeg", reason="the EPIC-like videos need imageio-ffmpeg (a dev dependency)")
    from hoi_audit.clips import write_epic_like
    return write_epic_like(tmp_path_factory.mktemp("epic") / "videos", "tiny", seed=0)


def test_user_world_model_through_success_cli(ep, tmp_path):
    out = tmp_path / "s.json"
    assert cli(success, "success", "--size", "tiny", "--out", str(out), "--seeds", "42", "--horizons", "4", "--n-boot", "20",
               "--model", f"{USER}:make_world_model", "--quiet") == 0
    payload = read_results(out)
    assert payload["config"]["forecaster"]["model"] == f"{USER}:make_world_model"
    assert payload["config"]["forecaster"]["source_sha256"] is not None
    # the forecast features in the store are the user's model's rollout, fitted on train_full only
    from user_worldmodel import make_world_model          # tests/ is on sys.path under pytest (rootdir conftest)
    model = make_world_model(ep.split_of("train_full"))
    held = ep.split_of("heldout")
    stored = np.load(tmp_path / "store" / "success_probes" / "units" / "stage=forecaster" / "seed=42" / "H4_heldout_endpoint.npy")
    np.testing.assert_allclose(stored, model.rollout(held.latents[:, :4], held.commands[:, 4:])["latents"][:, -1], rtol=1e-6)


def test_user_world_model_through_ranking_cli(ep, tmp_path):
    out = tmp_path / "r.json"
    assert cli(ranking, "ranking", "--size", "tiny", "--out", str(out), "--methods", "persistence", "--seeds", "42",
               "--model", f"mine={USER}:make_world_model", "--n-boot", "20", "--quiet") == 0
    rec = read_results(out)["records"]
    endpoint = rec[rec.energy.eq("endpoint") & rec.seed.isna() if "seed" in rec else rec.energy.eq("endpoint")]
    r1 = endpoint[endpoint.method.eq("mine") & endpoint.metric.eq("r_at_1")].value.item()
    assert endpoint[endpoint.method.eq("persistence") & endpoint.metric.eq("r_at_1")].value.item() == pytest.approx(1 / 16, abs=1e-12)
    # reference: the same model's energies computed directly on the pinned candidate set
    from user_worldmodel import make_world_model
    pool = ranking.heldout_pool(ep)
    cs = ranking.build_candidates(pool.context, pool.plans, pool.success, pool.language, pool.episode_id)
    goal, future = ranking.query_targets(ep, pool, cs)
    e = ranking.candidate_energies(make_world_model(ep.split_of("train_full")), pool.context[cs.query], cs, goal, future, pin=cs.sha256)
    assert r1 == pytest.approx(ranking.rank_metrics(e["endpoint"], cs.recorded).r_at_1.mean(), abs=1e-12)
    assert set(rec.comparison.dropna()) == {"mine-persistence"}


def test_user_encoder_and_forecaster_through_epic_cli(epic_data, tmp_path):
    out = tmp_path / "e.json"
    assert cli(epic, "epic", "--videos", str(epic_data["folder"]), "--narrations", str(epic_data["narrations"]), "--out", str(out),
               "--encoder", f"{USER}:make_encoder", "--model", f"{USER}:make_forecaster", "--n-boot", "20") == 0
    payload = json.loads(out.read_text())
    assert payload["config"]["latent_dim"] == 6 and payload["config"]["encoder"] == f"{USER}:make_encoder"
    assert payload["config"]["seeds"] == [42]          # a factory that ignores the seed is one frozen model: one run, not three
    assert payload["config"]["forecaster_adapter"] == "predict"
    assert {"fingerprint_encoder", "fingerprint_forecaster_42"} <= set(payload["pins"])
    rec = pd.DataFrame(payload["records"])
    assert set(rec.feature_set.dropna()) == {"context", "persistence", "linear", "forecast", "oracle"}
    # every narration is scored or listed as excluded, with its reason
    summary = payload["config"]["substitution_summary"]
    assert len(payload["config"]["excluded"]) == summary["actions_with_errors"]


def test_a_broken_user_model_is_named(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import numpy as np\nclass M:\n    def rollout(self, context, commands):\n"
                   "        return {'latents': context[:, -1:]}\ndef make(episodes, seed):\n    return M()\n")
    with pytest.raises(ContractError, match=r"M.rollout\(context \(5, 4, 16\), commands \(5, 4, 7\)\)\['latents'\] must return shape"):
        cli(success, "success", "--size", "tiny", "--out", str(tmp_path / "o.json"), "--seeds", "42", "--horizons", "4",
            "--model", f"{bad}:make", "--quiet")


def embedded_world_models(ep):
    train = ep.split_of("train_full")
    models = {"persistence": PersistenceModel(), "linear": LinearExtrapolationModel()}
    for kind in ("jepa", "residual_mlp", "context_only"):
        models[kind] = train_forecaster(train, kind=kind, seed=42, steps=30, batch_size=64)
    models["context_forecaster"] = train_context_forecaster(train.latents[:, :4], train.latents[:, 4], seed=42, steps=30)
    return models


@pytest.fixture(scope="module")
def models(ep):
    return embedded_world_models(ep)


@pytest.mark.parametrize("name", ["persistence", "linear", "jepa", "residual_mlp", "context_only", "context_forecaster"])
def test_each_embedded_world_model_through_each_protocol(ep, models, name, tmp_path):
    model = models[name]
    D = ep.latent_dim
    check_world_model(model, D, context_bins=(4,), horizon=4)
    # 1. success probes
    run = success.run_success_probes(ep, tmp_path, seeds=(42,), horizons=(4,), feature_sets=("context_action", "forecast"),
                                     model=model, n_boot=20, progress=False)
    assert run["summary"].query("feature_set == 'forecast' and metric == 'auroc'").value.notna().all()
    # 2. candidate ranking: a command-blind model cannot tell the plans apart, so it sits exactly at chance
    res = ranking.run_ranking(ep, tmp_path, models={name: ranking.user_model(model, ep)}, n_boot=20)
    rec = pd.DataFrame(res["records"]).query("energy == 'endpoint' and metric == 'r_at_1'")
    if name in ("persistence", "linear", "context_only", "context_forecaster"):
        assert rec.value.item() == pytest.approx(1 / 16, abs=1e-12)
    # 3. EPIC: a world model forecasts one step under the null plan (no commands in that protocol)
    ctx = ep.latents[:60, :4]
    sets = epic.feature_sets(ctx, model)
    expected = model.rollout(ctx, np.zeros((60, 1, COMMAND_DIM), np.float32))["latents"][:, -1]
    np.testing.assert_allclose(sets["forecast"][1], expected, rtol=1e-6)
    y, groups = np.arange(60) % 3, np.repeat(np.arange(4), 15)
    result = epic.anticipation_protocol(sets, y, groups, n_boot=20)
    assert set(result.table.index) == {"context", "persistence", "linear", "forecast"}


def test_epic_adapter_refuses_objects_with_neither_method():
    with pytest.raises(ContractError, match="needs predict"):
        epic.feature_sets(np.zeros((3, 4, 2)), object())
    with pytest.raises(ContractError, match="no method predict or rollout"):
        build(lambda seed: object(), "forecaster", seed=42)


RETRAINED = '''import numpy as np
from pathlib import Path
from user_worldmodel import LinearWorldModel          # tests/ (on sys.path under pytest): z_k = z_{k-1} + u_k @ B
def make(seed=42):
    "B read from the weights file beside this one (the usual pretrained model)."
    return LinearWorldModel(np.load(Path(__file__).parent / "weights.npy"))
'''


@pytest.mark.parametrize("protocol", ["ranking", "success"])
def test_retrained_weights_beside_an_unchanged_file_are_recomputed(ep, protocol, tmp_path):
    """Issue 31: a world model whose weights file changes while its .py stays the same. A rerun into the same --out gives what a
    fresh --out gives with the new weights (not the old model's scores); an unchanged model reuses every unit."""
    user = tmp_path / "user"; user.mkdir()
    (user / "wm.py").write_text(RETRAINED)
    rng = np.random.default_rng(0)
    weights = lambda: np.save(user / "weights.npy", rng.standard_normal((COMMAND_DIM, ep.latent_dim)).astype(np.float32))
    args = {"ranking": ["--methods", "persistence", "--model", f"mine={user}/wm.py:make", "--n-boot", "20"],
            "success": ["--horizons", "4", "--model", f"{user}/wm.py:make", "--n-boot", "20"]}[protocol]
    module = {"ranking": ranking, "success": success}[protocol]
    def run(out):
        assert cli(module, protocol, "--size", "tiny", "--out", str(out), "--seeds", "42", *args, "--quiet") == 0
        payload = read_results(out)
        return payload["records"], payload["config"]
    weights()
    old, _ = run(tmp_path / "same" / "r.json")
    weights()                                                 # retrained: new weights, same file
    rerun, config = run(tmp_path / "same" / "r.json")
    fresh, _ = run(tmp_path / "fresh" / "r.json")
    pd.testing.assert_frame_equal(rerun, fresh)
    assert not rerun.equals(old), "the retrained model scored like the old one"
    units = sorted((tmp_path / "same" / "store").rglob("manifest.json"))
    stamps = [p.stat().st_mtime_ns for p in units]
    again, _ = run(tmp_path / "same" / "r.json")              # unchanged: nothing recomputed
    pd.testing.assert_frame_equal(again, rerun)
    assert [p.stat().st_mtime_ns for p in units] == stamps


def run_protocol(protocol, spec, tmp_path):
    "`hoi-audit ranking|success` on the tiny embedded episodes, one seed, with the user's model `spec`."
    return cli({"ranking": ranking, "success": success}[protocol], protocol, "--size", "tiny", "--out", str(tmp_path / "o.json"),
               "--seeds", "42", "--model", spec if protocol == "success" else f"mine={spec}", "--n-boot", "20", "--quiet",
               *(["--horizons", "4"] if protocol == "success" else ["--methods", "persistence"]))   # no learned baseline to train first


REFUSED = {   # a user's model that every protocol must refuse before scoring it, and the error that says why (issue 31)
    # causality in the commands is checked on every world model, not only on one that declares itself autoregressive
    "reads_later_commands": ("class Peek:\n    def rollout(self, context, commands):\n"
                             "        plan = np.asarray(commands, np.float32).sum(1, keepdims=True)[..., :1]   # the whole plan at every step\n"
                             "        return {'latents': np.repeat(context[:, -1:], commands.shape[1], 1) + plan}\n"
                             "def make(seed=42):\n    return Peek()\n", ContractError, r"step 1 changed when only commands 2\.\.4 changed"),
    # a factory is offered the training episodes' latents and commands only: reading a success label is an error saying why
    "reads_a_downstream_label": ("class Still:\n    def rollout(self, context, commands):\n"
                                 "        return {'latents': np.repeat(context[:, -1:], commands.shape[1], 1)}\n"
                                 "def make(episodes, seed=42):\n    print('failure rate', float((~episodes.success).mean()))\n    return Still()\n",
                                 HoiAuditError, "never trained on a downstream label"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
@pytest.mark.parametrize("protocol", ["ranking", "success"])
def test_a_model_that_breaks_the_rules_is_refused_by_every_protocol(protocol, case, tmp_path):
    source, error, match = REFUSED[case]
    (tmp_path / "user.py").write_text("import numpy as np\n" + source)
    with pytest.raises(error, match=match): run_protocol(protocol, f"{tmp_path / 'user.py'}:make", tmp_path)


def test_user_code_that_fails_only_at_full_size_is_one_named_error(tmp_path):
    """Issue 31: a model that passes its check on a few rows but returns NaN on a full-size batch, and a factory that needs an
    argument the command does not offer: `hoi-audit: error: <spec>: <stage> (...): <problem>`, exit 2, no traceback, no results."""
    import subprocess, sys
    exe = Path(sys.executable).parent / "hoi-audit"
    f = tmp_path / "late.py"
    f.write_text("import numpy as np\nclass Late:\n    def rollout(self, context, commands):\n"
                 "        z = np.repeat(context[:, -1:], commands.shape[1], 1).astype(np.float32)\n"
                 "        if len(context) > 50: z[-1] = np.nan\n        return {'latents': z}\n"
                 "def make(seed=42):\n    return Late()\n"
                 "def needs(checkpoint_dir, seed=42):\n    return Late()\n")
    def run(protocol, spec, *extra):
        out = tmp_path / protocol / spec.rsplit(":", 1)[-1]
        r = subprocess.run([str(exe), protocol, "--size", "tiny", "--seeds", "42", "--n-boot", "20", "--quiet", "--out", str(out), *extra,
                            "--model", spec], capture_output=True, text=True)
        assert r.returncode == 2 and r.stderr.startswith("hoi-audit: error:") and "Traceback" not in r.stderr, r.stderr[-3000:]
        assert not (out / "results").exists()
        return r.stderr
    err = run("ranking", f"late={f}:make")
    assert f"{f}:make: rollout (batch 0, rows 0-" in err and "horizon 4): returned NaN or infinite values in 'latents'" in err, err
    err = run("success", f"{f}:make", "--horizons", "4")
    assert f"{f}:make: rollout (rows 0-" in err and "returned NaN or infinite values" in err, err
    err = run("success", f"{f}:needs", "--horizons", "4")
    assert f"{f}:needs: construction (the command offers seed, episodes): raised TypeError" in err and "checkpoint_dir" in err, err
