# Two commands for a fresh machine: `make demo` and `make test`. Both bootstrap .venv.
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= out
PYTEST_ARGS ?=

.PHONY: demo test bootstrap lint clean

bootstrap:
	@VENV=$(VENV) ./scripts/bootstrap.sh

demo: bootstrap
	$(PY) scripts/demo.py --out $(OUT)

test:
	@VENV=$(VENV) TRIAGE_TEST_TOOLS=1 ./scripts/bootstrap.sh
	$(PY) -m pytest $(PYTEST_ARGS)

lint: bootstrap
	$(PY) -m ruff check .

clean:
	rm -rf $(OUT) .pytest_cache
