# dqnflow — the two commands a new user needs are `make run` and `make test`.
GO       ?= go
BIN      := bin
DQNFLOW  := $(BIN)/dqnflow
TEMPORAL := $(BIN)/temporal
# Tests use the local server's `test` database unless DATABASE_URL says
# otherwise; `make run` uses DATABASE_URL or the local `postgres` database.
TEST_DATABASE_URL := $(or $(DATABASE_URL),postgres://postgres@127.0.0.1:5432/test?sslmode=disable)

.PHONY: gpu-binaries all build run test test-short lint bench bench-temporal learn-check record-history temporal clean

all: build

## build: the static dqnflow binary (no cgo; the GPU libraries load at run time)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(DQNFLOW) ./cmd/dqnflow

## temporal: the pinned Temporal dev server (tools/go.mod pins CLI v1.5.1; cached after the first build)
temporal: $(TEMPORAL)
$(TEMPORAL): tools/go.mod tools/go.sum
	cd tools && CGO_ENABLED=0 $(GO) build -o ../$(TEMPORAL) github.com/temporalio/cli/cmd/temporal

## run: the main job on local defaults
run: build temporal
	$(DQNFLOW) dev --demo

## test: every test, against the real PostgreSQL and a real Temporal dev server
test: build temporal
	DATABASE_URL='$(TEST_DATABASE_URL)' DQNFLOW_BIN=$(abspath $(DQNFLOW)) DQNFLOW_TEMPORAL=$(abspath $(TEMPORAL)) \
		$(GO) test -count=1 -timeout 30m ./...

## test-short: unit tests only (no servers, no long runs)
test-short:
	DATABASE_URL='$(TEST_DATABASE_URL)' $(GO) test -short -count=1 ./...

## lint: formatting and vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

## bench: CPU trainer throughput (train steps/s, env steps/s) and the Go benchmarks
bench: build
	$(DQNFLOW) bench --device cpu --json
	$(GO) test -run '^$$' -bench . -benchtime 20x ./trainer/cpu/ ./replay/

## bench-temporal: Temporal overhead per epoch; needs `make run` (or dqnflow dev) running
bench-temporal: build
	$(DQNFLOW) bench --temporal --epochs 50

## record-history: re-record the workflow histories the replay test checks (after an intended workflow change)
record-history: build temporal
	DQNFLOW_TEMPORAL=$(abspath $(TEMPORAL)) $(GO) test ./workflows -run TestRecordHistories -record -count=1

## learn-check: train on the synthetic series with and without its signal and compare with the oracle on the test range (about 4 min of CPU on 2 cores, limit 10; docs/perf/learning-2026-12-01.md)
learn-check: build
	$(DQNFLOW) learn-check --json

clean:
	rm -rf $(BIN) checkpoints .dqnflow

## gpu-binaries: static binaries for a device visit (tools/device/visit.sh runs them on a GPU machine)
gpu-binaries: build
	mkdir -p $(BIN)/gputest
	CGO_ENABLED=0 $(GO) test -c -o $(BIN)/gputest/cuda.test ./gpu/cuda
	CGO_ENABLED=0 $(GO) test -c -o $(BIN)/gputest/gpu.test ./gpu
