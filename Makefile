# Diffcast: `make run` starts the daemon, `make test` runs every test. Both install the Debian
# packages they need first (libuv1-dev and libnats-dev to build; netcat-openbsd, systemd's tools,
# nats-server and curl for the tests).

SWIFT ?= swift
VERSION := $(shell sed -n 's/^\#define DIFFCAST_VERSION "\(.*\)"/\1/p' Sources/CBuildInfo/build_info.c)
COMMIT := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
SOCKET ?= /tmp/diffcast.sock
CHECKER ?= ../shared/conformance/check.py
PREFIX ?= /usr/local
DESTDIR ?=
UNITDIR ?= /etc/systemd/system
SYSUSERSDIR ?= /etc/sysusers.d
APT_PACKAGES := libuv1-dev libnats-dev libhttp-parser-dev libwslay-dev libssl-dev pkg-config netcat-openbsd systemd
# The backbone's tests run a 3-node NATS JetStream cluster on loopback.
BACKBONE_PACKAGES := nats-server curl
BENCH_PACKAGES := redis-server valgrind
DIST_PACKAGES := help2man binutils dpkg
# What the installed binaries load at run time (ldd .build/release/diffcastd): libuv, libnats with
# what it pulls in (libssl3, libprotobuf-c1) even when no backbone is configured, and the HTTP
# front end's http_parser, wslay and libcrypto.
RUNTIME_PACKAGES := libuv1 libnats3.4 libhttp-parser2.9 libwslay1 libssl3
SERVICE_TEST_PACKAGES := debootstrap systemd-container
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps bench-deps backbone-deps runtime-deps test-sanitize fuzz test-web test-partition build release stamp run test test-clients test-backbone conformance soak soak-backbone bench bench-web \
	install deb test-service lint clean

# Installs the Debian packages named in PACKAGES that are missing (apt-get update first).
define apt_install
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
endef

deps:
	$(call apt_install,$(APT_PACKAGES))
	@command -v python3 >/dev/null || { $(SUDO) apt-get install -y -qq python3; }

bench-deps: deps
	$(call apt_install,$(BENCH_PACKAGES) $(BACKBONE_PACKAGES))

backbone-deps: deps
	$(call apt_install,$(BACKBONE_PACKAGES))

runtime-deps:
	$(call apt_install,$(RUNTIME_PACKAGES))

build: deps
	$(SWIFT) build

# The commit goes into the binary through Sources/CBuildInfo/commit.h (rewritten only when it
# changes, so only that C file recompiles). build_info.c is touched too: a build that compiled it
# before commit.h existed recorded no dependency on it, and printed "commit unknown".
stamp:
	@line='#define DIFFCAST_COMMIT "$(COMMIT)"'; \
	[ "$$(cat Sources/CBuildInfo/commit.h 2>/dev/null)" = "$$line" ] \
	  || { echo "$$line" > Sources/CBuildInfo/commit.h; touch Sources/CBuildInfo/build_info.c; }

# A self-contained release binary: the Swift standard library linked in statically, so it
# needs only libuv1, libstdc++, libgcc_s and libc where it is installed.
RELEASE_BUILD = $(SWIFT) build -c release --static-swift-stdlib

release: deps stamp
	$(RELEASE_BUILD) --product diffcastd
	$(RELEASE_BUILD) --product diffcast

# `make run HTTP=127.0.0.1:8080` also serves the HTTP front end and the inspector page.
run: release
	@echo "diffcastd: serving $(SOCKET) (subscribe with: nc -U $(SOCKET))$(if $(HTTP), and http://$(HTTP)/)"
	.build/release/diffcastd --socket $(SOCKET) $(if $(HTTP),--http $(HTTP))

# Suites run one after another: the integration tests start and kill many processes. The release
# build (the daemon check.py runs against, and the package's binaries) is made meanwhile, at the
# lowest priority: the Swift suites run one test at a time and leave a core idle, and the suites of
# processes spend most of their time waiting on daemons, browsers and NATS. The Swift suites run
# from their test binary, not through `swift test`, which would wait for the build's lock on
# .build. Then the shared contract check (../shared/conformance/check.py --contract 3, when it is
# there) runs against a fresh release daemon, so a broken contract shows where the work is done
# (under CI, .ci/run runs it next on its own).
SWIFT_SUITES = NO_COLOR=1 .build/debug/DiffcastPackageTests.xctest --testing-library swift-testing --no-parallel

