"""hoi_audit.paper against the paper's own text: every number typed into a table is printed in that table of the seed document.

The seed (../shared/seeds/, a development checkout only) prints each table's rows and then its caption, `Table N: ...`; table N's
text is what lies between the caption before it and its own. Its cells run together there (`Full model63.431.7`, `4721.730.3`), so a
number is looked for as text, printed to the table's decimals. A typo in `hoi_audit.paper` (a digit swapped, a row shifted into
another table) types a number the table does not print.
"""
import re
from pathlib import Path
import pandas as pd
import pytest
from hoi_audit import paper

REPO = Path(__file__).resolve().parent.parent
SEEDS = REPO.parent / "shared" / "seeds"


def paper_text() -> str:
    "The audit paper's text: the seed document that prints Table 1's caption."
    if not SEEDS.is_dir():
        pytest.skip(f"{SEEDS} is absent: nothing to check hoi_audit.paper against")
    for f in sorted(SEEDS.glob("*.txt")):
        text = f.read_text(encoding="utf-8", errors="replace")
        if "Table 1: Primary four-condition Breakfast audit" in text:
            return text
    pytest.skip(f"no seed in {SEEDS} prints the audit paper's Table 1")


def table_text(text: str, n: int) -> str:
    "What the paper prints between table n-1's caption and table n's (the table's rows come before its caption)."
    captions = {int(m.group(1)): m.start() for m in re.finditer(r"^Table (\d+):", text, re.M)}
    return text[captions.get(n - 1, 0) : captions[n]]


def not_printed(values: set, body: str) -> list:
    return sorted(v for v in values if v not in body)


def typed(column: pd.Series, digits: int) -> set:
    "A float column's numbers as the paper prints them (unsigned, `digits` decimals), NaN left out."
    return {f"{abs(v):.{digits}f}" for v in column.dropna()}


def table_values(t) -> set:
    "Every float a table of hoi_audit.paper holds, as printed (integer columns, counts, are not the paper's measurements)."
    frames = t.values() if isinstance(t, dict) else [t]
    out = set()
    for f in frames:
        f = f.to_frame() if isinstance(f, pd.Series) else f
        for _, column in f.select_dtypes("floating").items():
            out |= typed(column, 3 if column.abs().max() < 1 else 1)   # Table 20's probabilities print three decimals
    return out


# hoi_audit.paper's table -> the paper's tables it is typed from (TABLE13 adds Table 4's intervals, TABLE14 is Tables 5 and 14)
TABLES = {"TABLE1": (1,), "TABLE2": (2,), "TABLE3": (3, 11), "TABLE9": (9,), "TABLE10": (10,), "TABLE12": (12,), "TABLE13": (4, 13),
          "TABLE14": (14,), "TABLE15": (15,), "TABLE16": (16,), "TABLE17": (17,), "TABLE19": (19,), "TABLE20": (20,), "TABLE21": (21,)}


@pytest.mark.parametrize("name", TABLES)
def test_every_typed_number_is_printed_in_its_table(name):
    text = paper_text()
    missing = not_printed(table_values(getattr(paper, name)), "".join(table_text(text, n) for n in TABLES[name]))
    assert not missing, f"hoi_audit.paper.{name} holds {missing}, which the paper's Table(s) {TABLES[name]} do not print"


def test_every_table_of_the_module_is_checked():
    assert sorted(TABLES) == sorted(n for n in paper.__all__ if n.startswith("TABLE"))


def test_the_check_sees_a_typo():
    "A number moved by one digit is caught."
    text = paper_text()
    wrong = paper.TABLE2.copy()
    wrong.loc["matched", "gap"] = 23.0
    assert not_printed(table_values(wrong), table_text(text, 2)) == ["23.0"]
