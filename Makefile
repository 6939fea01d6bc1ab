# Two commands for a fresh machine: `make demo` and `make test`. Both bootstrap .venv.
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= out
PYTEST_ARGS ?=

.PHONY: demo test bootstrap lint clean

bootstrap:
	@VENV=$(VENV) ./scripts/bootstrap.sh

demo: bootstrap
	@mkdir -p $(OUT)
	$(PY) -m triage diagnose --json $(OUT)/diagnose.json

test: bootstrap
	$(PY) -m pytest $(PYTEST_ARGS)

lint: bootstrap
	$(PY) -m ruff check .

clean:
	rm -rf $(OUT) .pytest_cache
