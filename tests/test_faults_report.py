"Faults in the results JSON that `hoi-audit report` reads: each is one named error (exit 2) naming the file, the record and the field."
import json
from pathlib import Path
import pytest
from hoi_audit.report import check_results, metric_kind
from hoi_audit.runner import main
from conftest import REPO

AUDIT = json.loads((REPO / "results" / "four_condition.json").read_text())
INTERVENTION = json.loads((REPO / "results" / "intervention_2x2.json").read_text())
COMMITTED = sorted((REPO / "results").rglob("*.json"))

def _index(payload, prefix):
    "The first record whose metric starts with `prefix`."
    return next(i for i, r in enumerate(payload["records"]) if r["metric"].startswith(prefix))

def _report(tmp_path, capsys, edit=None, text=None, intervention=None):
    "Write the committed audit (edited by `edit`, or `text` verbatim) to tmp_path, run `hoi-audit report` on it: (exit, stderr, path)."
    path = tmp_path / "audit.json"
    payload = json.loads(json.dumps(AUDIT))
    if edit: edit(payload)
    path.write_text(text if text is not None else json.dumps(payload))
    if intervention is not None: (tmp_path / "audit.intervention_2x2.json").write_text(json.dumps(intervention))
    rc = main(["report", str(path)])
    return rc, capsys.readouterr().err, path

def _refused(tmp_path, capsys, record_prefix, field, value, expected):
    "Set `field` of the first `record_prefix` record to `value` (or delete it: ...), check exit 2 and a message naming all three."
    i = _index(AUDIT, record_prefix)
    def edit(p):
        if value is ...: del p["records"][i][field]
        else: p["records"][i][field] = value
    rc, err, path = _report(tmp_path, capsys, edit)
    assert rc == 2 and err.startswith("hoi-audit: error: ") and "Traceback" not in err
    assert str(path) in err and f"record {i} (metric " in err and f"field {field!r}" in err and expected in err, err
    assert not path.with_name("audit.report.html").exists()   # nothing written from bad input
    return err

def test_string_value_is_named(tmp_path, capsys):
    "a string where a number belongs ('0.5') -> exit 2 naming the record and field 'value', not a pandas traceback"
    _refused(tmp_path, capsys, "act1", "value", "0.5", 'is "0.5"; expected a finite number')

def test_accuracy_above_100_is_refused(tmp_path, capsys):
    "an accuracy of 250 -> exit 2: expected a percentage in [0, 100]"
    _refused(tmp_path, capsys, "act1", "value", 250, "expected a percentage in [0, 100]")

def test_null_value_is_refused(tmp_path, capsys):
    "null where a number belongs -> exit 2: expected a finite number"
    _refused(tmp_path, capsys, "act5", "value", None, "is null; expected a finite number")

def test_boolean_value_is_refused(tmp_path, capsys):
    "a boolean where a number belongs (JSON true is no score) -> exit 2"
    _refused(tmp_path, capsys, "verb1", "value", True, "is true; expected a finite number")

def test_missing_value_is_named(tmp_path, capsys):
    "a record without 'value' -> exit 2: field 'value' missing"
    _refused(tmp_path, capsys, "act1", "value", ..., "field 'value' missing")

def test_missing_split_is_named(tmp_path, capsys):
    "an audit record without 'split' (the report groups by it) -> exit 2: field 'split' missing"
    _refused(tmp_path, capsys, "act1", "split", ..., "field 'split' missing")

def test_gap_without_n_is_named(tmp_path, capsys):
    "a gap record without its 'n' (the verdict reads it) -> exit 2: field 'n' missing"
    _refused(tmp_path, capsys, "gap_", "n", ..., "field 'n' missing; expected a non-negative integer")

def test_negative_n_is_refused(tmp_path, capsys):
    "a negative n -> exit 2: expected a non-negative integer"
    _refused(tmp_path, capsys, "gap_", "n", -3, "is -3; expected a non-negative integer")

def test_fractional_n_is_refused(tmp_path, capsys):
    "n = 2.5 -> exit 2: expected a non-negative integer"
    _refused(tmp_path, capsys, "gap_", "n", 2.5, "expected a non-negative integer")

def test_ci_low_above_ci_high_is_refused(tmp_path, capsys):
    "ci_low > ci_high -> exit 2: expected ci_low <= ci_high"
    _refused(tmp_path, capsys, "gap_", "ci_low", 99.0, "expected ci_low <= ci_high")

def test_value_outside_its_interval_is_refused(tmp_path, capsys):
    "a gap outside [ci_low, ci_high] -> exit 2: expected within its interval"
    _refused(tmp_path, capsys, "gap_", "value", -50.0, "expected within its interval")

def test_gap_beyond_100_points_is_refused(tmp_path, capsys):
    "a gap of 150 points (with a matching interval) -> exit 2: expected a difference in [-100, 100]"
    i = _index(AUDIT, "gap_")
    def edit(p): p["records"][i].update(value=150.0, ci_low=140.0, ci_high=160.0)
    rc, err, path = _report(tmp_path, capsys, edit)
    assert rc == 2 and str(path) in err and f"record {i} (metric 'gap_" in err and "difference of percentages in [-100, 100]" in err

def test_half_an_interval_is_refused(tmp_path, capsys):
    "ci_high null beside a numeric ci_low -> exit 2: both numbers or both null"
    _refused(tmp_path, capsys, "gap_", "ci_high", None, "expected both numbers, or both null")

