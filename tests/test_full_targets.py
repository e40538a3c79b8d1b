"The committed full-scale results against the paper's numbers that the presets are calibrated to (calibration.AUDIT_TARGETS)."
import pytest
from hoi_audit.calibration import AUDIT_TARGETS, full_scale_scoreboard
from conftest import REPO

FULL = REPO / "results" / "full"

# Calibrated targets the committed full-scale results miss, each with its measured value and why. A miss not listed here fails;
# a listed one that is met fails too (strict xfail), so the list cannot outlive the regeneration that fixes it (issue 33, item 6).
KNOWN_MISSES = {
    # the window knobs were searched on split 1 of one draw (CALIBRATION_SEED); the generator seed sets most of the difficulty
    # (50 Salads at the full size, split means at the frozen knob: seed 0 81.3, seed 1 82.3, seed 2 76.7, seed 1000 76.0; real-label
    # Breakfast at the knobs chosen on seed 1000 (45.6): seeds 0/1/2 40.8/40.4/44.5), so these are fixed by searching on the mean over
    # calibration.CALIBRATION_SEEDS and regenerating over three draws (12d "The generator seed sets the difficulty"; issue 33, item 6)
    ("window_acc", "synthetic_50salads"): "81.3 against 74.7 +/- 2 (calibrated to 73.8 on split 1 of the calibration seed)",
    ("window_acc", "50salads_labels"): "80.9 against 74.7 +/- 2 (calibrated to 75.3 on split 1 of the calibration seed)",
    ("window_acc", "breakfast_labels"): "41.3 against 44.4 +/- 2 (calibrated to 45.2 on split 1 of the calibration seed)",
    ("video_only_act1", "breakfast_labels"): "17.7 against 21.7 +/- 3 (calibrated to 21.0 on split 1 of the calibration seed)",
}

CALIBRATED = [t for t in AUDIT_TARGETS if t.calibrated]

@pytest.fixture(scope="module")
def board():
    return full_scale_scoreboard(FULL).set_index(["quantity", "dataset"])

def test_known_misses_are_calibrated_targets():
    assert set(KNOWN_MISSES) <= {(t.quantity, t.dataset) for t in CALIBRATED}

@pytest.mark.parametrize("target", [
    pytest.param(t, marks=pytest.mark.xfail(strict=True, reason=KNOWN_MISSES[t.quantity, t.dataset]))
    if (t.quantity, t.dataset) in KNOWN_MISSES else t for t in CALIBRATED], ids=lambda t: f"{t.quantity}-{t.dataset}")
def test_calibrated_target_met_at_full_scale(board, target):
    row = board.loc[(target.quantity, target.dataset)]
    assert row["met"], f"{target.dataset} {target.quantity}: {row['measured']} against {target.paper} +/- {target.tolerance}"

def test_every_target_is_measured(board):
    "Every target, calibrated or not, is found in the committed results: the scoreboard of the note is complete."
    assert len(board) == len(AUDIT_TARGETS) and board["measured"].notna().all()
