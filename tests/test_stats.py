"Statistics: every interval against scipy, every metric against scikit-learn, degenerate and bad input."
import json, math
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn import metrics as skm
from sklearn.calibration import calibration_curve

import hoi_audit.stats as hs
from hoi_audit.core import DataError
from hoi_audit.results import write_results, read_results
from hoi_audit.stats import (Interval, auroc, average_precision, balanced_accuracy, bootstrap_interval, brier, cluster_bootstrap,
                             ece, gap_table, mean_std, mean_topk_recall, nll, paired_bootstrap_delta, paired_gap, probe_metrics,
                             probe_metric_intervals, student_t_from_summary, student_t_interval, topk, topk_accuracy)


# ---------------------------------------------------------------- Student-t and paired intervals

@pytest.mark.parametrize("n,confidence", [(2, 0.95), (3, 0.9), (4, 0.95), (5, 0.99), (12, 0.95), (50, 0.8)])
def test_student_t_matches_scipy(n, confidence):
    x = np.random.default_rng(n).normal(40, 5, n)
    iv = student_t_interval(x, confidence)
    low, high = stats.t.interval(confidence, n - 1, loc=x.mean(), scale=stats.sem(x))
    assert iv.estimate == pytest.approx(x.mean(), abs=1e-12)
    assert (iv.low, iv.high) == pytest.approx((low, high), abs=1e-10)
    assert iv.std == pytest.approx(x.std(ddof=1), abs=1e-12)
    assert iv.p_value == pytest.approx(stats.ttest_1samp(x, 0).pvalue, rel=1e-10)
    assert iv.n == n


def test_four_split_t_quantile_and_published_intervals():
    # the seed's 4-split intervals use t(0.975, 3) = 3.182, not 1.96
    iv = student_t_from_summary(0.0, 2.0, 4)
    assert iv.half_width == pytest.approx(3.182446 * 2.0 / 2, abs=1e-5)
    # Table 10: +19.4 +- 1.9 over 4 splits -> [+16.4, +22.4]; Table 18: +26.8 +- 2.8 -> [+22.3, +31.2] (rounded inputs)
    t10 = student_t_from_summary(19.4, 1.9, 4)
    assert (round(t10.low, 1), round(t10.high, 1)) == (16.4, 22.4)
    t18 = student_t_from_summary(26.8, 2.8, 4)
    assert t18.low == pytest.approx(22.3, abs=0.06) and t18.high == pytest.approx(31.2, abs=0.06)


def test_paired_gap_matches_ttest_rel_and_aligns_by_index():
    rng = np.random.default_rng(0)
    videos = [f"rgb-{i:02d}" for i in range(25)]
    rec = pd.Series(rng.normal(5, 2, 25), index=videos)
    gt = pd.Series(rec.to_numpy() + rng.normal(3, 2, 25), index=videos)
    shuffled = rec.sample(frac=1.0, random_state=1)          # same videos, another order
    g = paired_gap(gt, shuffled)
    r = stats.ttest_rel(gt, rec)
    ci = r.confidence_interval(0.95)
    assert (g.low, g.high) == pytest.approx((ci.low, ci.high), abs=1e-10)
    assert g.p_value == pytest.approx(r.pvalue, rel=1e-9)
    assert g.estimate == pytest.approx((gt - rec).mean(), abs=1e-12)
    assert g.std == pytest.approx((gt - rec).std(ddof=1), abs=1e-12)
    # a one-sample t interval of the differences is the same thing
    one = stats.ttest_1samp((gt - rec).to_numpy(), 0).confidence_interval(0.9)
    g90 = paired_gap(gt.to_numpy(), rec.to_numpy(), confidence=0.9)
    assert (g90.low, g90.high) == pytest.approx((one.low, one.high), abs=1e-10)
    # mappings are aligned like Series
    assert tuple(paired_gap(gt.to_dict(), rec.to_dict())) == pytest.approx(tuple(g), abs=1e-12)


