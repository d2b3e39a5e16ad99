# `make demo` and `make test` each create .venv when it is missing, install brainx into it, then run.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test fuzz install bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,examples]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/snn_bptt.py

test: $(STAMP)
	PYTHONUNBUFFERED=1 $(PY) -m pytest --durations=10

# 10000 random stateful programs against plain JAX (hours); BRAINX_FUZZ_EXAMPLES=N for fewer
fuzz: $(STAMP)
	BRAINX_FUZZ_EXAMPLES=$${BRAINX_FUZZ_EXAMPLES:-10000} BRAINX_FUZZ_RANDOM=1 \
		$(PY) -m pytest -q tests/test_fuzz_programs.py --hypothesis-show-statistics

bench: $(STAMP)
	$(PY) benchmarks/dispatch.py
	$(PY) benchmarks/compile_time.py
	$(PY) benchmarks/remat_memory.py

clean:
	rm -rf $(VENV) build *.egg-info
