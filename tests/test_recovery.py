"Integration tests of hoi_audit.recovery: train-only fitting, causality of BA/BFR, hand-computed recovery, the feature knob, noise, bad input."
import numpy as np
import pandas as pd
import pytest
from hoi_audit.core import DataError
from hoi_audit.provenance import TrackedArray, assert_never_read
from hoi_audit.procedural import Video, read_mstcn, write_mstcn
from hoi_audit.queries import next_action_queries, scheduled_queries
from hoi_audit.features import FeatureSpec
from hoi_audit.synthetic import synthetic_dataset, synthesize_features_for_labels, write_synthetic
from hoi_audit.recovery import (CrossFittedRecognizer, WindowRecognizer, collapse_window_labels, edit_distance, feature_windows, history_edit_rate,
                                noisy_history, pool_windows, pooled_windows, recover_history_boundary_aware, recover_history_boundary_free,
                                window_accuracy_table, window_labels)

CLEAN = dict(frame_noise=0.0, segment_noise=0.0, next_signal=0.0, participant_shift=0.0, camera_shift=0.0)

@pytest.fixture(scope="module")
def gtea(tmp_path_factory):
    return read_mstcn(write_synthetic(synthetic_dataset("gtea", "tiny", seed=0), tmp_path_factory.mktemp("gtea") / "gtea"))

@pytest.fixture(scope="module")
def fitted(gtea):
    return WindowRecognizer().fit(gtea, split=1, seed=42)

# ---------------------------------------------------------------- a hand-built dataset whose windows we can label by hand
CLASSES = ["SIL", "a", "b", "c"]

def one_hot_features(labels, scale=5.0, seed=0):
    "Features = scale x one-hot(label) + small noise: any sensible recognizer labels a pure window correctly."
    rng = np.random.default_rng(seed)
    return scale * np.eye(4)[np.asarray(labels)] + 0.05 * rng.standard_normal((len(labels), 4))

@pytest.fixture
def toy(tmp_path):
    # test video v: SIL*16 a*32 b*32 SIL*24 b*32 c*32 (168 frames); train videos: SIL a b c SIL
    v = [0] * 16 + [1] * 32 + [2] * 32 + [0] * 24 + [2] * 32 + [3] * 32
    train = {f"w{i}": [0] * 16 + [1] * 32 + [2] * 32 + [3] * 32 + [0] * 16 for i in range(3)}
    labels = {"v": v, **train}
    feats = {name: one_hot_features(lab, seed=i) for i, (name, lab) in enumerate(labels.items())}
    root = write_mstcn(tmp_path / "toy", labels, CLASSES, {1: {"train": sorted(train), "test": ["v"]}}, features=feats)
    return read_mstcn(root)

def test_hand_computed_boundary_free_and_aware(toy):
    r = WindowRecognizer().fit(toy, split=1)
    q = next_action_queries(toy, ["v"], window=16)
    assert q["t"].tolist() == [16, 48, 104, 136] and q["history"].tolist() == [(), (1,), (1, 2), (1, 2, 2)]
    # BA: each annotated action segment is pure, so it is labelled correctly -> the GT history
    assert recover_history_boundary_aware(toy, q, r).tolist() == [(), (1,), (1, 2), (1, 2, 2)]
    # BFR by hand (windows [s, s+16), s = 0, 8, ...; a window straddling two labels may go either way):
    #   t=16:  one window (SIL)                      -> a one-window run, removed               -> ()
    #   t=48:  SIL SIL|a a a a                       -> (a)
    #   t=104: ... a-run, b b b (s=48..64), SIL at s=80, 88 -> (a, b)
    #   t=136: ... SIL SIL, b b b (s=104..120 at least) -> background keeps the repeat          -> (a, b, b)
    assert recover_history_boundary_free(toy, q, r).tolist() == [(), (1,), (1, 2), (1, 2, 2)]
    assert recover_history_boundary_free(toy, q, r, min_run=1).iloc[0] == ()     # the single SIL window is background anyway
    pure = window_labels(toy.video("v").labels, 16, 8)
    pred = r.predict_windows(feature_windows(toy.video("v").features(), 168))
    mixed = np.array([len(set(toy.video("v").labels[s:s + 16])) > 1 for s in range(0, 153, 8)])
    assert np.array_equal(pred[~mixed], pure[~mixed])