def test_paired_is_narrower_than_independent_when_splits_share_difficulty():
    rec = np.array([25.0, 33.0, 28.0, 34.0]); gt = rec + np.array([31.0, 33.0, 32.0, 32.0])
    paired = paired_gap(gt, rec)
    welch = stats.ttest_ind(gt, rec, equal_var=False).confidence_interval()
    assert paired.half_width < (welch.high - welch.low) / 2


@pytest.mark.parametrize("a,b,message", [
    (pd.Series([1.0, 2.0], index=["s1", "s2"]), pd.Series([1.0, 2.0], index=["s1", "s3"]), "unpaired units"),
    (pd.Series([1.0, 2.0, 3.0], index=[1, 1, 2]), pd.Series([1.0, 2.0, 3.0], index=[1, 2, 3]), "duplicated unit"),
    (pd.Series([1.0, 2.0]), [1.0, 2.0], "not one of each"),
    ([1.0, 2.0, 3.0], [1.0, 2.0], "not paired"),
    ([1.0, np.nan], [1.0, 2.0], "non-finite"),
    ([1.0, np.inf], [1.0, 2.0], "non-finite"),
    (["a", "b"], [1.0, 2.0], "not numbers"),
    ([], [], "no values"),
    (np.ones((2, 2)), np.ones((2, 2)), "1-D"),
    (pd.DataFrame({"a": [1.0]}), pd.DataFrame({"a": [1.0]}), "DataFrame"),
])
def test_paired_gap_refuses_bad_input(a, b, message):
    with pytest.raises(DataError, match=message): paired_gap(a, b)


def test_degenerate_t_intervals():
    one = student_t_interval([62.3])
    assert one.estimate == 62.3 and math.isnan(one.low) and math.isnan(one.high) and "n=1" in one.note
    assert one.format() == "+62.3 [undefined]"
    g = paired_gap({"s1": 62.3}, {"s1": 30.3})
    assert g.estimate == pytest.approx(32.0) and math.isnan(g.low) and g.n == 1
    flat = paired_gap([3.0, 4.0, 5.0], [1.0, 2.0, 3.0])
    assert tuple(flat) == (2.0, 2.0, 2.0) and "zero variance" in flat.note
    assert math.isnan(mean_std([1.0])[1])
    with pytest.raises(ValueError, match="confidence"): student_t_interval([1.0, 2.0], confidence=1.5)
    with pytest.raises(ValueError, match="n must be"): student_t_from_summary(1.0, 1.0, 0)


def test_gap_table_per_split_and_per_video():
    rng = np.random.default_rng(4)
    rows = []
    for beta in (0.1, 0.2, 0.3):
        for split in range(1, 6):
            for k in range(10):
                base = rng.normal(6, 2)
                rows += [{"beta": beta, "split": split, "video": f"s{split}v{k}", "condition": "rec", "value": base},
                         {"beta": beta, "split": split, "video": f"s{split}v{k}", "condition": "gt", "value": base + rng.normal(3, 3)}]
    recs = pd.DataFrame(rows)
    per_video = gap_table(recs, "gt", "rec", unit="video", by=["beta"])
    per_split = gap_table(recs.groupby(["beta", "split", "condition"], as_index=False)["value"].mean(), "gt", "rec", by=["beta"])
    assert per_video["n"].tolist() == [50] * 3 and per_split["n"].tolist() == [5] * 3
    assert set(per_video["unit"]) == {"video"}
    for _, row in per_video.iterrows():
        d = recs[recs.beta == row["beta"]].pivot(index="video", columns="condition", values="value")
        ci = stats.ttest_rel(d["gt"], d["rec"]).confidence_interval()
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-10)
    # with equal videos per split, the split means give the same point gap, with a t interval on 4 degrees of freedom
    assert per_video["value"].to_numpy() == pytest.approx(per_split["value"].to_numpy(), abs=1e-10)
    means = recs[recs.beta == 0.2].groupby(["split", "condition"])["value"].mean().unstack()
    ci = stats.ttest_rel(means["gt"], means["rec"]).confidence_interval()
    assert tuple(per_split.loc[1, ["ci_low", "ci_high"]]) == pytest.approx((ci.low, ci.high), abs=1e-10)
    with pytest.raises(DataError, match="beta=0.2.*unpaired"):
        gap_table(recs.drop(recs[(recs.beta == 0.2) & (recs.video == "s1v0") & (recs.condition == "gt")].index),
                  "gt", "rec", unit="video", by=["beta"])
    with pytest.raises(DataError, match="no column"): gap_table(recs, "gt", "rec", unit="participant")


