# The two commands a new user needs: `make book` and `make test`.
# Both create .venv and install requirements.txt (mha included, editable) when needed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install book test unit clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $(STAMP)

install: $(STAMP)

book: install
	$(VENV)/bin/jupyter-book build --all -W -n --keep-going .
	@echo "Book built: $(CURDIR)/_build/html/index.html"

unit: install
	$(PY) -m pytest tests

test: unit

clean:
	rm -rf _build .pytest_cache
