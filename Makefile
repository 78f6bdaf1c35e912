# One entry point for developers and CI. `make setup` is idempotent and works on a fresh machine.
PY      ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
# The images' pinned runtime dependencies constrain the dev venv too, so tests run against the
# versions the images ship (tests fail when the pins and the venv drift apart).
PINS    := requirements-operator.txt broker_image/requirements.txt
# setup.py compiles the record reader (mypyc) into the source tree: a changed reader reinstalls,
# so the compiled module never lags its source (tests/unit/test_record_reader.py would say so).
READER  := broker_image/jbod_broker/storage/record_reader.py
STAMP   := $(VENV)/.installed-$(shell cat pyproject.toml setup.py $(READER) $(PINS) | sha1sum | cut -c1-12)

.PHONY: setup test unit integration e2e torture lint bench clean pin crds demo

# kube-apiserver and etcd built from their Go modules (cached outside the repo), kubectl/helm.
-include mk/kube.mk
# Apache Kafka's jars from Maven Central (cached outside the repo): its tools and a KRaft broker.
-include mk/kafka.mk

setup: $(STAMP)
	@$(MAKE) --no-print-directory kube-bins kubectl-bins kafka-jars

$(STAMP): pyproject.toml setup.py $(READER) $(PINS)
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,operator,spark]' $(addprefix -c ,$(PINS))
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

# The README's first command: API server, operator and 3 brokers x 2 disks on this machine, a
# broker and a disk added, one Rebalance (Spark plan, approval, moves with live progress) while
# a counting producer and consumer run; cleans up. Last line: wall time per phase (JSON).
demo: setup
	$(BIN)/python scripts/demo.py

# What CI runs: every tier. scripts/run-tests drops the root's permission override so that
# chmod 000 really fails a disk, as it would for the non-root broker in its image. Every tier
# runs on two workers (pytest-xdist); integration and e2e share them out a module at a time,
# Apache Kafka's modules one after another, and the tests that measure time run last, alone
# (tests/tiers.py says why).
test: setup
	scripts/run-tests tests/unit -n 2
	scripts/run-tests tests/integration e2e -n 2 --dist loadfile -m "not serial"
	scripts/run-tests tests/integration e2e -m serial

unit: setup
	scripts/run-tests tests/unit -n 2

integration: setup
	scripts/run-tests tests/integration

e2e: setup
	scripts/run-tests e2e

# Seeded random PartitionReassignments under SIGKILLs of the active operator and of brokers,
# each end audited against the brokers (e2e/test_reassignment_torture.py; `make test` runs its
# two fixed seeds): SEEDS=N runs seeds 1..N (or a comma list), STEPS reassignments each.
SEEDS ?= 2
STEPS ?= 6
torture: setup
	TORTURE_SEEDS=$(SEEDS) TORTURE_STEPS=$(STEPS) scripts/run-tests e2e/test_reassignment_torture.py -s

# The same checks run from .pre-commit-config.yaml (`.venv/bin/pre-commit install`).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check broker_image operator spark_apps
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m jbod_operator.tools.crdgen --check

# Benches run as modules of the repository (python -m bench.x): they import tests' helpers.
bench: setup
	@for b in $(filter-out bench/__init__.py,$(wildcard bench/*.py)); do m=$$(basename $$b .py); \
	  echo "== $$b"; $(BIN)/python -m bench.$$m --quick || exit 1; done

# Re-pin the broker image's runtime dependencies to what the venv has (tests check they match).
pin: setup
	@{ echo "# Runtime dependencies of the broker image, pinned to the versions the tests ran with."; \
	   echo "# Regenerate with: make pin (a test fails when these drift from the project venv)."; \
	   $(BIN)/pip freeze | grep -iE '^(pydantic|pydantic.core|aiohttp|crc32c|prometheus.client|annotated.types|typing.extensions|typing.inspection|multidict|yarl|frozenlist|aiosignal|attrs|aiohappyeyeballs|propcache|idna|kio|cramjam)=='; \
	 } > broker_image/requirements.txt

# CRDs are generated from the pydantic models (tests fail when crds/ is stale).
crds: setup
	$(BIN)/python -m jbod_operator.tools.crdgen

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
