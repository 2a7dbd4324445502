# Orderly's build. `make run` and `make test` are the two commands that matter; see README.md.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

GO        ?= go
BIN       := $(CURDIR)/bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -X orderly.dev/orderly/internal/version.Version=$(VERSION) -X orderly.dev/orderly/internal/version.Commit=$(COMMIT)
ORDERLY   := $(BIN)/orderly
CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT  := $(BIN)/golangci-lint
# Pinned in hack/tools/<tool>/go.mod; rebuilt when that file changes.
CONTROLLER_GEN_MOD := hack/tools/controller-gen/go.mod
GOLANGCI_LINT_MOD  := hack/tools/golangci-lint/go.mod
# envtest's API server and etcd, built from source and cached by `orderly dev assets`.
ASSETS = $(shell $(ORDERLY) dev assets)

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

##@ The two commands
.PHONY: run
run: build ## Start the local cluster (and a local PostgreSQL if installed), apply config/samples and run the manager until Ctrl-C.
	$(ORDERLY) dev up
	$(ORDERLY) dev postgres up --optional
	$$($(ORDERLY) dev kubectl-path) --kubeconfig "$$($(ORDERLY) dev kubeconfig)" apply -f config/samples/
	$(ORDERLY) manager --kubeconfig "$$($(ORDERLY) dev kubeconfig)" --leader-elect=false --log-format console --metrics-bind-address :18080 --health-probe-bind-address :18081

.PHONY: test
test: prerequisites verify lint unit integration e2e ## Install what the tests need, run every check and all three test tiers.

##@ Prerequisites
# Everything else `make test` needs (the Kubernetes binaries, controller-gen,
# golangci-lint) is built from the Go module proxy; PostgreSQL's server, used by the
# DevDatabase integration and e2e tests, and Prometheus' server, used by the Canary
# integration and e2e tests and the Canary benchmark, come from the system's packages.
# Where PostgreSQL is found is the same rule as internal/localpg's; Prometheus is found
# on PATH or by $ORDERLY_PROMETHEUS_BIN, as internal/testprom does.
POSTGRES_INSTALL := sudo apt-get install -y postgresql
PROMETHEUS_INSTALL := sudo apt-get install -y prometheus

.PHONY: prerequisites
prerequisites: ## Install PostgreSQL's and Prometheus' servers for the tests when missing (apt-get, as root); otherwise say how.
	@if [ -n "$${ORDERLY_POSTGRES_BIN_DIR:-}" ]; then \
		test -x "$$ORDERLY_POSTGRES_BIN_DIR/initdb" || { echo "ORDERLY_POSTGRES_BIN_DIR=$$ORDERLY_POSTGRES_BIN_DIR holds no initdb"; exit 1; }; \
	elif ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "Installing PostgreSQL (Debian's postgresql package) for the tests"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -q; \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql; \
			compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || { echo "apt-get installed postgresql but no /usr/lib/postgresql/*/bin/initdb is there"; exit 1; }; \
		else \
			echo "The tests need PostgreSQL's server binaries. Install them with: $(POSTGRES_INSTALL)"; \
			echo "(or set ORDERLY_POSTGRES_BIN_DIR to a directory holding initdb, pg_ctl and postgres)"; \
			exit 1; \
		fi; \
	fi
	@if [ -n "$${ORDERLY_PROMETHEUS_BIN:-}" ]; then \
		test -x "$$ORDERLY_PROMETHEUS_BIN" || { echo "ORDERLY_PROMETHEUS_BIN=$$ORDERLY_PROMETHEUS_BIN is not an executable"; exit 1; }; \
	elif ! command -v prometheus >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "Installing Prometheus (Debian's prometheus package) for the tests"; \
			DEBIAN_FRONTEND=noninteractive apt-get update -q; \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus; \
			command -v prometheus >/dev/null || { echo "apt-get installed prometheus but no prometheus is on PATH"; exit 1; }; \
		else \
			echo "The tests need Prometheus' server. Install it with: $(PROMETHEUS_INSTALL)"; \
			echo "(or set ORDERLY_PROMETHEUS_BIN to a prometheus binary)"; \
			exit 1; \
		fi; \
	fi

##@ Build
.PHONY: build
build: ## Build bin/orderly.
	$(GO) build -ldflags "$(LDFLAGS)" -o $(ORDERLY) ./cmd/orderly

$(CONTROLLER_GEN): $(CONTROLLER_GEN_MOD)
	cd hack/tools/controller-gen && $(GO) build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

$(GOLANGCI_LINT): $(GOLANGCI_LINT_MOD)
	@echo "Building golangci-lint (first time only, about 2 minutes)"
	cd hack/tools/golangci-lint && $(GO) build -o $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and the manager's RBAC into config/.
	$(CONTROLLER_GEN) crd rbac:roleName=orderly-manager paths=./... output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

##@ Checks
.PHONY: verify
verify: generate manifests ## Fail when generated files, go.mod or formatting are stale.
	$(GO) mod tidy
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed on:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- api config go.mod go.sum || { echo "Generated files or go.mod are stale: run 'make generate manifests' and 'go mod tidy', then commit."; exit 1; }
	@test -z "$$(git ls-files --others --exclude-standard -- api config)" || { echo "Untracked generated files:"; git ls-files --others --exclude-standard -- api config; exit 1; }

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run --build-tags integration,e2e,bench ./...

##@ Tests
.PHONY: unit
unit: ## Unit tests: pure logic.
	$(GO) test ./...

.PHONY: integration
integration: build ## Integration tests: every controller against a real kube-apiserver and etcd.
	KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test -tags integration -count=1 ./internal/...

.PHONY: e2e
e2e: build ## End-to-end tests: the orderly binary against the full local cluster.
	ORDERLY_BIN=$(ORDERLY) $(GO) test -tags e2e -count=1 -timeout 30m -v ./test/e2e/...

.PHONY: bench
bench: build ## Benchmarks on the local cluster; print figures and ratios to a baseline.
	ORDERLY_BIN=$(ORDERLY) $(GO) test -tags bench -count=1 -timeout 60m -run '^$$' -bench . -benchtime 1x -v ./test/bench/...

##@ Local cluster
.PHONY: dev-up dev-down
dev-up: build ## Start the local cluster.
	$(ORDERLY) dev up
dev-down: build ## Remove the local cluster.
	$(ORDERLY) dev down
