# BoardReadyOps Cloud — developer entry points. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The Go toolchain every build, test and image uses, the one go.work's go line requires: go1.27.3
# fixes the standard-library vulnerabilities of go1.26.8 (docs/security.md). The go command
# fetches it from the module proxy once (golang.org/toolchain, about 76 MB). A plain `go` command
# on a machine whose own Go is older fails until GOTOOLCHAIN=go1.27.3 is exported (README.md).
GO_TOOLCHAIN ?= go$(shell sed -n 's/^go //p' $(CURDIR)/go.work)
export GOTOOLCHAIN := $(GO_TOOLCHAIN)
MODULES      := schema pkg charts hack services/brops services/ingest services/lifecycle services/outbox-dispatcher services/operator
SERVICES     := ingest lifecycle outbox-dispatcher operator brops
ROOT_PKG     := github.com/boardreadyops/cloud/...
TOOLS        := $(CURDIR)/bin/tools
GOLANGCI_LINT_VERSION := v2.15.0
GOVULNCHECK_VERSION := v1.9.0
# The Go vulnerability database, from the golang.org/x/vulndb module on the module proxy (its
# data/osv entries, indexed by its cmd/indexdb): `latest` is the newest the proxy has. Set
# VULNCHECK_DB=https://vuln.go.dev to ask the database's own server instead.
VULNDB_VERSION ?= latest
VULNCHECK_DB ?= file://$(TOOLS)/vulndb
CONTROLLER_GEN_VERSION := v0.23.0
CHART        := charts/boardreadyops
# Local development database (hack/pgdev); override DATABASE_URL to use your own.
DEV_DB_DIR   := $(CURDIR)/.data/postgres
DEV_DB_PORT  ?= 55432
DATABASE_URL ?= postgres://postgres@127.0.0.1:$(DEV_DB_PORT)/boardreadyops?sslmode=disable
GOTEST_FLAGS ?= -race -count=1 -timeout 10m

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: test
test: test-rules envtest ## Run every test against a real PostgreSQL (a private one is started unless TEST_DATABASE_URL is set)
	go test $(GOTEST_FLAGS) $(ROOT_PKG)

.PHONY: chaos
chaos: ## Fault-injection suite, full length (crashes, PostgreSQL restarts, GitHub faults, poison input), with reports
	@mkdir -p .data; log=.data/chaos.log; \
	BOARDREADYOPS_CHAOS=full go test -count=1 -v -timeout 30m ./hack/test/chaos 2>&1 | tee $$log | \
		grep --line-buffered -E '^(=== RUN|--- |ok|FAIL)|report:|poison answers'; rc=$${PIPESTATUS[0]}; \
	if [ $$rc -ne 0 ]; then echo "make chaos: failed (rc $$rc); the suite's whole output, also in $$log:"; cat $$log; fi; \
	exit $$rc

.PHONY: envtest
envtest: ## Build (once; cached under ~/.cache/boardreadyops) the etcd and kube-apiserver that the Kubernetes tests start
	@hack/envtest/build-binaries.sh >/dev/null

.PHONY: test-rules
test-rules: ## Check (lint: --lint=all --lint-fatal) and unit-test the Prometheus alert rules with promtool (Debian: apt-get install prometheus)
	@command -v promtool >/dev/null || { echo "promtool not found: apt-get install prometheus (Debian) provides it"; exit 1; }
	cd charts/boardreadyops/rules && promtool check rules --lint=all --lint-fatal boardreadyops.rules.yml && promtool test rules boardreadyops.rules.test.yml

.PHONY: lint
lint: $(TOOLS)/golangci-lint ## gofmt, go vet, golangci-lint (.golangci.yml: staticcheck, errorlint, gocritic, revive, ...) and govulncheck in every module; promtool's rule lint; no tracked file over 1 MiB
	@hack/check-file-sizes.sh
	@$(MAKE) -s test-rules
	@unformatted=$$(gofmt -l $(MODULES)); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	go vet $(ROOT_PKG)
	@# The suites behind build tags: a sweeping change must keep them compiling too.
	cd hack && go vet -tags cluster ./test/cluster/ && go vet -tags monitoring ./test/monitoring/
	@set -e; for m in $(MODULES); do echo "golangci-lint $$m"; (cd $$m && $(TOOLS)/golangci-lint run --allow-parallel-runners --config $(CURDIR)/.golangci.yml ./...); done
	@$(MAKE) -s vulncheck

