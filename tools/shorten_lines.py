"""Bring code cells within the house's 100 characters without changing what the package means or reads (issue 52).

`tools/format_notebooks.py` runs `shorten` on every code cell: ruff formats the cell after these rewrites, and a cell whose
meaning the result would change keeps its layout.

- a trailing comment that makes its line too long, and the comment of a lone `)` (ruff's output for `x = (long)  # why`),
  moves to its own line(s) above (above the line, or above the statement the `)` ends), at the same indentation;
- a parameter's or dataclass field's docment (`name:type=default, # what it is`) that makes its line too long moves to ONE
  comment line right above the parameter, where fastcore's `docments` and `cli.parameter_docs` read it too; a docment that
  does not fit in one line stays (a multi-line docment is a newline inside nbdev's parameter table);
- a signature that ruff would lay out so that a docment is read differently keeps its original lines (the body is formatted);
- a long string literal splits at spaces into adjacent literals (one constant to Python; an f-string splits outside `{...}`
  and a piece without braces loses its `f`); a long one-line docstring becomes a wrapped triple-quoted one.

`same_meaning` is the check: the same AST (docstrings compared with their whitespace collapsed) and every docment read the
same, as fastcore reads it (the comment on the parameter's line, else the comment lines right above it).
"""

from __future__ import annotations
import ast, inspect, io, json, re, subprocess, tempfile, textwrap, tokenize
from pathlib import Path

LIMIT = 100  # the line length of tools/ruff.toml
RUFF_TOML = Path(__file__).resolve().parent / "ruff.toml"


def _code(src: str) -> str:
    "The cell's Python (IPython magics and shell lines blanked, so that line numbers hold)."
    return "\n".join("" if l.lstrip().startswith(("%", "!")) else l for l in src.splitlines())


def _comments(src: str) -> dict:
    "{line: the comment token on it}."
    toks = tokenize.generate_tokens(io.StringIO(_code(src)).readline)
    return {t.start[0]: t for t in toks if t.type == tokenize.COMMENT}


def _read(line: int, stops: set, comments: dict):
    "A docment as fastcore reads it: the comment on `line`, else the comment lines right above (up to a parameter's line)."
    if line in comments:
        return comments[line].string[1:].strip()
    above = []
    while line - 1 > 0 and line - 1 in comments and line - 1 not in stops:
        line -= 1
        above.insert(0, comments[line].string[1:])
    return textwrap.dedent("\n".join(above)) if above else None


def _owners(tree) -> list:
    "[(node, {parameter or field: its first line})] of every def and class, in walk order; a def's return is `return`."
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            params = [
                *a.posonlyargs,
                *a.args,
                *filter(None, [a.vararg]),
                *a.kwonlyargs,
                *filter(None, [a.kwarg]),
            ]
            lines = {p.arg: p.lineno for p in params}
            if node.returns:
                lines["return"] = node.returns.lineno
            out.append((node, lines))
        elif isinstance(node, ast.ClassDef):
            fields = [
                i
                for i in node.body
                if isinstance(i, ast.AnnAssign) and isinstance(i.target, ast.Name)
            ]
            out.append((node, {f.target.id: f.lineno for f in fields}))
    return out


def docments(src: str) -> list:
    "[(def or class, {name: docment})] in walk order, each docment read as fastcore and `cli.parameter_docs` read it."
    tree, comments = ast.parse(_code(src)), _comments(src)
    out = []
    for node, lines in _owners(tree):
        stops = set(lines.values())
        docs = {k: _read(line, stops, comments) for k, line in lines.items()}
        if (
            "return" in lines
        ):  # the return annotation must stay on one line: docments reads its first line only
            docs["return lines"] = node.returns.end_lineno - node.returns.lineno
        out.append((node.name, docs))
    return out


def _docstring_nodes(tree) -> list:
    "The docstring constants of a tree (module, classes, defs), in walk order."
    out = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
        ):
            first = body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                out.append(first.value)
    return out


def _same_docstring(before: str, after: str) -> bool:
    "The same text as `inspect.getdoc` cleans it, or a one-line docstring wrapped (the same words)."
    if inspect.cleandoc(before) == inspect.cleandoc(after):
        return True
    return "\n" not in before.strip() and before.split() == after.split()


def same_meaning(before: str, after: str) -> bool:
    "The same AST (a one-line docstring may be wrapped) and every docment read the same."
    try:
        trees = [ast.parse(_code(s)) for s in (before, after)]
    except SyntaxError:
        return False
    docs = [[d.value for d in _docstring_nodes(t)] for t in trees]
    for t in trees:
        for d in _docstring_nodes(t):
            d.value = ""
    return (
        ast.dump(trees[0]) == ast.dump(trees[1])
        and len(docs[0]) == len(docs[1])
        and all(map(_same_docstring, *docs))
        and docments(before) == docments(after)
    )


