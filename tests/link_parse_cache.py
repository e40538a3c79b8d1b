"""A pytest plugin for tests/test_docs.py's link check (`-p link_parse_cache`): pytest-check-links parses the target page of every
link with an anchor again (html5lib, pure Python: a page linked 40 times is parsed 40 times); this keeps each page's tree, keyed by
its path and modification time, so a page is parsed once. The trees are only read (`findall` for the anchor)."""
import functools, os
import html5lib

_parse = html5lib.parse

@functools.lru_cache(maxsize=None)
def _page(path: str, mtime_ns: int):
    with open(path, "rb") as fd: return _parse(fd, namespaceHTMLElements=False)

def parse(doc, *args, **kwargs):
    "html5lib.parse, once per (page file, version) where the document is a file opened by path and parsed as pytest-check-links does."
    name = getattr(doc, "name", None)
    if isinstance(name, str) and not args and kwargs == {"namespaceHTMLElements": False} and os.path.isfile(name):
        return _page(os.path.abspath(name), os.stat(name).st_mtime_ns)
    return _parse(doc, *args, **kwargs)

html5lib.parse = parse