def test_interval_records_round_trip_through_results_json(tmp_path):
    g = paired_gap(pd.Series({1: 60.0, 2: 66.0, 3: 61.0, 4: 63.0}), pd.Series({1: 28.0, 2: 33.0, 3: 29.0, 4: 31.0}))
    one = student_t_interval([1.0])
    path = write_results(tmp_path / "gaps.json", "gaps",
                         [g.record(dataset="breakfast", metric="gap"), one.record(dataset="epic", metric="gap")])
    back = read_results(path)["records"].set_index("dataset")
    assert back.loc["breakfast", "ci_low"] == pytest.approx(g.low) and back.loc["breakfast", "n"] == 4
    assert pd.isna(back.loc["epic", "ci_low"])                      # an undefined bound is written as null, not dropped
    assert json.loads(path.read_text())["records"][1]["ci_high"] is None


# ---------------------------------------------------------------- bootstraps

@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_bootstrap_mean_equals_scipy_on_the_same_draws(confidence):
    x = np.random.default_rng(3).lognormal(size=80)
    ours = bootstrap_interval(x, n_boot=1500, confidence=confidence, seed=11)
    ref = stats.bootstrap((x,), np.mean, n_resamples=1500, confidence_level=confidence, method="percentile",
                          rng=np.random.default_rng(11))
    assert (ours.low, ours.high) == pytest.approx((ref.confidence_interval.low, ref.confidence_interval.high), abs=1e-12)
    assert ours.std == pytest.approx(ref.standard_error, abs=1e-12)
    assert ours.n == 80 and ours.method == "percentile bootstrap"


def test_bootstrap_literal_statistic_equals_scipy():
    x = np.random.default_rng(5).normal(size=41)
    ours = bootstrap_interval(x, np.median, n_boot=600, seed=2)          # not batched: evaluated per resample
    ref = stats.bootstrap((x,), np.median, n_resamples=600, method="percentile", rng=np.random.default_rng(2))
    assert (ours.low, ours.high) == pytest.approx((ref.confidence_interval.low, ref.confidence_interval.high), abs=1e-12)


def test_paired_bootstrap_delta_equals_scipy_paired_bootstrap():
    rng = np.random.default_rng(8)
    y = rng.integers(0, 2, 150)
    a = y + rng.normal(scale=0.7, size=150); b = y + rng.normal(scale=1.4, size=150)
    ours = paired_bootstrap_delta(auroc, y, a, b, n_boot=400, seed=9)
    ref = stats.bootstrap((y, a, b), lambda y, a, b: skm.roc_auc_score(y, a) - skm.roc_auc_score(y, b), paired=True,
                          vectorized=False, n_resamples=400, method="percentile", rng=np.random.default_rng(9))
    assert (ours.low, ours.high) == pytest.approx((ref.confidence_interval.low, ref.confidence_interval.high), abs=1e-12)
    assert ours.estimate == pytest.approx(skm.roc_auc_score(y, a) - skm.roc_auc_score(y, b), abs=1e-12)
    assert ours.low > 0 and ours.p_value < 0.01
    # a literal (non-batched) metric gives the same replicates as the batched one
    lit = paired_bootstrap_delta(lambda y, p: skm.roc_auc_score(y, p), y, a, b, n_boot=400, seed=9)
    assert tuple(lit) == pytest.approx(tuple(ours), abs=1e-12)