def _comment_lines(text: str, indent: int) -> list:
    "`# text` wrapped to the limit at `indent`."
    width = max(LIMIT - indent - 2, 20)
    rows = textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]
    return [(" " * indent + "# " + r).rstrip() for r in rows]


def _comment_block(n: int, rows: list, comments: dict) -> list:
    "The lines of the block of comment lines (same indentation, nothing else on them) that holds line `n`."
    alone = lambda m: (
        m in comments
        and not rows[m - 1][: comments[m].start[1]].strip()
        and comments[m].start[1] == comments[n].start[1]
    )
    first, last = n, n
    while alone(first - 1):
        first -= 1
    while alone(last + 1):
        last += 1
    return list(range(first, last + 1))


PRAGMA = re.compile(
    r"#\s*(noqa|type:|fmt:|pragma|pyright:|mypy:|nbqa)"
)  # comments that must stay on their line


def move_comments(src: str, limit: int = LIMIT) -> str:
    """Trailing comments that make a line longer than `limit`, and the comments of lone closing brackets, moved above (see the
    module). A smaller `limit` leaves room for ruff's spacing (`x:int=1 # doc` becomes `x: int = 1  # doc`).
    """
    code = _code(src)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return src
    rows, comments = code.splitlines(), _comments(src)
    owners = _owners(tree)
    stops = {line for _, where in owners for line in where.values()}
    starts = {}  # line -> the names starting on it; a return's docment never moves
    for _, where in owners:
        for name, line in where.items():
            starts.setdefault(line, []).append(name)
    column = {
        n.lineno: n.col_offset for n in ast.walk(tree) if isinstance(n, (ast.arg, ast.AnnAssign))
    }
    statements = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    inserts = {}  # line -> comment lines to put above it
    for n, tok in sorted(comments.items()):
        if rows[n - 1] is None:
            continue  # in a comment block already re-wrapped
        row, code_part = rows[n - 1], rows[n - 1][: tok.start[1]].rstrip()
        text = tok.string[1:].strip()
        if PRAGMA.match(tok.string) or tok.string.startswith("#|"):
            continue
        if (
            not code_part
        ):  # a comment block with a long line: re-wrapped, unless it is a docment or has a layout
            if len(row) > limit:
                block = _comment_block(n, rows, comments)
                texts = [comments[m].string[1:].strip() for m in block]
                below = block[-1] + 1
                if below not in starts and not any(
                    re.match(r"[-*>|]|\d+[.)] |.*\s\s", t) for t in texts
                ):
                    inserts.setdefault(block[0], []).extend(
                        _comment_lines(" ".join(texts), tok.start[1])
                    )
                    for m in block:
                        rows[m - 1] = None
            continue
        if (
            n in starts
        ):  # a docment: to ONE line right above its parameter, where it is read the same
            col = column.get(n)
            above = " " * (col or 0) + "# " + text
            if (
                len(row) > limit
                and starts[n] != ["return"]
                and len(starts[n]) == 1
                and col is not None
                and not row[:col].strip()
                and len(above) <= LIMIT
                and (n - 1 not in comments or n - 1 in stops)
            ):
                inserts[n], rows[n - 1] = [above], code_part
            continue
        if re.fullmatch(
            r"\s*[)\]}][)\]},\s]*", code_part
        ):  # a lone `)`: above the statement it ends
            ends = [s for s in statements if s.end_lineno == n and s.lineno < n]
            if not ends or max(s.lineno for s in ends) in starts:
                continue
            stmt = max(ends, key=lambda s: s.lineno)
            inserts.setdefault(stmt.lineno, []).extend(_comment_lines(text, stmt.col_offset))
            rows[n - 1] = code_part
        elif len(row) > limit:
            inserts.setdefault(n, []).extend(_comment_lines(text, len(row) - len(row.lstrip())))
            rows[n - 1] = code_part
    out = []
    for n, row in enumerate(rows, 1):
        out += inserts.get(n, []) + ([row] if row is not None else [])
    return "\n".join(out) + ("\n" if src.endswith("\n") else "")


