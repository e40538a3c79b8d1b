"Tests of hoi_audit.worldmodel: training reads train_full only, determinism, the learned models beat persistence, bad input."
import numpy as np
import pytest

from hoi_audit.core import DataError
from hoi_audit.episodes import Episodes, make_episodes
from hoi_audit.worldmodel import (KINDS, LinearExtrapolationModel, PersistenceModel, WorldModel, check_rollout, endpoint_l1,
                                  train_forecaster)


@pytest.fixture(scope="module")
def ep():
    return make_episodes("tiny", seed=1)


@pytest.fixture(scope="module")
def jepa(ep):
    return train_forecaster(ep, "jepa", seed=42, steps=150, batch_size=128)


def test_learned_beats_persistence_and_actions_help(ep, jepa):
    held = ep.split_of("heldout")
    ctx_only = train_forecaster(ep, "context_only", seed=42, steps=150, batch_size=128)
    errors = {"persistence": endpoint_l1(PersistenceModel(), held), "context_only": endpoint_l1(ctx_only, held), "jepa": endpoint_l1(jepa, held)}
    assert errors["jepa"] < errors["context_only"] < errors["persistence"], errors


def test_training_never_reads_heldout(ep, jepa):
    fields = {f: getattr(ep, f) for f in ("episode_id", "split", "latents", "commands", "success", "language", "length_bin")}
    held = ep.split == "heldout"
    noisy = dict(fields, latents=np.where(held[:, None, None], 100.0, ep.latents).astype(np.float32),
                 commands=np.where(held[:, None, None], -5.0, ep.commands).astype(np.float32), success=np.where(held, True, ep.success))
    other = train_forecaster(Episodes(**noisy), "jepa", seed=42, steps=150, batch_size=128)
    ctx, cmd = ep.latents[:20, :4], ep.commands[:20, 4:]
    np.testing.assert_array_equal(other.rollout(ctx, cmd)["latents"], jepa.rollout(ctx, cmd)["latents"])
    assert other.trained_on == jepa.trained_on


def test_deterministic_and_seed_sensitive(ep, jepa):
    ctx, cmd = ep.latents[:20, :4], ep.commands[:20, 4:]
    again = train_forecaster(ep, "jepa", seed=42, steps=150, batch_size=128)
    np.testing.assert_array_equal(again.rollout(ctx, cmd)["latents"], jepa.rollout(ctx, cmd)["latents"])
    other = train_forecaster(ep, "jepa", seed=43, steps=150, batch_size=128)
    assert not np.array_equal(other.rollout(ctx, cmd)["latents"], jepa.rollout(ctx, cmd)["latents"])


def test_rollout_is_batched_consistently_and_autoregressive(ep, jepa):
    ctx, cmd = ep.latents[:50, :4], ep.commands[:50, 4:]
    full = jepa.rollout(ctx, cmd)["latents"]
    jepa.batch_size = 7
    try: np.testing.assert_allclose(jepa.rollout(ctx, cmd)["latents"], full, rtol=1e-5, atol=1e-5)
    finally: jepa.batch_size = 4096
    # autoregressive: rolling 2 steps then 2 more from the predicted latents equals one 4-step rollout
    two = jepa.rollout(ctx, cmd[:, :2])["latents"]
    rest = jepa.rollout(np.concatenate([ctx, two], 1), cmd[:, 2:])["latents"]
    np.testing.assert_allclose(np.concatenate([two, rest], 1), full, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_satisfies_the_interface(ep, kind):
    m = train_forecaster(ep, kind, seed=44, steps=5, batch_size=32)
    assert isinstance(m, WorldModel)
    out = check_rollout(m.rollout(ep.latents[:3, :6], ep.commands[:3, 6:]), ep.latents[:3, :6], ep.commands[:3, 6:])
    assert out["latents"].shape == (3, 2, 16) and out["gate"].shape == (3, 2)
    assert (out["gate"] > 0).all() == (kind == "jepa")


def test_bad_inputs(ep, jepa):
    with pytest.raises(DataError, match="trained on 16-D"):
        jepa.rollout(np.zeros((2, 4, 8)), np.zeros((2, 4, 7)))
    with pytest.raises(DataError, match="commands must be"):
        LinearExtrapolationModel().rollout(np.zeros((2, 4, 16)), np.zeros((3, 4, 7)))
    with pytest.raises(ValueError, match="kind must be one of"):
        train_forecaster(ep, "transformer")
    with pytest.raises(DataError, match="NaN"):
        check_rollout({"latents": np.full((1, 1, 2), np.nan)}, np.zeros((1, 3, 2)), np.zeros((1, 1, 7)))
    no_train = ep.subset(ep.split == "heldout")
    with pytest.raises(DataError, match="no train_full"):
        train_forecaster(no_train, "jepa", steps=1)
