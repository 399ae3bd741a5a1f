# Two commands on a fresh machine (see README):
#   make run   — set up .venv and run the calibration flow offline on the embedded model
#   make test  — set up .venv and run lint, types, the docs build and the test suite
.PHONY: setup run test lint

VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=
LINT_PATHS := tokenlens flows tests bench

setup:
	@bash scripts/setup.sh

# Exit 4 means the calibration ran but some class could not be certified: a result, not a crash.
run: setup
	@$(BIN)/tokenlens calibrate $(ARGS); code=$$?; \
	if [ $$code = 4 ]; then echo "make run: exit 4 = some classes were not certified (reasons above)"; fi; \
	exit $$code

lint: setup
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/mypy
	$(BIN)/mkdocs build --strict

test: lint
	@bash scripts/setup-test.sh
	$(BIN)/python -m pytest $(ARGS)
