"""The MS-TCN reader: bad input, orientation, trimming, laziness, segments, and the real Breakfast / 50 Salads / GTEA labels."""
import gzip, itertools, os, shutil, subprocess, sys
from pathlib import Path

import numpy as np
import pytest

import hoi_audit.procedural as procedural
from hoi_audit.core import DataError, PinMismatch
from hoi_audit.procedural import (MSTCN_LABEL_PINS, REAL_DATASETS, SHIPPED_LABELS, Trim, labels_pins, materialize_real_labels,
                                  pack_mstcn, read_mstcn, real_labels_root, segments_of, unpack_labels, write_mstcn)

CLASSES = ["SIL", "take_cup", "pour_milk", "stir_milk"]
LABELS = {"v1": ["SIL"] * 3 + ["take_cup"] * 4 + ["pour_milk"] * 5 + ["SIL"] * 2,   # 14 frames
          "v2": ["take_cup"] * 6 + ["stir_milk"] * 6 + ["pour_milk"] * 8,           # 20 frames
          "v3": ["SIL"] * 9 + ["stir_milk"] * 9}                                     # 18 frames
SPLITS = {1: {"train": ["v1", "v2"], "test": ["v3"]}, 2: {"train": ["v2", "v3"], "test": ["v1"]}}
D = 64  # far from every label length, so the orientation is never ambiguous unless a test makes it so


def make(tmp_path, labels=LABELS, features="DxT", extra=None, name="ds"):
    "A tiny MS-TCN folder; features T x D from a fixed generator, stored D x T (I3D layout), T x D, or not at all."
    rng = np.random.default_rng(0)
    feats = None
    if features:
        feats = {v: rng.normal(size=(len(l) + (extra or {}).get(v, 0), D)).astype(np.float32) for v, l in labels.items()}
    return write_mstcn(tmp_path / name, labels, CLASSES, SPLITS, features=feats,
                       feature_layout=features if features else "as_given"), feats


def save_stored(root, video, array):
    np.save(root / "features" / f"{video}.npy", array)


# ---------------------------------------------------------------------------------------------------------------- bad input

def test_missing_mapping(tmp_path):
    root, _ = make(tmp_path)
    (root / "mapping.txt").unlink()
    with pytest.raises(DataError, match=r"mapping\.txt: mapping file not found"): read_mstcn(root)


def test_missing_splits_folder(tmp_path):
    root, _ = make(tmp_path)
    for p in (root / "splits").iterdir(): p.unlink()
    (root / "splits").rmdir()
    with pytest.raises(DataError, match=r"splits: splits folder not found"): read_mstcn(root)


def test_empty_splits_folder_and_missing_part(tmp_path):
    root, _ = make(tmp_path)
    (root / "splits" / "test.split2.bundle").unlink()
    with pytest.raises(DataError, match=r"test\.split2\.bundle: file not found"): read_mstcn(root)
    for p in (root / "splits").iterdir(): p.unlink()
    with pytest.raises(DataError, match=r"no <part>\.split<N>\.bundle files"): read_mstcn(root)


@pytest.mark.parametrize("line,problem", [("1 take cup", "line 2 is malformed"), ("x take_cup", "line 2 is malformed"),
                                          ("take_cup", "line 2 is malformed"), ("0 take_cup", "line 2: class id 0 appears twice")])
def test_malformed_mapping_line(tmp_path, line, problem):
    root, _ = make(tmp_path, features=None)
    (root / "mapping.txt").write_text(f"0 SIL\n{line}\n2 pour_milk\n3 stir_milk\n")
    with pytest.raises(DataError, match=rf"mapping\.txt: {problem}"): read_mstcn(root)


def test_bundle_video_without_label_file(tmp_path):
    root, _ = make(tmp_path, features=None)
    (root / "groundTruth" / "v3.txt").unlink()
    with pytest.raises(DataError, match=r"test\.split1\.bundle: 1 videos have no label file .* v3\.txt"): read_mstcn(root)


