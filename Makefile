# The two commands of the README: `make reproduce` and `make test`. Both set up .venv from nothing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SCALE ?= small
OUT ?= .
# torch first, pinned: its CPU wheel; a bare `torch` would pull a multi-GB CUDA build
TORCH := torch==2.13.0
# No environment variable: the real labels ship with the package (procedural.real_labels_root), so `make reproduce` is exactly
# `hoi-audit reproduce --out .` and runs the same from a fresh clone with nothing beside it.

.PHONY: venv reproduce test check-export nbtest pytest fresh-clone docs check-docs readme check-readme bench clean

venv: $(VENV)/.installed

$(VENV)/.installed: settings.ini setup.py tools/constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -c tools/constraints.txt -e ".[dev]"
	touch $@

## make reproduce: every experiment notebook at the small scale -> figures/, results/, runs/, store/ (the same as hoi-audit reproduce --out .)
reproduce: venv
	$(BIN)/hoi-audit reproduce --scale $(SCALE) --out $(OUT)

## make test: library in sync with the notebooks, nbdev_test, every experiment regenerated in a fresh copy, the offline docs build, pytest
# The fresh-copy runs come first and leave their executed notebooks in _build/reproduce/runs, where the docs build takes its
# experiment pages from: each experiment runs once, not once for the docs and once for the byte-for-byte check.
test: PYTEST_ARGS := -k "not test_fresh_clone_regenerates_the_committed_results"
test: venv check-export check-readme nbtest fresh-clone docs pytest

# nbdev_export must not change the library: the notebooks are the source
check-export: venv
	@before=$$(find hoi_audit -name '*.py' | sort | xargs sha256sum); \
	$(BIN)/nbdev_export; \
	after=$$(find hoi_audit -name '*.py' | sort | xargs sha256sum); \
	if [ "$$before" != "$$after" ]; then echo "nbdev_export changed hoi_audit/: commit the exported library (never edit hoi_audit/*.py by hand)"; diff <(echo "$$before") <(echo "$$after"); exit 1; fi; \
	echo "hoi_audit/ is in sync with nbs/"
	@$(BIN)/python tools/format_notebooks.py --check   # lines of about 100 characters: ruff format, docments kept (tools/ruff.toml)

# library notebooks only: experiment notebooks run through papermill (make reproduce, tests/test_reproduce.py)
nbtest: venv
	@out=$$($(BIN)/nbdev_test --skip_folder_re '^(experiments|[_.].*)$$' --do_print 2>&1); status=$$?; echo "$$out"; \
	if echo "$$out" | grep -q "No files were eligible"; then echo "nbdev_test tested nothing"; exit 1; fi; exit $$status

# TEST_WORKERS pytest-xdist processes (the CI machine has 2 cores): pytest hands out whole test files (--dist loadfile: a file's module
# fixtures are built once), the fresh-clone regeneration its experiments, a clone per worker (--dist loadgroup: the experiments that
# share stores stay in one, tests/test_reproduce.py)
TEST_WORKERS ?= 2

pytest: venv
	$(BIN)/python -m pytest tests -q -ra --durations=10 -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# every experiment at the small scale in a copy of the tree with nothing beside it, byte-identical to the committed results JSON
fresh-clone: venv
	HOI_AUDIT_EXECUTED=$(CURDIR)/_build/reproduce/runs $(BIN)/python -m pytest tests/test_reproduce.py -q -ra --durations=20 \
	  -n $(TEST_WORKERS) --dist loadgroup -k test_fresh_clone_regenerates_the_committed_results

## make docs: the documentation site into _docs/ (Sphinx + myst-nb + autodoc, offline; nbdev_docs where Quarto exists)
# sources: nbdev's processing of nbs/ and the executed experiments (runs/ of make reproduce when current, else run small here)
RUNS ?= $(OUT)/runs
docs: venv
	rm -rf _docs _build/html
	$(BIN)/python tools/docs_sources.py _build/site --runs $(RUNS) --executed _build/reproduce
	$(BIN)/sphinx-build -j auto -q -W --keep-going -n -b html -c docs -d _build/doctrees _build/site _build/html
	mv _build/html _docs

# the site's checks alone (also part of make pytest): no warning, every internal link and anchor resolves (pytest-check-links),
# an API entry per export with its parameter table and source link, a figure and a table on every experiment page
check-docs: docs
	$(BIN)/python -m pytest -q tests/test_docs.py

## make readme: README.md from nbs/index.ipynb, whose two tables are generated (the experiments from their notebooks, the headline
# from results/full/): the notebook is executed in place (seconds; it reads only files of the repository), cleaned by nbdev_clean,
# and converted with its generating cells hidden
README_MD := $(BIN)/jupyter nbconvert --log-level WARN --to markdown --stdout --TagRemovePreprocessor.remove_cell_tags remove-cell \
  --TagRemovePreprocessor.remove_input_tags remove-input
readme: venv
	$(BIN)/jupyter nbconvert --log-level ERROR --to notebook --execute --inplace --ExecutePreprocessor.record_timing=False nbs/index.ipynb
	$(BIN)/nbdev_clean --fname nbs/index.ipynb
	$(README_MD) nbs/index.ipynb | cat -s > README.md.tmp && mv README.md.tmp README.md

# README.md is what nbs/index.ipynb's stored outputs give (what the docs site shows) and what executing it again gives (the
# generated tables follow the experiment notebooks and results/)
check-readme: venv
	@$(README_MD) nbs/index.ipynb | cat -s | diff -q - README.md >/dev/null \
	  || { echo "README.md is out of date with nbs/index.ipynb: run make readme"; exit 1; }
	@$(BIN)/jupyter nbconvert --log-level ERROR --to notebook --execute --stdout nbs/index.ipynb 2>/dev/null | $(README_MD) --stdin \
	  | cat -s | diff -q - README.md >/dev/null \
	  || { echo "nbs/index.ipynb's generated tables are out of date with nbs/experiments/ or results/: run make readme"; exit 1; }

## make bench: speed and memory figures (prints; the Breakfast-scale reading bench writes ~29 GB: run it alone)
bench: venv
	$(BIN)/python bench/bench_core.py
	$(BIN)/python bench/bench_decode.py
	$(BIN)/python bench/bench_ranking.py
	@echo "Breakfast-scale reading (about 20 min, 29 GB of disk): $(BIN)/python bench/bench_procedural.py"

clean:
	rm -rf _proc _docs _build runs store raw
