"""A Sphinx extension: the parameter table of an API entry, from its docments (`window:int=32, # feature frames before the query`).

nbdev's notebooks document parameters with a comment on each parameter's line (fastcore's docments), which `show_doc` renders.
Here autodoc writes the entry (signature, docstring, a link to the highlighted source) and this extension appends the same
table: parameter, type, default, details, and the return value. Docstrings are written in markdown (`name` is code), so
single backticks become reST literals. A reference to a member that has no entry of its own (a dataclass field, say) resolves to
its class, as nbdev's page anchors would.
"""
import inspect, re
from fastcore.docments import docments

_TICK = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_EMPHASIS = re.compile(r"(\*\*?)(?=\S)([^*\n]*?\S)\1(?!\w)")

def _md_to_rst(text: str) -> str:
    "Markdown text outside code: balanced *emphasis* and **strong** are kept, any other `*` and a word-final `_` escaped."
    kept = []
    text = _EMPHASIS.sub(lambda m: kept.append(m.group(0)) or f"\0{len(kept) - 1}\0", text)
    text = re.sub(r"(?<!\\)\*", r"\\*", text)
    text = re.sub(r"(?<=\w)_(?!\w)", r"\\_", text)
    text = re.sub(r"\|", r"\\|", text)
    return re.sub("\0(\\d+)\0", lambda m: kept[int(m.group(1))], text)

def md_literals(text: str) -> str:
    "A markdown docstring line -> reST: `code` -> ``code`` (followed by an escaped space where a word goes on), the rest escaped."
    parts = _TICK.split(text)
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0: out.append(_md_to_rst(part)); continue
        nxt = parts[i + 1] if i + 1 < len(parts) else ""
        prev = out[-1] if out else ""
        lead = "\\ " if prev and re.search(r"\w$", prev) else ""
        out.append(f"{lead}``{part}``" + ("\\ " if re.match(r"\w", nxt) else ""))
    return "".join(out)

def _cell(value) -> str:
    return md_literals(str(value)).replace("\n", " ").strip() if value not in (None, "") else ""

def _literal(text: str) -> str:
    text = str(text).replace("`", "'")
    return f"``{text}``" if text else ""

def table(obj) -> list[str]:
    "The reST list-table of `obj`'s documented parameters; [] when no parameter has a comment."
    target = obj.__init__ if inspect.isclass(obj) and not hasattr(obj, "__dataclass_fields__") else obj
    try: docs = docments(target, full=True)
    except (TypeError, ValueError, OSError, SyntaxError): return []
    params = {k: v for k, v in docs.items() if k not in ("self", "cls", "return")}
    ret = docs.get("return") or {}
    if not any(v.get("docment") for v in params.values()) and not ret.get("docment"): return []
    rows = []
    for name, info in params.items():
        anno = info.get("anno")
        anno = "" if anno in (None, inspect.Parameter.empty) else (anno if isinstance(anno, str) else inspect.formatannotation(anno))
        default = info.get("default", inspect.Parameter.empty)
        if default is inspect.Parameter.empty: default = ""
        elif getattr(default, "__class__", None).__name__ == "_HAS_DEFAULT_FACTORY_CLASS": default = "(factory)"
        else: default = repr(default)
        kind = info.get("kind")
        star = "*" if kind == inspect.Parameter.VAR_POSITIONAL else "**" if kind == inspect.Parameter.VAR_KEYWORD else ""
        rows.append((_literal(star + name), _literal(anno), _literal(default), _cell(info.get("docment"))))
    if ret.get("docment"):
        anno = ret.get("anno")
        anno = "" if anno in (None, inspect.Parameter.empty) else (anno if isinstance(anno, str) else inspect.formatannotation(anno))
        rows.append(("**returns**", _literal(anno), "", _cell(ret.get("docment"))))
    lines = ["", ".. list-table::", "   :header-rows: 1", "   :class: docments", "   :widths: 20 20 15 45", "",
             "   * - Parameter", "     - Type", "     - Default", "     - Details"]
    for row in rows:
        lines.append(f"   * - {row[0]}")
        lines += [f"     - {v}" for v in row[1:]]
    return lines + [""]

def process_docstring(app, what, name, obj, options, lines):
    lines[:] = [md_literals(l) for l in lines]
    if what in ("function", "method", "class"): lines.extend(table(obj))

def missing_reference(app, env, node, contnode):
    "`pkg.mod.Class.field` with no entry of its own -> the entry of `pkg.mod.Class` (or the module's page)."
    if node.get("refdomain") != "py": return None
    target = node.get("reftarget", "")
    if not target.startswith(app.config.docments_package + "."): return None
    domain = env.get_domain("py")
    parts = target.split(".")
    for i in range(len(parts) - 1, 1, -1):
        parent = ".".join(parts[:i])
        for role in ("obj", "mod"):
            found = domain.resolve_xref(env, node["refdoc"], app.builder, role, parent, node, contnode)
            if found is not None: return found
    return None

def setup(app):
    app.add_config_value("docments_package", "hoi_audit", "env")
    app.connect("autodoc-process-docstring", process_docstring)
    app.connect("missing-reference", missing_reference, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