.PHONY: vulncheck
vulncheck: $(TOOLS)/govulncheck ## govulncheck (reachable vulnerabilities) over every module; docs/security.md says how a finding is handled
	@if [ "$(VULNCHECK_DB)" = "file://$(TOOLS)/vulndb" ]; then $(MAKE) -s vulndb; fi
	@go build -o $(TOOLS)/vulncheck ./hack/vulncheck
	@set -eo pipefail; for m in $(MODULES); do echo "govulncheck $$m"; \
		(cd $$m && $(TOOLS)/govulncheck -db '$(VULNCHECK_DB)' -format json ./... | $(TOOLS)/vulncheck -accepted $(CURDIR)/hack/vulncheck/accepted.txt); done

.PHONY: vulndb
vulndb: ## Build the local Go vulnerability database bin/tools/vulndb from golang.org/x/vulndb@$(VULNDB_VERSION) (module proxy)
	@dir=$$(GOWORK=off go mod download -json golang.org/x/vulndb@$(VULNDB_VERSION) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p'); \
		version=$$(basename "$$dir" | sed 's/.*@//'); \
		if [ "$$(cat $(TOOLS)/vulndb.version 2>/dev/null)" != "$$version" ]; then \
			echo "vulndb $$version"; rm -rf $(TOOLS)/vulndb; \
			GOWORK=off go run golang.org/x/vulndb/cmd/indexdb@$$version -vulns "$$dir/data/osv" -out $(TOOLS)/vulndb && \
			echo "$$version" >$(TOOLS)/vulndb.version; \
		fi

# The tools are rebuilt when the toolchain changes: a linter built by an older Go cannot read a
# newer standard library, and govulncheck reports on the standard library it was built with.
$(TOOLS)/.go-$(GO_TOOLCHAIN):
	@mkdir -p $(TOOLS) && rm -f $(TOOLS)/.go-* $(TOOLS)/golangci-lint $(TOOLS)/govulncheck $(TOOLS)/controller-gen && touch $@

$(TOOLS)/golangci-lint: $(TOOLS)/.go-$(GO_TOOLCHAIN)
	GOBIN=$(TOOLS) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

$(TOOLS)/govulncheck: $(TOOLS)/.go-$(GO_TOOLCHAIN)
	GOBIN=$(TOOLS) go install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION)

$(TOOLS)/controller-gen: $(TOOLS)/.go-$(GO_TOOLCHAIN)
	GOBIN=$(TOOLS) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

.PHONY: generate
generate: $(TOOLS)/controller-gen ## Generate the operator's deepcopy code, its CRD and RBAC rules into the chart, the schema snapshot schema/current (needs PostgreSQL 15) and the Grafana dashboards (hack/dashboards)
	cd services/operator && $(TOOLS)/controller-gen object paths=./api/...
	@# The CRD is generated into files/crds/ and rendered by templates/operator-crd.yaml (not crds/,
	@# which Helm never upgrades); the directory is emptied first so that a renamed kind leaves no stale file.
	rm -rf $(CHART)/files/crds
	cd services/operator && $(TOOLS)/controller-gen crd paths=./api/... output:crd:dir=$(CURDIR)/$(CHART)/files/crds
	cd services/operator && $(TOOLS)/controller-gen rbac:roleName=boardreadyops-operator paths=./internal/controller/... output:rbac:dir=$(CURDIR)/$(CHART)/files
	PATH="$(PG15_BIN):$$PATH" go run ./hack/schemasnap -out schema/current
	go run ./hack/dashboards -out $(CHART)/dashboards

# The schema snapshot is generated with PostgreSQL 15 (Debian 12's postgresql); its bin directory
# goes first on PATH when present.
PG15_BIN     ?= /usr/lib/postgresql/15/bin
GENERATED    := services/operator/api $(CHART)/files schema/current $(CHART)/dashboards

