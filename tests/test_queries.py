"Integration tests of hoi_audit.queries: hand-computed queries, causality violations, bad input, real labels."
import os
from pathlib import Path
import numpy as np
import pandas as pd
import pytest
from hoi_audit.core import DataError
from hoi_audit.procedural import read_mstcn, write_mstcn
from hoi_audit.queries import (next_action_queries, scheduled_queries, lta_split, lta_targets, check_causality,
                               split_queries, state_matrix)

CLASSES = ["SIL", "a", "b", "c"]

@pytest.fixture
def toy(tmp_path):
    # v: SIL*3 a*4 b*2 SIL*2 a*3 c*6 = 20 frames; w: b*4 c*4 (no background at all)
    labels = {"v": [0]*3 + [1]*4 + [2]*2 + [0]*2 + [1]*3 + [3]*6, "w": [2]*4 + [3]*4}
    return read_mstcn(write_mstcn(tmp_path / "toy", labels, CLASSES, {1: {"train": ["w"], "test": ["v"]}}))

def test_hand_computed_boundary_queries(toy):
    q = next_action_queries(toy, ["v"], window=2, gap=1)
    assert q["t"].tolist() == [3, 7, 11, 14]
    assert q["target"].tolist() == [1, 2, 1, 3]
    assert q["history"].tolist() == [(), (1,), (1, 2), (1, 2, 1)]
    assert q["history_time"].tolist() == [(), (7,), (7, 9), (7, 9, 14)]
    assert q["window_start"].tolist() == [0, 4, 8, 11] and q["window_end"].tolist() == [2, 6, 10, 13]
    assert q[[f"target_h{h}" for h in (1, 2, 3, 4, 5)]].values.tolist() == [[1, 2, 1, 3, -1], [2, 1, 3, -1, -1],
                                                                             [1, 3, -1, -1, -1], [3, -1, -1, -1, -1]]
    assert np.allclose(q["elapsed_fraction"], [3/20, 7/20, 11/20, 14/20])
    assert check_causality(q, toy, gap=1).empty

def test_background_switches(toy):
    assert next_action_queries(toy, ["v"], include_first=False)["target"].tolist() == [2, 1, 3]
    assert next_action_queries(toy, ["v"], background_target=True)["target"].tolist() == [0, 1, 2, 0, 1, 3]
    assert next_action_queries(toy, ["v"], background_history=True)["history"].tolist()[2] == (0, 1, 2, 0)

def test_short_windows_are_clipped_or_counted(toy):
    clipped = next_action_queries(toy, window=4)
    assert clipped.loc[clipped["t"] == 3, "window_frames"].item() == 3 and len(clipped) == 6
    dropped = next_action_queries(toy, window=4, short_window="drop")
    assert len(dropped) == 4 and dropped.attrs["dropped"] == {"short_window": 2}

def test_scheduled_and_lta(toy):
    s = scheduled_queries(toy, ["v"], start=5, every=5, window=2)
    # t=5: next action starting >= 5 is b at 7; t=10: a at 11; t=15: none (dropped)
    assert s["t"].tolist() == [5, 10] and s["target"].tolist() == [2, 1] and s["target_start"].tolist() == [7, 11]
    # completed actions only: at t=5 the a of 3..7 is under way (in the history only with include_ongoing, which is refused)
    assert s["history"].tolist() == [(), (1, 2)] and s.attrs["dropped"] == {"no_next_action": 1}
    assert check_causality(s, toy).empty
    ongoing = scheduled_queries(toy, ["v"], start=5, every=5, window=2, include_ongoing=True)
    assert ongoing["history"].tolist() == [(1,), (1, 2)]
    assert check_causality(ongoing, toy)[["index", "problem"]].values.tolist() == [[0, "history_open_at_query"]]
    lta = lta_split(toy, ["v"], observe=(0.3,), predict=(0.2,))
    assert lta[["observed_end", "predict_end"]].values.tolist() == [[6, 10]]
    assert lta_targets(toy, lta.iloc[0]).tolist() == [1, 2, 2, 0]

def test_state(toy):
    st = state_matrix(next_action_queries(toy, ["v"]), 4)
    assert st[:, :4].tolist() == [[0, 0, 0, 0], [0, 1, 0, 0], [0, 1, 1, 0], [0, 1, 1, 0]]
    assert st[:, 4:].tolist() == [[0, 3], [1, 7], [2, 11], [3, 14]]     # completed count, elapsed frames: nothing needs n_frames

def test_causality_catches_a_broken_query_set(toy):
    q = next_action_queries(toy, window=2)
    broken = q.copy()
    broken.loc[0, "window_end"] = broken.loc[0, "t"] + 1                          # the window sees the target's first frame
    broken.at[1, "history"] = (1, 2); broken.at[1, "history_time"] = (7, 9)     # the target itself leaked into the history
    broken.loc[2, "target"] = 3                                                  # not the label at target_start
    v = check_causality(broken, toy)
    assert set(zip(v["index"], v["problem"])) == {(0, "window_after_target"), (0, "window_after_query"),
                                                  (1, "history_after_query"), (2, "target_mismatch")}
    with pytest.raises(DataError, match="causality violations"): check_causality(broken, toy, raise_on_violation=True)
    assert check_causality(q, toy, gap=2)["problem"].eq("window_after_target").all()

