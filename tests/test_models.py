"Models: determinism, the provenance guard, metrics against sklearn, pooling by hand, bad input."
import numpy as np, pandas as pd, pytest, torch
from sklearn.metrics import top_k_accuracy_score
from hoi_audit.core import DataError, ProvenanceError
from hoi_audit.provenance import Block, Condition
from hoi_audit.models import (TrainConfig, AnticipationModel, anticipation_metrics, fit_anticipation, history_token_matrix,
                              input_blocks, video_window_tokens, verb_scores)
from hoi_audit.procedural import read_mstcn
from hoi_audit.queries import split_queries
from hoi_audit.synthetic import synthetic_dataset, write_synthetic

CFG = TrainConfig(d_model=16, n_heads=2, n_layers=1, batch_size=32, lr=3e-3, epochs=4, patience=2)
GT = Condition("gt_history", {"video", "oracle"}, deployable=False)
REC = Condition("recognizer_ba", {"video", "recognizer"})

@pytest.fixture(scope="module")
def data(tmp_path_factory):
    ds = read_mstcn(write_synthetic(synthetic_dataset("breakfast", "tiny", seed=0), tmp_path_factory.mktemp("m") / "b"))
    train, test = split_queries(ds, 1, window=16)
    return ds, train, test

def test_same_seed_same_logits_bit_for_bit(data):
    ds, train, test = data
    tr, te = input_blocks(ds, train, ("video", "history", "state"), n_tokens=2), input_blocks(ds, test, ("video", "history", "state"), n_tokens=2)
    logits = [fit_anticipation(GT, tr, train["target"], len(ds.classes), train["video"], CFG, seed=s).predict_logits(te) for s in (42, 42, 44)]
    assert logits[0].tobytes() == logits[1].tobytes()
    assert not np.array_equal(logits[0], logits[2])

def test_non_oracle_condition_never_receives_an_oracle_block(data):
    ds, train, test = data
    gt_blocks = input_blocks(ds, train, ("video", "history"), n_tokens=2)
    with pytest.raises(ProvenanceError, match="refuses block 'history' from source 'oracle'"):
        fit_anticipation(REC, gt_blocks, train["target"], len(ds.classes), config=CFG)
    state_only = input_blocks(ds, train, ("state",))     # the state built from GT history is oracle too
    with pytest.raises(ProvenanceError, match="'state' from source 'oracle'"):
        fit_anticipation(Condition("ctx", {"recognizer"}), state_only, train["target"], len(ds.classes), config=CFG)
    rec_blocks = input_blocks(ds, train, ("video", "history"), history=list(train["history"]), history_source="recognizer", n_tokens=2)
    model = fit_anticipation(REC, rec_blocks, train["target"], len(ds.classes), train["video"], CFG)
    with pytest.raises(ProvenanceError):            # at test time too, unless a non-deployable test condition is named
        model.predict_logits(input_blocks(ds, test, ("video", "history"), n_tokens=2))
    with pytest.raises(ProvenanceError, match="declared deployable"):
        Condition("sneaky", {"video", "oracle"})

def test_metrics_match_sklearn():
    rng = np.random.default_rng(1)
    n, k = 300, 12
    y, logits = rng.integers(0, k, n), rng.normal(size=(n, k)) * 2
    verb_of = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4, 4])
    m = anticipation_metrics(logits, y, verb_of)
    assert m["act1"] == pytest.approx(100 * top_k_accuracy_score(y, logits, k=1, labels=range(k)))
    assert m["act5"] == pytest.approx(100 * top_k_accuracy_score(y, logits, k=5, labels=range(k)))
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    verb_p = np.stack([p[:, verb_of == v].sum(1) for v in range(5)], 1)          # reference: summed probabilities
    assert m["verb1"] == pytest.approx(100 * np.mean(verb_p.argmax(1) == verb_of[y]))
    np.testing.assert_allclose(np.exp(verb_scores(logits, verb_of)), verb_p, rtol=1e-10)

def test_window_pooling_by_hand(data):
    ds, train, _ = data
    q = train.iloc[[3]].assign(window_start=10, window_end=17)      # 7 frames -> chunks of 3, 2, 2
    tok = video_window_tokens(ds, q, n_tokens=3)[0]
    f = np.asarray(ds.video(q["video"].iloc[0]).features())
    np.testing.assert_allclose(tok, np.stack([f[10:13].mean(0), f[13:15].mean(0), f[15:17].mean(0)]), rtol=1e-5)
    assert history_token_matrix([(5, 6, 7)], max_len=2).tolist() == [[7, 8]]

def test_early_stopping_keeps_best_epoch(data):
    ds, train, _ = data
    cfg = TrainConfig(d_model=16, n_heads=2, n_layers=1, batch_size=32, lr=3e-2, epochs=30, patience=2)
    m = fit_anticipation(GT, input_blocks(ds, train, ("video", "history"), n_tokens=2), train["target"], len(ds.classes), train["video"], cfg)
    val = [h["val_loss"] for h in m.history]
    assert m.best_epoch == int(np.argmin(val)) and len(val) <= m.best_epoch + 1 + cfg.patience

def test_bad_input_is_a_clear_error(data):
    ds, train, _ = data
    n = len(train)
    bad_video = Block("video", "video", np.full((n, 2, 16), np.nan, dtype=np.float32))
    with pytest.raises(DataError, match="NaN"): fit_anticipation(Condition("v", {"video"}), [bad_video], train["target"], len(ds.classes), config=CFG)
    ok = Block("video", "video", np.zeros((n, 2, 16), dtype=np.float32))
    with pytest.raises(DataError, match="targets outside"): fit_anticipation(Condition("v", {"video"}), [ok], np.full(n, 99), len(ds.classes), config=CFG)
    with pytest.raises(DataError, match="targets but"): fit_anticipation(Condition("v", {"video"}), [ok], train["target"][:-1], len(ds.classes), config=CFG)
    with pytest.raises(DataError, match="outside the video"): video_window_tokens(ds, train.head(1).assign(window_end=10**7))
    with pytest.raises(ValueError, match="subset"): input_blocks(ds, train, ("audio",))