def test_label_not_in_mapping(tmp_path):
    root, _ = make(tmp_path, features=None)
    (root / "groundTruth" / "v2.txt").write_text("take_cup\ntake_cup\nfry_egg\n")
    ds = read_mstcn(root)                                   # labels are read lazily, so opening succeeds
    with pytest.raises(DataError, match=r"v2\.txt: line 3 has label 'fry_egg', which is not in the mapping"): ds.video("v2").labels


@pytest.mark.parametrize("text", ["", "\n", "\n\n  \n"])
def test_empty_label_file(tmp_path, text):
    root, _ = make(tmp_path, features=None)
    (root / "groundTruth" / "v1.txt").write_text(text)
    with pytest.raises(DataError, match=r"v1\.txt: label file is empty"): read_mstcn(root).video("v1").segments


def test_blank_line_inside_label_file(tmp_path):
    root, _ = make(tmp_path, features=None)
    (root / "groundTruth" / "v1.txt").write_text("SIL\n\nSIL\n")
    with pytest.raises(DataError, match=r"v1\.txt: line 2 is blank"): read_mstcn(root).video("v1").labels


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("layout", ["DxT", "TxD"])
def test_nonfinite_features(tmp_path, bad, layout):
    root, feats = make(tmp_path, features=layout)
    x = feats["v2"].copy(); x[13, 7] = bad; x[15, 2] = bad          # T x D: frames 13 and 15
    save_stored(root, "v2", x.T if layout == "DxT" else x)
    ds = read_mstcn(root)
    assert ds.video("v2").n_frames == 20                        # reading labels does not read feature values
    with pytest.raises(DataError, match=r"v2\.npy: 2 NaN/inf feature values, the first at frame 13"): ds.video("v2").features()
    with pytest.raises(DataError, match=r"v2\.npy: 2 NaN/inf"): ds.validate()
    np.testing.assert_array_equal(ds.video("v1").features(), feats["v1"])   # the other videos are unaffected


def test_length_mismatch_beyond_tolerance(tmp_path):
    root, _ = make(tmp_path, extra={"v3": 11})                    # default tolerance is 10 frames
    ds = read_mstcn(root)
    with pytest.raises(DataError, match=r"v3\.npy: feature/label length mismatch.*18 label frames.*length_tolerance=10"):
        ds.video("v3").labels
    with pytest.raises(DataError, match=r"v3\.npy: feature/label length mismatch"): read_mstcn(root, orientation="DxT").video("v3").labels


def test_missing_feature_file_and_bad_feature_files(tmp_path):
    root, _ = make(tmp_path)
    (root / "features" / "v1.npy").unlink()
    with pytest.raises(DataError, match=r"features: 1 videos have labels but no feature file, e.g. v1\.npy"): read_mstcn(root)
    (root / "features" / "v1.npy").write_bytes(b"not an npy file")
    with pytest.raises(DataError, match=r"v1\.npy: not a readable \.npy array"): read_mstcn(root).video("v1").labels
    np.save(root / "features" / "v1.npy", np.zeros((D, 14, 1)))
    with pytest.raises(DataError, match=r"v1\.npy: features must be 2-D"): read_mstcn(root).video("v1").labels


def test_features_requested_from_labels_only_dataset(tmp_path):
    root, _ = make(tmp_path, features=None)
    ds = read_mstcn(root)
    assert not ds.has_features and ds.video("v1").trimmed is None
    with pytest.raises(DataError, match="has no features"): ds.video("v1").features()


def test_leakage_and_duplicates_in_bundles(tmp_path):
    root, _ = make(tmp_path, features=None)
    (root / "splits" / "test.split1.bundle").write_text("v3.txt\nv1.txt\n")
    with pytest.raises(DataError, match="split 1 lists 1 videos in both train and test"): read_mstcn(root)
    (root / "splits" / "test.split1.bundle").write_text("v3.txt\nv3.txt\n")
    with pytest.raises(DataError, match=r"test\.split1\.bundle: videos listed twice: \['v3'\]"): read_mstcn(root)


def test_validate_collects_every_problem(tmp_path):
    root, _ = make(tmp_path, extra={"v3": 30})
    (root / "groundTruth" / "v1.txt").write_text("SIL\nboil_water\n")
    with pytest.raises(DataError) as e: read_mstcn(root).validate()
    assert "2 problems" in str(e.value) and "boil_water" in str(e.value) and "v3.npy: feature/label length mismatch" in str(e.value)