def test_paired_delta_of_identical_methods_is_zero():
    y = np.random.default_rng(0).integers(0, 2, 50); p = np.random.default_rng(1).random(50)
    d = paired_bootstrap_delta(brier, y, p, p.copy(), n_boot=100, seed=0)
    assert tuple(d) == (0.0, 0.0, 0.0) and d.p_value == 1.0


def test_cluster_bootstrap_equals_literal_cluster_resampling():
    rng = np.random.default_rng(2)
    sizes = rng.integers(3, 60, 10)
    participant = np.repeat(np.array([f"P{i:02d}" for i in range(10)]), sizes)
    y = rng.integers(0, 6, len(participant)); scores = rng.normal(size=(len(participant), 6)); scores[np.arange(len(y)), y] += 0.7
    metric = topk(2, mean_topk_recall)
    cb = cluster_bootstrap(metric, y, scores, clusters=participant, n_boot=300, seed=4)
    names = np.unique(participant)
    draws = np.random.default_rng(4).integers(0, 10, (300, 10))
    literal = []
    for d in draws:
        take = np.concatenate([np.flatnonzero(participant == names[c]) for c in d])
        literal.append(mean_topk_recall(y[take], scores[take], k=2))
    assert (cb.low, cb.high) == pytest.approx(tuple(np.quantile(literal, [0.025, 0.975])), abs=1e-12)
    assert cb.n == 10 and cb.method == "cluster percentile bootstrap"
    assert cb.estimate == pytest.approx(mean_topk_recall(y, scores, k=2))


def test_chunked_resampling_is_deterministic_and_batched_equals_literal(monkeypatch):
    monkeypatch.setattr(hs, "_CHUNK_CELLS", 64)           # force many chunks of replicates
    rng = np.random.default_rng(6)
    y = rng.integers(0, 2, 40); p = rng.random(40)
    a = bootstrap_interval((y, p), ece, n_boot=250, seed=3)
    b = bootstrap_interval((y, p), lambda y, p: ece(y, p), n_boot=250, seed=3)
    assert tuple(a) == pytest.approx(tuple(b), abs=1e-12)
    assert tuple(a) == tuple(bootstrap_interval((y, p), ece, n_boot=250, seed=3))
    assert tuple(a) != tuple(bootstrap_interval((y, p), ece, n_boot=250, seed=4))


def test_bootstrap_monte_carlo_close_to_scipy_with_other_draws():
    x = np.random.default_rng(12).gamma(2.0, size=200)
    ours = bootstrap_interval(x, n_boot=4000, seed=1)
    ref = stats.bootstrap((x,), np.mean, n_resamples=4000, method="percentile", rng=np.random.default_rng(999))
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert abs(ours.low - ref.confidence_interval.low) < 0.05 * width
    assert abs(ours.high - ref.confidence_interval.high) < 0.05 * width


def test_undefined_replicates_are_counted_not_hidden():
    y = np.r_[np.zeros(28), np.ones(2)]; p = np.random.default_rng(0).random(30)
    iv = bootstrap_interval((y, p), auroc, n_boot=400, seed=0)
    n_undefined = (np.random.default_rng(0).integers(0, 30, (400, 30)) >= 28).any(axis=1)
    assert f"{int((~n_undefined).sum())} of 400 replicates undefined" in iv.note
    all_bad = bootstrap_interval((np.ones(5), np.random.default_rng(0).random(5)), auroc, n_boot=20, seed=0)
    assert math.isnan(all_bad.estimate) and math.isnan(all_bad.low)