def _headers(src: str) -> list:
    "[(def, line of `def`, line and column of its `:`)] of every def, in walk order."
    code = _code(src)
    toks = list(tokenize.generate_tokens(io.StringIO(code).readline))
    out = []
    for node in ast.walk(ast.parse(code)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        depth, start = 0, None
        for t in toks:
            if start is None:
                if t.type == tokenize.NAME and t.string == "def" and t.start[0] >= node.lineno:
                    start = t.start[0]
            elif t.type == tokenize.OP and t.string in "([{":
                depth += 1
            elif t.type == tokenize.OP and t.string in ")]}":
                depth -= 1
            elif t.type == tokenize.OP and t.string == ":" and depth == 0:
                out.append((node, start, *t.start))
                break
    return out


def _spans(src: str) -> list:
    "[(node, {name: (first line, last line)})] per def and class in walk order: a def's signature, a field with its comment lines above."
    tree, comments, rows = ast.parse(_code(src)), _comments(src), _code(src).splitlines()
    heads = iter(
        [
            (start, line) if not rows[line - 1][col + 1 :].split("#")[0].strip() else None
            for _, start, line, col in _headers(src)
        ]
    )
    out = []
    for node, _ in _owners(tree):
        if isinstance(node, ast.ClassDef):
            spans = {}
            for f in (
                i
                for i in node.body
                if isinstance(i, ast.AnnAssign) and isinstance(i.target, ast.Name)
            ):
                first = f.lineno
                while (
                    first - 1 in comments
                    and not rows[first - 2][: comments[first - 1].start[1]].strip()
                ):
                    first -= 1
                spans[f.target.id] = (first, f.end_lineno)
            out.append((node, spans))
        else:
            head = next(heads)  # _headers walks the defs in the same order
            out.append((node, {"": head} if head else {}))
    return out


def restore_signatures(before: str, after: str) -> str:
    """`after` with each signature (`def` to `:`) and each class field whose docments formatting changed put back as in `before`
    (a field with the comment lines above it); everything else as in `after`.
    """
    try:
        old, new, old_docs, new_docs = (
            _spans(before),
            _spans(after),
            docments(before),
            docments(after),
        )
    except SyntaxError:
        return after
    if len(old) != len(new):
        return after
    rows, old_rows, swaps = after.splitlines(), before.splitlines(), []
    for (o, o_spans), (n, n_spans), (_, od), (_, nd) in zip(old, new, old_docs, new_docs):
        if od == nd:
            continue
        for name in o_spans.keys() & n_spans.keys():
            if name and od.get(name) == nd.get(name):
                continue
            (o1, o2), (n1, n2) = o_spans[name], n_spans[name]
            shift = (n.col_offset - o.col_offset) if not name else 0
            swaps.append(
                (
                    n1,
                    n2,
                    [
                        (" " * shift + r) if shift >= 0 else r[-shift:]
                        for r in old_rows[o1 - 1 : o2]
                    ],
                )
            )
    for n1, n2, lines in sorted(swaps, reverse=True):
        rows[n1 - 1 : n2] = lines
    return "\n".join(rows) + ("\n" if after.endswith("\n") else "")


def _words(body: str, fstring: bool) -> list:
    "The text of a literal cut after each space outside `{...}` of an f-string (never after an escaped space)."
    words, cur, depth, i = [], "", 0, 0
    while i < len(body):
        two = body[i : i + 2]
        if fstring and depth == 0 and two in ("{{", "}}"):
            cur, i = cur + two, i + 2
            continue
        ch = body[i]
        depth += fstring and (ch == "{") - (ch == "}")
        cur, i = cur + ch, i + 1
        if ch == " " and depth == 0 and not cur.endswith("\\ "):
            words.append(cur)
            cur = ""
    return [w for w in words + [cur] if w]


def _pack(words: list, width: int, first: int) -> list:
    "Words joined greedily into pieces of at most `width` characters, the first of `first` (a longer word is a piece of its own)."
    pieces = []
    for w in words:
        if pieces and len(pieces[-1]) + len(w) <= (first if len(pieces) == 1 else width):
            pieces[-1] += w
        else:
            pieces.append(w)
    return pieces


LITERAL = re.compile(r"([rRuUfF]{0,2})('|\")(.*)\2", re.S)


def _groups(code: str) -> list:
    "[(tokens of adjacent one-line string literals, bracket depth)]: implicit concatenations and lone literals."
    out, depth, run = [], 0, []
    for t in tokenize.generate_tokens(io.StringIO(code).readline):
        if t.type == tokenize.STRING and t.start[0] == t.end[0] and LITERAL.fullmatch(t.string):
            if not run:
                out.append(([], depth))
            out[-1][0].append(t)
            run = out[-1][0]
            continue
        if t.type not in (tokenize.NL,):
            run = []
        if t.type == tokenize.OP and t.string in "([{":
            depth += 1
        if t.type == tokenize.OP and t.string in ")]}":
            depth -= 1
    return out


def _joined(tokens: list):
    "(prefix without f, quote, is f-string, the text) of adjacent literals, or None where they cannot be one literal."
    parts = [LITERAL.fullmatch(t.string).groups() for t in tokens]
    if len({(pre.lower().replace("f", ""), q) for pre, q, _ in parts}) != 1:
        return None
    fstring = any("f" in pre.lower() for pre, _, _ in parts)
    text = "".join(
        b.replace("{", "{{").replace("}", "}}") if fstring and "f" not in pre.lower() else b
        for pre, _, b in parts
    )
    return parts[0][0].replace("f", "").replace("F", ""), parts[0][1], fstring, text


def split_strings(src: str) -> str:
    "Long one-line string literals split into adjacent pieces; long one-line docstrings wrapped (see the module)."
    code = _code(src)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return src
    docs, rows = {(d.lineno, d.col_offset) for d in _docstring_nodes(tree)}, code.splitlines()
    edits = []
    for tokens, depth in _groups(code):
        if all(len(rows[t.start[0] - 1]) <= LIMIT for t in tokens):
            continue
        first, last = tokens[0], tokens[-1]
        row, (n, col) = rows[first.start[0] - 1], first.start
        if (n, col) in docs and len(tokens) == 1:
            pre, quote, body = LITERAL.fullmatch(first.string).groups()
            if (
                row[:col].strip()
                or row[first.end[1] :].strip()
                or quote * 3 in body
                or "f" in pre.lower()
            ):
                continue
            wrapped = textwrap.wrap(
                body, LIMIT - col - 3, break_long_words=False, break_on_hyphens=False
            )
            if len(wrapped) > 1 and "".join(wrapped).replace(" ", "") == body.replace(" ", ""):
                text = (
                    f"{pre}{quote * 3}{wrapped[0]}\n"
                    + "".join(" " * col + w + "\n" for w in wrapped[1:])
                    + " " * col
                    + quote * 3
                )
                edits.append((first.start, last.end, text))
            continue
        joined = _joined(tokens)
        if joined is None or "b" in joined[0].lower():
            continue
        pre, quote, fstring, body = joined
        lines = (
            first.start[0] != last.start[0]
        )  # a concatenation over lines: re-cut at its own columns
        at = tokens[1].start[1] if lines else len(row) - len(row.lstrip()) + 4
        room = lambda column: max(
            LIMIT - column - len(pre) - 5, 30
        )  # quotes, an `f`, a comma or bracket after
        pieces = _pack(_words(body, fstring), room(at), room(col) if lines else room(at))
        lits = [
            f"{pre}{'f' if fstring and ('{' in p or '}' in p) else ''}{quote}{p}{quote}"
            for p in pieces
        ]
        if len(pieces) < 2 or lits == [t.string for t in tokens]:
            continue
        text = (f"\n{' ' * at}" if lines else " ").join(lits)
        edits.append((first.start, last.end, text if depth > 0 else f"({text})"))
    for (l1, c1), (l2, c2), text in sorted(edits, reverse=True):
        rows[l1 - 1 : l2] = (rows[l1 - 1][:c1] + text + rows[l2 - 1][c2:]).split("\n")
    return "\n".join(rows) + ("\n" if src.endswith("\n") else "")


def ruff_format(sources: list[str], template: dict) -> list[str]:
    "Each source formatted by ruff as a notebook cell (one ruff run for all; `template` gives the notebook's metadata)."
    if not sources:
        return []
    cells = [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": f"{i:08x}",
            "metadata": {},
            "outputs": [],
            "source": s.splitlines(keepends=True),
        }
        for i, s in enumerate(sources)
    ]
    nb = {**template, "cells": cells}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cells.ipynb"
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        subprocess.run(
            [_ruff(), "format", "--quiet", "--config", str(RUFF_TOML), str(path)],
            check=False,
            cwd=tmp,
            stderr=subprocess.DEVNULL,
        )
        return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]