# ---------------------------------------------------------------------------------------------------------------- orientation

@pytest.mark.parametrize("layout", ["DxT", "TxD"])
def test_orientation_detected_and_exposed_as_t_by_d(tmp_path, layout):
    root, feats = make(tmp_path, features=layout)
    stored = np.load(root / "features" / "v2.npy")
    assert stored.shape == ((D, 20) if layout == "DxT" else (20, D))
    ds = read_mstcn(root)
    for v in ds.videos:
        f = ds.video(v).features()
        assert f.shape == (len(LABELS[v]), D)
        np.testing.assert_array_equal(f, feats[v])
    # forcing the wrong orientation is a length mismatch, not a silent transpose
    wrong = "TxD" if layout == "DxT" else "DxT"
    with pytest.raises(DataError, match="feature/label length mismatch"): read_mstcn(root, orientation=wrong).video("v1").labels


def test_ambiguous_orientation_resolved_by_the_other_files(tmp_path):
    # v2 has 20 frames and its features are 20 x 20: both axes fit. The other files (D x T with D = 20) show that axis 0 is D.
    labels = {"v1": LABELS["v1"], "v2": LABELS["v2"], "v3": LABELS["v3"]}
    root = write_mstcn(tmp_path / "amb", labels, CLASSES, SPLITS)
    rng = np.random.default_rng(1)
    tx_d = {v: rng.normal(size=(len(l), 20)).astype(np.float32) for v, l in labels.items()}
    (root / "features").mkdir()
    for v, x in tx_d.items(): save_stored(root, v, x.T)
    ds = read_mstcn(root, length_tolerance=0)
    np.testing.assert_array_equal(ds.video("v2").features(), tx_d["v2"])
    # stored T x D instead: the varying axis is 0, so the square file is read as T x D
    for v, x in tx_d.items(): save_stored(root, v, x)
    np.testing.assert_array_equal(read_mstcn(root, length_tolerance=0).video("v2").features(), tx_d["v2"])


def test_ambiguous_orientation_that_cannot_be_resolved(tmp_path):
    labels = {v: ["SIL"] * 5 + ["take_cup"] * 5 for v in LABELS}          # every video 10 frames, every file 10 x 10
    root = write_mstcn(tmp_path / "sq", labels, CLASSES, SPLITS, features={v: np.eye(10) for v in labels})
    with pytest.raises(DataError, match="cannot tell whether features are D x T or T x D.*orientation="):
        read_mstcn(root).video("v1").labels
    assert read_mstcn(root, orientation="DxT").video("v1").features().shape == (10, 10)


def test_both_axes_vary_is_an_error(tmp_path):
    root = write_mstcn(tmp_path / "mix", LABELS, CLASSES, SPLITS)
    (root / "features").mkdir()
    save_stored(root, "v1", np.zeros((14, 14)))                                     # ambiguous
    save_stored(root, "v2", np.zeros((20, 30))); save_stored(root, "v3", np.zeros((31, 18)))
    with pytest.raises(DataError, match="disagree on both axes"): read_mstcn(root, length_tolerance=0).video("v1").labels


# ---------------------------------------------------------------------------------------------------------------- trimming

def test_trim_within_tolerance_features_longer(tmp_path):
    root, feats = make(tmp_path, extra={"v2": 3})
    ds = read_mstcn(root)
    v = ds.video("v2")
    assert v.trimmed == Trim(label_frames=20, feature_frames=23, n_frames=20)
    assert (v.trimmed.features_dropped, v.trimmed.labels_dropped) == (3, 0)
    np.testing.assert_array_equal(v.features(), feats["v2"][:20])                  # dropped from the end
    assert ds.video("v1").trimmed is None