@pytest.mark.parametrize("call,error,message", [
    (lambda: bootstrap_interval((np.ones(3), np.ones(4))), DataError, "different numbers"),
    (lambda: bootstrap_interval(np.array([])), DataError, "no examples"),
    (lambda: bootstrap_interval(np.ones(3), n_boot=0), ValueError, "n_boot"),
    (lambda: bootstrap_interval(np.ones(3), confidence=0), ValueError, "confidence"),
    (lambda: cluster_bootstrap(hs.weighted_mean, np.ones(4), clusters=[1, 2, 3]), DataError, "one cluster id per example"),
    (lambda: cluster_bootstrap(hs.weighted_mean, np.ones(3), clusters=np.array([1.0, np.nan, 2.0])), DataError, "missing cluster"),
])
def test_bootstrap_refuses_bad_input(call, error, message):
    with pytest.raises(error, match=message): call()


# ---------------------------------------------------------------- probe metrics

def _sk_balanced(y, p, sample_weight=None): return skm.balanced_accuracy_score(y, p > 0.5, sample_weight=sample_weight)
def _sk_nll(y, p, sample_weight=None): return skm.log_loss(y, p, sample_weight=sample_weight, labels=[0, 1])

@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("ours,ref", [(auroc, skm.roc_auc_score), (average_precision, skm.average_precision_score),
                                      (brier, skm.brier_score_loss), (nll, _sk_nll), (balanced_accuracy, _sk_balanced)])
def test_probe_metrics_match_sklearn(seed, ours, ref):
    rng = np.random.default_rng(seed)
    n = 300
    y = (rng.random(n) < [0.5, 0.8, 0.1][seed]).astype(int)
    p = 1 / (1 + np.exp(-(1.5 * y - 0.7 + rng.normal(size=n))))
    if seed == 1: p = np.round(p, 1)                                       # heavy ties
    w = rng.integers(0, 5, n).astype(float)
    assert ours(y, p) == pytest.approx(ref(y, p), abs=1e-12)
    assert ours(y, p, sample_weight=w) == pytest.approx(ref(y, p, sample_weight=w), abs=1e-12)
    # a weight matrix gives one value per row, each the metric on the literally repeated examples
    counts = rng.multinomial(n, np.full(n, 1 / n), size=3)
    rows = ours(y, p, sample_weight=counts)
    assert rows.shape == (3,)
    for c, v in zip(counts, rows):
        take = np.repeat(np.arange(n), c)
        assert v == pytest.approx(ref(y[take], p[take]), abs=1e-12)


def test_ece_hand_computed_and_against_calibration_curve():
    # 3 bins: [0,1/3]: p .1 .2, y 0 0 -> |.15-0|; (1/3,2/3]: .5 .6, y 1 0 -> |.55-.5|; (2/3,1]: .9 1, y 1 1 -> |.95-1|
    assert ece([0, 0, 1, 0, 1, 1], [0.1, 0.2, 0.5, 0.6, 0.9, 1.0], n_bins=3) == pytest.approx((0.15 + 0.05 + 0.05) / 3, abs=1e-12)
    # unequal bin counts: bin 1 holds 3 of 4 examples
    assert ece([1, 0, 0, 1], [0.1, 0.2, 0.3, 0.9], n_bins=2) == pytest.approx(0.75 * abs(0.2 - 1 / 3) + 0.25 * 0.1, abs=1e-12)
    rng = np.random.default_rng(7)
    y = rng.integers(0, 2, 500); p = np.clip(0.3 + 0.4 * y + rng.normal(scale=0.2, size=500), 0, 1)
    frac, mean_p = calibration_curve(y, p, n_bins=15, strategy="uniform")
    counts = np.bincount(hs.ece_bins(p, 15), minlength=15)
    assert ece(y, p) == pytest.approx(float(((counts[counts > 0] / 500) * np.abs(frac - mean_p)).sum()), abs=1e-12)
    assert ece(np.r_[np.zeros(10), np.ones(10)], np.r_[np.zeros(10), np.ones(10)]) == 0.0


