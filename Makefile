# Crux for Python: every target sets up what it needs, so `make demo` and `make test`
# work on a fresh machine with Python 3.11 and the package registries.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DIST_DIR ?= dist
# The exact, tested versions: runtime (the container image: a worker or `crux serve`) and
# everything `make` needs.
LOCK := requirements.lock
# The distribution's packages (bytecode is compiled for them before runs that measure).
PACKAGES := activities contracts crux planner providers storage telemetry vocabulary workflows worker.py
DEV_LOCK := requirements-dev.lock
# The peers `bench/bench_peers.py` measures Crux against (the `bench` extra) live in a virtual
# environment of their own: the OpenAI Agents SDK needs websockets<17 and the dev tools'
# langsmith websockets 17, so they cannot share `.venv`. Its lock is compiled against the
# runtime lock, so Crux runs there at the exact versions a deployment runs.
BENCH_VENV ?= .venv-bench
BENCH_LOCK := requirements-bench.lock
BENCH_STAMP := $(BENCH_VENV)/.installed
UV_COMPILE = $(BIN)/uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes --quiet
# The test runs are parallel (pytest-xdist). Each worker is a pytest session of its own with
# its own PostgreSQL and Temporal dev server; `loadgroup` hands out one test at a time (the
# long ones first, see LONG_POLES in tests/conftest.py) and keeps the tests that hold the
# well-known ports 7233/8233 on one worker. The suite mostly waits (servers, timers, outages),
# so on 2 cores 4 workers beat 3 (measured on a quiet machine: make test 4:02 against 4:24,
# make check the same); on a machine busy with other work, TEST_WORKERS=3 can be faster, and
# TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 4
PYTEST = $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup
# The edit-test loop leaves out the long suites (crashes, kills, outages, fault matrices,
# long conversations), the tests that start processes or whole stacks, and the long property
# runs; `make test` runs everything.
QUICK = -m "not durability and not stack and not slow"

.DEFAULT_GOAL := help
.PHONY: help install lock dist docs schemas demo dev worker test test-suite test-ts check test-fast lint fmt typecheck fuzz soak soak-history bench migrate all clean

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml $(DEV_LOCK)
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(PYTHON) not found; set PYTHON=/path/to/python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -qq --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -qq --disable-pip-version-check --require-hashes -r $(DEV_LOCK)
	@# -qq: setuptools reports how an editable install works, as a warning.
	$(BIN)/python -m pip install -qq --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(STAMP)

install: $(STAMP) ## Create the virtual environment from the lock file, with the dev tools

lock: $(STAMP) ## Re-resolve the lock files after a pyproject.toml change (UV_ARGS=--upgrade for newer releases)
	$(UV_COMPILE) --extra dev $(UV_ARGS) -o $(DEV_LOCK)
	$(UV_COMPILE) --extra serve -c $(DEV_LOCK) -o $(LOCK)
	$(UV_COMPILE) --extra embedded --extra bench -c $(LOCK) -o $(BENCH_LOCK)

