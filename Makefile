# tinybert — the course and the library. `make book` and `make test` are all a new user needs;
# each sets up .venv itself. See README.md and book/how-this-book-is-made.md.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
JB     := $(VENV)/bin/jupyter-book
STAMP  := $(VENV)/.installed
MATHJAX := book/_vendor/node_modules/mathjax/es5/tex-mml-chtml.js
JBFLAGS := -W -n --keep-going --builder html
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: help venv mathjax export sync format lint check unit nbval site browser test book notebooks student \
        nbgrader budget budget-quick bench gpu-data gpu-check colab unit-oldest-torch clean

help:
	@echo "make book      set up .venv, execute every chapter, build the website into _build/html"
	@echo "make test      set up .venv and run the whole test suite (quick mode)"
	@echo "make export    write the chapters' exported cells into the tinybert package"
	@echo "make sync      bring each chapter's .md and .py in sync (jupytext)"
	@echo "make format    fit the code to 88 columns (ruff format, then book/tools/fit88.py)"
	@echo "make lint      line lengths, ruff's format check and lint rules (part of check and test)"
	@echo "make check     fast checks: pairs, export drift, formatting, lint, unit tests"
	@echo "make notebooks .ipynb files for Colab/Binder in _build/notebooks"
	@echo "make student   student notebooks and a site without solutions in _build/student"
	@echo "make nbgrader  the chapters as nbgrader source assignments in _build/nbgrader/source"
	@echo "make budget    time every chapter in quick and normal mode; writes book/budgets.json"
	@echo "make budget-quick  the same, quick mode only"
	@echo "make bench     speed comparisons against the reference implementations"
	@echo "make colab     the Colab rehearsal: every chapter from the wheel, newest torch"
	@echo "make unit-oldest-torch  the unit tests with the lowest torch pyproject.toml allows"
	@echo "make gpu-data  pack the course data (without MiniLM) into _gpu/ for a lent GPU"
	@echo "make gpu-check the prepared GPU run (parity, chapters, throughput) -> one JSON"

# --- environment ------------------------------------------------------------------------
# pip always installs with -c constraints.txt (torch is pinned there) and never with -U.
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet -c constraints.txt torch==2.13.0
	$(PIP) install --quiet -c constraints.txt -e ".[book,test,hf]"
	# seqeval (the named-entity scores' test oracle) ships only as a source archive whose
	# setup.py fetches the newest setuptools_scm, which no longer builds it: install the pinned one first.
	$(PIP) install --quiet -c constraints.txt setuptools-scm
	$(PIP) install --quiet -c constraints.txt --no-build-isolation seqeval
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (tinybert)" >/dev/null
	touch $(STAMP)

venv: $(STAMP)

$(MATHJAX): book/_vendor/package.json book/_vendor/package-lock.json
	cd book/_vendor && npm ci --no-audit --no-fund --loglevel=error
	touch $(MATHJAX)

mathjax: $(MATHJAX)

# --- authoring ----------------------------------------------------------------------------
export: venv
	$(PY) -m book.tools.export

sync: venv
	$(PY) -m book.tools.pairs --sync

notebooks: venv
	rm -rf _build/notebooks
	$(PY) -m book.tools.editions notebooks --out _build/notebooks

student: venv mathjax
	$(PY) -m book.tools.editions student --out _build/student
	$(JB) build _build/student/src --path-output _build/student $(JBFLAGS)
	@echo "student notebooks: _build/student/notebooks; student site: _build/student/_build/html"

nbgrader: venv
	rm -rf _build/nbgrader
	$(PY) -m book.tools.nbgrader --out _build/nbgrader

# The compute budget on each chapter page comes from book/budgets.json, which these write
# (one chapter at a time: `$(PY) -m book.tools.budget --mode normal --only 06`).
budget: venv
	$(PY) -m book.tools.budget --mode both

budget-quick: venv
	$(PY) -m book.tools.budget --mode quick

# --- tests --------------------------------------------------------------------------------
# The code that fits the page: chapters' code cells (through their .py twins) and the
# hand-written package; the generated modules are formatted by `make export` itself. After
# formatting the .py twins, the .md files take their code, and the .py files are written
# again from the .md (jupytext's own blank lines between cells, which ruff would change:
# that is why `lint` checks the chapters' line length, not ruff's blank lines).
FORMATTED := chapters/[0-9]*.py tinybert
format: venv
	$(PY) -m book.tools.fit88 $(FORMATTED)          # first: trailing comments move above
	$(PY) -m ruff format $(FORMATTED)
	$(PY) -m book.tools.fit88 $(FORMATTED)          # then comments, docstrings, strings
	$(PY) -m book.tools.lift_comments $(FORMATTED)
	$(PY) -m ruff format $(FORMATTED)
	$(PY) -m book.tools.pairs --sync
	sleep 1 && touch chapters/[0-9]*.md && $(PY) -m book.tools.pairs --sync
	$(PY) -m book.tools.export

