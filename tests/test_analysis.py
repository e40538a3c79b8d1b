"Error analysis and attribution: bins by hand, gradient x input against a closed form, ablations against a manual forward."
import numpy as np, pandas as pd, pytest, torch
from torch import nn
from hoi_audit.analysis import (ablation_table, error_analysis, frequency_terciles, stream_attribution, train_conditions,
                                transition_probabilities)
from hoi_audit.conditions import AuditConfig
from hoi_audit.provenance import Block, Condition
from hoi_audit.models import Anticipator, TrainConfig
from hoi_audit.procedural import read_mstcn
from hoi_audit.synthetic import synthetic_dataset, write_synthetic

def test_frequency_terciles_keep_classes_whole():
    train = [0] * 10 + [1] * 5 + [2] * 2 + [3]
    test = [3, 3, 2, 2, 1, 1, 1, 0, 0]            # 9 queries: rarest classes 3, 2 (4 queries), then 1 (3), then 0 (2)
    bins = frequency_terciles(train, test).tolist()
    assert bins == ["rarest"] * 4 + ["middle"] * 3 + ["commonest"] * 2

def test_transition_probabilities_by_hand():
    tq = pd.DataFrame({"history": [(), (), (5,), (5,), (5,), (5,)], "target": [5, 7, 6, 6, 6, 7]})
    sq = pd.DataFrame({"history": [(1, 5), (), (9,)], "target": [6, 5, 6]})
    np.testing.assert_allclose(transition_probabilities(tq, sq), [0.75, 0.5, 0.0])

def test_grad_x_input_of_a_bilinear_network():
    class Net(nn.Module):     # logit = video . w + state . v ; gradient x input per element is exact
        def __init__(self): super().__init__(); self.w = nn.Linear(6, 3, bias=False); self.v = nn.Linear(2, 3, bias=False)
        def forward(self, video, state): return self.w(video.flatten(1)) + self.v(state)
    torch.manual_seed(3); net = Net()
    rng = np.random.default_rng(3)
    V, S = rng.standard_normal((5, 2, 3)).astype(np.float32), rng.standard_normal((5, 2)).astype(np.float32)
    norm = {"video": (np.zeros(3, np.float32), np.ones(3, np.float32)), "state": (np.zeros(2, np.float32), np.ones(2, np.float32))}
    model = Anticipator(net, Condition("c", {"video"}), norm, input_shapes={"video": (2, 3), "state": (2,)}, n_classes=3)
    att = stream_attribution(model, [Block("video", "video", V), Block("state", "video", S)])
    with torch.no_grad():
        c = net(torch.tensor(V), torch.tensor(S)).argmax(1)
        ref_v = (net.w.weight[c] * torch.tensor(V).flatten(1)).abs().sum(1).numpy()
        ref_s = (net.v.weight[c] * torch.tensor(S)).abs().sum(1).numpy()
    np.testing.assert_allclose(att[("attribution", "video")], ref_v, rtol=1e-5)
    np.testing.assert_allclose(att[("share", "state")], 100 * ref_s / (ref_s + ref_v), rtol=1e-5)

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    ds = read_mstcn(write_synthetic(synthetic_dataset("breakfast", "tiny", seed=0), tmp_path_factory.mktemp("an") / "b"))
    config = AuditConfig(window=16, n_tokens=2, train=TrainConfig(d_model=16, n_heads=2, n_layers=1, epochs=6, patience=3, lr=3e-3))
    return train_conditions(ds, split=1, config=config)

def test_tables_20_and_21_against_direct_computation(trained):
    t20 = error_analysis(trained)
    y = trained.test_q["target"].to_numpy()
    correct = trained.models["gt_history"].predict_logits(trained.test_blocks["gt_history"]).argmax(1) == y
    for factor, g in t20.groupby("factor"):
        assert g["n"].sum() == len(y)
        assert (g["act1"] * g["n"]).sum() / len(y) == pytest.approx(100 * correct.mean())   # the bins partition the test queries
    t21 = ablation_table(trained)
    assert t21.loc["full", "gt_history"] == pytest.approx(100 * correct.mean())
    m = trained.models["gt_history"]
    x = m.torch_inputs(trained.test_blocks["gt_history"])
    with torch.no_grad():
        manual = m.model(**{**x, "history": torch.zeros_like(x["history"])}).argmax(1).numpy()
    assert t21.loc["zero_history", "gt_history"] == pytest.approx(100 * np.mean(manual == y))
    shares = t21.loc[["grad_x_input_video", "grad_x_input_history", "grad_x_input_state"]]
    np.testing.assert_allclose(shares.sum().to_numpy(), 100, atol=1e-6)
