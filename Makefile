# The project's commands. `make test` is what CI runs.
GO ?= go

# Without -trimpath the go command keys every compile of this module's
# packages on the checkout's directory, so a clone in a new folder (CI's)
# compiled all of them again, in every variant make test builds (race,
# plain for the fleets' service binary, fuzz) and relinked every test
# binary: ~290 s of compile and ~100 s of link CPU on two cores. With it, a
# package compiled before from the same source, anywhere on the machine,
# comes from the build cache. It also keeps build paths out of the binaries.
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)

.PHONY: all help build test test-matrix test-rest fuzz-short-idle test-unit test-e2e test-faults test-k8s lint fuzz fuzz-short demo fleet psql faults deps demo-deps clean

# `make` alone builds, as it always has (scripts and CI call it so);
# `make help` lists what else there is.
all: build

# Every target with a `## name: what it does` line above it, one line each,
# in the file's order, the descriptions aligned.
## help: this list; `make` alone builds bin/inventory
help:
	@awk '/^## [a-z][a-z0-9-]*: / { n++; t[n] = substr($$2, 1, length($$2) - 1); d[n] = substr($$0, length($$2) + 5); if (length(t[n]) > w) w = length(t[n]) } \
		END { for (i = 1; i <= n; i++) printf "make %-*s  %s\n", w, t[i], d[i] }' $(firstword $(MAKEFILE_LIST))

## build: compile the service into bin/inventory
build:
	$(GO) build -o bin/inventory ./cmd/inventory

## deps: install (apt) every server the tests and the demo start, if missing
# postgres, redis-server, nginx, etcd, zookeeper, prometheus, chromium,
# libfaketime, patroni (apt, Debian/Ubuntu).
deps:
	./scripts/install-deps.sh

## demo-deps: install only what make demo and make fleet start (apt)
demo-deps:
	./scripts/install-deps.sh --demo

## lint: go vet and a gofmt check
lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# A binary built with -race sleeps a second before it exits (GORACE's
# atexit_sleep_ms, 1000 by default), so that goroutines still running can
# finish a race report: a test binary spends it after its last test, ~40
# seconds of make test in all. A race is reported the moment it happens and
# fails the test it happens in, and the exit status still says so.
export GORACE ?= atexit_sleep_ms=0

# Runs what follows with one Postgres, etcd and ZooKeeper started for all the
# test binaries (named to them in INVENTORY_TEST_* variables) and stopped when
# it ends, pass, fail or Ctrl-C; each binary still starts its own Redis (why:
# internal/testenv's shared). Plain `go test` starts them per binary.
WITH_SERVERS = $(GO) build -o bin/testservers ./internal/testenv/cmd/testservers && $(SERVERS_NICE) bin/testservers --

# Test binaries are linked without DWARF (-w): a fifth less link time, and
# a panic's or a race's stack trace does not need it (Go prints them from
# its own tables).
TEST_FLAGS = -race -count=1 -vet=off -ldflags=-w

# go test links every test binary anew unless -o says where to keep it;
# then a binary whose inputs have not changed comes from the build cache
# instead (warm, the links took ~90 s of make test's CPU). -o wants one
# name per binary, and the commands' test binaries (fleet.test,
# inventory.test) would take internal/fleet's and the module root's: they
# go to a directory of their own, from a go test of their own.
TESTBIN = bin/test
CMDS = ./cmd/fleet ./cmd/inventory

## test: every test, -race, real servers, short fault matrix and fuzz included (CI)
# Every test, with the race detector, against real Postgres, Redis and
# nginx (the short fault matrix included), with a short fuzz run beside
# them.
# Side by side: the short fault matrix, the longest package, which every
# other ended up waiting for; every other package, three at a time at a
# lower CPU priority (nice 5); the short fuzz run at the lowest (nice 19),
# in the time the cores would idle while test binaries wait on their
# servers; the few seconds of test-k8s; and lint, which ran before them
# all and held the matrix back by its 10-20 s. The matrix gets the cores
# when it needs them and the rest takes what is left (measured in
# docs/testing.md).
test: deps
	@$(MAKE) --no-print-directory -j5 lint test-matrix test-rest fuzz-short-idle test-k8s

# Test binaries at once, the matrix's included: most of them wait on
# servers (the matrix's fleets above all), so four keep two cores busier
# than go test's default of one per core.
TEST_P ?= 4

