"Integration and bad-input tests of hoi_audit.episodes: presets, folder round trips (npz, parquet), pins, malformed user folders."
import json
import numpy as np
import pandas as pd
import pytest

from hoi_audit.core import DataError, PinMismatch, sha256_folder
from hoi_audit.episodes import PRESETS, SPLITS, Episodes, make_episodes, pin_episodes, read_episodes, write_episodes


@pytest.fixture(scope="module")
def ep():
    return make_episodes("tiny", seed=3)


def test_preset_counts_match_the_protocol():
    n_train, f_train, n_held, f_held, _ = PRESETS["full"]
    assert (n_train, f_train, n_held, f_held) == (86072, 15104, 9564, 1677)     # section 1 of the protocol document
    assert abs(f_train / n_train - 0.1755) < 0.001 and abs(f_held / n_held - 0.1755) < 0.001


def test_tiny_shapes_dtypes_and_exact_failures(ep):
    assert ep.latents.shape == (640, 8, 16) and ep.commands.shape == (640, 8, 7)
    assert ep.latents.dtype == np.float32 and ep.language.dtype == np.int64
    for split, (n, f) in zip(SPLITS, [(480, 84), (160, 28)]):
        part = ep.split_of(split)
        assert len(part) == n and int((~part.success).sum()) == f


def test_success_depends_on_the_final_latent_not_only_the_first(ep):
    "The planted label: a linear probe on the final latent beats one on the first latent (sklearn reference)."
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    tr, te = ep.split_of("train_full"), ep.split_of("heldout")
    auc = {k: roc_auc_score(te.success, LogisticRegression(max_iter=1000).fit(tr.latents[:, k], tr.success).predict_proba(te.latents[:, k])[:, 1])
           for k in (0, -1)}
    assert auc[-1] > 0.9 and auc[-1] > auc[0] + 0.15


@pytest.mark.parametrize("fmt", ["npz", "parquet"])
def test_round_trip(ep, tmp_path, fmt):
    back = read_episodes(write_episodes(ep, tmp_path / fmt, format=fmt))
    assert back.fingerprint() == ep.fingerprint()


def test_written_folder_is_byte_identical_and_pins_every_file(ep, tmp_path):
    a, b = write_episodes(ep, tmp_path / "a"), write_episodes(ep, tmp_path / "b")
    assert sha256_folder(a) == sha256_folder(b)
    audit = json.loads((a / "outcome_audit.json").read_text())
    assert set(audit["files"]) == {"episodes.npz", "split.csv", "labels.csv"}
    assert audit["counts"]["heldout"] == {"episodes": 160, "failures": 28}


@pytest.mark.parametrize("name", ["split.csv", "labels.csv", "episodes.npz"])
def test_any_changed_file_is_a_pin_mismatch_naming_it(ep, tmp_path, name):
    folder = write_episodes(ep, tmp_path / "e")
    path = folder / name
    path.write_bytes(path.read_bytes() + (b"\n" if name.endswith(".csv") else b"\0"))
    with pytest.raises(PinMismatch, match=name):
        read_episodes(folder)


def _user_folder(ep, root, **override):
    root.mkdir()
    arrays = dict(episode_id=ep.episode_id, latents=ep.latents, commands=ep.commands, language=ep.language, length_bin=ep.length_bin)
    arrays.update(override)
    np.savez(root / "episodes.npz", **{k: v for k, v in arrays.items() if v is not None})
    pd.DataFrame({"episode_id": ep.episode_id, "split": ep.split}).to_csv(root / "split.csv", index=False)
    pd.DataFrame({"episode_id": ep.episode_id, "success": ep.success.astype(int)}).to_csv(root / "labels.csv", index=False)
    return root


def test_user_folder_pinned_once_then_read(ep, tmp_path):
    folder = _user_folder(ep, tmp_path / "u")
    with pytest.raises(DataError, match="pin_episodes"):
        read_episodes(folder)
    pin_episodes(folder)
    assert read_episodes(folder).fingerprint() == ep.fingerprint()


@pytest.mark.parametrize("override, message", [
    (dict(length_bin=None), "missing field"),
    (dict(commands="short"), "'commands' must be 7-D"),
    (dict(latents="nan"), "NaN"),
    (dict(language="low"), "'language' must be an instruction id"),
    (dict(episode_id="dup"), "duplicates"),
    (dict(length_bin="float"), "'length_bin' must hold integers"),
])
def test_malformed_user_folders_name_the_file_and_field(ep, tmp_path, override, message):
    values = {"short": ep.commands[:, :, :6], "nan": np.where(np.arange(16) == 3, np.nan, ep.latents).astype(np.float32),
              "low": np.full(len(ep), -2), "dup": np.r_[ep.episode_id[:1], ep.episode_id[:-1]], "float": ep.length_bin + 0.5}
    override = {k: (values[v] if isinstance(v, str) else v) for k, v in override.items()}
    folder = _user_folder(ep, tmp_path / "bad", **override)
    with pytest.raises(DataError, match=message) as err:
        pin_episodes(folder)
    assert "episodes.npz" in str(err.value) or "dup" in message


def test_sidecar_problems(ep, tmp_path):
    folder = _user_folder(ep, tmp_path / "s")
    (folder / "labels.csv").write_text("episode_id,success\n" + "".join(f"{i},1\n" for i in ep.episode_id[:-1]))
    with pytest.raises(DataError, match=f"labels.csv: no row for episode.*{ep.episode_id[-1]}"):
        pin_episodes(folder)
    (folder / "labels.csv").write_text("episode_id,success\n" + "".join(f"{i},yes\n" for i in ep.episode_id))
    with pytest.raises(DataError, match="must be 0/1"):
        pin_episodes(folder)
    (folder / "split.csv").write_text("episode_id,split\n" + "".join(f"{i},test\n" for i in ep.episode_id))
    (folder / "labels.csv").write_text("episode_id,success\n" + "".join(f"{i},1\n" for i in ep.episode_id))
    with pytest.raises(DataError, match="unknown values \\['test'\\]"):
        pin_episodes(folder)


def test_missing_folder_and_ambiguous_arrays(ep, tmp_path):
    with pytest.raises(DataError, match="not a folder"):
        read_episodes(tmp_path / "nope")
    folder = write_episodes(ep, tmp_path / "both")
    write_episodes(ep, tmp_path / "pq", format="parquet")
    (folder / "episodes.parquet").write_bytes((tmp_path / "pq" / "episodes.parquet").read_bytes())
    with pytest.raises(DataError, match="keep one"):
        read_episodes(folder)