.PHONY: verify-generate
verify-generate: generate ## Fail when generated files differ from what is committed (also new, uncommitted ones)
	@git diff --exit-code -- $(GENERATED) && test -z "$$(git status --porcelain -- $(GENERATED))" || { git status --short -- $(GENERATED); echo "generated files are stale: run make generate and commit"; exit 1; }

.PHONY: dashboards-preview
dashboards-preview: ## Render each dashboard to docs/img/dashboard-*.png with real data: the services under load, a Debian Prometheus, uPlot (npm) in headless Chromium (PROMETHEUS_URL=... renders from that Prometheus instead)
	hack/dashboards/preview.sh

IMAGE_TAG  ?= dev
IMAGE_BASE ?= gcr.io/distroless/static-debian12:nonroot
PUSH       ?=
.PHONY: images
images: ## Build every service's image without a container engine (hack/images) into .data/images; PUSH=registry/prefix pushes them, IMAGE_BASE=local uses a base made from this machine's files
	go run ./hack/images -base '$(IMAGE_BASE)' -tag '$(IMAGE_TAG)' $(if $(PUSH),-push '$(PUSH)',-out .data/images)

.PHONY: cluster-up
cluster-up: ## Start a real single-node Kubernetes cluster (root; docs/kubernetes.md): kubeconfig in .data/cluster/kubeconfig
	@mkdir -p bin && go build -o bin/cluster ./hack/cluster
	bin/cluster up

.PHONY: cluster-down
cluster-down: ## Stop the cluster of make cluster-up and remove what it left (processes, mounts, bridge, iptables chains)
	@mkdir -p bin && go build -o bin/cluster ./hack/cluster
	bin/cluster down

.PHONY: test-cluster
test-cluster: ## End-to-end test on a real single-node cluster (root; not part of make test): images, helm install, scaling, upgrade, uninstall
	go test -tags cluster -count=1 -v -timeout 50m ./hack/test/cluster

.PHONY: test-monitoring
test-monitoring: ## Live test (no root, not part of make test): Prometheus and Alertmanager (Debian) scrape the real services under load; panels, rules, alerts, notifications
	@command -v prometheus >/dev/null || { echo "prometheus not found: apt-get install prometheus (Debian)"; exit 1; }
	@command -v prometheus-alertmanager >/dev/null || { echo "prometheus-alertmanager not found: apt-get install prometheus-alertmanager (Debian)"; exit 1; }
	set -o pipefail; go test -tags monitoring -count=1 -v -timeout 15m ./hack/test/monitoring 2>&1 | grep -v 'points ('

.PHONY: chart-docs
chart-docs: ## Regenerate the chart README's value table from values.yaml comments
	go test ./charts/charttest -run TestReadmeListsEveryValue -count=1 -update

.PHONY: build
build: ## Build every service binary into bin/
	@mkdir -p bin
	@set -e; for s in $(SERVICES); do echo "build bin/$$s"; CGO_ENABLED=0 go build -trimpath -o bin/$$s ./services/$$s; done
	@set -e; for t in pgdev githubsim devkeys demo loadgen; do go build -o bin/$$t ./hack/$$t; done

.PHONY: build-isolated
build-isolated: ## Build each service with GOWORK=off, as container builds do
	@set -e; for s in $(SERVICES); do (cd services/$$s && GOWORK=off CGO_ENABLED=0 go build -trimpath -o /dev/null .); done

.PHONY: tidy
tidy: ## go mod tidy in every module
	@set -e; for m in $(MODULES); do (cd $$m && GOWORK=off go mod tidy); done

.PHONY: db
db: ## Run the local development PostgreSQL in the foreground (data in .data/postgres)
	go run ./hack/pgdev --dir $(DEV_DB_DIR) --port $(DEV_DB_PORT)

.PHONY: migrate
migrate: ## Apply migrations to DATABASE_URL (default: the local development database; start it with make db)
	go run ./services/brops migrate up --database-url '$(DATABASE_URL)'

.PHONY: run
run: build ## Run the product locally: PostgreSQL, migrations and every service (Ctrl-C stops all)
	hack/run.sh $(ARGS)

.PHONY: clean
clean: ## Remove build output (keeps the local database in .data/)
	rm -rf bin