# -vet=off: lint runs the whole of go vet beside them, a superset of the
# checks go test runs before each package.
MATRIX = ./internal/faults/matrix
test-matrix:
	@mkdir -p $(TESTBIN)
	$(GO) test $(TEST_FLAGS) -o $(TESTBIN)/ -timeout 20m $(MATRIX)

# Every package that takes 10 s or more, longest first, then every other
# (go test runs packages in the order named, -p at a time, and names each
# once): started last, the longest ran side by side at the end with the
# other slots idle. Measured inside make test (docs/testing.md): the lock
# backends' ten to forty seconds, in ./...'s order behind the short ones,
# ran on for 44 s after internal/stock, the longest, had ended.
SLOWEST_FIRST = ./internal/stock ./loadtest ./internal/localstack ./internal/fleet ./internal/faults \
	./internal/api ./internal/lock/redislock ./internal/lock/etcdlock ./dashboards ./internal/lock/zklock \
	./internal/client ./internal/lock/redlock ./internal/stampede

# The shared servers run at the tests' priority too: at the matrix's, the
# shared Postgres, etcd and ZooKeeper took CPU the matrix waited for.
test-rest: SERVERS_NICE = nice -n 5
# The commands' packages run beside the rest, under the same servers, and
# so does the module's root package: its test binary (inventory.test) would
# take the name of internal/inventory's, and cmd/inventory's that of both.
test-rest:
	@mkdir -p $(TESTBIN)/cmd $(TESTBIN)/root
	pkgs=$$($(GO) list ./... | grep -v -e '$(patsubst .%,%,$(MATRIX))$$' -e '^inventory$$' $(patsubst .%,-e '%$$',$(CMDS))) && \
	export PKGS="$(SLOWEST_FIRST) $$pkgs" && $(WITH_SERVERS) sh -c '\
		$(GO) test $(TEST_FLAGS) -o $(TESTBIN)/cmd/ -timeout 20m $(CMDS) & cmds=$$!; \
		$(GO) test $(TEST_FLAGS) -o $(TESTBIN)/root/ -timeout 20m . & root=$$!; \
		$(GO) test $(TEST_FLAGS) -o $(TESTBIN)/ -p $$(( $(TEST_P) > 1 ? $(TEST_P) - 1 : 1 )) -timeout 20m $$PKGS; rest=$$?; \
		wait $$cmds && wait $$root && exit $$rest'

fuzz-short-idle:
	@nice -n 19 $(MAKE) --no-print-directory fuzz-short

## test-k8s: render the Kubernetes manifests and decode them strictly, offline
# deploy/k8s is a module of its own.
test-k8s:
	cd deploy/k8s && $(GO) test -count=1 ./...

# The tiers, for iterating (make test runs them all at once). A test joins
# the e2e or faults tier with testenv.InTier; every other test is a unit test.
TIER_PACKAGES = $(addprefix ./,$(sort $(dir $(shell git grep -l 'testenv.InTier(t, testenv.Tier$(1))' -- '*_test.go'))))

# The unit tier's longest first: named in ./...'s order, internal/stock
# started two minutes in and ran on after every other package had ended.
UNIT_SLOWEST_FIRST = ./internal/stock ./internal/localstack ./internal/lock/redislock ./internal/api ./cmd/inventory

## test-unit: the fast tier: logic and one-backend tests (no fleets, browsers, faults)
test-unit: deps
	$(WITH_SERVERS) env INVENTORY_TEST_TIER=unit $(GO) test -race -count=1 -p $(TEST_P) -timeout 20m $(UNIT_SLOWEST_FIRST) ./...

## test-e2e: the fleet and browser tests (two replicas behind nginx, Prometheus, Chromium)
# With the unit tests of their packages.
test-e2e: deps
	$(WITH_SERVERS) env INVENTORY_TEST_TIER=e2e $(GO) test -race -count=1 -p $(TEST_P) -timeout 20m $(call TIER_PACKAGES,E2E)

## test-faults: the short fault matrix: every fault, one run per cell, on both fleets
# With the unit tests of its package.
test-faults: deps
	$(WITH_SERVERS) env INVENTORY_TEST_TIER=faults $(GO) test -race -count=1 -p $(TEST_P) -timeout 20m $(call TIER_PACKAGES,Faults)