def test_negative_edit_rate_is_refused(tmp_path, capsys):
    "a negative history edit rate -> exit 2: expected a non-negative number"
    _refused(tmp_path, capsys, "history_edit_rate", "value", -0.1, "expected a non-negative number")

def test_item_accuracy_is_a_fraction(tmp_path, capsys):
    "a history item accuracy of 1.5 (a fraction) -> exit 2: expected a fraction in [0, 1]"
    _refused(tmp_path, capsys, "history_item_acc", "value", 1.5, "expected a fraction in [0, 1]")

def test_label_not_a_string_is_refused(tmp_path, capsys):
    "a condition that is a list -> exit 2: expected a non-empty string"
    _refused(tmp_path, capsys, "act1", "condition", ["gt_history"], "expected a non-empty string")

def test_unknown_metric_is_type_checked_only(tmp_path, capsys):
    "an unknown metric with a number -> accepted (no range); with a string -> exit 2"
    extra = {"dataset": "d", "split": 1, "condition": "gt_history", "metric": "my_plugin_score", "value": 1234.5}
    rc, err, path = _report(tmp_path, capsys, lambda p: p["records"].append(extra))
    assert rc == 0 and path.with_name("audit.report.html").is_file(), err
    n = len(AUDIT["records"])
    rc, err, path = _report(tmp_path, capsys, lambda p: p["records"].append(extra | {"value": "high"}))
    assert rc == 2 and str(path) in err and f"record {n} (metric 'my_plugin_score'): field 'value'" in err

def test_records_not_a_list_is_refused(tmp_path, capsys):
    "records an object instead of a list -> exit 2 naming the field 'records'"
    rc, err, path = _report(tmp_path, capsys, lambda p: p.update(records={"0": p["records"][0]}))
    assert rc == 2 and str(path) in err and "field 'records'" in err and "expected a list of records" in err

def test_record_not_an_object_is_refused(tmp_path, capsys):
    "a record that is a number -> exit 2 naming the record"
    rc, err, path = _report(tmp_path, capsys, lambda p: p["records"].insert(0, 7))
    assert rc == 2 and str(path) in err and "record 0 is 7; expected an object with metric and value" in err

def test_empty_records_are_refused(tmp_path, capsys):
    "an empty records list -> exit 2: expected at least one record"
    rc, err, path = _report(tmp_path, capsys, lambda p: p.update(records=[]))
    assert rc == 2 and str(path) in err and "field 'records' is []" in err

def test_missing_section_is_refused(tmp_path, capsys):
    "a payload without 'scale' -> exit 2: not a results JSON, missing ['scale']"
    rc, err, path = _report(tmp_path, capsys, lambda p: p.pop("scale"))
    assert rc == 2 and str(path) in err and "missing ['scale']" in err

def test_wrong_experiment_is_refused(tmp_path, capsys):
    "another experiment's results JSON -> exit 2 naming field 'experiment' and both names"
    rc, err, path = _report(tmp_path, capsys, lambda p: p.update(experiment="lta"))
    assert rc == 2 and str(path) in err and "field 'experiment'" in err and "'lta'" in err and "expected 'four_condition'" in err

def test_config_train_not_an_object_is_refused(tmp_path, capsys):
    "config.train a list (the report reads its settings) -> exit 2 naming config field 'train'"
    rc, err, path = _report(tmp_path, capsys, lambda p: p["config"].update(train=[40]))
    assert rc == 2 and str(path) in err and "config: field 'train' is [40]; expected an object" in err

def test_truncated_file_is_named(tmp_path, capsys):
    "a truncated results JSON -> exit 2: not a readable results JSON, naming the file"
    rc, err, path = _report(tmp_path, capsys, text=json.dumps(AUDIT)[:500])
    assert rc == 2 and str(path) in err and "not a readable results JSON" in err and "Traceback" not in err

def test_every_problem_is_listed_up_to_20(tmp_path, capsys):
    "25 bad records -> one error listing 20 problems and counting the other 5"
    def edit(p):
        for r in p["records"][:25]: r["value"] = "x"
    rc, err, path = _report(tmp_path, capsys, edit)
    assert rc == 2 and "(25 problems)" in err and "record 19 (metric" in err and "record 20 (metric" not in err
    assert "... and 5 more problems" in err

def test_bad_2x2_beside_the_audit_is_named(tmp_path, capsys):
    "a bad value in the 2x2 results beside the audit -> exit 2 naming that file, its record and field"
    iv = json.loads(json.dumps(INTERVENTION))
    i = _index(iv, "contrast_")
    iv["records"][i]["n"] = -1
    rc, err, path = _report(tmp_path, capsys, intervention=iv)
    assert rc == 2 and "audit.intervention_2x2.json" in err and f"record {i} (metric 'contrast_act1'): field 'n' is -1" in err

def test_committed_audit_still_reports(tmp_path, capsys):
    "the committed audit and its 2x2 -> exit 0 and the report written"
    rc, err, path = _report(tmp_path, capsys, intervention=INTERVENTION)
    assert rc == 0 and err == "" and path.with_name("audit.report.html").is_file()

@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(REPO / "results")))
def test_committed_results_validate(path):
    "every committed results/*.json -> valid, and every metric in it has a kind (none is unknown)"
    payload = json.loads(path.read_text())
    check_results(payload, path)
    assert not {r["metric"] for r in payload["records"] if metric_kind(r["metric"], r) is None}