def test_trim_within_tolerance_labels_longer(tmp_path):
    root, feats = make(tmp_path)
    save_stored(root, "v3", feats["v3"][:-4].T)                                    # 14 feature frames, 18 labels
    ds = read_mstcn(root)
    v = ds.video("v3")
    assert (v.n_frames, v.trimmed.labels_dropped, v.trimmed.features_dropped) == (14, 4, 0)
    assert v.labels.tolist() == [0] * 9 + [3] * 5
    assert v.segments.tolist() == [[0, 9, 0], [9, 14, 3]]
    assert v.features().shape == (14, D)


def test_trim_summary_and_tolerance_edges(tmp_path):
    root, feats = make(tmp_path, extra={"v1": 2, "v2": 10})
    ds = read_mstcn(root)
    assert len(ds.trim_summary()) == 0                                             # nothing read yet
    ds.validate()
    s = ds.trim_summary()
    assert s["video"].tolist() == ["v1", "v2"] and s["features_dropped"].tolist() == [2, 10]
    assert s["labels_dropped"].tolist() == [0, 0] and s["n_frames"].tolist() == [14, 20]
    with pytest.raises(DataError, match="v2.npy: feature/label length mismatch"): read_mstcn(root, length_tolerance=9).video("v2").labels
    with pytest.raises(DataError, match="v1.npy: feature/label length mismatch"): read_mstcn(root, length_tolerance=0).validate()


def test_nonfinite_values_in_the_trimmed_tail_are_dropped_not_reported(tmp_path):
    root, feats = make(tmp_path, features="TxD")
    x = np.concatenate([feats["v1"], np.full((2, D), np.nan, np.float32)])
    save_stored(root, "v1", x)
    v = read_mstcn(root).video("v1")
    np.testing.assert_array_equal(v.features(), feats["v1"])
    assert v.trimmed.features_dropped == 2


def test_bad_tolerance_and_orientation_arguments(tmp_path):
    root, _ = make(tmp_path, features=None)
    with pytest.raises(ValueError, match="length_tolerance"): read_mstcn(root, length_tolerance=0.5)
    with pytest.raises(ValueError, match="orientation"): read_mstcn(root, orientation="T x D")


# ---------------------------------------------------------------------------------------------------------------- laziness

def test_opening_reads_no_label_or_feature_file(tmp_path, monkeypatch):
    root, _ = make(tmp_path)
    calls = {"labels": 0, "load": []}
    real_read, real_load = procedural.read_label_file, np.load
    def counting_read(*args, **kwargs):
        calls["labels"] += 1
        return real_read(*args, **kwargs)
    def recording_load(*args, **kwargs):
        calls["load"].append(kwargs.get("mmap_mode"))
        return real_load(*args, **kwargs)
    monkeypatch.setattr(procedural, "read_label_file", counting_read)
    monkeypatch.setattr(np, "load", recording_load)
    ds = read_mstcn(root)
    assert calls == {"labels": 0, "load": []}
    v = ds.video("v1")
    v.labels; v.segments; v.transcript; v.labels
    assert calls["labels"] == 1                                                    # read once, then cached
    f1, f2 = v.features(), v.features()
    assert isinstance(f1, np.memmap) and isinstance(f2, np.memmap) and f1 is not f2  # mapped per call, never cached
    assert set(calls["load"]) == {"r"}                                             # every feature read is a memory map
    assert calls["labels"] == 1 and ds.video("v1") is v


def test_no_memory_map_outlives_a_call(tmp_path):
    root, _ = make(tmp_path)
    ds = read_mstcn(root)
    ds.validate()
    held = [(v.name, k) for v in ds for k, x in vars(v).items() if isinstance(x, np.memmap)]
    held += [k for k, x in vars(ds).items() if isinstance(x, np.memmap)]
    assert held == []


def test_labels_are_read_only(tmp_path):
    root, _ = make(tmp_path, features=None)
    v = read_mstcn(root).video("v1")
    with pytest.raises(ValueError): v.labels[0] = 1
    with pytest.raises(ValueError): v.segments[0, 0] = 1


# ---------------------------------------------------------------------------------------------------------------- segments, verbs, names

