"Protocol lint: each planted problem is found on exactly its rows, a clean protocol passes, bad input is named, the CLI."
import argparse, json
import pandas as pd
import pytest
from hoi_audit.core import DataError
from hoi_audit.lint import PLANTABLE, RULES, add_subcommand, lint_protocol, write_example_protocol


def cli(*argv):
    p = argparse.ArgumentParser(); sub = p.add_subparsers(); add_subcommand(sub)
    args = p.parse_args(["lint", *argv]); return args.func(args)


def flags(inputs):
    return sum([[f"--{k.replace('_', '-')}", str(v)] for k, v in inputs.items()], [])


def test_clean_protocol_passes(tmp_path):
    inputs, planted = write_example_protocol(tmp_path)
    assert planted == {}
    report = lint_protocol(**inputs)
    assert report.ok and report.n_annotated == 40 and report.n_scored == 38     # two excluded with a reason


@pytest.mark.parametrize("rule", PLANTABLE)
def test_each_planted_problem_is_found_on_its_rows_only(tmp_path, rule):
    inputs, planted = write_example_protocol(tmp_path, plant=(rule,))
    report = lint_protocol(**inputs)
    assert report.findings.rule.tolist() == [rule]
    f = report.finding(rule)
    assert f["narration_ids"] == sorted(planted[rule]) and f["n_actions"] == len(planted[rule])


def test_all_planted_together(tmp_path):
    inputs, planted = write_example_protocol(tmp_path, plant=PLANTABLE)
    report = lint_protocol(**inputs)
    assert {r: report.finding(r)["narration_ids"] for r in planted} == {r: sorted(v) for r, v in planted.items()}


def test_window_anchor_by_hand(tmp_path):
    "Windows ending 0.5 s before each action's end: the 2 s action's window covers its start, found with the end-anchor message."
    inputs, _ = write_example_protocol(tmp_path)
    ann = pd.read_csv(inputs["annotations"])
    from hoi_audit.epic import parse_timestamp
    stop = ann.stop_timestamp.map(parse_timestamp)
    pd.DataFrame({"narration_id": ann.narration_id, "window_start": stop - 5.5, "window_end": stop - 0.5}).to_csv(inputs["windows"], index=False)
    f = lint_protocol(**inputs).finding("window-anchor")
    assert "relative to the stop time" in f["message"] and f["n_actions"] == 38


def test_a_window_one_tenth_second_late_is_found(tmp_path):
    inputs, _ = write_example_protocol(tmp_path)
    w = pd.read_csv(inputs["windows"])
    scored = inputs["scored"].read_text().split()
    w.loc[w.narration_id == scored[3], "window_end"] += 0.1            # ends 0.9 s before the start
    w.to_csv(inputs["windows"], index=False)
    assert lint_protocol(**inputs).finding("window-anchor")["narration_ids"] == [scored[3]]


def test_excluded_from_extract_json(tmp_path):
    inputs, planted = write_example_protocol(tmp_path, plant=("dropped-without-record",))
    record = {"records": [{"action_id": i, "error": "decode failed"} for i in planted["dropped-without-record"]]
              + [{"action_id": i, "error": "damaged"} for i in pd.read_csv(inputs["excluded"]).narration_id]}
    (tmp_path / "extract.json").write_text(json.dumps(record))
    assert lint_protocol(**{**inputs, "excluded": tmp_path / "extract.json"}).ok


def test_bad_input_names_the_file(tmp_path):
    inputs, _ = write_example_protocol(tmp_path)
    inputs["windows"].write_text("narration_id,window_start\nx,1\n")
    with pytest.raises(DataError, match=r"windows.csv: missing column\(s\) \['window_end'\]"):
        lint_protocol(**inputs)
    inputs, _ = write_example_protocol(tmp_path / "b")
    with pytest.raises(DataError, match="reported split"):
        lint_protocol(**{**inputs, "reported_split": None})
    with pytest.raises(DataError, match="scored ids file not found"):
        lint_protocol(**{**inputs, "scored": tmp_path / "nope.txt"})


def test_cli_exit_codes_and_report(tmp_path):
    clean, _ = write_example_protocol(tmp_path / "clean")
    assert cli(*flags(clean), "--out", str(tmp_path / "clean.json")) == 0
    bad, planted = write_example_protocol(tmp_path / "bad", plant=PLANTABLE)
    assert cli(*flags(bad), "--out", str(tmp_path / "o")) == 1
    report = json.loads((tmp_path / "o" / "results" / "lint.json").read_text())
    assert not report["ok"] and set(report["rules"]) == set(RULES)
    assert {f["rule"]: f["n_actions"] for f in report["findings"]} == {r: len(v) for r, v in planted.items()}
    assert sorted(p.relative_to(tmp_path / "o").as_posix() for p in (tmp_path / "o").rglob("*") if p.is_file()) == ["results/lint.json"]
