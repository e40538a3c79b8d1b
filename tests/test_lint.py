"Protocol lint: each planted problem is found on exactly its rows, a clean protocol passes, bad input is named, the CLI."
import argparse, json
import pandas as pd
import pytest
from hoi_audit.core import DataError
from hoi_audit.lint import PLANTABLE, RULES, lint_protocol, write_example_protocol
from hoi_audit.published import add_subcommand  # the CLI's `hoi-audit lint`


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


def test_filters_on_verbs_nouns_and_pairs_are_each_named_with_counts(tmp_path):
    """Issue 31 (a benchmark shaped like V-JEPA 2's EPIC-100 eval): actions dropped because their noun, or their (verb, noun) pair,
    never occurs in training are `noun-filter` and `pair-filter` findings with their ids, not merged into `dropped-without-record`."""
    inputs, _ = write_example_protocol(tmp_path)
    ev, tr = pd.read_csv(inputs["annotations"]), pd.read_csv(inputs["train_annotations"])
    tr.loc[tr.index[:3], ["noun", "noun_class"]] = ["knife", 1]             # noun 1 is seen in training, only with these verbs
    seen_with_1 = set(tr.verb_class[:3])
    scored = inputs["scored"].read_text().split()
    pair_rows = [i for i in ev.index if ev.narration_id[i] in scored and ev.verb_class[i] not in seen_with_1][:4]
    noun_rows = [i for i in ev.index if ev.narration_id[i] in scored and i not in pair_rows][:2]
    ev.loc[pair_rows, ["noun", "noun_class"]] = ["knife", 1]
    ev.loc[noun_rows, ["noun", "noun_class"]] = ["spoon", 9]                 # never in training
    ev.to_csv(inputs["annotations"], index=False); tr.to_csv(inputs["train_annotations"], index=False)
    dropped = set(ev.narration_id[pair_rows + noun_rows])
    inputs["scored"].write_text("\n".join(i for i in scored if i not in dropped) + "\n")
    report = lint_protocol(**inputs)
    assert report.findings.rule.tolist() == ["noun-filter", "pair-filter"]
    assert report.finding("noun-filter")["narration_ids"] == sorted(ev.narration_id[noun_rows])
    assert report.finding("pair-filter")["narration_ids"] == sorted(ev.narration_id[pair_rows])
    assert report.finding("pair-filter")["n_actions"] == 4


def test_end_anchored_windows_at_59_94_fps_are_diagnosed_within_one_frame(tmp_path):
    "Timestamps rounded to 10 ms and windows computed from frames one second before each END: diagnosed as end-anchored (tolerance one frame)."
    inputs, _ = write_example_protocol(tmp_path)
    ev = pd.read_csv(inputs["annotations"])
    fps = 59.94
    from hoi_audit.lint import _timestamp
    start_f = (ev.start_frame / 60 * fps).round().astype(int); stop_f = (ev.stop_frame / 60 * fps).round().astype(int)
    ev = ev.assign(start_frame=start_f, stop_frame=stop_f, start_timestamp=[_timestamp(round(f / fps, 2)) for f in start_f],
                   stop_timestamp=[_timestamp(round(f / fps, 2)) for f in stop_f])
    ev.to_csv(inputs["annotations"], index=False)
    end = stop_f / fps - 1.0
    pd.DataFrame({"narration_id": ev.narration_id, "window_start": end - 5.0, "window_end": end}).to_csv(inputs["windows"], index=False)
    f = lint_protocol(**inputs).finding("window-anchor")
    assert "relative to the stop time" in f["message"] and f["n_actions"] == 38, f["message"]


def test_one_bad_window_row_is_a_finding_not_an_abort(tmp_path):
    "A degenerate (end before start), an unreadable, a duplicated and a padded window: each named by id; every other rule still runs."
    inputs, planted = write_example_protocol(tmp_path, plant=("dropped-without-record",))
    w = pd.read_csv(inputs["windows"], dtype={"window_start": str, "window_end": str})
    ids = w.narration_id.tolist()
    w.loc[3, ["window_start", "window_end"]] = [w.loc[3, "window_end"], w.loc[3, "window_start"]]
    w.loc[4, "window_start"] = "soon"
    w.loc[5, "window_start"] = "-0.5"
    w = pd.concat([w, w.iloc[[6]]])
    w.to_csv(inputs["windows"], index=False)
    report = lint_protocol(**inputs)
    assert report.finding("degenerate-window")["narration_ids"] == sorted([ids[3], ids[4], ids[6]])
    assert report.finding("padded-window")["narration_ids"] == [ids[5]]
    assert report.finding("dropped-without-record")["narration_ids"] == sorted(planted["dropped-without-record"])
    assert cli(*flags(inputs), "--out", str(tmp_path / "o")) == 1
