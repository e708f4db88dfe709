# Two commands do everything on a fresh clone: `make demo` (the main job) and `make test`.
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint typecheck deadcode release verify lock gpu-check

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[instructor,gpu-cu13,dev]"  # README "Install": this machine's full profile
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	# Bytecode for the editable grader and the suites, which pip does not compile: every sandboxed
	# worker (it cannot write any) and a shell with PYTHONDONTWRITEBYTECODE would else compile them
	# from source in each grading
	$(BIN)/python -m compileall -q grader tests/hidden tests/public
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(BIN)/grader demo --out demo-output

# One worker per core (at most 4), each taking whole test files, so that a file's session fixtures
# (the corpus's one batch grading) are made once; pytest-xdist. Bare `pytest` runs them in one process.
test: setup
	$(BIN)/pytest -q -n auto --maxprocesses=4 --dist loadfile

lint: setup typecheck deadcode
	$(BIN)/ruff check .
	$(BIN)/lint-imports

typecheck: setup  # pyproject.toml [tool.mypy]: grader/, every function annotated
	$(BIN)/mypy

deadcode: setup  # tools/vulture_whitelist.py says why each name it lists is not dead
	$(BIN)/vulture

release: setup
	$(BIN)/grader release

verify: setup
	$(BIN)/grader verify

# One lock per install profile (locks/*.txt): rerun after any change to pyproject.toml's
# dependencies; tests/unit/test_locks.py fails until then. The workflows key their caches on them.
lock: setup
	$(BIN)/python locks/lock.py

# On a GPU machine, before it grades (README "GPU runners", docs/GITHUB_SETUP.md): the preflight,
# every GPU-marked test, the sample class graded in the sandbox as root and as an ordinary user,
# bench part 4; one JSON (gpu-check.json) and a one-screen summary, in at most 8 minutes. Exit 3
# on a machine without a GPU.
gpu-check: setup
	$(BIN)/python tools/gpu_check.py --json gpu-check.json
