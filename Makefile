# The two commands a new user needs: `make book` and `make test`.
# Both create .venv and install requirements.txt (mha included, editable) when needed.
# The browser tests (tests/browser/) run after the book is built.
#
#   make book             build the HTML book from the stored outputs (_build/html/index.html)
#   make book-zh          build the Chinese edition from the same outputs (_build/html-zh/index.html)
#   make gettext          after changing English text: update the Chinese catalogues (locales/zh_CN)
#   make test             import layers, unit tests, nbval over every chapter (CPU) and the Chinese notebooks
#                         (nbval-zh: five of them), both editions, the browser test
#   make unit-fast        the core's and the chapters' tests (tests/core, tests/chapters) but the slow ones:
#                         the loop to run while changing mha (about a minute on 2 cores)
#   make lint             import layers (lint-imports), ruff check and format (code and notebooks), chapter sync
#   make format           ruff format the code and the chapters' code cells (chapters/*.md, through Jupytext)
#   make notebooks        re-execute every chapter on the CPU and store its outputs (after changing code)
#   make check-notebooks  prove `make notebooks` would change no text output (writes nothing)
#   make test-portable    nbval over every chapter as two other CPUs compute (other kernels, 1 and 2 threads),
#                         then with the last bits of every floating result nudged (tests/book/last_bits.py)
#   make test-learner-torch  (CI) the chapters downloaded from the book, run in a fresh venv on the newest torch
#   make caches           retrain and rewrite every cache in mha/data/ (over an hour, with progress bars)
#   MHA_DEVICE=cuda make test-gpu   unit tests and nbval with every chapter computing on CUDA
#   make budget           reading minutes per page and part, then nbval per chapter and the book build, against the budget
#   make lab              install JupyterLab (requirements-lab.txt), copy the chapters to lab/, open them there
#                         (MHA_LANG=zh_CN: the checkers' verdicts in Chinese)
#   make test-lab         run chapters 1, 3, 5 and 11 in a headless JupyterLab, move their explorers, time them
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NOTEBOOKS := $(sort $(wildcard book/*.ipynb))
CHAPTERS := $(sort $(wildcard chapters/*.md))
NBVAL := $(PY) -m pytest -p no:cacheprovider --nbval --nbval-current-env \
	--nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=300

# Chapters compute on the CPU unless MHA_DEVICE says otherwise (test-gpu requires cuda).
MHA_DEVICE ?= cpu
export MHA_DEVICE
# The checkers answer in English, the language of the stored outputs that nbval compares;
# `make lab MHA_LANG=zh_CN` opens the chapters with their verdicts in Chinese.
MHA_LANG ?= en
export MHA_LANG
export TQDM_DISABLE := 1

.PHONY: install book book-zh gettext notebooks check-notebooks lint format unit unit-fast nbval browser test test-portable test-gpu budget caches clean lab lab-install test-lab

# npm ci installs KaTeX (package-lock.json into node_modules/), which typesets every formula when the
# book is built (_ext/mha_math.py; Node.js 18 or newer). Without npm (a GPU runner that only tests the
# chapters) the rest installs and `make book` says what is missing.
$(STAMP): requirements.txt constraints.txt pyproject.toml package.json package-lock.json
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt -c constraints.txt
	if command -v npm >/dev/null 2>&1; then npm ci --no-audit --no-fund; \
	else echo "npm not found: before \`make book\`, install Node.js 18+ and run \`npm ci\` (KaTeX)"; fi
	touch $(STAMP)

install: $(STAMP)

# The live notebooks: JupyterLab and Notebook 7, pinned in requirements-lab.txt, on top of
# `make install`. The learner works on copies in lab/ (git-ignored; scripts/lab_copies.py never
# overwrites one), so that saving never changes book/*.ipynb, which the book and nbval read.
# `make lab APP=notebook` opens Notebook 7 instead; `make lab LAB_ARGS=--no-browser` opens no browser.
LAB_STAMP := $(VENV)/.lab-installed
APP ?= lab
LAB_ARGS ?=
$(LAB_STAMP): $(STAMP) requirements-lab.txt
	$(PY) -m pip install -q -r requirements-lab.txt -c constraints.txt
	touch $(LAB_STAMP)

lab-install: $(LAB_STAMP)

# The course's own device choice (CUDA when torch sees one) unless MHA_DEVICE is given; progress bars on.
lab: $(LAB_STAMP)
	$(PY) scripts/lab_copies.py
	$(if $(filter environment command,$(firstword $(origin MHA_DEVICE))),,env -u MHA_DEVICE) env -u TQDM_DISABLE \
	  $(VENV)/bin/jupyter $(APP) --ServerApp.root_dir=lab $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# The Chinese notebooks: the same code and outputs, the prose from the Chinese catalogues,
# checkers that answer in Chinese; copies in lab/zh_CN/, never overwritten either.
.PHONY: lab-zh
lab-zh: $(LAB_STAMP)
	$(PY) scripts/lab_copies.py --language zh_CN
	$(if $(filter environment command,$(firstword $(origin MHA_DEVICE))),,env -u MHA_DEVICE) env -u TQDM_DISABLE \
	  $(VENV)/bin/jupyter $(APP) --ServerApp.root_dir=lab/zh_CN $(if $(filter 0,$(shell id -u)),--allow-root) $(LAB_ARGS)

# Headless JupyterLab on 127.0.0.1 over copies in a temporary folder: Run All in chapters 1, 3, 5 and
# 11, move each explorer's controls, type into its text boxes, check the figure changes;
# latencies in _build/test-lab/latencies.json and .md. Needs Chromium, like the browser test.
test-lab: $(LAB_STAMP)
	MHA_TEST_LAB=1 $(PY) -m pytest -p no:cacheprovider -rs tests/lab/test_lab_browser.py

book: install
	$(VENV)/bin/jupyter-book build --all -W -n --keep-going .
	@echo "Book built: $(CURDIR)/_build/html/index.html"

# The Chinese edition: the same notebooks and stored outputs, the prose from
# locales/zh_CN/LC_MESSAGES/book/*.po (Sphinx gettext). Jupyter Book reads its configuration
# (_config.yml with language: zh_CN, written by scripts/i18n.py) from the book's root.
book-zh: install
	$(PY) scripts/i18n.py config
	$(VENV)/bin/jupyter-book build --all -W -n --keep-going --config _config.zh_CN.yml --path-output _build/zh .
	rm -rf _build/html-zh && mv _build/zh/_build/html _build/html-zh
	@echo "Chinese edition built: $(CURDIR)/_build/html-zh/index.html"

# After an English paragraph changes: its translation turns fuzzy (or a new message appears) in
# locales/zh_CN; tests/zh_CN/test_i18n.py fails until it is translated (see CONTRIBUTING.md). After a
# checker says a new message: it appears untranslated ("") in its topic's mha/chapters/<topic>/zh_CN.json
# (and an entry no checker says goes); tests/zh_CN/test_verdict_i18n.py fails until it is translated.
gettext: install
	$(PY) scripts/i18n.py update
	$(PY) scripts/i18n.py strings --write
	$(PY) scripts/i18n.py status

notebooks: install
	$(PY) scripts/execute_notebooks.py $(CHAPTERS)

check-notebooks: install
	$(PY) scripts/execute_notebooks.py --check $(CHAPTERS)

# The package's layers (import-linter contracts in pyproject.toml), ruff (lint and format) on the
# code and on the chapters' notebooks (whose code comes from chapters/*.md: fix findings there, then
# `make notebooks`), the chapters' two forms in sync, and the README's table of chapters current.
lint: install
	$(VENV)/bin/lint-imports --no-logo
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) scripts/check_sync.py
	$(PY) scripts/chapter_table.py --check

unit: install
	$(PY) -m pytest -p no:cacheprovider tests --ignore=tests/browser

# The inner loop: the tests of the core and of the chapters' code, without those marked slow
# (@pytest.mark.slow, over about 5 s each; `make unit` runs them).
unit-fast: install
	$(PY) -m pytest -p no:cacheprovider -q tests/core tests/chapters -m "not slow"

nbval: install
	$(NBVAL) $(NOTEBOOKS)
	@$(PY) scripts/nbval_cells.py $(NOTEBOOKS)

# The Chinese notebooks the zh edition hands out, run under nbval against what they store:
# the English notebook's outputs, each checker's verdict in its stored Chinese text.
NBVAL_ZH := 01_single_head_limits 03_worked_example 04_build_it_yourself 05_parameter_analysis 11_pretrained_heads
.PHONY: nbval-zh
nbval-zh: install
	rm -rf _build/nbval-zh
	$(PY) scripts/notebooks.py learner zh_CN _build/nbval-zh $(NBVAL_ZH)
	$(NBVAL) $(addprefix _build/nbval-zh/,$(addsuffix .ipynb,$(NBVAL_ZH)))

browser: book book-zh
	$(PY) -m pytest -p no:cacheprovider -rs --durations=15 tests/browser
	@echo "Screenshots: $(CURDIR)/_build/screenshots/"

test: lint unit nbval nbval-zh book book-zh browser
	@$(PY) scripts/nbval_cells.py $(NOTEBOOKS) | tail -n 1

format: install
	$(VENV)/bin/ruff check --fix --exclude '*.ipynb' .
	$(VENV)/bin/ruff format --exclude '*.ipynb' .
	for f in $(CHAPTERS); do PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/jupytext --pipe "ruff format --stdin-filename chapters/cell.py -" $$f || exit 1; done
	@echo "Chapters reformatted: run \`make notebooks\` to store their outputs."

# Other CPUs, emulated: PyTorch's, MKL's and oneDNN's kernels forced to other instruction sets, with
# one and with two threads. Every chapter must print the same checked text as on the machine that
# stored it (scripts/measure_portability.py measures the trained results under more combinations).
PORTABLE_CPUS := \
	"ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41 OMP_NUM_THREADS=1" \
	"ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 OMP_NUM_THREADS=2"

# Then as any other machine might compute: every inexact floating result of every operation nudged
# by up to a few units in its last place (tests/book/last_bits.py, entered in each kernel by an IPython
# startup file), once per seed in LAST_BITS_SEEDS. It finds what emulation cannot: another vendor's
# code paths (an Intel MKL printed 0e+00 for a round-off this AMD machine printed as 1e-16).
LAST_BITS_SEEDS ?= 1
LAST_BITS_IPYTHON := _build/last-bits-ipython
test-portable: install
	@for cpu in $(PORTABLE_CPUS); do \
	  echo "== nbval as another CPU computes: $$cpu"; \
	  env $$cpu $(NBVAL) -q $(NOTEBOOKS) || exit 1; \
	done
	rm -rf $(LAST_BITS_IPYTHON) && mkdir -p $(LAST_BITS_IPYTHON)/profile_default/startup
	cp tests/book/last_bits_startup.py $(LAST_BITS_IPYTHON)/profile_default/startup/00-last-bits.py
	@for seed in $(LAST_BITS_SEEDS); do \
	  echo "== nbval with the last bits of every floating result nudged (tests/book/last_bits.py, seed $$seed)"; \
	  IPYTHONDIR=$(CURDIR)/$(LAST_BITS_IPYTHON) MHA_ROOT=$(CURDIR) MHA_LAST_BITS=$$seed $(NBVAL) -q $(NOTEBOOKS) || exit 1; \
	done

# CI only (not make test): the chapters as a learner runs them, downloaded from the built book, in a
# virtual environment of their own with the book's wheel and the newest torch on the registry (the
# wheel accepts torch>=2.5; the pinned 2.13.0 stores the outputs). Run All, no output compared, and
# chapter 4 once more with every stub replaced by its solution. PIP_CONFIG_FILE=/dev/null: pip reads
# no machine-wide configuration (a cap on torch, local wheel folders), as on a learner's machine.
# Chapter 10 reads the repository's benchmark results, so it runs from a clone only (nbval does).
LEARNER_VENV ?= _build/learner-venv
LEARNER_TORCH ?= torch
LEARNER_CHAPTERS := 01 02 03 04 05 06 07 08 09 11
.PHONY: test-learner-torch
LEARNER_WHEEL = $(firstword $(wildcard _build/html/_downloads/mha/mha-*.whl))
test-learner-torch:
	@test -n "$(LEARNER_WHEEL)" || { echo "test-learner-torch runs the built book's downloads: run make book first"; exit 2; }
	test -x $(LEARNER_VENV)/bin/python || $(PYTHON) -m venv $(LEARNER_VENV)
	PIP_CONFIG_FILE=/dev/null $(LEARNER_VENV)/bin/python -m pip install -q --upgrade "$(LEARNER_TORCH)"
	PIP_CONFIG_FILE=/dev/null $(LEARNER_VENV)/bin/python -m pip install -q "$(LEARNER_WHEEL)[chapters,pretrained]" nbclient ipykernel
	PIP_CONFIG_FILE=/dev/null $(LEARNER_VENV)/bin/python -m pip install -q --force-reinstall --no-deps "$(LEARNER_WHEEL)"
	work=$$(mktemp -d) && for n in $(LEARNER_CHAPTERS); do cp _build/html/_sources/book/$${n}_*.ipynb $$work/; done && \
	  cd $$work && env -u MHA_DEVICE TQDM_DISABLE=1 $(CURDIR)/$(LEARNER_VENV)/bin/python $(CURDIR)/scripts/run_as_learner.py *.ipynb && \
	  env -u MHA_DEVICE TQDM_DISABLE=1 $(CURDIR)/$(LEARNER_VENV)/bin/python $(CURDIR)/scripts/run_as_learner.py --solve 04_*.ipynb

# Every cache of trained or long-accumulated numbers, rebuilt from scratch with its provenance,
# then the bands of the live checks. Rerun after changing the code that produced them.
caches: install
	env -u TQDM_DISABLE $(PY) scripts/make_ch01_cache.py --fresh
	env -u TQDM_DISABLE $(PY) scripts/make_ch08_control.py --fresh
	env -u TQDM_DISABLE $(PY) scripts/make_merge_results.py
	env -u TQDM_DISABLE $(PY) scripts/make_ablation_cache.py
	env -u TQDM_DISABLE $(PY) scripts/measure_portability.py

test-gpu: install
	@case "$(MHA_DEVICE)" in cuda*) ;; *) echo "make test-gpu runs the chapters on a GPU: use MHA_DEVICE=cuda make test-gpu (MHA_DEVICE is '$(MHA_DEVICE)')"; exit 2;; esac
	$(PY) scripts/check_gpu.py
	$(PY) -m pytest -p no:cacheprovider tests --ignore=tests/browser
	$(NBVAL) $(NOTEBOOKS)
	@$(PY) scripts/nbval_cells.py $(NOTEBOOKS) | tail -n 1

budget: install
	$(PY) scripts/reading_time.py --check
	$(PY) scripts/sentence_length.py
	$(PY) scripts/measure_budget.py

clean:
	rm -rf _build .pytest_cache

# Benchmarks: writes benchmarks/results/<device>.json/.md and explorers-<device>.json/.md;
# then, where the book is built, how soon a phone shows each page (_build/page-speed.md)
.PHONY: bench
bench: install
	$(PY) -m benchmarks.bench_attention
	$(PY) -m benchmarks.bench_explorers
	$(PY) -m benchmarks.bench_text
	$(PY) scripts/measure_pages.py
