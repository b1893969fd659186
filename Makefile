# Two commands: `make book` sets everything up and builds the site; `make test` runs every test.
# While working: `make check` (model, data and unit tests, under a minute) and
# `make chapter NAME=per-watt` (execute one chapter, report its first error).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
FAST := not build and not browser and not kernel and not slow

.PHONY: book test check chapter clean

$(STAMP): requirements.txt requirements-test.txt constraints.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-test.txt
	touch $(STAMP)

book: $(STAMP)
	$(BIN)/python -m perwatt.devtools build
	@echo "Open _build/html/index.html, or serve it: $(BIN)/python -m http.server -d _build/html 8000 --bind 127.0.0.1"

test: $(STAMP)
	$(BIN)/python -m pytest

check: $(STAMP)
	$(BIN)/python -m pytest -m "$(FAST)"

chapter: $(STAMP)
	$(BIN)/python -m perwatt.devtools chapter $(NAME)

clean:
	rm -rf _build
