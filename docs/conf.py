"""Sphinx configuration of the documentation site (`make docs`: sources from tools/docs_sources.py, HTML into _docs/).

Sphinx + myst-nb renders the nbdev-processed notebooks; autodoc writes the API entries, with the parameter table taken from
the docments (docs/_ext/docments_table.py); sphinx-book-theme gives the sidebar in sections, search, per-page contents and
previous/next links. Every warning is an error (`make docs` runs sphinx-build -W -n), except those suppressed below.
"""
import configparser, sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(REPO))
_cfg = configparser.ConfigParser(delimiters=["="]); _cfg.read(REPO / "settings.ini")
settings = _cfg["DEFAULT"]

project = settings["title"]
author = settings["author"]
copyright = settings["copyright"]
release = version = settings["version"]

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.viewcode", "docments_table"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "conf.py"]
templates_path = []

# notebooks are rendered as they are: the library notebooks' examples are run by nbdev_test, the experiments by papermill
nb_execution_mode = "off"
nb_output_stderr = "remove"          # progress bars and warnings of the executed experiments
nb_merge_streams = True
nb_render_markdown_format = "myst"   # Markdown outputs (the home page's generated tables) rendered as MyST, tables included
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath", "attrs_inline", "attrs_block"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True     # `window:int=32` shows 32, a default of `None` shows None, a factory shows its name
add_module_names = False
python_display_short_literal_types = True
toc_object_entries_show_parents = "hide"
nitpicky = True                      # every cross-reference must resolve (the nbdev backtick links become py:obj roles)
# annotations name types from numpy, pandas, torch and typing: Sphinx has no inventory of them offline; not our links
nitpick_ignore_regex = [("py:class", r"(?!hoi_audit\.).*"),
                        # a CLI handler's `Annotated[T, {argparse settings}]` (05_cli) is rendered as one reference to typing
                        ("py:obj", r"typing\.Annotated\[.*")]
suppress_warnings = []

html_theme = "sphinx_book_theme"
html_title = settings["title"]
html_static_path = [str(DOCS / "_static")]
html_css_files = ["hoi_audit.css"]
html_show_sourcelink = False
html_copy_source = False
html_theme_options = {
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "navigation_with_keys": False,
    "article_header_end": [],
}