def test_ece_edges_belong_to_the_bin_below():
    # 2 bins [0, .5], (.5, 1]: p=.5 (y=1) alone in bin 0, p=.9 (y=0) in bin 1 -> .5*.5 + .5*.9 = .7
    # (were .5 in bin 1 the residuals would cancel: |(.5-1) + (.9-0)| / 2 = .2)
    assert ece([1, 0], [0.5, 0.9], n_bins=2) == pytest.approx(0.7, abs=1e-12)
    p = np.linspace(0, 1, 16)                                   # every 15-bin edge exactly
    y = np.arange(16) % 2
    frac, mean_p = calibration_curve(y, p, n_bins=15, strategy="uniform")
    counts = np.bincount(hs.ece_bins(p, 15), minlength=15)
    assert hs.ece_bins(p, 15).tolist() == [0] + list(range(15))
    assert ece(y, p) == pytest.approx(float(((counts[counts > 0] / 16) * np.abs(frac - mean_p)).sum()), abs=1e-12)


def test_degenerate_metric_cases():
    assert math.isnan(auroc([1, 1, 1], [0.1, 0.5, 0.9]))
    assert math.isnan(auroc([0, 0], [0.1, 0.5]))
    assert math.isnan(average_precision([0, 0, 0], [0.1, 0.5, 0.9]))
    assert balanced_accuracy([0, 0, 0, 0], [0.1, 0.2, 0.7, 0.3]) == 0.75
    assert auroc([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5]) == 0.5
    assert nll([1, 0], [1.0, 0.0]) == pytest.approx(-math.log(1 - np.finfo(float).eps), abs=1e-15)
    assert nll([1], [0.0]) == pytest.approx(-math.log(np.finfo(float).eps))     # clipped, finite
    m = probe_metrics([1, 1, 1], [0.9, 0.8, 0.7])
    assert math.isnan(m["auroc"]) and m["balanced_accuracy"] == 1.0 and m["brier"] == pytest.approx((0.01 + 0.04 + 0.09) / 3)


@pytest.mark.parametrize("call,message", [
    (lambda: auroc([0, 1, 2], [0.1, 0.2, 0.3]), "0/1"),
    (lambda: auroc([0, 1], [0.1, 0.2, 0.3]), "same length"),
    (lambda: brier([0, 1], [0.1, 1.2]), r"\[0, 1\]"),
    (lambda: nll([0, 1], [0.1, np.nan]), "non-finite"),
    (lambda: ece([0, 1], [0.1, 0.2], sample_weight=[1.0, -1.0]), "non-negative"),
    (lambda: ece([0, 1], [0.1, 0.2], sample_weight=np.ones((2, 3))), "sample_weight"),
    (lambda: auroc([], []), "no examples"),
    (lambda: topk_accuracy([0, 5], np.zeros((2, 4))), "class indices"),
    (lambda: topk_accuracy([0.0, 1.0], np.zeros((2, 4))), "class indices"),
    (lambda: topk_accuracy([0, 1], np.zeros((3, 4))), "expected"),
    (lambda: mean_topk_recall([0, 1], np.full((2, 4), np.nan), k=1), "non-finite"),
])
def test_metrics_refuse_bad_input(call, message):
    with pytest.raises(DataError, match=message): call()


