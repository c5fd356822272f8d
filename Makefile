# rftpipe — make targets. `make demo` runs the main job on the bundled store;
# `make test` runs vet and every test (GPU tests skip without a device).
GO      ?= go
BIN     := bin/rftpipe
STORE   := fixtures/stores/demo.parquet
OUT     := out

.PHONY: build test demo bench peer scaling lint fixtures clean image

build:
	$(GO) build -o $(BIN) ./cmd/rftpipe

# image builds the container image the Kubernetes manifest runs
# (cmd/rftpipe/deploy/indexed-job.yaml: rftpipe:latest).
IMAGE ?= rftpipe:latest
image:
	docker build --build-arg VERSION=$$(git describe --tags --always --dirty 2>/dev/null) -t $(IMAGE) .

test:
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m ./...
	@# The run above hides skips; say which device tests did not run, and why.
	@$(GO) test -count=1 -v ./gpu/ | grep -E -B1 -- '^--- SKIP' | grep -v -- '^--$$' || echo "gpu: every device test ran"

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1)
	$(GO) vet ./...

# demo runs GRPO with zero-variance groups filtered and informative groups
# duplicated over the bundled store, shows a few advantages, and says where
# to look next.
demo: build
	@mkdir -p $(OUT)
	$(BIN) run --advantage-fn grpo --arg std_threshold=0 --arg duplicate_experiences=true --seed 1 \
		--in $(STORE) --out $(OUT)/demo_grpo.parquet --metrics $(OUT)/demo_metrics.json --progress never
	@grep -E '"experience_pipeline/(experience_count|filtered_count|group_advantages/reward_std/mean)"|rftpipe/success' $(OUT)/demo_metrics.json
	$(BIN) sql "SELECT task, run, reward, round(advantages[1], 4) AS advantage, duplicate_of FROM experiences WHERE task = 1 ORDER BY batch, run LIMIT 8" --store $(OUT)/demo_grpo.parquet
	@echo "next: $(BIN) sql --list --store $(OUT)/demo_grpo.parquet   (canned analyses)"
	@echo "      $(BIN) report $(OUT)/demo_grpo.parquet --out $(OUT)/demo_report.html"

# CPUS lists the GOMAXPROCS settings of 1, 2, 4, 8, 16 the machine has.
CPUS = $(shell n=$$(nproc); s=1; for p in 2 4 8 16; do [ $$p -le $$n ] && s=$$s,$$p; done; echo $$s)

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./...
	@# the end-to-end figures beside the machine's floor, at each GOMAXPROCS setting
	$(GO) test -run '^$$' -bench 'BenchmarkRun$$' -benchtime 1x -cpu $(CPUS) ./pipeline
	@# every job at each setting, one process per setting: wall, speedup, peak RSS
	RFTPIPE=$(BIN) pipeline/bench/scaling.sh
	@# rftpipe against the reference in the same run (needs RFT_UPSTREAM_SRC)
	RFTPIPE=$(BIN) pipeline/bench/peer.sh

# peer prints rftpipe's speed as ratios to the reference's (Trinity-RFT's own
# code, measured in the same run; pipeline/bench/peer.sh): RFT_UPSTREAM_SRC
# names the directory holding its trinity/ source, PEERBENCH the harness's.
peer: build
	RFTPIPE=$(BIN) pipeline/bench/peer.sh

# scaling prints how every job scales with GOMAXPROCS (pipeline/bench/scaling.sh;
# TASKS=N sets the store's size, N × 8 rows).
scaling: build
	RFTPIPE=$(BIN) pipeline/bench/scaling.sh $(TASKS)

# fixtures regenerates the bundled stores (deterministic: same bytes every time).
fixtures: build
	$(BIN) gen --tasks 48 --runs 8 --tasks-per-batch 16 --prompt-len 16 --resp-len 16:64 --seed 7 --out fixtures/stores/demo.parquet
	$(BIN) gen --tasks 16 --runs 4 --steps 3 --tasks-per-batch 8 --prompt-len 16 --resp-len 24:96 --kind multi --seed 11 --out fixtures/stores/multi.parquet
	$(BIN) gen --tasks 32 --runs 1 --tasks-per-batch 16 --prompt-len 16 --resp-len 8:32 --kind dpo --seed 13 --out fixtures/stores/dpo.parquet
	$(BIN) gen --tasks 32 --runs 8 --tasks-per-batch 16 --prompt-len 16 --resp-len 8:32 --with all --seed 17 --out fixtures/stores/full.parquet
	$(BIN) gen --tasks 32 --kind pairs --tasks-per-batch 16 --prompt-len 16 --resp-len 8:32 --with all --seed 19 --out fixtures/stores/dpo_pairs.parquet
	$(BIN) gen --tasks 16 --runs 4 --steps 3 --tasks-per-batch 8 --prompt-len 16 --resp-len 24:96 --kind multi --info --with all --seed 23 --out fixtures/stores/gigpo.parquet
	$(BIN) gen --tasks 32 --runs 8 --tasks-per-batch 16 --prompt-len 16 --resp-len 8:32 --reward-components correct,format --with all --seed 29 --out fixtures/stores/multireward.parquet
	$(BIN) convert fixtures/stores/demo.parquet fixtures/stores/demo.jsonl

clean:
	rm -rf bin $(OUT)

# report-check renders the HTML report of the bundled store, and of its GRPO
# output (with advantages and duplicated rows), and where Debian's chromium is
# installed takes headless screenshots of both for a person to look at.
.PHONY: report-check
report-check: build
	@mkdir -p $(OUT)
	$(BIN) report --in $(STORE) --out $(OUT)/report.html
	$(BIN) run --advantage-fn grpo --arg std_threshold=0 --arg duplicate_experiences=true --seed 1 --in $(STORE) --out $(OUT)/report_grpo.parquet
	$(BIN) report --in $(OUT)/report_grpo.parquet --out $(OUT)/report_grpo.html
	@if command -v chromium >/dev/null 2>&1; then \
		for page in report report_grpo; do \
			profile=$$(mktemp -d); \
			timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
				--disable-background-networking --disable-component-update --disable-sync \
				--user-data-dir=$$profile --screenshot=$(OUT)/$$page.png --window-size=1400,4000 \
				file://$(CURDIR)/$(OUT)/$$page.html >/dev/null 2>&1; \
			rm -rf $$profile; \
			test -s $(OUT)/$$page.png || { echo "report-check: chromium made no screenshot of $$page.html"; exit 1; }; \
			echo "report-check: look at $(OUT)/$$page.png"; \
		done; \
	else \
		echo "report-check: chromium is not installed (apt-get install chromium); open $(OUT)/report.html in a browser"; \
	fi
