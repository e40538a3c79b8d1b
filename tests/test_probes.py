"Integration tests of hoi_audit.probes: hand-computed predictors, the synthetic Bayes check, the real Table 16 acceptance."
import os
from pathlib import Path
import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from hoi_audit.core import DataError
from hoi_audit.results import read_results
from hoi_audit.procedural import read_mstcn, write_mstcn
from hoi_audit.queries import split_queries
from hoi_audit.probes import (PREDICTORS, MajorityPredictor, BigramPredictor, latest_action_predictor, completed_set_predictor,
                              full_history_predictor, decomposition, run_decomposition, act_at_1, ceiling_act1)
from hoi_audit.paper import TABLE16

CLASSES = ["SIL", "a", "b", "c", "d"]

def frames(actions):
    return [0] + [f for x in actions for f in [CLASSES.index(x)] * 2 + [0]]

@pytest.fixture
def toy(tmp_path):
    # split 1: train abcd x3 + acbd; test abcd, acbd
    videos = {"t1": "abcd", "t2": "abcd", "t3": "abcd", "t4": "acbd", "e1": "abcd", "e2": "acbd"}
    splits = {1: {"train": ["t1", "t2", "t3", "t4"], "test": ["e1", "e2"]}, 2: {"train": ["t1", "t2", "t4", "e2"], "test": ["t3", "e1"]}}
    return read_mstcn(write_mstcn(tmp_path / "toy", {v: frames(a) for v, a in videos.items()}, CLASSES, splits))

def test_hand_computed_predictors(toy):
    train, test = split_queries(toy, 1)
    y = test["target"].to_numpy()                                  # a b c d a c b d
    assert y.tolist() == [1, 2, 3, 4, 1, 3, 2, 4]
    # train targets: a x4, b x4, c x4, d x4 -> tie, lowest id: a -> 2 of 8
    assert act_at_1(MajorityPredictor().fit(train).predict(test), y) == 25.0
    # bigram: ()->a, a->b (3:1), b->c (3:1), c->d (3:1): abcd all right; acbd: a right, then c, d, c for c, b, d: 5 of 8
    bg = BigramPredictor().fit(train)
    assert bg.predict(test).tolist() == [1, 2, 3, 4, 1, 2, 4, 3]
    assert act_at_1(bg.predict(test), y) == 62.5
    assert act_at_1(latest_action_predictor().fit(train, 5).predict(test), y) == 62.5
    # the learned probes are scikit-learn's logistic regression on designs built here by hand
    def design(histories, kind):
        X = np.zeros((len(histories), 8 * 5 if kind == "seq" else 5))
        for i, h in enumerate(histories):
            if kind == "set": X[i, list(set(h)) or [4]] = 1
            else:
                padded = [4] * (8 - len(h)) + list(h)
                for pos, c in enumerate(padded): X[i, pos * 5 + c] = 1
        return X
    for kind, make in (("set", completed_set_predictor), ("seq", full_history_predictor)):
        ref = LogisticRegression(C=1.0, max_iter=1000).fit(design(list(train["history"]), kind), train["target"])
        assert make().fit(train, 5).predict(test).tolist() == ref.predict(design(list(test["history"]), kind)).tolist()
    assert ceiling_act1(test, "latest") == 62.5 and ceiling_act1(test, "history") == 87.5   # (a,) -> b in abcd, c in acbd: one of the two

def test_decomposition_table(toy):
    per_split, table = decomposition(toy)
    assert list(table.index) == list(PREDICTORS)
    assert set(per_split["split"]) == {1, 2} and (per_split["metric"] == "act1").all()
    v = per_split.pivot(index="predictor", columns="split", values="value")
    assert np.allclose(table["mean"], v.loc[table.index].mean(axis=1))
    assert np.allclose(table["std"], v.loc[table.index].std(axis=1, ddof=1))

def test_run_decomposition_writes_results(toy, tmp_path, capsys):
    out = tmp_path / "res.json"
    per_split = run_decomposition(toy.root, out=out)
    assert "Majority" in capsys.readouterr().out
    saved = read_results(out)
    assert saved["experiment"] == "decomposition" and len(saved["records"]) == 10
    assert set(saved["records"].columns) >= {"dataset", "split", "predictor", "metric", "value"}
    assert saved["pins"]["toy/mapping.txt"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="neither an MS-TCN folder"): run_decomposition(tmp_path / "empty")

def test_bad_input(toy):
    with pytest.raises(ValueError, match="unknown predictors"): decomposition(toy, predictors=["oracle"])
    with pytest.raises(DataError, match="empty"): MajorityPredictor().fit(pd.DataFrame({"history": [], "target": np.array([], int)}))

synthetic = pytest.importorskip("hoi_audit.synthetic")
grammar = pytest.importorskip("hoi_audit.grammar")

@pytest.mark.parametrize("preset", ["gtea", "50salads"])   # small sizes: seconds
def test_synthetic_matches_exact_bayes(preset, tmp_path):
    "Pooled over the test splits, each predictor is within 3 binomial standard errors of the generator's exact Bayes accuracy."
    s = synthetic.synthetic_dataset(preset, "small", seed=0)
    ds = read_mstcn(write_mstcn(tmp_path / preset, {v.name: s.labels(v) for v in s.videos}, list(s.classes), s.splits))
    correct, total = {p: 0 for p in PREDICTORS}, 0
    for split in ds.splits:
        train, test = split_queries(ds, split)
        total += len(test)
        for name, make in PREDICTORS.items():
            correct[name] += int((make().fit(train, len(ds.classes)).predict(test) == test["target"].to_numpy()).sum())
    for name in PREDICTORS:
        bayes = grammar.bayes_accuracy(s, name, include_first=True)
        se = np.sqrt(bayes * (1 - bayes) / total)
        assert abs(correct[name] / total - bayes) <= 3 * se, (name, correct[name] / total, bayes, se)

# Table 16 of the audit paper (GT history, no video; hoi_audit.paper): mean, std over splits of the rows checked here
CHECKED = {"breakfast": ("majority", "bigram"), "50salads": ("bigram",), "gtea": ("majority",)}
PAPER = {d: {p: tuple(map(float, TABLE16.loc[(d, p), ["act1", "act1_std"]])) for p in ps} for d, ps in CHECKED.items()}

def test_real_labels_acceptance(real_labels):
    "On the labels shipped with the package (no environment variable needed)."
    for name, rows in PAPER.items():
        _, table = decomposition(real_labels(name), predictors=list(rows))
        for predictor, (mean, std) in rows.items():
            assert abs(table.loc[predictor, "mean"] - mean) <= std, (name, predictor, table.loc[predictor, "mean"], mean, std)