# Every fuzz target as package:Name. `go test -fuzz` takes one package and
# one target at a time.
FUZZ_TARGETS = ./internal/api:FuzzDecodeSale ./internal/api:FuzzIdempotencyKey \
	./internal/api:FuzzRequestID ./internal/api:FuzzStrategyParam ./internal/inventory:FuzzValidateProductID \
	./internal/wire:FuzzScanSale ./internal/wire:FuzzProblemJSON ./internal/wire:FuzzScan ./internal/wire:FuzzSaleBody
FUZZTIME ?= 60s
# A count, not a duration: Go 1.26's fuzz coordinator can fail a target with a
# bare "context deadline exceeded" when a duration runs out on a busy machine
# (go.dev/issue/75804, fixed in Go 1.27); a count has no deadline to race.
FUZZTIME_SHORT ?= 3000x

## fuzz: every fuzz target for FUZZTIME each (default 60s; make fuzz FUZZTIME=10m)
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
		$(GO) test -ldflags=-w -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

## fuzz-short: every fuzz target for FUZZTIME_SHORT each (default 3000 inputs)
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

## demo: every strategy on a local fleet, then a flash sale; writes out/demo-report.html
# Installs what is missing while building, starts the local two-replica
# fleet, runs every strategy (250 units, 400 buyers), then a flash sale
# with orders on redis (half the buyers hold a unit; abandoned and
# cancelled carts' units come back and are sold again), prints the
# verdicts and writes out/demo-report.html. DEMO_ARGS are the load
# tester's flags, after the demo's own, so they win:
# make demo DEMO_ARGS='--strategies none,redis,atomic' or DEMO_ARGS='--stock 1000 --buyers 1500'.
DEMO_ARGS ?=
demo:
	GO=$(GO) ./scripts/demo.sh $(DEMO_ARGS)

# What make demo and make faults write goes under out/ (ignored by git).
OUT = out

## faults: every strategy × every fault, RUNS runs a cell (3); writes out/faults.html
RUNS ?= 3
faults: deps
	@mkdir -p $(OUT)
	$(GO) run ./loadtest faults --runs $(RUNS) --json $(OUT)/faults.json --html $(OUT)/faults.html

## fleet: a local fleet on LISTEN (127.0.0.1:8080) until Ctrl-C; STRATEGY=name: its default
# Postgres, Redis, the lock services, 2 replicas and nginx; every
# process's log goes under the directory it prints; STRATEGY (default
# redis) is the fleet default strategy the replicas start with;
# FLEET_ARGS=--postgres-ha runs Postgres as a primary and a synchronous
# standby under Patroni.
LISTEN ?= 127.0.0.1:8080
STRATEGY ?= redis
FLEET_ARGS ?=
# Built, then run: go run exits 1 after a Ctrl-C even when the fleet stopped cleanly and exited 0.
fleet: demo-deps
	@echo "building bin/fleet (go build ./cmd/fleet) …"
	@$(GO) build -o bin/fleet ./cmd/fleet
	bin/fleet $(strip --listen $(LISTEN) --strategy $(STRATEGY) $(FLEET_ARGS))

## psql: psql on the fleet's Postgres (bin/fleet.env); Q='select …' runs one query
# make fleet writes bin/fleet.env while it runs (its Postgres's port
# changes from run to run). Q comes to the recipe through the
# environment, as every variable set on make's command line does, so
# that its quotes reach psql as they were typed.
FLEET_ENV = bin/fleet.env
psql:
	@if [ ! -f $(FLEET_ENV) ]; then \
		echo "make psql: no fleet running here ($(FLEET_ENV) is written by make fleet while it runs): start one with make fleet, in another terminal" >&2; exit 1; fi
	@. ./$(FLEET_ENV) && if ! kill -0 "$$FLEET_PID" 2>/dev/null; then \
		echo "make psql: $(FLEET_ENV) names a fleet whose process $$FLEET_PID is gone (killed?): start one with make fleet" >&2; exit 1; fi && \
		if [ -n "$$Q" ]; then exec psql "$$FLEET_POSTGRES_URL" -c "$$Q"; else exec psql "$$FLEET_POSTGRES_URL"; fi

## clean: remove bin/ and out/ (what builds, make demo and make faults wrote)
clean:
	rm -rf bin $(OUT)