def test_fixed_time_queries_drop_the_open_run_by_hand(toy):
    "At fixed query times both histories hold completed actions only: the GT one by annotation, BFR by dropping its last run."
    r = WindowRecognizer().fit(toy, split=1)
    q = scheduled_queries(toy, ["v"], start=72, every=32, window=16)
    # t=72 inside b (48..80); t=104 at the second b's start, after SIL; t=136 at c's start; t=168: no next action
    assert q["t"].tolist() == [72, 104, 136] and q["target"].tolist() == [2, 2, 3]
    assert q["history"].tolist() == [(1,), (1, 2), (1, 2, 2)] and q.attrs["query_times"] == "fixed"
    assert scheduled_queries(toy, ["v"], start=72, every=32, window=16, include_ongoing=True)["history"].tolist() == [
        (1, 2), (1, 2), (1, 2, 2)]
    # BFR by hand, windows ending by t: t=72 ... a-run, b b (s=48, 56)   -> open run b dropped         -> (a)
    #   t=104: ... b-run, SIL SIL (s=80, 88) -> the open run is background, the b before it has ended -> (a, b)
    #   t=136: ... SIL-run, b b b (s=104..120): nothing of c yet, so b may still be under way          -> (a, b)
    bfr = recover_history_boundary_free(toy, q, r)
    assert bfr.tolist() == [(1,), (1, 2), (1, 2)] and bfr.attrs["drop_open"] is True
    assert recover_history_boundary_free(toy, q, r, drop_open=False).tolist() == [(1, 2), (1, 2), (1, 2, 2)]
    boundary = next_action_queries(toy, ["v"], window=16)
    assert recover_history_boundary_free(toy, boundary, r).attrs["drop_open"] is False
    assert collapse_window_labels([1, 1, 2, 2, 0, 0], [0], drop_open=True) == (1, 2)
    assert collapse_window_labels([1, 1, 2, 2, 0], [0], drop_open=True) == (1,)      # a one-window SIL is a flicker

def test_collapse_rules_by_hand():
    assert collapse_window_labels([1, 1, 2, 1, 1], [0]) == (1,)                 # one-window flicker removed, neighbours merged
    assert collapse_window_labels([1, 1, 2, 2, 1, 1], [0]) == (1, 2, 1)
    assert collapse_window_labels([1, 1, 0, 0, 1, 1], [0]) == (1, 1)            # real background gap keeps a repeat
    assert collapse_window_labels([1, 1, 0, 1, 1], [0]) == (1,)                 # background flicker does not
    assert collapse_window_labels([1, 1, 2, 2, 2], [0], min_run=3) == (2,)
    assert collapse_window_labels([3], [0], min_run=1) == (3,)
    with pytest.raises(ValueError): collapse_window_labels([1], [0], min_run=0)

# ---------------------------------------------------------------- train videos only
def test_fit_reads_train_videos_only(gtea, monkeypatch):
    read = []
    original = Video.features
    monkeypatch.setattr(Video, "features", lambda self: (read.append(self.name), original(self))[1])
    r = WindowRecognizer().fit(gtea, split=2)
    assert read and set(read) <= set(gtea.splits[2]["train"]) and not set(read) & set(gtea.splits[2]["test"])
    assert r.train_videos == frozenset(gtea.splits[2]["train"])
    read.clear()
    with pytest.raises(DataError, match="in its test part"):
        WindowRecognizer().fit(gtea, gtea.splits[2]["train"] + [gtea.splits[2]["test"][0]], split=2)
    assert read == []                                                             # refused before any feature was read
    with pytest.raises(DataError, match="not all train videos"):
        WindowRecognizer().fit(gtea, [gtea.splits[k]["test"][0] for k in gtea.splits])
    with pytest.raises(DataError, match="no split 9"): WindowRecognizer().fit(gtea, split=9)

def test_window_accuracy_refuses_training_videos(gtea, fitted):
    with pytest.raises(DataError, match="trained on"): fitted.window_accuracy(gtea, gtea.splits[1]["train"][:2])
    assert fitted.window_accuracy(gtea, gtea.splits[1]["train"][:2], allow_train=True) > 0

def test_window_accuracy_matches_sklearn_by_hand(gtea, fitted):
    from sklearn.metrics import accuracy_score
    truth, pred = [], []
    for name in gtea.splits[1]["test"]:
        v = gtea.video(name)
        f = np.asarray(v.features())
        starts = np.arange(0, v.n_frames - 15, 8)
        truth += [np.bincount(v.labels[s:s + 16]).argmax() for s in starts]
        pred += fitted.model.predict(np.stack([f[s:s + 16].mean(0) for s in starts])).tolist()
    assert fitted.window_accuracy(gtea, gtea.splits[1]["test"]) == pytest.approx(100 * accuracy_score(truth, pred))

