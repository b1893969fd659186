# Two commands: `make book` sets everything up and builds the site; `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: book test clean

$(STAMP): requirements.txt requirements-test.txt constraints.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-test.txt
	touch $(STAMP)

book: $(STAMP)
	$(BIN)/jupyter-book build . --warningiserror --nitpick --keep-going
	@echo "Open _build/html/index.html, or serve it: $(BIN)/python -m http.server -d _build/html 8000 --bind 127.0.0.1"

test: $(STAMP)
	$(BIN)/python -m pytest

clean:
	rm -rf _build
