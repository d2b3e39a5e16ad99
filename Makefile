# `make demo` and `make test` each create .venv when it is missing, install brainx into it, then run.
# `make test PYTHON=python3.12` runs on another interpreter, in its own environment
# (.venv-python3.12); a pyenv version installed but not selected is found in pyenv's folder.
PYTHON ?= python3
PYTHON_EXE := $(shell $(PYTHON) -c '' >/dev/null 2>&1 && echo $(PYTHON) || \
	ls -d $$(pyenv root 2>/dev/null)/versions/$(patsubst python%,%,$(notdir $(PYTHON))).*/bin/$(notdir \
	$(PYTHON)) 2>/dev/null | sort -V | tail -1)
VENV ?= $(if $(filter python3,$(PYTHON)),.venv,.venv-$(notdir $(PYTHON)))
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# `make demo` alone installs brainx with the examples extra only (what the examples, tutorials and
# guides run: matplotlib, tqdm, scikit-learn, pytest, brainevent, numba, flax, equinox; not the
# test extra's pytest-xdist, hypothesis, scipy); the test install covers the demo too.
DEMO_STAMP := $(VENV)/.installed-demo
TEST_EXTRAS := test,examples

.PHONY: demo test test-core test-check-caches test-cost test-long fuzz docs docs-check install bench compat compat-0.6 clean

$(PY):
	@test -n "$(PYTHON_EXE)" || { echo "no interpreter $(PYTHON) here" >&2; exit 1; }
	$(PYTHON_EXE) -m venv $(VENV)

# The distribution is brainx-jax. It was named brainx before: an editable install of this checkout
# under that name is removed (never the package index's brainx, which is another project).
define pip_install
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(1)]"
	$(PY) -m pip show brainx 2>/dev/null | grep -qx 'Editable project location: $(CURDIR)' && \
		$(PY) -m pip uninstall --quiet --yes brainx || true
endef

$(STAMP): $(PY) pyproject.toml
	$(call pip_install,$(TEST_EXTRAS))
	touch $(STAMP) $(DEMO_STAMP)

$(DEMO_STAMP): $(PY) pyproject.toml
	$(call pip_install,examples)
	touch $(DEMO_STAMP)

install: $(STAMP)

demo: $(DEMO_STAMP)
	$(PY) examples/snn_bptt.py

# A sample of the largest test matrices (tests/conftest.py says which), on two workers (one per
# core of the CI machine; loadscope keeps a module's tests, and its fixtures, on one worker).
TEST_WORKERS ?= 2
# then the trace-cache tests once more with BRAINX_CHECK_CACHES=1: every reuse of a cached trace
# is compared with a trace made afresh (brainx/transform/core/cache_check.py)
CHECK_CACHES_TESTS := tests/test_trace_keys.py tests/test_cache_check.py \
	tests/test_trace_cache_keys.py tests/test_jit.py tests/test_jit_rebind.py \
	tests/test_jit_settings.py tests/test_conditions.py tests/test_sharing_soundness.py \
	tests/test_stateful_api.py tests/test_jax_cache_key.py
test: $(STAMP)
	PYTHONUNBUFFERED=1 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope --durations=10
	$(MAKE) --no-print-directory test-check-caches

# the core of brainx in a few minutes: states, jit, checkpoint, grad, loops, branches, mapping,
# random, environ, modules, saving, the brainstate switch. CI runs it on the other Pythons
# (`make test-core PYTHON=python3.13`), the whole suite on the default one.
CORE_TESTS := tests/test_state.py tests/test_jit.py tests/test_checkpoint.py \
	tests/test_grad_basics.py tests/test_autodiff.py tests/test_loops.py \
	tests/test_conditions.py tests/test_mapping.py tests/test_random.py tests/test_environ.py \
	tests/test_nn.py tests/test_io.py tests/test_trace_keys.py tests/test_compat_install.py \
	tests/test_nn_event_linear.py
test-core: $(STAMP)
	PYTHONUNBUFFERED=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadscope $(CORE_TESTS)

test-check-caches: $(STAMP)
	BRAINX_CHECK_CACHES=1 PYTHONUNBUFFERED=1 $(PY) -m pytest -q -n $(TEST_WORKERS) \
		--dist loadscope $(CHECK_CACHES_TESTS)

# what each file of the default run costs in CPU seconds, dearest first (wall times on a shared
# machine measure its load; tests/cpu_cost.py says more); TESTS="tests/test_a.py ..." for a few
COST_REPORT ?= build/test-cost.jsonl
test-cost: $(STAMP)
	mkdir -p $(dir $(COST_REPORT)) && rm -f $(COST_REPORT)
	PYTHONUNBUFFERED=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadscope \
		--cpu-report=$(COST_REPORT) $(TESTS); status=$$?; \
		$(PY) tests/cpu_cost.py $(COST_REPORT) --tests 20; exit $$status