lint: venv
	$(PY) -m ruff format --check tinybert
	$(PY) -m book.tools.fit88 --check chapters/[0-9]*.py
	$(PY) -m ruff check $(FORMATTED)

check: venv lint
	$(PY) -m book.tools.pairs
	$(PY) -m book.tools.export --check
	$(PY) -m pytest -q -m "not notebooks and not site" tests

unit: venv mathjax
	$(PY) -m pytest -m "not site" --fail-on-unexpected-skip tests

nbval: venv
	rm -rf _build/nbval
	$(PY) -m book.tools.editions nbval --out _build/nbval
	TINYBERT_QUICK=1 $(PY) -m pytest --nbval-lax --nbval-cell-timeout=600 -p no:cacheprovider _build/nbval

# The website in quick mode, for the tests (make book builds it in normal mode).
site: venv mathjax
	rm -rf _build/quick
	TINYBERT_QUICK=1 $(JB) build . --path-output _build/quick $(JBFLAGS)

browser: venv
	$(PY) -m pytest -m site tests

# The Colab rehearsal (book/tools/colab.py): the wheel, installed by each notebook's own
# install cell into a fresh environment with the newest torch installable here (the CUDA
# build, as on Colab), every chapter executed in quick mode from a folder outside the
# repository. COLAB_WORK must lie outside the repository; it is emptied first.
COLAB_TORCH ?= 2.14.1
COLAB_WORK  ?= $(or $(TMPDIR),/tmp)/tinybert-colab
colab: venv
	$(PY) -m book.tools.colab --work $(COLAB_WORK) --torch $(COLAB_TORCH)

# The unit tests with the lowest torch that pyproject.toml allows (its `torch>=X.Y`), in
# an environment of their own: every other pin of constraints.txt holds.
TORCH_FLOOR := $(shell sed -n 's/.*"torch>=\([0-9.]*\)".*/\1/p' pyproject.toml)
OLDEST      := .venv-oldest-torch
$(OLDEST)/.installed: pyproject.toml constraints.txt
	rm -rf $(OLDEST) && $(PYTHON) -m venv $(OLDEST)
	grep -v '^torch==' constraints.txt > $(OLDEST)/constraints.txt
	$(OLDEST)/bin/python -m pip install --quiet torch==$(TORCH_FLOOR).0
	$(OLDEST)/bin/python -m pip install --quiet -c $(OLDEST)/constraints.txt \
		-e ".[book,test,hf]" setuptools-scm
	$(OLDEST)/bin/python -m pip install --quiet -c $(OLDEST)/constraints.txt \
		--no-build-isolation seqeval
	touch $@

unit-oldest-torch: $(OLDEST)/.installed
	$(OLDEST)/bin/python -c "import torch; print('torch', torch.__version__)"
	$(OLDEST)/bin/python -m pytest -q -m "not notebooks and not site" \
		--fail-on-unexpected-skip tests

test: venv mathjax
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory unit
	$(MAKE) --no-print-directory nbval
	$(MAKE) --no-print-directory site
	$(MAKE) --no-print-directory browser
	$(MAKE) --no-print-directory colab
	$(MAKE) --no-print-directory unit-oldest-torch

# --- the website --------------------------------------------------------------------------
# --all: re-read and re-execute every chapter, even when Sphinx thinks nothing changed (a
# previous build's outputs must never be served as this build's).
book: venv mathjax
	$(JB) build . --all $(JBFLAGS)
	@echo "website: _build/html/index.html"

bench: venv
	for script in benchmarks/bench_*.py; do $(PY) $$script || exit 1; done

# --- a lent GPU (benchmarks/README.md) ------------------------------------------------------
# The lent machine has no .venv, only python3 with torch and the test libraries: gpu-check
# needs nothing else (GPU_PY=.venv/bin/python here). It unpacks _gpu/data.tar.xz when
# present (make gpu-data writes it) and writes $(GPU_OUT)/gpu_check.json; GPU_ARGS are
# passed on (--tiny, --deadline-s 240, --chapters 01 03, ...).
GPU_PY   ?= python3
GPU_OUT  ?= _build/gpu-check
GPU_ARGS ?=
gpu-data:
	$(PYTHON) benchmarks/pack_gpu_data.py

gpu-check:
	PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_PY) benchmarks/gpu_check.py \
		--out $(GPU_OUT) $(GPU_ARGS)

clean:
	rm -rf _build