def test_segments_hand_computed(tmp_path):
    root, _ = make(tmp_path, features=None)
    ds = read_mstcn(root)
    # v1: SIL x3, take_cup x4, pour_milk x5, SIL x2  ->  [0,3) SIL, [3,7) take_cup, [7,12) pour_milk, [12,14) SIL
    assert ds.video("v1").segments.tolist() == [[0, 3, 0], [3, 7, 1], [7, 12, 2], [12, 14, 0]]
    assert ds.video("v1").transcript == (0, 1, 2, 0)
    assert ds.video("v2").segments.tolist() == [[0, 6, 1], [6, 12, 3], [12, 20, 2]]
    assert segments_of(np.array([2, 2, 2])).tolist() == [[0, 3, 2]]
    assert segments_of(np.array([1, 2, 1, 2])).tolist() == [[0, 1, 1], [1, 2, 2], [2, 3, 1], [3, 4, 2]]


def test_dataset_fields_and_overrides(tmp_path):
    root, _ = make(tmp_path, features=None)
    ds = read_mstcn(root)
    assert (ds.name, ds.root, ds.classes, ds.class_id["pour_milk"]) == ("ds", root, CLASSES, 2)
    assert ds.background == frozenset({0}) and ds.videos == ["v1", "v2", "v3"]
    assert ds.splits == {1: {"train": ["v1", "v2"], "test": ["v3"]}, 2: {"train": ["v2", "v3"], "test": ["v1"]}}
    assert ds.verb_names == ["SIL", "take", "pour", "stir"] and ds.verb_of.tolist() == [0, 1, 2, 3]
    custom = read_mstcn(root, name="milk", background=["SIL", "stir_milk"],
                        verbs={"SIL": "none", "take_cup": "get", "pour_milk": "move", "stir_milk": "move"})
    assert custom.name == "milk" and custom.background == frozenset({0, 3})
    assert custom.verb_names == ["none", "get", "move"] and custom.verb_of.tolist() == [0, 1, 2, 2]
    assert read_mstcn(root, background=[]).background == frozenset()
    with pytest.raises(DataError, match="'boil' is not in the mapping"): read_mstcn(root, background=["boil"])
    with pytest.raises(KeyError, match="no video 'v9'"): ds.video("v9")


def test_write_read_roundtrip_with_ids(tmp_path):
    root = write_mstcn(tmp_path / "r", {"a": [0, 0, 3, 3, 3], "b": [1, 2]}, CLASSES, {1: {"train": ["a"], "test": ["b"]}})
    ds = read_mstcn(root)
    assert ds.video("a").labels.tolist() == [0, 0, 3, 3, 3] and ds.video("b").transcript == (1, 2)


# ---------------------------------------------------------------------------------------------------------------- real labels

EXPECTED = {  # dataset: (videos, classes, background names, splits, (train, test) per split)
    "breakfast": (1712, 48, {"SIL"}, 4, None),
    "50salads": (50, 19, {"action_start", "action_end"}, 5, (40, 10)),
    "gtea": (28, 11, {"background"}, 4, (21, 7)),
}


def bundle_lines(path):
    return [line.strip().removesuffix(".txt") for line in Path(path).read_text().splitlines() if line.strip()]


def runs_reference(path, class_id):
    "Segments by itertools.groupby over the raw lines: an independent reference for segments_of."
    names = [line.strip() for line in Path(path).read_text().splitlines() if line.strip()]
    out, t = [], 0
    for name, run in itertools.groupby(names):
        n = len(list(run)); out.append([t, t + n, class_id[name]]); t += n
    return out