def test_deterministic(gtea):
    a = WindowRecognizer(max_windows=500).fit(gtea, split=1, seed=42)
    b = WindowRecognizer(max_windows=500).fit(gtea, split=1, seed=42)
    q = next_action_queries(gtea, gtea.splits[1]["test"])
    assert recover_history_boundary_free(gtea, q, a).tolist() == recover_history_boundary_free(gtea, q, b).tolist()
    assert np.array_equal(a.model[-1].coef_, b.model[-1].coef_)

# ---------------------------------------------------------------- causality: no frame at or after t is read
class FutureGuard:
    "Features whose frames at or after `t` sit behind a TrackedArray: any read that reaches them is recorded and fails."
    def __init__(self, array, t):
        array = np.asarray(array)
        self.t, self.shape, self.past = t, array.shape, array[:t]
        self.future = TrackedArray(array[t:], f"frames >= {t}")
    def __getitem__(self, index):
        if isinstance(index, slice) and index.step in (None, 1):
            start, stop, _ = index.indices(self.shape[0])
            if stop <= self.t: return self.past[index]
        self.future[0:0]                                                           # record the read
        raise AssertionError(f"read {index!r} reaches a frame at or after t={self.t}")
    def __array__(self, *args, **kwargs):
        self.future[0:0]
        raise AssertionError(f"the whole feature array was read (t={self.t})")

def guarded(monkeypatch, t):
    original, guards = Video.features, []
    def features(self):
        guards.append(FutureGuard(original(self), t)); return guards[-1]
    monkeypatch.setattr(Video, "features", features)
    return guards

def test_guard_catches_a_future_read(gtea, monkeypatch):
    guards = guarded(monkeypatch, 40)
    v = gtea.video(gtea.splits[1]["test"][0])
    assert len(feature_windows(v.features(), 47)) == 4                               # fine: the windows end by 40
    assert_never_read(*(g.future for g in guards))
    with pytest.raises(AssertionError): feature_windows(v.features(), 48)          # the window [32, 48) needs frames 40..47
    with pytest.raises(Exception): assert_never_read(*(g.future for g in guards))

def test_pooled_windows_never_read_at_or_after_end(gtea, monkeypatch):
    guards = guarded(monkeypatch, 40)
    v = gtea.video(gtea.splits[1]["test"][0])
    for pooling in ("mean", "mean_std"):
        assert len(pooled_windows(v.features(), 47, pooling=pooling)) == 4                # the windows end by 40
    assert_never_read(*(g.future for g in guards))
    with pytest.raises(AssertionError): pooled_windows(v.features(), 48)
    monkeypatch.undo()
    f = v.features()
    assert pooled_windows(f, 47).tobytes() == pool_windows(feature_windows(f, 47)).tobytes()

def test_segments_labelled_at_once_as_one_by_one(gtea, fitted):
    "log_proba_segments over a video's segments (one-window, short, clipped, overlapping) labels each as predict_segment alone does."
    v = gtea.video(gtea.splits[1]["test"][0])
    segments = [(int(s), int(e)) for s, e, _ in v.segments] + [(0, 5), (3, 19), (10, 26), (20, 44), (20, 45), (7, v.n_frames)]
    log_proba = fitted.log_proba_segments(v, segments)
    assert log_proba.shape == (len(segments), fitted.n_classes)
    assert log_proba.argmax(axis=1).tolist() == [fitted.predict_segment(v, s, e) for s, e in segments]
    np.testing.assert_allclose(log_proba[:2], np.stack([fitted.log_proba_segments(v, [seg])[0] for seg in segments[:2]]), rtol=1e-5, atol=1e-6)
    assert fitted.log_proba_segments(v, []).shape == (0, fitted.n_classes)
    with pytest.raises(DataError, match="runs past"): fitted.log_proba_segments(v, [(0, 10), (5, v.n_frames + 1)])
    with pytest.raises(ValueError, match="empty or negative"): fitted.predict_segment(v, 5, 5)

