"Architectures: every registered family passes the contract checker; a user's model from a file; what a broken model is told."
import numpy as np, pytest, torch
from hoi_audit.core import DataError
from hoi_audit.provenance import Block, Condition
from hoi_audit.plugins import ContractError   # the one error of user code (plugins), whatever the role
from hoi_audit.models import (ARCHITECTURES, AnticipatorContractError, TrainConfig, architecture, check_anticipator, load_factory)
from hoi_audit.architectures import ARCHITECTURE_ORDER, DiagonalSSM, TemporalConvNet
from conftest import REPO

USER = f"{REPO / 'tests' / 'user_model.py'}:make_model"

@pytest.mark.parametrize("name", ARCHITECTURE_ORDER)
def test_every_registered_architecture_passes_the_checker(name):
    report = check_anticipator(name)
    assert report["shapes"] == (120, 5)
    assert report["act1_planted"] >= 60.0            # chance is 20%: the planted target is the latest history item
    assert report["batch_independence"] < 1e-4

def test_six_families_are_registered():
    assert [n for n in ARCHITECTURE_ORDER if n in ARCHITECTURES or architecture(n)] == ["transformer", "tcn", "gru", "ssm", "causal_lm", "diffusion"]

def test_user_model_from_a_file_passes_and_trains_with_the_shared_budget():
    report = check_anticipator(USER)
    assert report["act1_planted"] >= 60.0
    fit = architecture(USER)
    assert fit.network is not None and fit.__name__.startswith("fit_")

def test_broken_user_models_are_told_what_they_broke(tmp_path):
    with pytest.raises(AnticipatorContractError, match=r"logits of shape \(2, 4\), expected \(2, 5\)"):
        check_anticipator(f"{REPO / 'tests' / 'user_model.py'}:wrong_width")
    bad = tmp_path / "bad_models.py"
    bad.write_text("import torch\n"
                   "def not_a_module(shapes, n_classes, seed): return lambda **x: None\n"
                   "def frozen(shapes, n_classes, seed):\n    m = torch.nn.Linear(1, n_classes)\n    m.requires_grad_(False)\n    return m\n"
                   "def crashes(shapes, n_classes, seed): raise RuntimeError('no GPU here')\n"
                   "NOT_CALLABLE = 3\n")
    with pytest.raises(AnticipatorContractError, match="not a torch.nn.Module"): check_anticipator(f"{bad}:not_a_module")
    with pytest.raises(AnticipatorContractError, match="no trainable parameters"): check_anticipator(f"{bad}:frozen")
    with pytest.raises(AnticipatorContractError, match="raised RuntimeError: no GPU here"): check_anticipator(f"{bad}:crashes")
    with pytest.raises(ContractError, match="not a callable factory"): load_factory(f"{bad}:NOT_CALLABLE")
    with pytest.raises(ContractError, match="has no attribute 'missing'"): load_factory(f"{bad}:missing")
    with pytest.raises(ContractError, match="is not a file"): load_factory(f"{tmp_path / 'nope.py'}:f")
    with pytest.raises(ContractError, match="cannot import module 'no_such_pkg.models'"): load_factory("no_such_pkg.models:f")
    with pytest.raises(ContractError, match="expected 'package.module:factory'"): load_factory("just_a_module:")

def test_ssm_convolution_equals_the_recurrence():
    torch.manual_seed(1)
    ssm = DiagonalSSM(4, state=6)
    u = torch.randn(3, 9, 4)
    with torch.no_grad():
        dt = torch.exp(ssm.log_dt)[:, None]
        A = torch.complex(-torch.exp(ssm.log_A_real), ssm.A_imag)
        Ab, Bb, C = torch.exp(dt * A), (torch.exp(dt * A) - 1) / A, torch.view_as_complex(ssm.C)
        x, ys = torch.zeros(3, 4, 3, dtype=torch.complex64), []
        for t in range(9):                                   # x_t = Ab x_{t-1} + Bb u_t ; y_t = 2 Re(C x_t) + D u_t
            x = Ab * x + Bb * u[:, t, :, None]
            ys.append(2 * (C * x).sum(-1).real + ssm.D * u[:, t])
        np.testing.assert_allclose(ssm(u).numpy(), torch.stack(ys, 1).numpy(), atol=1e-4)

