"""Faults in a user's data folder (issue 32): each ends in one `hoi-audit: error:` naming every bad file, before any unit is computed,
or, for a folder name that cannot key stored results, in a safe name and a note. Each test builds a tiny MS-TCN folder."""
import json, shutil
from pathlib import Path
import numpy as np
import pytest
from hoi_audit.core import DataError
from hoi_audit.procedural import read_mstcn, read_for_command, safe_name, write_mstcn
from hoi_audit.runner import main
from hoi_audit.synthetic import synthetic_dataset, write_synthetic

CHEAP = ["--splits", "1", "--seeds", "42", "--tokens", "2", "--epochs", "1", "--d-model", "16"]   # the cheapest audit-engine run

@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    "A tiny synthetic Breakfast-like MS-TCN folder with features (two splits)."
    return write_synthetic(synthetic_dataset("breakfast", "tiny", seed=0), tmp_path_factory.mktemp("tiny") / "breakfast")

@pytest.fixture
def data(tiny_folder, tmp_path) -> Path:
    "A private copy of the tiny folder, free to break."
    d = tmp_path / "data" / "breakfast"
    shutil.copytree(tiny_folder, d)
    return d

def shrink_dim(folder:Path, video:str, by:int=4) -> Path:
    "Rewrite one video's feature file with `by` fewer feature dimensions; return its path."
    v = read_mstcn(folder).video(video)
    v.labels                                              # reads the header: which axis is time
    x = np.load(v.feature_path)
    np.save(v.feature_path, x[:-by] if v._time_axis == 1 else x[:, :-by])
    return v.feature_path

def run(capsys, *argv) -> tuple:
    "`hoi-audit ARGV` in this process: (exit status, stdout, stderr)."
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err

def no_unit_under(out:Path) -> bool:
    return not any(p.name == "units" for p in out.rglob("units")) if out.exists() else True

def test_mixed_feature_dimension_is_named_before_any_unit(data, tmp_path, capsys):
    "feature files of two dimensions -> one error naming each D with its files, before the first unit (no sklearn/numpy traceback)"
    video = read_mstcn(data).splits[2]["test"][0]
    bad = shrink_dim(data, video)
    dim = read_mstcn(data).video(video).feature_dim
    rc, _, err = run(capsys, "audit", data, "--out", tmp_path / "o", *CHEAP[2:])
    assert rc == 2 and err.startswith("hoi-audit: error:") and "Traceback" not in err, err
    assert "feature dimensions differ between videos" in err and f"D={dim} in 1 file ({bad.name})" in err, err
    assert no_unit_under(tmp_path / "o")

@pytest.mark.parametrize("command", ["controls", "sensitivity", "horizons", "context-probes", "lta"])
def test_mixed_feature_dimension_stops_every_feature_command(command, data, tmp_path, capsys):
    "feature files of two dimensions -> every command reading one folder's features stops before its first unit, naming the file"
    bad = shrink_dim(data, read_mstcn(data).videos[-1])
    rc, _, err = run(capsys, command, data, "--out", tmp_path / "o", "--seeds", "42", "--epochs", "1")
    assert rc == 2 and "feature dimensions differ" in err and bad.name in err and "Traceback" not in err, err
    assert no_unit_under(tmp_path / "o")

def test_empty_split_bundle_is_found_before_split_1_runs(data, tmp_path, capsys):
    "an empty test.split2.bundle -> an error naming that bundle before split 1 is computed"
    (data / "splits" / "test.split2.bundle").write_text("")
    rc, _, err = run(capsys, "audit", data, "--out", tmp_path / "o", *CHEAP[2:])
    assert rc == 2 and "test.split2.bundle: empty (split 2 has no test videos)" in err, err
    assert no_unit_under(tmp_path / "o")

def test_every_problem_is_listed_at_once(tmp_path, capsys):
    "many bad label files, an empty bundle and a mixed D -> one error: the first 20 problems, each naming its file, then '... and N more'"
    videos = [f"v{i:02d}" for i in range(26)]
    labels = {v: ["SIL", "cut"] * 12 for v in videos}
    feats = {v: np.zeros((24, 8 if v != "v01" else 6), np.float32) for v in videos}   # T x D: 24 frames, D=8 (v01: 6)
    root = write_mstcn(tmp_path / "many", labels, ["SIL", "cut"], {1: {"train": videos, "test": []}}, features=feats)
    for v in videos[2:]: (root / "groundTruth" / f"{v}.txt").write_text("SIL\nstir\n" * 6)
    rc, _, err = run(capsys, "audit", root, "--out", tmp_path / "o", *CHEAP[2:])
    assert rc == 2 and "26 problems" in err and "... and 6 more" in err, err
    assert "test.split1.bundle: empty" in err and f"{root / 'groundTruth' / 'v02.txt'}: line 2 has label 'stir'" in err, err
    assert "D=8 in 1 file (v00.npy); D=6 in 1 file (v01.npy)" in err or "D=6 in 1 file (v01.npy); D=8 in 1 file (v00.npy)" in err, err
    assert no_unit_under(tmp_path / "o")