def _ruff() -> str:
    import shutil, sys

    return shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")


def _first_same(src: str, candidates: list) -> str:
    return next((c for c in candidates if same_meaning(src, c)), src)


def _needs_work(text: str) -> bool:
    return any(len(r) > LIMIT or re.match(r"\s*[)\]}][)\]},\s]*#", r) for r in text.splitlines())


def shorten(sources: list[str], template: dict, rounds: int = 3) -> list[str]:
    "Every code cell formatted and shortened where its meaning stays (see the module); a cell that would change keeps its text."
    plain = ruff_format(sources, template)
    out = [_first_same(s, [p, restore_signatures(s, p)]) for s, p in zip(sources, plain)]
    rewrites = (
        move_comments,
        lambda t: move_comments(t, LIMIT - 8),
        split_strings,
    )  # the second: where ruff's spacing overflows
    for _ in range(rounds):
        start = list(out)
        for rewrite in rewrites:
            todo = [i for i, t in enumerate(out) if _needs_work(t)]
            before = [out[i] for i in todo]
            rewritten = [rewrite(t) for t in before]
            ruffed = ruff_format(rewritten, template)
            for i, b, r, f in zip(todo, before, rewritten, ruffed):
                out[i] = _first_same(sources[i], [f, restore_signatures(r, f), b])
        if out == start:
            break
    return out
