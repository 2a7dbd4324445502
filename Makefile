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
# golangci-lint with the Kube API Linter (sigs.k8s.io/kube-api-linter) built in, for
# the API types only (.golangci-kal.yml).
GOLANGCI_KAL   := $(BIN)/golangci-lint-kube-api-linter
CRD_REF_DOCS   := $(BIN)/crd-ref-docs
HELM           := $(BIN)/helm
# Pinned in hack/tools/<tool>/go.mod; rebuilt when that file changes.
CONTROLLER_GEN_MOD := hack/tools/controller-gen/go.mod
GOLANGCI_LINT_MOD  := hack/tools/golangci-lint/go.mod
GOLANGCI_KAL_MOD   := hack/tools/kube-api-linter/go.mod
CRD_REF_DOCS_MOD   := hack/tools/crd-ref-docs/go.mod
HELM_MOD           := hack/tools/helm/go.mod
# envtest's API server and etcd, built from source and cached by `orderly dev assets`.
ASSETS = $(shell $(ORDERLY) dev assets)

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

##@ The two commands
.PHONY: run
# `orderly dev run`: the local cluster, a local stand-in beside it for everything the
# samples talk to (PostgreSQL, an S3 store, BIND, the Gateway API, cert-manager,
# Prometheus, a registry with a vulnerability database, a member cluster; a missing
# Debian package is reported with what stays not Ready and how to install it),
# config/samples applied server-side, the manager, a wait until every sample is
# Ready, and a tour. `orderly dev down` removes the cluster and the stand-ins.
run: build ## Start the local cluster with local stand-ins for everything the samples use, apply config/samples, run the manager until Ctrl-C, print a tour.
	$(ORDERLY) dev run

.PHONY: test checks cluster-binaries
# The checks run beside the build of the local cluster's binaries, which integration
# and e2e need: on a fresh machine that build is the longest single step (about 20
# minutes on 2 cores), and the checks spend part of their time downloading modules
# rather than compiling. Integration, e2e and the attacker suite then run side by side:
# each starts API servers of its own (envtest, or the run's own local clusters) and
# spends most of its time waiting on them, so together they take little longer than e2e
# alone (the attacker suite takes about 90 s by itself, less than e2e's waiting shard).
# Each target's output is printed when it ends.
test: prerequisites build ## Install what the tests need, run every check, all three test tiers and the attacker suite.
	$(MAKE) --no-print-directory --output-sync=target -j2 checks cluster-binaries
	$(MAKE) --no-print-directory --output-sync=target -j3 integration e2e attack

# -j1: verify rewrites generated files that lint and unit read (make notes that it
# resets the jobserver for this sub-make). fuzz-short has the slack: the build beside
# the checks takes longer than all of them.
checks: ## verify, lint, unit and fuzz-short, one after another.
	$(MAKE) --no-print-directory -j1 verify lint unit fuzz-short

cluster-binaries: build ## Build (or find in the cache) the local cluster's binaries.
	$(ORDERLY) dev build

##@ Prerequisites
# Everything else `make test` needs (the Kubernetes binaries, controller-gen,
# golangci-lint) is built from the Go module proxy; PostgreSQL's server, used by the
# DevDatabase integration and e2e tests, and Prometheus' server, used by the Canary
# integration and e2e tests and the Canary benchmark, come from the system's packages.
# Where PostgreSQL is found is the same rule as internal/localpg's; Prometheus is found
# on PATH or by $ORDERLY_PROMETHEUS_BIN, as internal/testing/testprom does.
POSTGRES_INSTALL := sudo apt-get install -y postgresql
PROMETHEUS_INSTALL := sudo apt-get install -y prometheus
# MariaDB's server, for the mysql engine's DevDatabase tests, is found where
# internal/testing/testmysql looks: $ORDERLY_MARIADB_BIN_DIR (holding mariadbd and
# mariadb-install-db), else Debian's /usr/sbin/mariadbd and /usr/bin/mariadb-install-db.
# The package's own service is not wanted: the tests start servers of their own
# (where policy-rc.d forbids starting services, as in containers, it is not started).
MARIADB_INSTALL := sudo apt-get install -y mariadb-server
# The OCI registry of the image test (hack/image) is found where internal/testing/testregistry
# looks: $ORDERLY_REGISTRY_BIN, else docker-registry on PATH.
REGISTRY_INSTALL := sudo apt-get install -y docker-registry
# The DNS server of the ServiceDomain tests is found where internal/testing/testdns looks:
# $ORDERLY_NAMED_BIN, else named on PATH or /usr/sbin/named (Debian's bind9).
NAMED_INSTALL := sudo apt-get install -y bind9
# rpm and rpmbuild make the real RPM databases of the image scanner's test images
# (internal/testing/testimages).
RPM_INSTALL := sudo apt-get install -y rpm