def test_preflight_reads_feature_headers_not_values(data):
    "a NaN in a feature file -> preflight passes (headers only; the NaN check stays lazy) and the first read still names it"
    ds = read_mstcn(data)
    v = ds.video(ds.videos[0])
    x = np.load(v.feature_path); x.flat[5] = np.nan; np.save(v.feature_path, x)
    ds = read_mstcn(data)
    summary = ds.preflight()
    assert len(summary) == len(ds.videos) and summary["feature_dim"].nunique() == 1
    with pytest.raises(DataError, match="NaN/inf"): ds.video(ds.videos[0]).features()

def test_folder_name_with_non_ascii_letters_is_made_safe_and_noted(tiny_folder, tmp_path, capsys):
    "a data folder named 'données' -> the audit runs as dataset 'donnees', notes it on stderr, and records it in the results config"
    data = tmp_path / "données"
    shutil.copytree(tiny_folder, data)
    rc, _, err = run(capsys, "audit", data, "--out", tmp_path / "o", "--conditions", "recognizer_ba,gt_history", *CHEAP)
    assert rc == 0, err
    assert "hoi-audit: note: the folder name 'données'" in err and "'donnees'" in err, err
    config = json.loads((tmp_path / "o" / "results" / "four_condition.json").read_text())["config"]
    assert (config["dataset_name"], config["folder_name"]) == ("donnees", "données")

def test_folder_name_with_a_space_is_made_safe_for_label_commands(tiny_folder, tmp_path, capsys):
    "a data folder named 'my data' -> probes runs as dataset 'my_data' with a note, and its results config says so"
    data = tmp_path / "my data"
    shutil.copytree(tiny_folder, data)
    rc, _, err = run(capsys, "probes", data, "--out", tmp_path / "o", "--splits", "1", "--predictors", "majority")
    assert rc == 0 and "hoi-audit: note:" in err and "'my_data'" in err, err
    saved = json.loads((tmp_path / "o" / "results" / "decomposition.json").read_text())
    assert saved["config"]["dataset_names"]["my_data"]["folder_name"] == "my data"

@pytest.mark.parametrize("command", ["audit", "controls", "lta", "probes"])
def test_invalid_name_option_is_a_clear_error(command, data, tmp_path, capsys):
    "--name 'my data' -> a clear error suggesting a safe name, before anything is written"
    rc, _, err = run(capsys, command, data, "--out", tmp_path / "o", "--name", "my data")
    assert rc == 2 and "dataset name 'my data' cannot key stored results" in err and "e.g. 'my_data'" in err, err
    assert not (tmp_path / "o").exists()

def test_name_option_names_the_dataset(data, tmp_path, capsys):
    "--name mine on a folder 'breakfast' -> probes' records carry dataset 'mine' and its config records the folder's name"
    rc, _, err = run(capsys, "probes", data, "--out", tmp_path / "o", "--splits", "1", "--predictors", "majority", "--name", "mine")
    assert rc == 0 and "note" not in err, err
    saved = json.loads((tmp_path / "o" / "results" / "decomposition.json").read_text())
    assert saved["config"]["dataset_names"] == {"mine": {"dataset_name": "mine", "folder_name": "breakfast"}}

def test_scope_checks_every_folder_before_the_first_audit(tiny_folder, tmp_path, capsys):
    "scope over two folders, the second with an empty bundle -> an error naming it before the first folder is audited"
    first, second = tmp_path / "a b", tmp_path / "c"
    shutil.copytree(tiny_folder, first); shutil.copytree(tiny_folder, second)
    (second / "splits" / "train.split1.bundle").write_text("")
    rc, _, err = run(capsys, "scope", first, second, "--out", tmp_path / "o", *CHEAP)
    assert rc == 2 and "setting 'c'" in err and "train.split1.bundle: empty" in err and "Traceback" not in err, err
    assert "hoi-audit: note: setting 'a b' keys its stored results as 'a_b'" in err, err
    assert no_unit_under(tmp_path / "o")

def test_unreadable_label_file_is_named(data):
    "a label file that is not UTF-8 -> the preflight names it (no UnicodeDecodeError traceback)"
    video = read_mstcn(data).videos[0]
    (data / "groundTruth" / f"{video}.txt").write_bytes(b"\xff\xfe\x00bad\n")
    with pytest.raises(DataError, match=f"{video}.txt: label file is not UTF-8 text"): read_for_command(data)

def test_safe_name_folds_accents_and_replaces_the_rest():
    "names with spaces, accents, slashes or no Latin letters -> store keys (letters, digits, _.+-), distinct where the input was"
    assert [safe_name(n) for n in ("my data", "données", "a/b")] == ["my_data", "donnees", "a_b"]
    assert safe_name("数据") != safe_name("数字")
