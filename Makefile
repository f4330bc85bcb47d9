# Diffcast: `make run` starts the daemon, `make test` runs every test. Both install the Debian
# packages they need first (libuv1-dev to build, netcat-openbsd and python3 for the tests).

SWIFT ?= swift
SOCKET ?= /tmp/diffcast.sock
PREFIX ?= /usr/local
DESTDIR ?=
APT_PACKAGES := libuv1-dev netcat-openbsd python3 pkg-config
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps build release run test conformance bench lint clean

deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release --product diffcastd

run: release
	@echo "diffcastd: serving $(SOCKET) (subscribe with: nc -U $(SOCKET))"
	.build/release/diffcastd --socket $(SOCKET)

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

# Starts a release daemon on a temporary socket and runs the shared conformance check on it.
conformance: release
	./scripts/conformance.sh

bench: deps
	$(SWIFT) build -c release --product DiffcastBenchmarks
	.build/release/DiffcastBenchmarks $(BENCH_ARGS)

lint:
	$(SWIFT) format lint -r Sources Tests Benchmarks

clean:
	rm -rf .build