@pytest.mark.parametrize("builder", ["boundary", "scheduled"])
def test_recovery_never_reads_at_or_after_t(gtea, fitted, monkeypatch, builder):
    videos = gtea.splits[1]["test"][:3]
    q = (next_action_queries(gtea, videos) if builder == "boundary" else scheduled_queries(gtea, videos, start=20, every=37))
    q = q[q["t"] > 0].iloc[::3]
    assert len(q) >= 5
    for index in q.index:
        one = q.loc[[index]]
        guards = guarded(monkeypatch, int(one["t"].item()))
        ba = recover_history_boundary_aware(gtea, one, fitted)
        bfr = recover_history_boundary_free(gtea, one, fitted)
        assert_never_read(*(g.future for g in guards))
        monkeypatch.undo()
        assert ba.tolist() == recover_history_boundary_aware(gtea, one, fitted).tolist()
        assert bfr.tolist() == recover_history_boundary_free(gtea, one, fitted).tolist()

def test_history_unchanged_when_the_future_changes(tmp_path, gtea, fitted):
    "Scrambling every frame at or after a query's t leaves its BA/BFR history unchanged, even with later queries in the same call."
    name = gtea.splits[1]["test"][0]
    q = next_action_queries(gtea, [name])
    i = len(q) // 2
    t = int(q["t"].iloc[i])
    labels = {n: [gtea.classes[c] for c in gtea.video(n).labels] for n in [name]}
    feats = np.array(gtea.video(name).features())
    feats[t:] = np.random.default_rng(1).normal(scale=10, size=feats[t:].shape)
    other = read_mstcn(write_mstcn(tmp_path / "scrambled", labels, gtea.classes, {1: {"train": [], "test": [name]}},
                                   features={name: feats}))
    for recover in (recover_history_boundary_aware, recover_history_boundary_free):
        before, after = recover(gtea, q, fitted), recover(other, q, fitted)
        assert before.iloc[:i + 1].tolist() == after.iloc[:i + 1].tolist()

# ---------------------------------------------------------------- the feature knob
def _ba_and_accuracy(tmp_path, name, **knobs):
    ds = read_mstcn(write_synthetic(synthetic_dataset("breakfast", "tiny", seed=0, **knobs), tmp_path / name))
    r = WindowRecognizer().fit(ds, split=1)
    test = ds.splits[1]["test"]
    q = next_action_queries(ds, test)
    ba = recover_history_boundary_aware(ds, q, r)
    return r.window_accuracy(ds, test), history_edit_rate(ba, q["history"]), ba, q

def test_stronger_signal_recovers_better(tmp_path):
    weak_acc, weak_edit, _, _ = _ba_and_accuracy(tmp_path, "weak", current_signal=0.3)
    strong_acc, strong_edit, _, _ = _ba_and_accuracy(tmp_path, "strong", current_signal=3.0)
    assert strong_acc > weak_acc + 20 and strong_edit < weak_edit - 0.2

def test_perfect_signal_recovers_gt(tmp_path):
    acc, edit, ba, q = _ba_and_accuracy(tmp_path, "clean", current_signal=5.0, **CLEAN)
    # precondition (seed 0): every class of the test videos occurs in the train videos, so a perfect recognizer can name it
    assert ba.attrs["source"] == "recognizer" and acc > 95
    assert ba.tolist() == q["history"].tolist() and edit == 0

# ---------------------------------------------------------------- noise
def test_noise_rates_and_kinds():
    gt = pd.Series([tuple(range(1, 11))] * 300)
    for rate in (0.1, 0.4):
        noisy = noisy_history(gt, rate, 12, seed=5, exclude=[0])
        assert np.mean(noisy.attrs["edits"]) / 10 == pytest.approx(rate, abs=0.02)      # edits applied: Binomial(10, rate)
        distance = [edit_distance(a, b) for a, b in zip(noisy, gt)]
        assert all(d <= e for d, e in zip(distance, noisy.attrs["edits"]))            # an edit can coincide with a neighbour
        assert history_edit_rate(noisy, gt) > 0.8 * rate
        assert all(0 not in h for h in noisy)
    lengths = noisy_history(gt, 0.5, 12, kinds=["delete", "insert"], seed=2).map(len)
    assert lengths.mean() == pytest.approx(10, abs=0.3)                     # deletions and insertions balance
    assert noisy_history(gt, 0.3, 12, seed=7).tolist() == noisy_history(gt, 0.3, 12, seed=7).tolist()
    assert noisy_history(gt, 0.3, 12, seed=7).tolist() != noisy_history(gt, 0.3, 12, seed=8).tolist()
    assert noisy_history(gt.iloc[:5], 0.3, 12, seed=7).tolist() == noisy_history(gt, 0.3, 12, seed=7).iloc[:5].tolist()
    for bad in (dict(rate=1.5), dict(rate=0.1, kinds=["swap"]), dict(rate=0.1, n_classes=1)):
        with pytest.raises(ValueError): noisy_history(gt, **{"n_classes": 12, **bad})

