# personal-memory: every target is a thin wrapper over the `pmem` CLI.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PMEM   := $(BIN)/pmem
SOURCE ?=
EXPORT ?=
RUN    ?=
LLM    ?=
DRY_RUN ?=
MAX_COST ?=
PRICE ?=
MAX_WAIT ?=
PENDING ?=
REDRAFT ?=  # conversation keys to draft again (space-separated), or all: the export's
NO_EMBED ?=
JSON ?=
EXCLUDE ?=  # space-separated --exclude rules (a space inside a title: write ? or *)

export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export DO_NOT_TRACK ?= 1

.DEFAULT_GOAL := help
.PHONY: help setup browser test test-random lint demo backfill review apply status db-start db-stop clean eval

help: ## list every target
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-13s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

setup: $(BIN)/python ## create .venv, install everything, prepare the embedded PostgreSQL + pgvector
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(PMEM) db init
	@$(MAKE) --no-print-directory browser

browser: ## Debian's Chromium and a CJK font (fonts-noto-cjk: the pages' Japanese) for the browser tests (apt-get when run as root on Debian/Ubuntu)
	@if command -v chromium >/dev/null 2>&1 && fc-list 2>/dev/null | grep -qi 'Noto Sans CJK'; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian's chromium and fonts-noto-cjk for the browser tests (apt-get, about a minute)"; \
	  apt-get install -y -q chromium fonts-noto-cjk >/dev/null 2>&1 || \
	  { apt-get update -q >/dev/null && apt-get install -y -q chromium fonts-noto-cjk >/dev/null; }; \
	else echo "note: no chromium or no CJK font; the browser tests need both (apt install chromium fonts-noto-cjk / brew install --cask chromium font-noto-sans-cjk)"; fi

TEST_WORKERS ?= 2
SEED ?= 1
test: ## the whole suite in a shuffled order (pytest-randomly; SEED=1 unless given, the same SEED the same order: `make test SEED=7` another) on TEST_WORKERS processes (default 2; 0: serially)
	@echo "make test: the suite shuffled with SEED=$(SEED); this order again: make test SEED=$(SEED)"
	$(BIN)/python -m pytest -p randomly --randomly-seed=$(SEED) $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)

test-random: test ## the old name of `make test` (which shuffles now), SEED as there

lint: ## ruff (lint and the formatter's check) + mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy core stages state importers prompts providers search store flows reports cli memory_api mcp_server

eval: ## recall, search and drafting on ../shared/eval/ and the LoCoMo dev split (beside BM25 and the lexical list alone): R@5, MRR per kind, time ranges, the drafting table (own data dir .pmem-eval/; REBUILD=1 builds again)
	$(BIN)/python bench/eval.py $(if $(REBUILD),--rebuild)

demo: ## run the whole pipeline offline on the bundled sample export, then search it
	$(PMEM) runs demo

backfill: ## import + draft + commit: make backfill EXPORT=path [SOURCE=chatgpt] [DRY_RUN=1] [LLM=provider:model] [MAX_COST=usd] [PRICE=in/out] [MAX_WAIT=s] [PENDING=1] [REDRAFT="key …"|all] [EXCLUDE="title:*病院*"] [ME="太郎,Taro"] [INCLUDE_OTHERS=1] [JSON=1]
	$(PMEM) backfill $(if $(SOURCE),--source $(SOURCE)) $(if $(EXPORT),--export "$(EXPORT)") $(if $(PENDING),--pending) $(if $(DRY_RUN),--dry-run) $(if $(LLM),--llm $(LLM)) $(if $(MAX_COST),--max-cost $(MAX_COST)) $(if $(PRICE),--price $(PRICE)) $(if $(MAX_WAIT),--max-wait $(MAX_WAIT)) $(if $(REDRAFT),--redraft $(filter-out all,$(REDRAFT))) $(if $(NO_EMBED),--no-embed) $(foreach rule,$(EXCLUDE),--exclude '$(rule)') $(if $(ME),--me "$(ME)") $(if $(INCLUDE_OTHERS),--include-others) $(if $(JSON),--json)

review: ## a dry run's drafts as diffs: make review RUN=id (writes runs/<id>/review.md and .html)
	$(PMEM) runs review $(RUN)

apply: ## commit a reviewed run without drafting again: make apply RUN=id
	$(PMEM) runs apply $(RUN) --json

status: ## what the runs did (RUN=id for one run)
	$(PMEM) status $(if $(RUN),$(RUN))

.PHONY: schedule prefect-stop
CRON   ?=
schedule: ## serve the monthly re-import (inbox + Codex / Claude Code sessions): make schedule [CRON="0 3 1 * *"]
	$(PMEM) prefect schedule $(if $(CRON),--cron "$(CRON)") $(if $(LLM),--llm $(LLM))

prefect-stop: ## stop the local Prefect server pmem manages (it starts again on the next run)
	$(PMEM) prefect stop

db-start: ## start the embedded PostgreSQL
	$(PMEM) db start

db-stop: ## stop the embedded PostgreSQL
	$(PMEM) db stop

clean: ## stop the database and the Prefect server, remove the virtual env (keeps .pmem data)
	-$(PMEM) prefect stop
	-$(PMEM) db stop
	rm -rf $(VENV)