def test_bad_input(toy):
    with pytest.raises(DataError, match="no video 'x'"): next_action_queries(toy, ["x"])
    with pytest.raises(ValueError, match="short_window"): next_action_queries(toy, short_window="pad")
    with pytest.raises(DataError, match="no split 3"): split_queries(toy, 3)

def test_real_labels_are_causal(labels_dir):
    root = labels_dir
    for name in ("breakfast", "50salads", "gtea"):
        ds = read_mstcn(Path(root) / name)
        videos = ds.splits[1]["test"][:60]
        q = next_action_queries(ds, videos)
        assert check_causality(q, ds).empty
        # one query per non-background segment, computed independently from the raw label files
        expected = 0
        for v in videos:
            lab = [ds.class_id[x.strip()] for x in (Path(root) / name / "groundTruth" / f"{v}.txt").read_text().splitlines() if x.strip()]
            starts = [i for i in range(len(lab)) if i == 0 or lab[i] != lab[i - 1]]
            expected += sum(lab[i] not in ds.background for i in starts)
        assert len(q) == expected
        assert check_causality(scheduled_queries(ds, videos), ds).empty


def _segments(labels):
    "(label, start, end) runs of a frame-label sequence, computed here independently of hoi_audit.queries."
    labels = list(labels)
    starts = [i for i in range(len(labels)) if i == 0 or labels[i] != labels[i - 1]]
    return [(labels[a], a, b) for a, b in zip(starts, starts[1:] + [len(labels)])]

def _fixed_time_cases(tmp_path_factory, labels_dir):
    from hoi_audit.synthetic import synthetic_dataset, write_synthetic
    for preset in ("breakfast", "50salads", "gtea"):
        for seed in (0, 1):
            root = tmp_path_factory.mktemp(f"{preset}{seed}") / preset
            yield read_mstcn(write_synthetic(synthetic_dataset(preset, "tiny", seed=seed), root)), None
    for name in ("breakfast", "gtea"):
        ds = read_mstcn(Path(labels_dir) / name)
        yield ds, ds.splits[1]["test"][:40]

def test_fixed_time_histories_hold_completed_actions_only(tmp_path_factory, labels_dir):
    "Every preset, generator seed and real label set: the history is the actions ended by t, the target the first to start at or after t;"
    "the old construction (the action under way in the history) is refused exactly at the queries that fall inside an action."
    for ds, videos in _fixed_time_cases(tmp_path_factory, labels_dir):
        bg = set(ds.background)
        for start, every in ((64, 60), (13, 29)):
            q = scheduled_queries(ds, videos, start=start, every=every)
            assert len(q) > 0 and check_causality(q, ds).empty, ds.root
            inside = 0
            for row in q.itertuples():
                segs = [s for s in _segments(ds.video(row.video).labels) if s[0] not in bg]
                assert row.history == tuple(c for c, _, b in segs if b <= row.t), (ds.root, row.video, row.t)
                assert row.target == next(c for c, a, _ in segs if a >= row.t)
                inside += any(a < row.t < b for _, a, b in segs)
            old = scheduled_queries(ds, videos, start=start, every=every, include_ongoing=True)
            v = check_causality(old, ds)
            assert inside > 0 and set(v["problem"]) == {"history_open_at_query"} and v["index"].nunique() == inside, ds.root

def test_the_engine_refuses_the_ongoing_action_as_history(tmp_path):
    from dataclasses import replace
    from functools import partial
    from hoi_audit.conditions import AuditConfig, QuerySchedule, register_schedule, QUERY_SCHEDULES
    from hoi_audit.engine import split_audit_queries
    from hoi_audit.synthetic import synthetic_dataset, write_synthetic
    ds = read_mstcn(write_synthetic(synthetic_dataset("breakfast", "tiny", seed=0), tmp_path / "breakfast"))
    train, test = split_audit_queries(ds, 1, AuditConfig(schedule="boundary_independent"))
    assert train.attrs["query_times"] == test.attrs["query_times"] == "fixed"
    register_schedule(QuerySchedule("ongoing_diagnostic", partial(scheduled_queries, include_ongoing=True),
                                    (("start", 64), ("every", 60))), replace=True)
    try:
        with pytest.raises(DataError, match="(?s)ongoing_diagnostic schedule.*history_open_at_query"):
            split_audit_queries(ds, 1, AuditConfig(schedule="ongoing_diagnostic"))
    finally:
        QUERY_SCHEDULES.unregister("ongoing_diagnostic")