def test_edit_distance_by_hand():
    cases = [((), (), 0), ((1,), (), 1), ((1, 2, 3), (1, 2, 3), 0), ((1, 2, 3), (3, 2, 1), 2), ((1, 2, 3, 4), (2, 3, 4, 5), 2),
             ("intention", "execution", 5)]
    for a, b, d in cases: assert edit_distance(a, b) == d and edit_distance(b, a) == d

# ---------------------------------------------------------------- bad input
def test_bad_input(gtea, fitted):
    with pytest.raises(ValueError, match="not fitted"):
        recover_history_boundary_free(gtea, next_action_queries(gtea, gtea.splits[1]["test"][:1]), WindowRecognizer())
    q = next_action_queries(gtea, gtea.splits[1]["test"][:1])
    late = q.copy(); late.loc[late.index[-1], "t"] = 10 ** 6
    with pytest.raises(DataError, match="past the end"): recover_history_boundary_free(gtea, late, fitted)
    moved = q.copy(); moved["history_time"] = moved["history_time"].map(lambda h: tuple(x + 1 for x in h))
    with pytest.raises(DataError, match="history_time"): recover_history_boundary_aware(gtea, moved[moved["history"].map(len) > 0], fitted)
    with pytest.raises(ValueError, match="pooling"): WindowRecognizer(pooling="max")

def test_window_accuracy_table(gtea):
    table = window_accuracy_table(gtea, splits=[1, 3], max_windows=1000)
    assert table.columns.tolist() == ["dataset", "split", "metric", "value"] and table["split"].tolist() == [1, 3]
    assert (table["value"] > 50).all()

def test_real_label_mode_breakfast(labels_dir, tmp_path):
    "Synthesized features for a few real Breakfast videos: a split-1 recognizer beats the majority window label."
    src = labels_dir / "breakfast"
    train = [l.strip()[:-4] for l in (src / "splits" / "train.split1.bundle").read_text().split()][:24]
    test = [l.strip()[:-4] for l in (src / "splits" / "test.split1.bundle").read_text().split()][:8]
    ds = read_mstcn(synthesize_features_for_labels(src, tmp_path / "bf", FeatureSpec(dim=16), videos=train + test))
    r = WindowRecognizer(max_windows=4000).fit(ds, split=1)
    acc = r.window_accuracy(ds, test)
    truth = np.concatenate([window_labels(ds.video(v).labels) for v in test])
    assert acc > 100 * np.bincount(truth).max() / len(truth) + 10
    q = next_action_queries(ds, test)
    assert recover_history_boundary_aware(ds, q, r).map(len).tolist() == q["history"].map(len).tolist()

def test_cross_fitted_recognizer_never_labels_a_video_it_trained_on(gtea, monkeypatch):
    cf = CrossFittedRecognizer(folds=2, max_windows=1000).fit(gtea, split=1)
    train, test = gtea.splits[1]["train"], gtea.splits[1]["test"]
    assert len(cf.models) == 2 and cf.train_videos == frozenset(train)
    for name in train:
        model = cf.for_video(name)
        assert name not in model.train_videos and model is not cf.full
        # folds group participants: no participant of the video is in its labeller's training set
        assert gtea.video(name).participant not in {gtea.video(v).participant for v in model.train_videos}
    assert all(cf.for_video(v) is cf.full for v in test)
    used = []
    original = WindowRecognizer.log_proba_pooled
    monkeypatch.setattr(WindowRecognizer, "log_proba_pooled", lambda self, pooled: (used.append(self), original(self, pooled))[1])
    recover_history_boundary_free(gtea, next_action_queries(gtea, train[:1]), cf)
    assert used == [cf.for_video(train[0])]
    used.clear()
    recover_history_boundary_aware(gtea, next_action_queries(gtea, train[:1]), cf)
    assert used and set(used) == {cf.for_video(train[0])}
    with pytest.raises(DataError, match="fewer than"): CrossFittedRecognizer(folds=5).fit(gtea, split=1)
