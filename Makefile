# The project's commands. `make test` is what CI runs.
GO ?= go

.PHONY: all build test lint demo fleet deps clean

all: build

## build: compile the service into bin/inventory
build:
	$(GO) build -o bin/inventory ./cmd/inventory

## deps: install postgres, redis-server and nginx if missing (apt, Debian/Ubuntu)
deps:
	./scripts/install-deps.sh

## lint: go vet and a gofmt check
lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## test: every test, with the race detector, against real Postgres, Redis and nginx
test: deps lint
	$(GO) test -race -count=1 -timeout 20m ./...

## demo: start the local two-replica fleet, run every strategy, print the verdict table
demo: deps
	$(GO) run ./loadtest

## fleet: run Postgres, Redis, 2 replicas and nginx on 127.0.0.1:8080 until Ctrl-C (try the API with curl)
fleet: deps
	$(GO) run ./cmd/fleet

clean:
	rm -rf bin