test: deps
	$(SWIFT) build --build-tests
	@nice -n 19 $(MAKE) --no-print-directory release > .build/release-beside-tests.log 2>&1 & release=$$!; \
	status=0; \
	$(SWIFT_SUITES) && $(MAKE) --no-print-directory test-clients && $(MAKE) --no-print-directory test-web \
	  && $(MAKE) --no-print-directory test-backbone || status=$$?; \
	if ! wait $$release; then \
	  tail -40 .build/release-beside-tests.log; echo "the release build failed (.build/release-beside-tests.log)"; status=1; \
	fi; \
	exit $$status
	@if [ -n "$$CI" ]; then echo "conformance: .ci/run runs it next"; \
	elif [ -e $(CHECKER) ]; then CHECKER=$(CHECKER) ./scripts/conformance.sh --contract 3; \
	else echo "conformance: $(CHECKER) not found; skipped"; fi

# The Python client, installed with pip into .build/python, tested against the real daemon; then
# the `diffcast` command and examples/ driven as a user drives them (pytest, debug binaries).
test-clients: deps
	@python3 -m pytest --version >/dev/null 2>&1 || python3 -m pip install -q pytest
	rm -rf .build/python && python3 -m pip install -q --no-deps --target .build/python ./clients/python
	rm -rf clients/python/build clients/python/*.egg-info
	PYTHONPATH=.build/python python3 -m pytest -q -p no:cacheprovider clients/python/tests
	python3 -m pytest -q -p no:cacheprovider Tests/EndToEnd

# The HTTP front end through real HTTP, SSE and WebSocket clients (and check.py over WebSocket,
# every scenario but the stalled subscriber, which test_http.py stalls past the kernel's buffer);
# the JavaScript client under node against the real daemon; the inspector page in a real headless
# Chromium driven by Selenium (following every op over SSE and WebSocket, across a restart).
# Scoped access (Tests/Access: every right on every transport, tokens minted by PyJWT) and the
# deployment behind nginx with TLS, followed by Chromium (Tests/Proxy).
WEB_PACKAGES := nodejs chromium chromium-driver nginx-light openssl
# PyJWT 2.7 or later: Tests/Access writes its keys with `to_jwk(..., as_dict=True)`, which
# Debian's python3-jwt (2.6) lacks.
WEB_PYTHON_CHECK := import pytest, websocket, selenium, schemathesis, cryptography, jwt; \
	assert tuple(int(part) for part in jwt.__version__.split(".")[:2]) >= (2, 7)
test-web: deps
	$(call apt_install,$(WEB_PACKAGES))
	@python3 -c '$(WEB_PYTHON_CHECK)' 2>/dev/null || python3 -m pip install -q pytest websocket-client selenium schemathesis 'pyjwt>=2.7' cryptography
	CHECKER=$(abspath $(CHECKER)) python3 -m pytest -q -p no:cacheprovider Tests/HTTP Tests/Browser
	python3 -m pytest -q -p no:cacheprovider Tests/Access Tests/Proxy
	node --test clients/js/test/

# Daemons sharing collections through a 3-node NATS cluster (started and stopped by the tests):
# the owner killed, the stream leader killed, an owner stopped past its lease, and check.py
# against a daemon that owns nothing; as root, also network partitions (test_partition.py:
# namespaces, one node cut off and healed).
test-backbone: backbone-deps
	@python3 -m pytest --version >/dev/null 2>&1 || python3 -m pip install -q pytest
	CHECKER=$(abspath $(CHECKER)) python3 -m pytest -q -p no:cacheprovider -s Tests/Backbone/test_backbone.py Tests/Backbone/test_credentials.py

# Partitions in network namespaces (root and iproute2): a node cut off and healed, Jepsen-style.
# Not part of make test: it still finds failures.
test-partition: backbone-deps
	CHECKER=$(abspath $(CHECKER)) python3 -m pytest -q -p no:cacheprovider -s -rA Tests/Backbone/test_partition.py

# The backbone under faults, many times over: CYCLES cycles (20 by default) of one random fault
# each (a daemon or a nats-server killed or stopped, the stream leader killed), writers and
# verified subscribers checked after each; SEED replays a run's faults. The daemon is DIFFCASTD
# when set, else the debug build. Exits non-zero on a lost acknowledged write, a non-converged
# cycle, a gap or a divergence.
soak-backbone: backbone-deps
	@[ -n "$(DIFFCASTD)" ] || $(SWIFT) build --product diffcastd
	DIFFCASTD=$(or $(DIFFCASTD),.build/debug/diffcastd) python3 Tests/Backbone/soak.py \
	  --cycles $(or $(CYCLES),20) $(if $(SEED),--seed $(SEED))

# Starts a release daemon on a temporary socket and runs the shared conformance check on it.
conformance: release
	CHECKER=$(CHECKER) ./scripts/conformance.sh --contract 3

# Prints every benchmark table: `make bench BENCH=diff` (or feed, pipeline, fanout, memory, durability,
# backbone, window, allocations; instructions: the feed's instructions per append under
# callgrind; instructions-fanout: a fan-out's per delivery; sse or websocket: the browser transports against nginx + Nchan, as make bench-web
# does) for one.
bench: bench-deps release
	$(SWIFT) build -c release --product DiffcastBenchmarks
	$(SWIFT) build -c release --product DiffcastAllocations
	@for b in $(or $(BENCH),diff feed pipeline fanout memory durability backbone window auth allocations instructions instructions-fanout); do \
	  case $$b in \
	    allocations) .build/release/DiffcastAllocations || exit 1 ;; \
	    instructions) scripts/instructions.sh || exit 1 ;; \
	    instructions-fanout) scripts/instructions-fanout.sh || exit 1 ;; \
	    sse) $(MAKE) --no-print-directory bench-web WEB_BENCH="--transports sse $(WEB_BENCH)" || exit 1 ;; \
	    websocket) $(MAKE) --no-print-directory bench-web WEB_BENCH="--transports ws $(WEB_BENCH)" || exit 1 ;; \
	    *) .build/release/DiffcastBenchmarks $$b || exit 1 ;; \
	  esac; done

# The browser transports against nginx with the Nchan module (Debian's nginx-light and
# libnginx-mod-nchan), and over WebSocket also against nats-server's own WebSocket listener: the
# growing feed over Server-Sent Events and WebSocket, 10 and 1,000 subscribers read by one node
# process (Benchmarks/web). WEB_BENCH passes options, e.g.
# WEB_BENCH="--subscribers 100 --rounds 3 --deliveries 2000000" (see bench_web.py --help).
WEB_BENCH_PACKAGES := nginx-light libnginx-mod-nchan nats-server nodejs
bench-web: release
	$(call apt_install,$(WEB_BENCH_PACKAGES))
	@# nginx with Nchan makes its compiled-in temporary directories (/var/lib/nginx/body, ...)
	@# whatever its configuration says, and nothing else makes them on a fresh machine.
	$(SUDO) mkdir -p $$(nginx -V 2>&1 | tr ' ' '\n' | sed -n 's/^--http-[a-z-]*-temp-path=//p')
	DIFFCASTD=.build/release/diffcastd python3 Benchmarks/web/bench_web.py $(WEB_BENCH)

# The Swift suites under AddressSanitizer, and then ThreadSanitizer, with the daemon under test
# built with the same sanitizer (DIFFCASTD). Reports go to files in $(SANITIZER_REPORTS), from the
# test process and every daemon it starts: any report fails the target, even one from a daemon
# whose death no test noticed.
SANITIZER_REPORTS := $(abspath .build-sanitizer-reports)
test-sanitize: deps
	rm -rf $(SANITIZER_REPORTS) && mkdir -p $(SANITIZER_REPORTS)
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build-asan
	DIFFCAST_SANITIZER=address DIFFCASTD=$(abspath .build-asan/debug/diffcastd) \
	  ASAN_OPTIONS=log_path=$(SANITIZER_REPORTS)/asan:detect_leaks=0 \
	  $(SWIFT) test --skip-build --sanitize=address --scratch-path .build-asan --no-parallel
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build-tsan
	DIFFCAST_SANITIZER=thread DIFFCASTD=$(abspath .build-tsan/debug/diffcastd) \
	  TSAN_OPTIONS=log_path=$(SANITIZER_REPORTS)/tsan:halt_on_error=0 \
	  $(SWIFT) test --skip-build --sanitize=thread --scratch-path .build-tsan --no-parallel
	@if ls $(SANITIZER_REPORTS)/* >/dev/null 2>&1; then \
	  echo "sanitizer reports in $(SANITIZER_REPORTS):"; head -60 $(SANITIZER_REPORTS)/*; exit 1; \
	else echo "sanitizers: no reports"; fi

# Coverage-guided fuzzing (libFuzzer, -sanitize=fuzzer,address) of every place bytes come in from
# outside: the fuzz targets (Fuzz/Targets, which make test replays the committed inputs through)
# built as libFuzzer executables by the package in Fuzz/, so the root build never links
# libFuzzer. Replays Fuzz/regressions first, then runs each target for FUZZ_SECONDS (60); see
# Fuzz/README.md.
fuzz: deps
	FUZZ_SECONDS=$(or $(FUZZ_SECONDS),60) scripts/fuzz.sh $(TARGETS)

# The crash test for longer: CYCLES kill -9/restart cycles (200 by default).
soak: deps
	$(SWIFT) build --build-tests
	DIFFCAST_CRASH_CYCLES=$(or $(CYCLES),200) $(SWIFT) test --skip-build --filter acknowledgedWritesSurviveKillNine

# What `make install` and `make deb` ship: the stripped binaries, their man pages, and the
# shell completions of `diffcast`.
DIST := .build/dist
dist: release
	$(call apt_install,$(DIST_PACKAGES))
	mkdir -p $(DIST)/completions
	strip -o $(DIST)/diffcastd .build/release/diffcastd
	strip -o $(DIST)/diffcast .build/release/diffcast
	help2man --no-info --section 8 --name "collections of sections and items, published as minimal changesets" \
	  --version-string "$(VERSION)" $(DIST)/diffcastd > $(DIST)/diffcastd.8
	help2man --no-info --section 1 --name "read, write and follow diffcastd's collections" \
	  --version-string "$(VERSION)" $(DIST)/diffcast > $(DIST)/diffcast.1
	$(DIST)/diffcast --generate-completion-script bash > $(DIST)/completions/diffcast.bash
	$(DIST)/diffcast --generate-completion-script zsh > $(DIST)/completions/_diffcast
	$(DIST)/diffcast --generate-completion-script fish > $(DIST)/completions/diffcast.fish

# Into the running system, the runtime libraries are installed too; into a DESTDIR root, they
# are named (that root's own package manager must bring them).
install: dist
	@if [ -z "$(DESTDIR)" ]; then $(MAKE) --no-print-directory runtime-deps; \
	else echo "install: $(DESTDIR) also needs the packages $(RUNTIME_PACKAGES) (and what they depend on)"; fi
	install -D -m 0755 $(DIST)/diffcastd $(DESTDIR)$(PREFIX)/bin/diffcastd
	install -D -m 0644 $(DIST)/diffcastd.8 $(DESTDIR)$(PREFIX)/share/man/man8/diffcastd.8
	install -D -m 0755 $(DIST)/diffcast $(DESTDIR)$(PREFIX)/bin/diffcast
	install -D -m 0644 $(DIST)/diffcast.1 $(DESTDIR)$(PREFIX)/share/man/man1/diffcast.1
	install -D -m 0644 $(DIST)/completions/diffcast.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/diffcast
	install -D -m 0644 $(DIST)/completions/_diffcast $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_diffcast
	install -D -m 0644 $(DIST)/completions/diffcast.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/diffcast.fish
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(PREFIX)/share/doc/diffcast
	sed 's|/usr/local|$(PREFIX)|g' systemd/diffcast.service > $(DESTDIR)$(UNITDIR)/diffcast.service
	install -m 0644 systemd/diffcast.socket $(DESTDIR)$(UNITDIR)/diffcast.socket
	install -m 0644 systemd/diffcast.sysusers $(DESTDIR)$(SYSUSERSDIR)/diffcast.conf
	install -d $(DESTDIR)/etc/diffcast
	[ -e $(DESTDIR)/etc/diffcast/diffcastd.yaml ] || install -m 0644 config/diffcastd.yaml $(DESTDIR)/etc/diffcast/diffcastd.yaml
	install -m 0644 README.md docs/protocol.md $(DESTDIR)$(PREFIX)/share/doc/diffcast/

# A Debian package: diffcast_<version>_amd64.deb in .build/dist (see packaging/).
deb: dist
	./packaging/build-deb.sh "$(VERSION)" $(DIST)

# Boots a real systemd (bookworm in systemd-nspawn), installs the package and runs the README's
# service steps in it. Needs root and the Debian mirror; the root is cached in /var/cache.
test-service: deb
	$(call apt_install,$(SERVICE_TEST_PACKAGES))
	./scripts/test-service.sh $(DIST)/diffcast_$(VERSION)_amd64.deb

lint:
	$(SWIFT) format lint -r Sources Tests Benchmarks Fuzz/Targets Fuzz/Sources

clean:
	rm -rf .build