def test_probe_metric_intervals_table():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 300)
    p = 1 / (1 + np.exp(-(2 * y - 1 + rng.normal(size=300)))); base = 1 / (1 + np.exp(-(0.5 * y + rng.normal(size=300))))
    t = probe_metric_intervals(y, p, baseline=base, n_boot=200, seed=42)
    assert set(t.metric) == {"auroc", "auprc", "balanced_accuracy", "brier", "nll", "ece"}
    assert (t.groupby("metric").size() == 2).all()
    values = t[t.kind == "value"].set_index("metric")["value"]
    assert values["auroc"] == pytest.approx(skm.roc_auc_score(y, p)) and values["nll"] == pytest.approx(skm.log_loss(y, p))
    deltas = t[t.kind == "delta"].set_index("metric")
    assert deltas.loc["auroc", "value"] == pytest.approx(skm.roc_auc_score(y, p) - skm.roc_auc_score(y, base))
    assert deltas.loc["auroc", "ci_low"] > 0
    # the same seed gives the same table; clusters change n
    assert t.equals(probe_metric_intervals(y, p, baseline=base, n_boot=200, seed=42))
    tc = probe_metric_intervals(y, p, n_boot=50, seed=0, clusters=np.arange(300) // 30)
    assert set(tc["n"]) == {10}


# ---------------------------------------------------------------- top-k

def _epic_topk_recall(scores, labels, k=5, classes=None):
    "EPIC-KITCHENS' scorer, as in its repository (reference)."
    unique = np.unique(labels)
    classes = unique if classes is None else np.intersect1d(classes, unique)
    total = 0.0
    for c in classes:
        s, l = scores[labels == c], labels[labels == c]
        total += (s.argsort()[:, ::-1][:, :k] == l.reshape(-1, 1)).max(1).mean()
    return total / len(classes)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_topk_matches_sklearn_and_epic(k):
    rng = np.random.default_rng(k)
    n_cls = 20
    y = rng.choice(n_cls - 3, 400, p=np.r_[0.3, np.full(n_cls - 4, 0.7 / (n_cls - 4))])  # imbalanced, 3 classes absent
    scores = rng.normal(size=(400, n_cls)); scores[np.arange(400), y] += 1.2
    assert topk_accuracy(y, scores, k=k) == pytest.approx(skm.top_k_accuracy_score(y, scores, k=k, labels=np.arange(n_cls)), abs=1e-12)
    assert mean_topk_recall(y, scores, k=k) == pytest.approx(_epic_topk_recall(scores, y, k), abs=1e-12)
    many_shot = [0, 1, 2, 3, 18, 19]
    assert mean_topk_recall(y, scores, k=k, classes=many_shot) == pytest.approx(_epic_topk_recall(scores, y, k, many_shot), abs=1e-12)
    # mean recall differs from accuracy under imbalance (the reason EPIC reports both)
    w = rng.integers(0, 3, 400).astype(float)
    assert topk_accuracy(y, scores, sample_weight=w, k=k) == pytest.approx(
        skm.top_k_accuracy_score(y, scores, k=k, labels=np.arange(n_cls), sample_weight=w), abs=1e-12)


def test_topk_ties_follow_sklearn():
    scores = np.array([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.2, 0.2, 0.2]])
    y = np.array([0, 1, 2])
    assert topk_accuracy(y, scores, k=1) == pytest.approx(skm.top_k_accuracy_score(y, scores, k=1, labels=[0, 1, 2]))
    assert topk_accuracy(y, scores, k=2) == pytest.approx(skm.top_k_accuracy_score(y, scores, k=2, labels=[0, 1, 2]))
    with pytest.raises(ValueError, match="k must be"): topk_accuracy(y, scores, k=4)
    assert math.isnan(mean_topk_recall(y, scores, k=1, classes=[]))     # no class selected: undefined


def test_large_batched_bootstrap_is_bounded_and_matches_unbatched(monkeypatch):
    "A test set of the success protocol's size: batched AUROC replicates equal sklearn's on the same resamples."
    rng = np.random.default_rng(0)
    n = 9564
    y = (rng.random(n) < 0.82).astype(int); p = 1 / (1 + np.exp(-(y + rng.normal(size=n))))
    iv = bootstrap_interval((y, p), auroc, n_boot=120, seed=0)
    ref = bootstrap_interval((y, p), lambda y, p: skm.roc_auc_score(y, p), n_boot=120, seed=0)
    assert tuple(iv) == pytest.approx(tuple(ref), abs=1e-12)
    assert iv.low < skm.roc_auc_score(y, p) < iv.high