# every case of every matrix
test-long: $(STAMP)
	PYTHONUNBUFFERED=1 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope --long --durations=20

# 10000 random stateful programs against plain JAX (hours); BRAINX_FUZZ_EXAMPLES=N for fewer;
# then 10000 random cases of the native kernels against NumPy (tests/native_fuzz.py: layouts from
# every constructor, bad indices, arrays changed after the build, products, the raw kernel),
# and 2000 more with float64 (x64); BRAINX_NATIVE_FUZZ_CASES=N for fewer
fuzz: $(STAMP)
	BRAINX_FUZZ_EXAMPLES=$${BRAINX_FUZZ_EXAMPLES:-10000} BRAINX_FUZZ_RANDOM=1 \
		$(PY) -m pytest -q tests/test_fuzz_programs.py --hypothesis-show-statistics
	$(PY) tests/native_fuzz.py --cases $${BRAINX_NATIVE_FUZZ_CASES:-10000} --seed 42 --progress 1000
	$(PY) tests/native_fuzz.py --cases 2000 --seed 43 --x64

# The documentation site: Sphinx + MyST + autodoc/autosummary, the book theme, MyST notebooks
# executed at build time (myst-nb, cached in docs/_build/.jupyter_cache), sphinx-gallery over
# examples/ (cached by content), MathJax served from the site (docs/conf.py says more).
# -E: a fresh environment each time, so -W sees every warning; the HTML folder is emptied first
# (no stale page of an earlier build); offline (no intersphinx). docs-check opens the built site
# in headless Chromium (docs/check_site.py: math, images, links, console errors, code not cut, the
# sidebar marks the page, gallery thumbnails) and fails when no Chromium can be started, saying
# how to get one (apt-get install chromium, CHROMIUM=/path, playwright install chromium);
# `make docs-check BROWSER=0` runs only the static checks (links, images, no remote loads).
# The caches are keyed by the tutorials' and examples' own code: after a change in brainx that
# alters their output, `rm -rf docs/_build/.jupyter_cache docs/gallery` runs them again.
DOCS_STAMP := $(VENV)/.docs-installed

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	rm -rf docs/_build/html
	$(PY) -m sphinx -E -q -W --keep-going -b html docs docs/_build/html
	@echo "site: docs/_build/html/index.html"

docs-check: $(DOCS_STAMP)   # checks the site as last built (builds it if there is none)
	@test -f docs/_build/html/index.html || $(MAKE) docs
	$(PY) docs/check_site.py $(if $(filter 0 no false,$(BROWSER)),--static-only)

bench: $(STAMP)
	$(PY) benchmarks/dispatch.py
	$(PY) benchmarks/compile_time.py
	$(PY) benchmarks/eager_transform_memory.py
	$(PY) benchmarks/remat_memory.py
	$(PY) benchmarks/snn_bptt.py
	$(PY) benchmarks/coba.py --quick

# brainstate 0.5.4's own core tests and notebooks against brainx (needs a brainstate checkout:
# BRAINSTATE_REPO), then its client libraries' own suites (downloads them; about an hour), then
# the notebooks again as a whole stack would run them, braintools and brainpy on brainx
BRAINSTATE_REPO ?= /work/.mirror/chaobrain+brainstate/repo
CLIENTS_VENV ?= /tmp/brainx-clients-venv
compat: $(STAMP)
	$(PY) tests/compat/run_brainstate_tests.py --repo $(BRAINSTATE_REPO)
	$(PY) tests/compat/run_tutorials.py --repo $(BRAINSTATE_REPO)
	$(PY) tests/compat/run_clients.py
	$(PY) tests/compat/run_tutorials.py --repo $(BRAINSTATE_REPO) --stack $(CLIENTS_VENV)
	$(MAKE) --no-print-directory compat-0.6

# brainstate 0.6.0's stack on Python 3.12: its own tests from its wheel (the new and changed ones
# counted against 0.5.4's), then its clients' suites (brainpy 2.9's brainpy.state, braintools
# 0.4.0, braintrace 0.2.8, braincell 0.2.0, brainspikes 0.2.0; downloads them; hours)
compat-0.6:
	$(MAKE) --no-print-directory install PYTHON=python3.12
	.venv-python3.12/bin/python tests/compat/run_brainstate_tests.py --repo brainstate==0.6.0 \
		--changed-since brainstate==0.5.4 --nn
	$(PY) tests/compat/run_clients.py --stack 0.6 --jobs 1

clean:
	rm -rf $(VENV) build *.egg-info docs/_build docs/gallery docs/api/generated
