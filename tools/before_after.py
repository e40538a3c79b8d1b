"""The full-scale results before and after a regeneration, beside the paper (issue 50's note): every target of
`calibration.AUDIT_TARGETS` (Tables 1, 2, 3, 4/13, 9, 10, 17 and 21), measured from `results/full/*.json` as a git revision
holds them and as the working tree (or another folder) holds them, with the paper's value and whether each is met.

    python tools/before_after.py --before 7d4fe08              # results/full at 7d4fe08 against the working tree's
    python tools/before_after.py --before 7d4fe08 --after REV  # two revisions
    python tools/before_after.py --before DIR --after DIR      # two folders of results JSON

A value a file made by an earlier protocol lacks is shown as "-" (`full_scale_scoreboard`'s `predates`).
"""
import argparse, subprocess, sys, tarfile, tempfile, io
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from hoi_audit.calibration import full_scale_scoreboard  # noqa: E402


def results_folder(where: str, scratch: Path) -> Path:
    "A folder of results JSON: `where` itself if it is one, else results/full/*.json at git revision `where`."
    if Path(where).is_dir():
        return Path(where)
    try:
        tar = subprocess.run(["git", "-C", str(ROOT), "archive", where, "results/full"], check=True,
                             capture_output=True).stdout
    except subprocess.CalledProcessError as e:
        sys.exit(f"before_after: {where!r} is neither a folder nor a git revision holding results/full "
                 f"({e.stderr.decode().strip()})")
    out = scratch / where.replace("/", "_")
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        # only the results JSON, not the store below them
        t.extractall(out, members=[m for m in t.getmembers() if m.name.count("/") == 2 and m.name.endswith(".json")],
                     filter="data")
    return out / "results" / "full"


def fmt(v) -> str:
    return "-" if pd.isna(v) else f"{v:+.1f}"


def table(before: pd.DataFrame, after: pd.DataFrame) -> str:
    "The markdown table: one row per target, the paper's value and tolerance, before, after, met after."
    keys = ["source", "quantity", "dataset"]
    both = before[keys + ["paper", "tolerance", "measured", "met"]].merge(
        after[keys + ["measured", "met"]], on=keys, suffixes=("_before", "_after"), validate="one_to_one")
    rows = ["| table | quantity | dataset | paper | before | after | after met |", "|---|---|---|---|---|---|---|"]
    for r in both.itertuples():
        met = "" if pd.isna(r.measured_after) else ("met" if r.met_after else "missed")
        rows.append(f"| {r.source} | `{r.quantity}` | `{r.dataset}` | {r.paper:+g} ± {r.tolerance:g} | "
                    f"{fmt(r.measured_before)} | {fmt(r.measured_after)} | {met} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, help="a git revision (its results/full) or a folder of results JSON")
    p.add_argument("--after", default=str(ROOT / "results" / "full"),
                   help="a git revision or a folder (default: this working tree's results/full)")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        before, after = (full_scale_scoreboard(results_folder(w, Path(tmp))) for w in (a.before, a.after))
    print(table(before, after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
