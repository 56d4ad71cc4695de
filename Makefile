# Two set-up commands (README): `make demo` and `make test`. Both install what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PG_URL ?= postgres://postgres@127.0.0.1:5432/ledgerkeep
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install browser demo test test-sqlite test-postgres lint bench

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/.installed

demo: install
	$(BIN)/python manage.py migrate --noinput -v0
	$(BIN)/python manage.py demo --url http://$(HOST):$(PORT)/
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

# lint-imports: the app layers, pure modules, no cycles ([tool.importlinter] in pyproject.toml)
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

browser:
	bash scripts/ensure-chromium.sh

test-sqlite: install browser
	env -u DATABASE_URL $(BIN)/pytest

test-postgres: install
	DATABASE_URL=$(PG_URL) $(BIN)/pytest

test: lint test-sqlite test-postgres

# at most 10 minutes on 2 cores; `make bench BENCH_ARGS=--full` adds the long sizes (bench/README.md)
BENCH_ARGS ?=
bench: install
	DATABASE_URL=$(PG_URL) $(BIN)/python -m bench $(BENCH_ARGS)
