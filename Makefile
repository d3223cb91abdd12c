# Sentinel developer tasks. `make help` lists them.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP) ## Create .venv and install Sentinel with its dev tools

demo: $(STAMP) ## Generate demo data and run the whole pipeline on ./demo/sentinel.duckdb
	$(BIN)/sentinel --log-level warning demo --dir demo

test: $(STAMP) ## Run the whole test suite (unit, rules, end-to-end)
	$(BIN)/pytest -q

lint: $(STAMP) ## ruff (lint + format check) and mypy --strict
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP) ## Run the benchmarks (minutes; prints ratios against baselines)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python bench/ingest_cloudtrail.py
	$(BIN)/python bench/ingest_profile.py
	$(BIN)/python bench/bench_detect.py
	$(BIN)/python bench/scan_bench.py --mb 200

clean: ## Remove the venv, demo data and caches
	rm -rf $(VENV) demo .pytest_cache .mypy_cache .ruff_cache

.PHONY: help venv demo test lint bench clean
