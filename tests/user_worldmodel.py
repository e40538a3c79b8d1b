"""A user's own world model, frame encoder and context-only forecaster, written outside the package.

The tests run them through all three downstream protocols from the command line, as a user would:
`hoi-audit success --model tests/user_worldmodel.py:make_world_model`, `hoi-audit ranking --model ...`,
`hoi-audit epic --encoder tests/user_worldmodel.py:make_encoder --model tests/user_worldmodel.py:make_forecaster`.
Nothing here imports hoi_audit: the contracts are plain methods and shapes.
"""
import numpy as np


class LinearWorldModel:
    "z_k = z_{k-1} + u_k @ B: each bin's command moves that bin's latent, B fitted by ridge regression."
    def __init__(self, B):
        self.B = np.asarray(B, dtype=np.float32)

    def rollout(self, context, commands):
        z, out = np.asarray(context, np.float32)[:, -1], []
        for h in range(commands.shape[1]):
            z = z + np.asarray(commands[:, h], np.float32) @ self.B
            out.append(z)
        return {"latents": np.stack(out, 1)}


def make_world_model(episodes, seed=42, ridge=1e-3):
    "Fit B on the episodes the protocol offers (its train_full split); deterministic, so every seed gives the same model."
    dz = (episodes.latents[:, 1:] - episodes.latents[:, :-1]).reshape(-1, episodes.latents.shape[2]).astype(np.float64)
    u = episodes.commands[:, 1:].reshape(-1, episodes.commands.shape[2]).astype(np.float64)
    B = np.linalg.solve(u.T @ u + ridge * len(u) * np.eye(u.shape[1]), u.T @ dz)
    return LinearWorldModel(B)


class MeanColourEncoder:
    "Per bin: the mean colour, and how much each channel's frame mean changes over the bin."
    latent_dim = 6

    def encode(self, bins):
        frames = np.asarray(bins, dtype=np.float32) / 255.0          # (N, F, H, W, 3)
        per_frame = frames.mean(axis=(2, 3))                          # (N, F, 3)
        return np.concatenate([per_frame.mean(1), per_frame[:, -1] - per_frame[:, 0]], axis=1)


def make_encoder():
    return MeanColourEncoder()


class DriftForecaster:
    "The next latent: the last one plus the mean step over the visible ones."
    def predict(self, context):
        context = np.asarray(context, dtype=np.float32)
        return context[:, -1] + (context[:, -1] - context[:, 0]) / max(1, context.shape[1] - 1)


def make_forecaster(latent_dim):
    "Offered seed, encoder and latent_dim, it takes only latent_dim: one frozen model for every seed."
    return DriftForecaster()
