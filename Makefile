# dqnflow — the two commands a new user needs are `make run` and `make test`.
GO       ?= go
# The Go release go.mod's toolchain line names builds, tests and checks
# everything, on every machine: a machine whose go.env says
# GOTOOLCHAIN=local (Debian's and this project's CI kind do) would
# otherwise build with its own older release and ship its standard
# library's vulnerabilities. "+auto": a module that needs a newer Go still
# gets it. The first use fetches it through the module proxy (about 8 s,
# then cached). `make GOTOOLCHAIN=local ...` overrides.
export GOTOOLCHAIN := $(shell sed -n 's/^toolchain //p' go.mod)+auto
BIN      := bin
DQNFLOW  := $(BIN)/dqnflow
TEMPORAL := $(BIN)/temporal
VERSITYGW := $(BIN)/versitygw
# Tests use the local server's `test` database unless DATABASE_URL says
# otherwise; `make run` uses DATABASE_URL or the local server's `dqnflow`
# database (created when missing), never the server's admin database.
TEST_DATABASE_URL := $(or $(DATABASE_URL),postgres://postgres@127.0.0.1:5432/test?sslmode=disable)

.PHONY: test-deps go-version gpu-binaries gpu-binaries-wf crosscheck-carry carry-check all build cross run test test-sm90a test-short lint bench bench-temporal learn-check record-history temporal versitygw clean fuzz-short fuzz chaos vulncheck vulndb vulncheck-devserver vulncheck-test

all: build

## build: the static dqnflow binary (no cgo; the GPU libraries load at run time)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(DQNFLOW) ./cmd/dqnflow

## cross: the binary for every platform users run it on (the control-plane commands everywhere; CUDA loads at run time on Linux)
PLATFORMS := linux/amd64 linux/arm64 darwin/arm64 windows/amd64
cross:
	@for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; ext=; [ $$os = windows ] && ext=.exe; \
		echo "build $$os/$$arch"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -o $(BIN)/cross/dqnflow-$$os-$$arch$$ext ./cmd/dqnflow || exit 1; \
	done

## temporal: the pinned Temporal dev server (tools/go.mod pins CLI v1.5.1; cached after the first build)
temporal: $(TEMPORAL)
$(TEMPORAL): tools/go.mod tools/go.sum
	cd tools && CGO_ENABLED=0 $(GO) build -o ../$(TEMPORAL) github.com/temporalio/cli/cmd/temporal

## versitygw: the S3-compatible server the object-store tests start (tools/versitygw pins v1.8.0; Apache-2.0; cached after the first build)
versitygw: $(VERSITYGW)
$(VERSITYGW): tools/versitygw/go.mod tools/versitygw/go.sum
	cd tools/versitygw && CGO_ENABLED=0 $(GO) build -trimpath -o ../../$(VERSITYGW) github.com/versity/versitygw/cmd/versitygw

## run: the main job on local defaults
run: build temporal
	$(DQNFLOW) dev --demo

## go-version: the Go release that builds everything here (go.mod's toolchain line, through GOTOOLCHAIN above)
go-version:
	@$(GO) version

## test-deps: find or install what the tests need besides Go (PostgreSQL running, NVRTC 11.8, OpenBLAS, Chromium; tools/test-deps.sh), or stop with the command that installs it
test-deps:
	@tools/test-deps.sh

## test: every test, against the real PostgreSQL, a real Temporal dev server, a real S3 server (versitygw) and headless Chromium (UI screenshots in artifacts/); sets up what it needs first (test-deps)
# As root, the checkpoint tests that mount a full or read-only tmpfs must
# run, never skip (CI runs as root).
REQUIRE_ROOT := $(if $(filter 0,$(shell id -u)),DQNFLOW_REQUIRE_ROOT=1)
# test-deps runs before the builds (minutes the first time), so a missing
# piece stops the target in seconds. With the libraries present, a test
# that cannot load them fails instead of skipping.
test: test-deps
	@$(MAKE) --no-print-directory build temporal versitygw
	DATABASE_URL='$(TEST_DATABASE_URL)' DQNFLOW_BIN=$(abspath $(DQNFLOW)) DQNFLOW_TEMPORAL=$(abspath $(TEMPORAL)) DQNFLOW_S3=$(abspath $(VERSITYGW)) \
		DQNFLOW_ARTIFACTS=$(abspath artifacts) DQNFLOW_REQUIRE_NVRTC=1 DQNFLOW_REQUIRE_OPENBLAS=1 $(REQUIRE_ROOT) \
		$(GO) test -count=1 -timeout 30m ./...

## test-sm90a: the kernels compiled by NVRTC 12 as well, with the sm_90a (wgmma) GEMMs that NVRTC 11.8 cannot target (NVRTC 12 from Debian trixie, unpacked into bin/nvrtc12 by tools/nvrtc12.sh; CI runs it)
test-sm90a:
	tools/nvrtc12.sh $(abspath $(BIN))/nvrtc12
	DQNFLOW_NVRTC=$(abspath $(BIN))/nvrtc12/libnvrtc.so.12 LD_LIBRARY_PATH=$(abspath $(BIN))/nvrtc12 DQNFLOW_REQUIRE_SM90A=1 DQNFLOW_REQUIRE_NVRTC=1 \
		$(GO) test -count=1 -timeout 20m -run TestKernelsCompileForHopper -v ./gpu/step

## test-short: unit tests only (no servers, no long runs)
test-short:
	DATABASE_URL='$(TEST_DATABASE_URL)' $(GO) test -short -count=1 ./...

## chaos: the heavy fault-injection tests (docs/reliability.md), beside those in `make test`
chaos: build temporal versitygw
	DATABASE_URL='$(TEST_DATABASE_URL)' DQNFLOW_BIN=$(abspath $(DQNFLOW)) DQNFLOW_TEMPORAL=$(abspath $(TEMPORAL)) DQNFLOW_S3=$(abspath $(VERSITYGW)) \
		$(GO) test -tags chaos -count=1 -timeout 30m -v -run 'KillInEveryStage|KillInsideACheckpointWrite|WorkflowWorkerKill|TemporalServerKill|PostgreSQLRestart|FalseAlarm|SixteenConcurrentRuns|DamagedCheckpointIsSkipped' ./e2e

## fuzz-short: every fuzz target for a fixed number of executions each (about 5 s apiece), one worker: the CI pass.
## Counts, not a duration: Go 1.26's coordinator can report a duration's expiry as a failure,
## "context deadline exceeded" with no failing input (go.dev/issue/75804, fixed in Go 1.27);
## a count has no deadline to race. FUZZTIME=30s (or 100000x) overrides every target's budget.
FUZZTIME ?=
FUZZ_TARGETS := prices:FuzzParseCSVAcceptsOnlyValidBars:50000x config:FuzzDecodeIsStrictAndRoundTrips:50000x \
	checkpoint:FuzzDecodeAcceptsOnlyWhatItCanWriteBack:15000x checkpoint:FuzzVerifyDetectsEveryChange:2500x
fuzz-short:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$${rest##*:}; \
		if [ -n "$(FUZZTIME)" ]; then budget=$(FUZZTIME); fi; \
		echo "fuzz $$name ($$budget)"; \
		$(GO) test ./$$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $$budget -parallel 1; \
	done

## fuzz: the same targets for longer (FUZZTIME=10m make fuzz); new findings land in testdata/fuzz.
## A duration can end in the go.dev/issue/75804 false failure above: one with no new file under testdata/fuzz is that.
fuzz: FUZZTIME = 2m
fuzz: fuzz-short

## vulncheck: govulncheck (pinned in tools/govulncheck) over every package, failing on a called vulnerable symbol, against the vulnerability data of the golang.org/x/vulndb version pinned in tools/govulncheck/localdb/pin.go (a dated snapshot; GOVULNDB=URL checks against that database instead)
GOVULNCHECK := $(BIN)/govulncheck
LOCALDB     := $(BIN)/localdb
VULNDB_DIR  := $(BIN)/vulndb
# Older pinned data fails the check (0: any age); see docs/reliability.md.
VULNDB_MAX_AGE_DAYS ?= 60
# VULNDB_WARN_STALE=1: data older than that is a loud warning, not a failure (CI)
VULNDB_WARN_STALE ?=
VULNCHECK_DB = $(or $(GOVULNDB),file://$(abspath $(VULNDB_DIR)))
$(GOVULNCHECK): tools/govulncheck/go.mod tools/govulncheck/go.sum
	cd tools/govulncheck && CGO_ENABLED=0 $(GO) build -o ../../$(GOVULNCHECK) golang.org/x/vuln/cmd/govulncheck
$(LOCALDB): tools/govulncheck/go.mod tools/govulncheck/go.sum $(wildcard tools/govulncheck/localdb/*.go)
	cd tools/govulncheck && CGO_ENABLED=0 $(GO) build -o ../../$(LOCALDB) ./localdb

## vulndb: the local vulnerability database (bin/vulndb) from the pinned golang.org/x/vulndb version, through the module proxy
vulndb: $(LOCALDB)
	$(LOCALDB) -out $(VULNDB_DIR) -max-age-days $(VULNDB_MAX_AGE_DAYS) $(if $(VULNDB_WARN_STALE),-warn-stale) -go $(GO)

vulncheck: $(GOVULNCHECK) $(if $(GOVULNDB),,vulndb)
	tools/govulncheck/vulncheck.sh $(GOVULNCHECK) $(VULNCHECK_DB) ./...

## vulncheck-devserver: the same check over the pinned Temporal dev server binary (tools/go.mod; binary mode); CI reports it without failing (docs/reliability.md)
vulncheck-devserver: $(GOVULNCHECK) $(if $(GOVULNDB),,vulndb) temporal
	tools/govulncheck/vulncheck.sh $(GOVULNCHECK) $(VULNCHECK_DB) -mode binary $(TEMPORAL)

## vulncheck-test: the tests of the check itself (the database builder, and govulncheck failing on a called vulnerable symbol)
vulncheck-test: $(GOVULNCHECK)
	cd tools/govulncheck && $(GO) vet ./... && GOVULNCHECK=$(abspath $(GOVULNCHECK)) $(GO) test -count=1 ./...

## lint: formatting and vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags chaos ./e2e
	@out=$$(git ls-files 'docs/perf/learning-*/*.json' 'docs/perf/learning-*/*.log'); if [ -n "$$out" ]; then echo "raw learning output committed unpacked (tools/pack-raw.sh, docs/perf/README.md):"; echo "$$out" | head; exit 1; fi

## bench: CPU trainer throughput on gonum and on the machine's BLAS (auto), with the PyTorch CPU reference beside it when python3 has torch; the Go benchmarks
bench: build
	$(DQNFLOW) bench --device cpu --blas gonum --pytorch off --json
	$(DQNFLOW) bench --device cpu --blas auto --json
	$(GO) test -run '^$$' -bench . -benchtime 20x ./trainer/cpu/ ./replay/

## bench-temporal: Temporal overhead per epoch; needs `make run` (or dqnflow dev) running
bench-temporal: build
	$(DQNFLOW) bench --temporal --epochs 50

## record-history: re-record the workflow histories the replay test checks (after an intended workflow change)
record-history: build temporal
	DQNFLOW_TEMPORAL=$(abspath $(TEMPORAL)) $(GO) test ./workflows -run TestRecordHistories -record -count=1

## learn-check: train on the synthetic series with and without its signal and compare with the oracle on the test range (about 70 s on 2 cores with OpenBLAS, limit 10 min; docs/perf/learning-2026-12-05.md, cpu-blas-2026-12-01.md)
learn-check: build
	$(DQNFLOW) learn-check --json

clean:
	rm -rf $(BIN) checkpoints .dqnflow artifacts

## gpu-binaries: static binaries for a device visit (tools/device/visit.sh runs them on a GPU machine)
gpu-binaries:
	mkdir -p $(BIN)/gputest
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/gputest/dqnflow ./cmd/dqnflow
	CGO_ENABLED=0 $(GO) test -c -trimpath -ldflags='-s -w' -o $(BIN)/gputest/cuda.test ./gpu/cuda
	CGO_ENABLED=0 $(GO) test -c -trimpath -ldflags='-s -w' -o $(BIN)/gputest/gpu.test ./gpu
	CGO_ENABLED=0 $(GO) test -c -trimpath -ldflags='-s -w' -o $(BIN)/gputest/step.test ./gpu/step
	CGO_ENABLED=0 $(GO) test -c -trimpath -ldflags='-s -w' -o $(BIN)/gputest/device.test ./gpu/device
	CGO_ENABLED=0 $(GO) test -c -trimpath -ldflags='-s -w' -o $(BIN)/gputest/workflows.test ./workflows
	CGO_ENABLED=0 $(GO) test -c -trimpath -ldflags='-s -w' -o $(BIN)/gputest/backend.test ./backend
	CGO_ENABLED=0 $(GO) test -c -trimpath -ldflags='-s -w' -o $(BIN)/gputest/market.test ./market
	# xz: the eight binaries must travel with the working tree in 64 MiB. At -9 xz's 64 MiB dictionary
	# sees what the test binaries share (the gpu packages' tests are three binaries since ADR 0044): about
	# 27 MB, against 47 MB at the default level
	rm -f $(BIN)/gputest.tgz
	XZ_OPT=-9 tar cJf $(BIN)/gputest.txz -C $(BIN) gputest
	tools/device/carry-check.sh $(BIN)/gputest.txz

## gpu-binaries-wf: what visit.sh part walkforward carries with the packed corpus (tools/device/pack-corpus.sh): dqnflow and the gpu and cuda test binaries (about 22 MB as xz)
gpu-binaries-wf:
	mkdir -p $(BIN)/gputest
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/gputest/dqnflow ./cmd/dqnflow
	CGO_ENABLED=0 $(GO) test -c -trimpath -ldflags='-s -w' -o $(BIN)/gputest/cuda.test ./gpu/cuda
	CGO_ENABLED=0 $(GO) test -c -trimpath -ldflags='-s -w' -o $(BIN)/gputest/gpu.test ./gpu
	tar cJf $(BIN)/gputest-wf.txz -C $(BIN) gputest/dqnflow gputest/cuda.test gputest/gpu.test
	tools/device/carry-check.sh $(BIN)/gputest-wf.txz .corpus/corpus.tar.xz

## crosscheck-carry: what visit.sh part crosscheck carries (with part bench or pytorch): the dqnflow binary alone and the Go reference case, packed (about 14 and 16 MB)
crosscheck-carry:
	mkdir -p $(BIN)/gputest
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/gputest/dqnflow ./cmd/dqnflow
	tar cJf $(BIN)/gputest-bench.txz -C $(BIN) gputest/dqnflow
	$(GO) run ./bench/pytorch/refcase -out $(BIN)/refcase.safetensors
	xz -f $(BIN)/refcase.safetensors
	tools/device/carry-check.sh $(BIN)/gputest-bench.txz $(BIN)/refcase.safetensors.xz

## carry-check: whether the tracked tree and bin/gputest.txz fit a device call (64 MiB); tools/pack-raw.sh packs raw output
carry-check:
	tools/device/carry-check.sh