def test_tcn_is_causal_and_sees_the_whole_sequence():
    tcn = TemporalConvNet(5, {"state": (3,), "video": (2, 4), "history": (8,)}, TrainConfig(d_model=8, n_heads=2, n_layers=1, dropout=0.0)).eval()
    assert tcn.receptive_field >= tcn.embed.length == 11
    x = {"state": torch.zeros(1, 3), "video": torch.zeros(1, 2, 4), "history": torch.zeros(1, 8, dtype=torch.long)}
    seq, _ = tcn.embed(x)
    h = seq.transpose(1, 2)
    out0 = tcn._causal(tcn.convs[0][0], h)
    bumped = h.clone(); bumped[:, :, 5] += 1.0                # a change at position 5 moves no output before it
    out1 = tcn._causal(tcn.convs[0][0], bumped)
    assert torch.equal(out0[:, :, :5], out1[:, :, :5]) and not torch.equal(out0[:, :, 5:], out1[:, :, 5:])
    x2 = {**x, "state": torch.ones(1, 3)}                     # the first token (the state) reaches the read-out
    assert not torch.equal(tcn(**x), tcn(**x2))

def test_committed_full_scale_table19_against_the_planted_ceiling_a_reference_interval_and_four_condition():
    """results/full/architectures.json (Breakfast-sized preset, 4 splits x 3 seeds): every family's GT row sits under the generator's
    exact Bayes accuracy, every gap is the paired Student-t interval of its own per-split records (scipy as the reference), and the
    transformer's rows are four_condition's (the same units, trained again in another store: the same numbers)."""
    from scipy import stats as st
    from hoi_audit.results import read_results
    from conftest import same_protocol_or_xfail
    from hoi_audit.grammar import bayes_accuracy
    from hoi_audit.synthetic import synthetic_dataset
    r = read_results(REPO / "results" / "full" / "architectures.json")
    assert r["scale"] == "full" and r["config"]["architectures"] == list(ARCHITECTURE_ORDER)
    recs = r["records"]
    act = recs.query("metric == 'act1' and seed == seed").groupby(["architecture", "condition", "split"])["value"].mean()
    bayes = 100 * bayes_accuracy(synthetic_dataset("breakfast", "full", seed=0), "full_history", include_first=True)
    for name in ARCHITECTURE_ORDER:
        per_split = act.loc[name].unstack("split")
        assert per_split.shape == (3, 4)
        # the oracle history is worth the same to every family: each GT row within 3 points under the ceiling, none above it by more than 1
        assert bayes - 3.0 <= per_split.loc["gt_history"].mean() <= bayes + 1.0, name
        diff = (per_split.loc["gt_history"] - per_split.loc["recognizer_ba"]).values
        lo, hi = st.t.interval(0.95, len(diff) - 1, loc=diff.mean(), scale=st.sem(diff))
        gap = recs.query("metric == 'gap_act1' and architecture == @name").iloc[0]
        assert (gap["value"], gap["ci_low"], gap["ci_high"]) == pytest.approx((diff.mean(), lo, hi), abs=1e-6), name
    same_protocol_or_xfail(REPO / "results" / "full", ["architectures", "four_condition"])
    four = read_results(REPO / "results" / "full" / "four_condition.json")["records"]
    four = four.query("dataset == 'synthetic_breakfast' and metric == 'act1' and seed == seed")
    theirs = four.groupby(["condition", "split"])["value"].mean()
    ours = act.loc["transformer"]
    assert ours.to_dict() == pytest.approx(theirs.loc[ours.index].to_dict(), abs=1e-9)