@pytest.mark.parametrize("dataset", sorted(EXPECTED))
def test_real_labels_load(dataset, labels_dir):
    root = labels_dir / dataset
    n_videos, n_classes, bg, n_splits, sizes = EXPECTED[dataset]
    ds = read_mstcn(root)
    assert (len(ds.videos), len(ds.classes), {ds.classes[i] for i in ds.background}) == (n_videos, n_classes, bg)
    assert sorted(ds.splits) == list(range(1, n_splits + 1))
    for n, parts in ds.splits.items():
        for part in ("train", "test"):
            assert parts[part] == bundle_lines(root / "splits" / f"{part}.split{n}.bundle")
        assert sorted(parts["train"] + parts["test"]) == ds.videos                # each split partitions the videos
        if sizes: assert (len(parts["train"]), len(parts["test"])) == sizes
    summary = ds.validate()                                                       # every video loads
    assert len(summary) == n_videos and (summary["n_frames"] > 0).all()
    for name in ds.videos[:: max(1, n_videos // 25)]:                             # segments against an independent reference
        assert ds.video(name).segments.tolist() == runs_reference(root / "groundTruth" / f"{name}.txt", ds.class_id)
    assert all(ds.video(v).participant is not None for v in ds.videos)


def test_real_breakfast_test_sets_cover_all_videos(real_labels):
    ds = real_labels("breakfast")
    tests = [ds.splits[n]["test"] for n in ds.splits]
    assert [len(t) for t in tests] == [252, 451, 433, 576]
    assert sorted(itertools.chain(*tests)) == ds.videos                          # disjoint, and together all 1,712
    v = ds.video("P03_cam01_P03_cereals")
    assert (v.participant, v.task) == ("P03", "cereals")
    assert {ds.video(n).task for n in ds.videos} == {"cereals", "coffee", "friedegg", "juice", "milk", "pancake", "salat",
                                                    "sandwich", "scrambledegg", "tea"}
    assert ds.verb_names[ds.verb_of[ds.class_id["pour_milk"]]] == "pour"


def test_real_names_and_verbs(real_labels):
    salads = real_labels("50salads")
    assert (salads.video("rgb-01-1").participant, salads.video("rgb-01-1").task) == ("01", None)
    assert salads.verb_names == ["cut", "place", "add", "mix", "peel", "serve", "action_start", "action_end"]
    gtea = real_labels("gtea")
    assert (gtea.video("S1_Cheese_C1").participant, gtea.video("S1_Cheese_C1").task) == ("S1", "Cheese")
    assert gtea.verb_names == gtea.classes                                       # GTEA's classes are verbs already


# ---------------------------------------------------------------------------------------------------------------- shipped labels

@pytest.mark.parametrize("dataset", REAL_DATASETS)
def test_shipped_labels_equal_the_shared_copy_frame_for_frame(dataset, shared_labels, labels_cache):
    "The rebuilt MS-TCN folder holds exactly the files of ../shared/data/labels, byte for byte (PROVENANCE.txt aside: ours adds the terms)."
    ours, theirs = materialize_real_labels(dataset), shared_labels / dataset
    files = lambda root: sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name != "PROVENANCE.txt")
    assert files(ours) == files(theirs)
    for name in files(theirs):
        assert (ours / name).read_bytes() == (theirs / name).read_bytes(), f"{dataset}/{name} differs from the shared copy"
    assert labels_pins(theirs, dataset) == {f"{dataset}/{k}": v for k, v in MSTCN_LABEL_PINS[dataset].items()}


@pytest.mark.parametrize("dataset", REAL_DATASETS)
def test_packing_the_shared_copy_gives_the_shipped_tables(dataset, shared_labels, tmp_path):
    "The shipped tables are what pack_mstcn makes of the shared copy (compared decompressed: gzip bytes may differ across zlib versions)."
    packed = pack_mstcn(shared_labels / dataset, tmp_path / dataset)
    for table in ("segments.tsv.gz", "splits.tsv.gz"):
        assert gzip.decompress((packed / table).read_bytes()) == gzip.decompress((SHIPPED_LABELS / dataset / table).read_bytes()), table
    assert (packed / "mapping.txt").read_bytes() == (SHIPPED_LABELS / dataset / "mapping.txt").read_bytes()


def test_shipped_tables_are_small():
    sizes = {p.relative_to(SHIPPED_LABELS).as_posix(): p.stat().st_size for p in SHIPPED_LABELS.rglob("*") if p.is_file()}
    assert sum(sizes.values()) < 200_000, sizes     # instead of 50 MB of per-frame text


def test_a_changed_shipped_table_is_an_error_naming_it(tmp_path, monkeypatch):
    copy = tmp_path / "labels"; shutil.copytree(SHIPPED_LABELS, copy)
    table = copy / "gtea" / "segments.tsv.gz"
    text = gzip.decompress(table.read_bytes()).decode()
    table.write_bytes(gzip.compress(text.replace("\tbackground\n", "\ttake\n", 1).encode(), mtime=0))   # one segment relabelled
    monkeypatch.setattr(procedural, "SHIPPED_LABELS", copy)
    with pytest.raises(PinMismatch, match=r"gtea/segments\.tsv\.gz: SHA-256 does not match its pin"):
        materialize_real_labels("gtea", tmp_path / "cache")
    assert not (tmp_path / "cache").exists()                                     # checked before anything is written


def test_a_damaged_cache_is_an_error_naming_the_file(tmp_path):
    root = materialize_real_labels("gtea", tmp_path)
    procedural._CHECKED.discard(root)
    (root / "splits" / "test.split2.bundle").write_text("S1_Cheese_C1.txt\n")
    with pytest.raises(PinMismatch, match=r"test\.split2\.bundle: the rebuilt gtea labels do not match their pin \(splits;"):
        materialize_real_labels("gtea", tmp_path)
    shutil.rmtree(root)                                  # what the error says to do
    assert labels_pins(materialize_real_labels("gtea", tmp_path), "gtea")["gtea/splits"] == MSTCN_LABEL_PINS["gtea"]["splits"]


def test_concurrent_first_use_builds_one_complete_folder(tmp_path):
    "Four processes materialize Breakfast into one empty cache at once: all succeed, all get the same complete folder, no scratch is left."
    code = ("import sys, hoi_audit.procedural as p; r = p.materialize_real_labels('breakfast', sys.argv[1]); "
            "print(r, len(list((r / 'groundTruth').iterdir())))")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert len({o for o, _ in outs}) == 1 and outs[0][0].split()[1] == "1712", outs
    folder = Path(outs[0][0].split()[0])
    assert [p.name for p in folder.parent.iterdir()] == ["breakfast"]      # the losers' builds were removed
    assert labels_pins(folder, "breakfast") == {f"breakfast/{k}": v for k, v in MSTCN_LABEL_PINS["breakfast"].items()}


# The first use's speed is measured by bench/bench_real_labels.py (no timed test: CI runs tests beside each other).


def test_user_copy_overrides_and_a_missing_one_is_an_error(tmp_path, monkeypatch):
    own = write_mstcn(tmp_path / "mine" / "breakfast", {"a": ["SIL", "x"], "b": ["x"]}, ["SIL", "x"], {1: {"train": ["a"], "test": ["b"]}})
    monkeypatch.setenv("HOI_AUDIT_LABELS", str(tmp_path / "mine"))
    assert real_labels_root("breakfast") == own
    with pytest.raises(DataError, match=r"no MS-TCN folder for 'gtea' \(\$HOI_AUDIT_LABELS="): real_labels_root("gtea")
    monkeypatch.setenv("HOI_AUDIT_LABELS", "")                           # empty is unset: the shipped labels
    assert read_mstcn(real_labels_root("breakfast")).classes[0] == "SIL" and len(read_mstcn(real_labels_root("breakfast")).videos) == 1712


def test_unpack_refuses_a_damaged_table(tmp_path):
    shutil.copytree(SHIPPED_LABELS / "50salads", tmp_path / "p")
    rows = gzip.decompress((tmp_path / "p" / "segments.tsv.gz").read_bytes()).decode().split("\n")
    del rows[3]                                                          # a gap inside rgb-01-1
    (tmp_path / "p" / "segments.tsv.gz").write_bytes(gzip.compress("\n".join(rows).encode(), mtime=0))
    with pytest.raises(DataError, match=r"segments\.tsv\.gz: line 4: segment \[\d+, \d+\) of 'rgb-01-1' must start at frame"):
        unpack_labels(tmp_path / "p", tmp_path / "out")


def test_the_committed_results_were_made_from_the_shipped_labels(repo):
    "results/decomposition.json pins the label folders it read: they are the folders the shipped tables rebuild."
    import json
    pins = json.loads((repo / "results" / "decomposition.json").read_text())["pins"]
    assert pins == {f"{d}/{k}": v for d, parts in MSTCN_LABEL_PINS.items() for k, v in parts.items()}
