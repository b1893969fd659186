# Two commands: `make book` sets everything up and builds the site; `make test` runs every test.
# While working: `make check` (model, data and unit tests, on every core: about a minute on 2) and
# `make chapter NAME=per-watt` (execute one chapter, report its first error).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
FAST := not build and not browser and not kernel and not slow
# `make wheelhouse`: the student set (requirements-student.txt) as wheels, with the build backend that its
# `-e .` needs, so a room installs with no network. For this platform, into wheelhouse/; for students'
# machines, e.g. `make wheelhouse PLATFORM=win_amd64` or `PLATFORM=macosx_12_0_arm64`, into wheelhouse-<platform>/.
# (3.11.5: the oldest Python 3.11 the pins allow; soupsieve needs it.) pip evaluates markers for this machine,
# not PLATFORM, so what only Windows or macOS needs is named here (tests/test_kit.py) and pinned in constraints.txt.
PLATFORM ?=
WHEELHOUSE := $(if $(PLATFORM),wheelhouse-$(PLATFORM),wheelhouse)
TARGET := $(if $(PLATFORM),--platform $(PLATFORM) --python-version 3.11.5 --implementation cp --abi cp311,)
WINDOWS_ONLY := colorama pywinpty
MACOS_ONLY := appnope
ONLY_THERE := $(if $(findstring win,$(PLATFORM)),$(WINDOWS_ONLY),$(if $(findstring macosx,$(PLATFORM)),$(MACOS_ONLY),))

# Installed by jupyter-events' and nbformat's `jsonschema[format-nongpl]`, used by nothing here: with
# rfc3987-syntax present, `import jsonschema` builds its IRI parsers with lark, about 1.8 s of CPU per
# process. Importing perwatt first stops that in kernels (perwatt/__init__.py, for students' installs
# too); this stops it where jsonschema comes first: Jupyter Book's own process, Jupyter servers. Without
# it, jsonschema leaves the "iri" formats unchecked (no installed schema uses them; `pip check` passes).
UNUSED := rfc3987-syntax lark

.PHONY: book test check chapter clean wheelhouse

# perwatt is installed editable, so pip compiled none of it to bytecode, as it does what it installs.
# Where PYTHONDONTWRITEBYTECODE is set (as on the machines this book is developed on), Python never
# writes it either, and every process that imports perwatt compiles it again from source: the build's,
# each kernel's, each test's subprocess. Importing the figures from a copy of the package took 2.25 and
# 2.32 s without bytecode (1.59 s in a third import), 1.47–1.48 s with it. Compiled here once; an
# edit makes that file's bytecode stale, which Python sees and ignores, until the next make.
COMPILE := $(BIN)/python -m compileall -q perwatt

# From npm, each exactly as its lockfile pins it: the hub's proxy (configurable-http-proxy) into $(VENV)/node, and
# axe-core, the browser tests' accessibility checker, into $(VENV)/axe. Without npm those tests fail and say so.
$(STAMP): Makefile requirements.txt requirements-test.txt requirements-hub.txt constraints.txt pyproject.toml deploy/jupyterhub/package-lock.json tests/axe/package-lock.json
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-test.txt
	$(BIN)/python -m pip uninstall --quiet --yes $(UNUSED)
	mkdir -p $(VENV)/node $(VENV)/axe && cp deploy/jupyterhub/package.json deploy/jupyterhub/package-lock.json $(VENV)/node/
	cp tests/axe/package.json tests/axe/package-lock.json $(VENV)/axe/
	if command -v npm >/dev/null; then npm ci --prefix $(VENV)/node --no-audit --no-fund --loglevel=error \
		&& npm ci --prefix $(VENV)/axe --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: the JupyterHub and accessibility tests need Node.js 20 or newer and npm (Debian: apt-get install nodejs npm)"; fi
	touch $(STAMP)

book: $(STAMP)
	$(COMPILE)
	$(BIN)/python -m perwatt.devtools build
	@echo "Open _build/html/index.html, or serve it: $(BIN)/python -m http.server -d _build/html 8000 --bind 127.0.0.1"

# One pytest worker per core (pytest-xdist); tests/conftest.py decides what runs once and what stays together.
# The 25 slowest steps are listed at the end, so that a run's log says where the suite's time goes.
test: $(STAMP)
	$(COMPILE)
	$(BIN)/python -m pytest -n auto --durations=25

check: $(STAMP)
	$(COMPILE)
	$(BIN)/python -m pytest -n auto -m "$(FAST)"

chapter: $(STAMP)
	$(COMPILE)
	$(BIN)/python -m perwatt.devtools chapter $(NAME)

# The pins as arguments, not `-r`: pip would otherwise pack the whole repository, .venv included, as perwatt's source.
wheelhouse: $(STAMP)
	$(BIN)/python -m pip download --quiet --only-binary=:all: $(TARGET) --dest $(WHEELHOUSE) -c constraints.txt \
		$$(sed -n 's/^\([A-Za-z0-9._-]*==[^ #]*\).*/\1/p' requirements-student.txt) $(ONLY_THERE) "setuptools>=68"
	@du -sh $(WHEELHOUSE)
	@echo "Offline: python3 -m venv .venv && .venv/bin/python -m pip install --no-index --find-links $(WHEELHOUSE) -r requirements-student.txt"

clean:
	rm -rf _build