dist: $(STAMP) ## Build the sdist and the wheel into dist/ (the wheel is built from the sdist)
	@# The venv's locked setuptools builds them: no build environment is downloaded.
	rm -rf $(DIST_DIR)
	$(BIN)/uv build --quiet --no-build-isolation --python $(BIN)/python --out-dir $(DIST_DIR)
	@ls -1 $(DIST_DIR)/*.whl $(DIST_DIR)/*.tar.gz

docs: $(STAMP) ## Build the documentation site into site/ (warnings are errors)
	@# Not --quiet: it hides the warnings that --strict turns into a failure.
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

schemas: $(STAMP) ## Regenerate the published JSON Schemas in schemas/ (and docs/reference/schemas.md) from the workflow contracts
	$(BIN)/python -m contracts.schemas

demo: $(STAMP) ## Run a multi-turn managed conversation on the embedded stack and print receipts
	@$(BIN)/python -m compileall -q $(PACKAGES)
	$(BIN)/crux demo $(DEMO_ARGS)

dev: $(STAMP) ## Start Temporal dev server, embedded PostgreSQL and a worker in the foreground
	@$(BIN)/python -m compileall -q $(PACKAGES)
	$(BIN)/crux dev

worker: $(STAMP) ## Run a worker against TEMPORAL_ADDRESS and CRUX_DATABASE_URL
	$(BIN)/python worker.py

migrate: $(STAMP) ## Apply the SQL migrations to CRUX_DATABASE_URL
	$(BIN)/crux db migrate

lint: $(STAMP) ## ruff check and format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

fmt: $(STAMP) ## Format and autofix
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck: $(STAMP) ## pyright, strict on the packages
	$(BIN)/pyright

test: $(STAMP) ## Everything CI runs: lint, type-check and docs beside the whole test suite (parallel)
	@# -k: every part runs to its end, so one run reports every failing part.
	@$(MAKE) --no-print-directory -k -j4 --output-sync=target lint typecheck docs test-suite \
		|| { echo >&2 "make test: FAILED (the parts marked *** above)"; exit 1; }

test-suite: $(STAMP)
	$(PYTEST) $(PYTEST_ARGS)

test-ts: $(STAMP) ## The TypeScript client suite alone (Node 20+; npm ci from tests/ts/package-lock.json)
	$(BIN)/python -m pytest -q -n 0 tests/ts

check: $(STAMP) ## Edit-test loop (< 2 min): unit, replay and behaviour tests in parallel (no durability or stack suites)
	$(PYTEST) $(QUICK) $(PYTEST_ARGS)

test-fast: $(STAMP) ## Every test (parallel) without lint, type-check and docs; stops at the first failure
	$(PYTEST) -x $(PYTEST_ARGS)

fuzz: $(STAMP) ## Longer property-based runs
	CRUX_FUZZ_EXAMPLES=5000 $(BIN)/python -m pytest -q -m slow $(PYTEST_ARGS)

soak: $(STAMP) ## Longer suites: 1,000+ generations through worker kills, PostgreSQL outages and crashes in every stage, canary leaks, 300 random provider fault sequences, hostile input; history bytes on a 10,000-message Thread
	CRUX_SOAK=1 $(BIN)/python -m pytest -q -s tests/e2e/test_crash_and_outage.py tests/e2e/test_flat_history.py tests/e2e/test_storage_faults.py tests/e2e/test_canary_leaks.py tests/e2e/test_provider_fault_sequences.py tests/e2e/test_hostile_input.py tests/e2e/test_hostile_runtime.py tests/crux/test_hostile_builders.py $(PYTEST_ARGS)

soak-history: $(STAMP) ## 300-turn managed-history conversations, every strategy and miss policy
	CRUX_SOAK=1 $(BIN)/python -m pytest -q -s -m slow tests/e2e/test_long_conversations.py $(PYTEST_ARGS)

$(BENCH_STAMP): pyproject.toml $(BENCH_LOCK)
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(PYTHON) not found; set PYTHON=/path/to/python3.11"; exit 1; }
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install -qq --disable-pip-version-check --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install -qq --disable-pip-version-check --require-hashes -r $(BENCH_LOCK)
	@touch $(BENCH_STAMP)

bench: $(STAMP) $(BENCH_STAMP) ## Run the benchmarks and write bench/REPORT.md (ratios against in-run anchors)
	@# Bytecode for the packages, as a wheel install has: without it every process that
	@# imports them (each benchmark, each worker) compiles the sources again.
	$(BIN)/python -m compileall -q $(PACKAGES)
	$(BIN)/python bench/report.py

all: test ## Everything CI runs

clean: ## Remove the virtual environment and local stack state
	rm -rf $(VENV) $(BENCH_VENV) .stack site $(DIST_DIR) build
