# Two commands for a newcomer: `make lab` and `make test` (both create .venv first if it is missing);
# `make check` is the quick loop while editing.
SHELL := /bin/bash
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
# nbgrader calls helper programs (alembic) by name: the venv's bin must be on PATH.
export PATH := $(BIN):$(PATH)
PORT ?= 8888
IP ?= 127.0.0.1
PYTEST_ARGS ?=
# The folder `make lab` serves (tests/test_browser.py serves a filled-in copy from a temporary folder).
LAB_DIR ?= notebooks

.PHONY: lab test check browser-test notebooks release venv gpu-test probes-test bench clean-nbgrader

# What each target installs (pyproject.toml's extras): the course alone for `make lab`, nbgrader and Dask
# for an instructor's targets, the test tools for the test targets.
EXTRA ?=
notebooks release clean-nbgrader: EXTRA = instructor
test check browser-test gpu-test probes-test: EXTRA = dev

venv:
	@tools/ensure_venv.sh $(EXTRA)

# JupyterLab on notebooks/ (or LAB_DIR), no browser where there is no display; prints the URL with its token.
lab: venv
	@token=$$($(BIN)/python -c 'import secrets; print(secrets.token_hex(24))'); \
	browser=--no-browser; \
	if [ -n "$$DISPLAY$$WAYLAND_DISPLAY" ] || [ "$$(uname)" = Darwin ]; then browser=; fi; \
	root=; if [ "$$(id -u)" = 0 ]; then root=--allow-root; fi; \
	echo ""; \
	echo "  JupyterLab for the course: http://$(IP):$(PORT)/lab?token=$$token"; \
	echo ""; \
	exec $(BIN)/jupyter lab $$browser $$root --ip=$(IP) --port=$(PORT) --ServerApp.port_retries=0 \
	    --ServerApp.root_dir="$(abspath $(LAB_DIR))" --IdentityProvider.token="$$token"

# The whole suite (what CI runs), on TEST_JOBS processes side by side (pytest-xdist; tests that share a
# graded submission stay in one process, `xdist_group`). It runs as on CI wherever it runs: no GPU visible
# (CPU_ONLY), Triton under the interpreter, `gpu` tests skipped (on a GPU machine: `make gpu-test`). Its
# kernel tests hold the interpreter's float32 (exact dots); a GPU reads float32 dot operands as TF32.
# The probes' tests are apart: `make probes-test`.
TEST_JOBS ?= 2
CPU_ONLY := CUDA_VISIBLE_DEVICES=
test: venv
	$(CPU_ONLY) $(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadgroup $(PYTEST_ARGS)

# The unit tier, for a quick loop while editing: no test that starts a process (grading workers, check's
# child, notebooks, nbgrader, Dask); starting one fails the test there (tests/conftest.py). TEST_JOBS
# processes side by side, as `make test`.
check: venv
	$(CPU_ONLY) COURSE_TEST_TIER=unit $(BIN)/python -m pytest -n $(TEST_JOBS) -m "not worker and not slow" $(PYTEST_ARGS)

# JupyterLab in headless Chromium (tests/test_browser.py): `make lab` on a learner's filled-in 03 notebook,
# Run All Cells, the check tables, the plot, no traceback; screenshots in out/browser/. Needs a system
# Chromium (`apt-get install chromium`); the playwright package comes with the venv.
browser-test: venv
	$(BIN)/python -m pytest tests/test_browser.py -s $(PYTEST_ARGS)

# GPU-only tests (on a GPU runner).
gpu-test: venv
	$(BIN)/python -m pytest -m gpu $(PYTEST_ARGS)

# The lab's tests (probes/tests/: the GPU probes, launch cost, grading-time tools), apart from the course suite.
probes-test: venv
	$(BIN)/python -m pytest probes/tests $(PYTEST_ARGS)

# Regenerate every student notebook from solutions/ (nbgrader strips solutions, hidden tests, outputs).
notebooks: venv
	@$(BIN)/python -m tools.generate_notebooks

# The learner's hand-out in dist/handout/: the student notebooks (regenerated first), check and the grader,
# and nothing that solves an exercise (tools/release.py says what is in it and why).
release: notebooks
	$(BIN)/python -m tools.release $(RELEASE_DIR)

bench: venv
	$(BIN)/python -m kernels_ref.bench $(BENCH_ARGS)

clean-nbgrader:
	rm -rf submitted autograded feedback source_with_tests gradebook.db autograder_results reports