# apt_install is the branch of a prerequisite that is missing: as root, with apt-get,
# it installs Debian package $(1) ($(2): what it is, for what) and checks with the shell
# test $(3) that it came ($(4): what is absent when it did not); otherwise it runs $(5),
# the commands that say how to install it, and fails.
comma := ,
apt_install = if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "Installing $(2)"; \
		DEBIAN_FRONTEND=noninteractive apt-get update -q; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(1); \
		$(3) || { echo "apt-get installed $(1) but $(4)"; exit 1; }; \
	else \
		$(5) \
		exit 1; \
	fi

.PHONY: prerequisites
prerequisites: ## Install PostgreSQL's, MariaDB's and Prometheus' servers, an OCI registry, a DNS server (bind9) and rpm for the tests when missing (apt-get, as root); otherwise say how.
	@if [ -n "$${ORDERLY_POSTGRES_BIN_DIR:-}" ]; then \
		test -x "$$ORDERLY_POSTGRES_BIN_DIR/initdb" || { echo "ORDERLY_POSTGRES_BIN_DIR=$$ORDERLY_POSTGRES_BIN_DIR holds no initdb"; exit 1; }; \
	elif ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then \
		$(call apt_install,postgresql,PostgreSQL (Debian's postgresql package) for the tests,compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null,no /usr/lib/postgresql/*/bin/initdb is there,echo "The tests need PostgreSQL's server binaries. Install them with: $(POSTGRES_INSTALL)"; echo "(or set ORDERLY_POSTGRES_BIN_DIR to a directory holding initdb$(comma) pg_ctl and postgres)";); \
	fi
	@if [ -n "$${ORDERLY_MARIADB_BIN_DIR:-}" ]; then \
		test -x "$$ORDERLY_MARIADB_BIN_DIR/mariadbd" -a -x "$$ORDERLY_MARIADB_BIN_DIR/mariadb-install-db" || { echo "ORDERLY_MARIADB_BIN_DIR=$$ORDERLY_MARIADB_BIN_DIR holds no mariadbd and mariadb-install-db"; exit 1; }; \
	elif ! [ -x /usr/sbin/mariadbd -a -x /usr/bin/mariadb-install-db ]; then \
		$(call apt_install,mariadb-server,MariaDB (Debian's mariadb-server package) for the tests,[ -x /usr/sbin/mariadbd -a -x /usr/bin/mariadb-install-db ],no /usr/sbin/mariadbd and /usr/bin/mariadb-install-db are there,echo "The tests need MariaDB's server. Install it with: $(MARIADB_INSTALL)"; echo "(or set ORDERLY_MARIADB_BIN_DIR to a directory holding mariadbd and mariadb-install-db)";); \
	fi
	@if [ -n "$${ORDERLY_PROMETHEUS_BIN:-}" ]; then \
		test -x "$$ORDERLY_PROMETHEUS_BIN" || { echo "ORDERLY_PROMETHEUS_BIN=$$ORDERLY_PROMETHEUS_BIN is not an executable"; exit 1; }; \
	elif ! command -v prometheus >/dev/null; then \
		$(call apt_install,prometheus,Prometheus (Debian's prometheus package) for the tests,command -v prometheus >/dev/null,no prometheus is on PATH,echo "The tests need Prometheus' server. Install it with: $(PROMETHEUS_INSTALL)"; echo "(or set ORDERLY_PROMETHEUS_BIN to a prometheus binary)";); \
	fi
	@if [ -n "$${ORDERLY_REGISTRY_BIN:-}" ]; then \
		test -x "$$ORDERLY_REGISTRY_BIN" || { echo "ORDERLY_REGISTRY_BIN=$$ORDERLY_REGISTRY_BIN is not an executable"; exit 1; }; \
	elif ! command -v docker-registry >/dev/null; then \
		$(call apt_install,docker-registry,an OCI registry (Debian's docker-registry package) for the image tests,command -v docker-registry >/dev/null,no docker-registry is on PATH,echo "The image tests need an OCI registry. Install it with: $(REGISTRY_INSTALL)"; echo "(or set ORDERLY_REGISTRY_BIN to a registry binary)";); \
	fi
	@if [ -n "$${ORDERLY_NAMED_BIN:-}" ]; then \
		test -x "$$ORDERLY_NAMED_BIN" || { echo "ORDERLY_NAMED_BIN=$$ORDERLY_NAMED_BIN is not an executable"; exit 1; }; \
	elif ! command -v named >/dev/null && ! [ -x /usr/sbin/named ]; then \
		$(call apt_install,bind9,a DNS server (Debian's bind9 package) for the ServiceDomain tests,[ -x /usr/sbin/named ],no /usr/sbin/named is there,echo "The ServiceDomain tests need a DNS server. Install it with: $(NAMED_INSTALL)"; echo "(or set ORDERLY_NAMED_BIN to a named binary)";); \
	fi
	@if ! command -v rpmbuild >/dev/null; then \
		$(call apt_install,rpm,rpm and rpmbuild (Debian's rpm package) for the image scanner's RPM test images,command -v rpmbuild >/dev/null,no rpmbuild is on PATH,echo "The image scanner's tests need rpm and rpmbuild. Install them with: $(RPM_INSTALL)";); \
	fi

##@ Build
.PHONY: build
build: ## Build bin/orderly (static: it is also what the image holds).
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(ORDERLY) ./cmd/orderly

# IMAGE_PUSH=registry/repository:tag pushes the image too (IMAGE_INSECURE=1 for a
# plain-HTTP registry on loopback).
.PHONY: image
image: build ## Build the manager image without Docker (hack/image) from bin/orderly into the OCI layout bin/image.
	rm -rf $(BIN)/image
	$(GO) run ./hack/image --binary linux/$$($(GO) env GOARCH)=$(ORDERLY) --version $(VERSION) --revision $(COMMIT) \
		--oci-layout $(BIN)/image $(if $(IMAGE_PUSH),--push $(IMAGE_PUSH)) $(if $(IMAGE_INSECURE),--insecure)

PLUGIN_DIR ?= $(HOME)/.local/bin
.PHONY: install-plugin
install-plugin: build ## Install bin/orderly as the kubectl plugin kubectl-orderly, with its completion, into PLUGIN_DIR (default ~/.local/bin; it must be on PATH).
	install -d $(PLUGIN_DIR)
	install -m 0755 $(ORDERLY) $(PLUGIN_DIR)/kubectl-orderly
	printf '#!/bin/sh\n# kubectl (1.26 and later) runs this to complete `kubectl orderly ...`.\nexec kubectl-orderly __complete "$$@"\n' > $(PLUGIN_DIR)/kubectl_complete-orderly
	chmod 0755 $(PLUGIN_DIR)/kubectl_complete-orderly
	@echo "installed $(PLUGIN_DIR)/kubectl-orderly: try \`kubectl orderly status\`"

# `make dist`: the kubectl plugin's release archives and its krew manifest
# (docs/install.md, "Publishing the plugin"). DIST_PLATFORMS must match Platforms in
# hack/krew/main.go, which refuses a missing binary. A release sets DIST_BASE_URL to
# where it uploads the archives: the manifest's URIs point there.
DIST           := $(CURDIR)/dist
DIST_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
DIST_BASE_URL  ?= https://orderly.dev/releases/download/$(VERSION)
DIST_LICENSE   ?= LICENSE
.PHONY: dist
dist: ## Build kubectl-orderly for linux and darwin, amd64 and arm64 (the flags of `make build`), pack each with LICENSE into dist/*.tar.gz and write the krew manifest dist/orderly.yaml.
	@test -f $(DIST_LICENSE) || { echo "$(DIST_LICENSE) is missing: every archive carries the license (krew's index asks for one); add it, or set DIST_LICENSE"; exit 1; }
	rm -rf $(DIST)
	for p in $(DIST_PLATFORMS); do \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -ldflags "$(LDFLAGS)" -o $(DIST)/$${p%/*}-$${p#*/}/kubectl-orderly ./cmd/orderly; \
	done
	$(MAKE) --no-print-directory krew

.PHONY: krew
krew: ## Pack the binaries of `make dist` and write the krew manifest dist/orderly.yaml (hack/krew: version, URIs, sha256s).
	$(GO) run ./hack/krew --version $(VERSION) --dist $(DIST) --license $(DIST_LICENSE) --base-url $(DIST_BASE_URL) --template hack/krew/orderly.yaml.tmpl
	$(GO) test -count=1 -run TestDistManifest ./hack/krew/

$(CONTROLLER_GEN): $(CONTROLLER_GEN_MOD)
	cd hack/tools/controller-gen && $(GO) build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

$(CRD_REF_DOCS): $(CRD_REF_DOCS_MOD)
	cd hack/tools/crd-ref-docs && $(GO) build -o $(CRD_REF_DOCS) github.com/elastic/crd-ref-docs

$(GOLANGCI_LINT): $(GOLANGCI_LINT_MOD)
	@echo "Building golangci-lint (first time only, about 2 minutes)"
	cd hack/tools/golangci-lint && $(GO) build -o $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

$(GOLANGCI_KAL): $(GOLANGCI_KAL_MOD)
	@echo "Building golangci-lint with the Kube API Linter (first time only, about 2 minutes)"
	cd hack/tools/kube-api-linter && $(GO) build -o $(GOLANGCI_KAL) sigs.k8s.io/kube-api-linter/cmd/golangci-lint-kube-api-linter

$(HELM): $(HELM_MOD)
	@echo "Building helm (first time only, about 3 minutes)"
	cd hack/tools/helm && $(GO) build -o $(HELM) helm.sh/helm/v4/cmd/helm

# charts/orderly gets one ClusterRole per controller, so that a controller switched off
# gets no RBAC: each is generated from the +kubebuilder:rbac markers of the packages
# listed here (the controller's own, and those only it runs; '+' separates packages).
# charts/chart_test.go checks that together they grant exactly config/rbac/role.yaml
# and that every controller has one.
CHART := charts/orderly
CHART_RBAC := \
	backupverification=./internal/controller/data/backupverification \
	canary=./internal/controller/delivery/canary \
	databaseserver=./internal/controller/data/databaseserver \
	devdatabase=./internal/controller/data/devdatabase \
	imagepolicy=./internal/controller/policy/imagepolicy \
	imagescan=./internal/controller/policy/imagescan \
	labelpolicy=./internal/controller/policy/labelpolicy+./internal/webhook/... \
	placement=./internal/controller/fleet/placement \
	secretrotation=./internal/controller/secrets/secretrotation \
	servicedomain=./internal/controller/network/servicedomain \
	sleepschedule=./internal/controller/power/sleepschedule \
	tenant=./internal/controller/tenancy/tenant \
	metrics-auth=./cmd/orderly

.PHONY: chart
chart: $(CONTROLLER_GEN) ## Copy the CRDs, people's ClusterRoles, alerting rules and Grafana dashboard from config/ into charts/orderly; generate its per-controller RBAC and the kustomizations of config/crd and config/rbac.
	rm -f $(CHART)/crds/*.yaml $(CHART)/files/rbac/*.yaml $(CHART)/files/prometheus/*.yaml $(CHART)/files/grafana/*.json
	mkdir -p $(CHART)/crds $(CHART)/files/rbac $(CHART)/files/prometheus $(CHART)/files/grafana
	cp config/crd/bases/*.yaml $(CHART)/crds/
	cp config/rbac/tenant_admin_role.yaml config/rbac/user_roles.yaml $(CHART)/files/rbac/
	cp config/prometheus/rules.yaml $(CHART)/files/prometheus/
	cp config/grafana/orderly.json $(CHART)/files/grafana/
	@# config/default reaches the CRDs and config/rbac through kustomizations listing
	@# their files, so that a new file cannot be left out.
	{ echo "# Generated by \`make chart\`: every CRD of bases/, for config/default."; \
	  echo "apiVersion: kustomize.config.k8s.io/v1beta1"; echo "kind: Kustomization"; echo "resources:"; \
	  for f in config/crd/bases/*.yaml; do echo "  - bases/$${f##*/}"; done; } > config/crd/kustomization.yaml
	{ echo "# Generated by \`make chart\`: every manifest of config/rbac, for config/default. Named"; \
	  echo "# without .yaml so that \`kubectl apply -f config/rbac\` does not take it for a manifest."; \
	  echo "apiVersion: kustomize.config.k8s.io/v1beta1"; echo "kind: Kustomization"; echo "resources:"; \
	  for f in config/rbac/*.yaml; do echo "  - $${f##*/}"; done; } > config/rbac/Kustomization
	for entry in $(CHART_RBAC); do \
		name=$${entry%%=*}; paths=""; \
		for p in $$(tr '+' ' ' <<<"$${entry#*=}"); do paths="$$paths paths=$$p"; done; \
		$(CONTROLLER_GEN) rbac:roleName=orderly-manager-$$name $$paths output:rbac:stdout > $(CHART)/files/rbac/$$name.yaml; \
	done

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and the manager's RBAC into config/.
	$(CONTROLLER_GEN) crd rbac:roleName=orderly-manager paths=./... output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: api-docs
api-docs: $(CRD_REF_DOCS) ## Generate the API reference docs/api.md from the types in api/.
	$(CRD_REF_DOCS) --source-path=./api --config=hack/api-docs.yaml --renderer=markdown --output-path=docs/api.md --log-level=warn

##@ Checks
.PHONY: verify
verify: generate manifests api-docs chart ## Fail when generated files, go.mod or formatting are stale.
	$(GO) mod tidy
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed on:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- api config docs/api.md go.mod go.sum || { echo "Generated files or go.mod are stale: run 'make generate manifests api-docs' and 'go mod tidy', then commit."; exit 1; }
	@test -z "$$(git ls-files --others --exclude-standard -- api config)" || { echo "Untracked generated files:"; git ls-files --others --exclude-standard -- api config; exit 1; }
	@git diff --exit-code -- $(CHART) || { echo "charts/orderly is stale: run 'make chart', then commit."; exit 1; }
	@test -z "$$(git ls-files --others --exclude-standard -- $(CHART))" || { echo "Untracked chart files:"; git ls-files --others --exclude-standard -- $(CHART); exit 1; }

.PHONY: lint
lint: $(GOLANGCI_LINT) $(GOLANGCI_KAL) $(HELM) ## Run golangci-lint, the Kube API Linter on api/ and helm lint.
	$(GOLANGCI_LINT) run --build-tags integration,e2e,bench ./...
	$(GOLANGCI_KAL) run --config .golangci-kal.yml ./api/...
	$(HELM) lint --strict $(CHART)
	$(HELM) lint --strict $(CHART) --set webhook.certManager.enabled=true,metrics.serviceMonitor.enabled=true,metrics.prometheusRule.enabled=true,metrics.grafanaDashboard.enabled=true,controllers.canary.enabled=false

##@ Tests
.PHONY: unit
unit: ## Unit tests: pure logic, under the race detector.
	$(GO) test -race ./...

.PHONY: integration
integration: build ## Integration tests: every controller against a real kube-apiserver and etcd.
	KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test -tags integration -count=1 ./internal/...

.PHONY: integration-race
# Not part of make test: under the race detector the tier takes several times as long.
integration-race: build ## Integration tests under the race detector.
	KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test -race -tags integration -count=1 -timeout 60m ./internal/...

.PHONY: e2e
# The e2e tests that mostly wait on real time run beside the others, on a second local
# cluster (hack/e2e-shards.sh); together they take about 430 s of the tier's 870.
# TestSamples (every sample Ready with its stand-ins, as `make run` shows them; about
# 35 s, most of it waiting on the stand-ins and the cluster) runs with them, since its
# stand-ins' cert-manager must not meet the one TestServiceDomainEndToEnd runs.
E2E_WAITING = ^(TestSecretRotationExternalNoRestartStorm|TestPlacementDivideFailoverReturn|TestSleepScheduleCrossesABoundary|TestSecretRotationPostgresRole|TestSamples)$$
e2e: build ## End-to-end tests: the orderly binary against the full local cluster (two shards, each on a cluster of its own).
	$(GO) test -tags e2e -c -o $(BIN)/e2e.test ./test/e2e
	ORDERLY_BIN=$(ORDERLY) hack/e2e-shards.sh $(BIN)/e2e.test '$(E2E_WAITING)'

.PHONY: attack
# What a user with edit in one namespace tries through every capability, each attempt
# beside a control (test/attack, CONTRIBUTING.md): a local cluster and a manager of its
# own, about 90 s.
attack: build ## Attacker tests: a namespace editor's attempts to reach beyond her namespace through every kind, each beside a control.
	$(GO) test -tags e2e -c -o $(BIN)/attack.test ./test/attack
	cd test/attack && ORDERLY_BIN=$(ORDERLY) $(BIN)/attack.test -test.v -test.count=1 -test.timeout=30m

# Every Go fuzz target (func FuzzX in a *_test.go file: the parsers and compilers of
# user input), one after another, each for FUZZTIME (hack/fuzz.sh). A failing input is
# kept in the package's testdata/fuzz/FuzzX/, where `go test` runs it from then on.
FUZZTIME ?= 60s
.PHONY: fuzz fuzz-short
fuzz: ## Fuzz every parser and compiler of user input, FUZZTIME each (default 60s); a failing input stays under the package's testdata/fuzz.
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

fuzz-short: ## Every fuzz target for 5s (part of make test's checks).
	FUZZTIME=5s hack/fuzz.sh

.PHONY: bench
bench: build ## Benchmarks on the local cluster; print figures and ratios to a baseline.
	ORDERLY_BIN=$(ORDERLY) $(GO) test -tags bench -count=1 -timeout 120m -run '^$$' -bench . -benchtime 1x -v ./test/bench/...

##@ Local cluster
.PHONY: dev-up dev-down
dev-up: build ## Start the local cluster.
	$(ORDERLY) dev up
dev-down: build ## Remove the local cluster.
	$(ORDERLY) dev down
