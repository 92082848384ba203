# govm: build, test and run. See README.md.
GO      ?= go
export PATH := /usr/local/go/bin:$(PATH)
BUILD   := build
GUEST   := guest/build/bzImage
GOVM    := bin/govm
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)

.PHONY: all build govm guest deps test test-short vet fuzz fuzz-long bench run guest-image clean

all: build

build: govm guest

govm:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(GOVM) ./cmd/govm

guest:
	$(MAKE) -C guest

# Debian packages the tests and the default guest need (installs the missing
# ones when run as root; a no-op when all are there).
deps:
	@sh scripts/deps.sh

# All tests: L0 unit tests under -race, L1 boots of the test kernel on
# /dev/kvm, L2 Debian kernel to its "Memory:" line, L3 (skipped with a reason
# on emulation-only hosts). Tests find the binaries through these variables.
test: deps build vet
	GOVM_BIN=$(CURDIR)/$(GOVM) GOVM_TEST_KERNEL=$(CURDIR)/$(GUEST) \
		$(GO) test -race -timeout 60m -count=1 ./...

test-short: build
	GOVM_BIN=$(CURDIR)/$(GOVM) GOVM_TEST_KERNEL=$(CURDIR)/$(GUEST) \
		$(GO) test -short -count=1 ./...

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...

# Fuzzing (scripts/fuzz.sh): `make fuzz` runs every target for a fixed number
# of executions (what CI runs); `make fuzz-long` runs each for FUZZ_TIME
# (default 10m) and writes build/fuzz-long.txt with the execs per target.
fuzz:
	sh scripts/fuzz.sh short

fuzz-long:
	sh scripts/fuzz.sh long

bench: build
	GOVM_BIN=$(CURDIR)/$(GOVM) GOVM_TEST_KERNEL=$(CURDIR)/$(GUEST) \
		$(GO) test -run XXX -bench . -benchtime 5x ./bench/

guest-image:
	bash scripts/mkguest.sh $(BUILD)/guest

# Boot the default guest (Debian kernel + busybox initramfs). On a host whose
# KVM only emulates guest kernel code (no VT-x/AMD-V), a stock kernel cannot
# boot: say so and boot the test kernel's console instead.
run: deps build
	@if $(GOVM) host --emulation-only >/dev/null 2>&1; then \
		echo "make run: $$($(GOVM) host --emulation-only)"; \
		echo "make run: a stock Linux kernel cannot boot here; booting the test kernel's console instead (Ctrl-A x quits)"; \
		$(GOVM) run --kernel $(GUEST) -m 256M -p "test=console"; \
	else \
		$(MAKE) guest-image && \
		$(GOVM) run --kernel $(BUILD)/guest/bzImage --initrd $(BUILD)/guest/initrd.cpio.gz -m 1G; \
	fi

clean:
	rm -rf bin $(BUILD)
	$(MAKE) -C guest clean
