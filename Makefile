# govm: build, test and run. See README.md.
GO      ?= go
export PATH := /usr/local/go/bin:$(PATH)
BUILD   := build
GUEST   := guest/build/bzImage
LINUX   := $(BUILD)/linux/bzImage
INITRD  := $(BUILD)/linux/initramfs.cpio
GOVM    := bin/govm
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)

.PHONY: all build govm guest linux deps test test-short vet fuzz fuzz-long bench run console clean

all: build

build: govm guest linux

# govm is built without cgo: a static binary maps no libc or loader (what
# that saves: bench/README.md, "Footprint"), and psx then makes Landlock's
# all-thread calls with the Go runtime's own AllThreadsSyscall. Tests keep
# cgo: the race detector needs it. govm-ringsim goes beside govm, where
# `govm ringsim` looks for it.
govm:
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.version=$(VERSION)" -o $(GOVM) ./cmd/govm
	$(GO) build -o $(dir $(GOVM))govm-ringsim ./cmd/govm-ringsim

guest:
	$(MAKE) -C guest

# The default guest: a minimal Linux built from Debian's linux-source
# package (cached outside the clone, keyed by source, config and patch:
# scripts/linux.sh) and a busybox initramfs.
linux:
	@sh scripts/linux.sh $(BUILD)/linux
	@sh scripts/initramfs.sh $(INITRD)

# Debian packages the tests and the default guest need (installs the missing
# ones when run as root; a no-op when all are there).
deps:
	@sh scripts/deps.sh

# What the tests boot, passed through the environment.
TESTENV := GOVM_BIN=$(CURDIR)/$(GOVM) GOVM_TEST_KERNEL=$(CURDIR)/$(GUEST) \
	GOVM_LINUX_KERNEL=$(CURDIR)/$(LINUX) GOVM_LINUX_INITRD=$(CURDIR)/$(INITRD)

# All tests: L0 unit tests under -race, L1 boots of the test kernel on
# /dev/kvm, L2 Debian's stock kernel, L3 the default guest's Linux running
# its in-guest suite against govm's devices.
test: deps build vet
	$(TESTENV) $(GO) test -race -timeout 60m -count=1 ./...

test-short: build
	$(TESTENV) $(GO) test -short -count=1 ./...

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
	$(TESTENV) $(GO) test -run XXX -bench . -benchtime 5x ./bench/

# Boot the default guest: the minimal Linux with a busybox shell, on any
# host (on an emulation-only one govm adds the kernel parameters it needs
# and says so). Ctrl-A x quits; so does leaving the shell.
run: deps build
	$(GOVM) run --kernel $(LINUX) --initrd $(INITRD) -m 128M

# The test kernel's interactive console (guest/tests/console.c).
console: deps build
	$(GOVM) run --kernel $(GUEST) -m 256M -p "test=console"

clean:
	rm -rf bin $(BUILD)
	$(MAKE) -C guest clean
