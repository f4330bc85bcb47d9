#!/usr/bin/env bash
# Boots a real systemd 252 (a debootstrapped Debian bookworm under systemd-nspawn), installs the
# package and runs the README's "Run as a service" steps in it, as a member of the 'diffcast'
# group would. Prints one line per step and ends with 'N passed, M failed'.
#
#   scripts/test-service.sh .build/dist/diffcast_<version>_amd64.deb
#
# Needs root, debootstrap and systemd-container. The minimal root is built once and cached in
# $DIFFCAST_TEST_ROOT_CACHE (default /var/cache/diffcast-test/bookworm), outside the clone.
set -uo pipefail
deb=$(readlink -f "$1")
cache=${DIFFCAST_TEST_ROOT_CACHE:-/var/cache/diffcast-test/bookworm}
work=$(mktemp -d /var/tmp/diffcast-service.XXXXXX)
root="$work/root"
passed=0
failed=0
nspawn=""

cleanup() {
  if [ -n "$nspawn" ] && kill -0 "$nspawn" 2>/dev/null; then
    kill -TERM "$nspawn" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$nspawn" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$nspawn" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT

step() {  # step NAME COMMAND...: runs a check, prints PASS or FAIL with what it said
  local name=$1
  shift
  local output
  if output=$("$@" 2>&1); then
    passed=$((passed + 1))
    echo "PASS $name${output:+: $(echo "$output" | tail -1)}"
  else
    failed=$((failed + 1))
    echo "FAIL $name: $(echo "$output" | tail -5 | tr '\n' ' ')"
  fi
}

if [ ! -x "$cache/usr/lib/systemd/systemd" ] && [ ! -x "$cache/lib/systemd/systemd" ]; then
  echo "building a minimal bookworm root in $cache (once)"
  mkdir -p "$(dirname "$cache")"
  rm -rf "$cache.partial"
  debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,dbus,netcat-openbsd,libuv1,procps,init-system-helpers,passwd,util-linux \
    bookworm "$cache.partial" >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
  mv "$cache.partial" "$cache"
fi
cp -a "$cache" "$root"
# Not /tmp: the guest's systemd mounts a tmpfs over it at boot.
cp "$deb" "$root/root/diffcast.deb"
# The guest has no network: its dependencies that the cached root lacks go in beside it.
mkdir -p "$work/debs" "$root/root/debs"
(cd "$work/debs" && apt-get download -q libnats3.4 libprotobuf-c1 libssl3 libhttp-parser2.9 libwslay1 >/dev/null 2>&1) \
  || { echo "cannot download libnats3.4, libhttp-parser2.9, libwslay1 and their dependencies"; exit 1; }
cp "$work"/debs/*.deb "$root/root/debs/"

systemd-nspawn -b -D "$root" --keep-unit --register=no --console=pipe --private-network \
  --machine=diffcast-test >"$work/boot.log" 2>&1 </dev/null &
nspawn=$!
guest=""
for _ in $(seq 100); do
  guest=$(pgrep -P "$nspawn" 2>/dev/null | head -1)
  [ -n "$guest" ] && break
  sleep 0.1
done
[ -n "$guest" ] || { echo "the container did not start"; cat "$work/boot.log"; exit 1; }
in_guest() { nsenter -t "$guest" -a -- "$@"; }
as_user() { local user=$1; shift; in_guest runuser -u "$user" -- "$@"; }
for _ in $(seq 100); do
  state=$(in_guest systemctl is-system-running 2>/dev/null)
  case "$state" in running | degraded) break ;; esac
  sleep 0.2
done
echo "guest systemd: $(in_guest systemctl --version | head -1), state ${state:-unknown}"

request() {  # request USER LINE: one request through nc, its response on stdout
  local user=$1 line=$2
  as_user "$user" sh -c "printf '%s\n' '$line' | nc -U -N -w 5 /run/diffcast/diffcast.sock"
}
main_pid() { in_guest systemctl show -p MainPID --value diffcast.service; }
# Signals a pid in the guest; never 0 or empty (kill 0 would hit this script's process group).
signal_guest() {
  case "$2" in '' | 0) echo "no main pid to signal" >&2; return 1 ;; esac
  in_guest kill "$1" "$2"
}
expect_in() {  # expect_in TEXT COMMAND...: the command's output contains TEXT
  local text=$1
  shift
  local output
  output=$("$@" 2>&1)
  echo "$output"
  case "$output" in *"$text"*) return 0 ;; *) return 1 ;; esac
}
wait_active() {
  for _ in $(seq 100); do
    [ "$(in_guest systemctl is-active diffcast.service)" = active ] && return 0
    sleep 0.1
  done
  in_guest systemctl status diffcast.service --no-pager | tail -5
  return 1
}

step "apt install ./diffcast.deb installs it" in_guest sh -c \
  'cd /root && apt-get install -y -q ./debs/*.deb ./diffcast.deb >/root/apt.log 2>&1 || { cat /root/apt.log; exit 1; }; dpkg -s diffcast | grep ^Version'
step "diffcastd runs without the Swift toolchain" expect_in "diffcastd 0." in_guest /usr/bin/diffcastd --version
step "the socket is listening, the service not yet started" sh -c \
  "[ \"\$(nsenter -t $guest -a systemctl is-active diffcast.socket)\" = active ] && [ \"\$(nsenter -t $guest -a systemctl is-active diffcast.service)\" != active ]"
in_guest useradd -m -G diffcast alice
in_guest useradd -m bob
step "a group member's first connection starts the service" expect_in '"ok":true' request alice ping
step "the service is active" wait_active
step "a write is acknowledged" expect_in '"version":1' request alice 'append_sections feed {"sections":[{"id":"today"}]}'
step "a second write on a new connection" expect_in '"version":2' request alice 'append_items feed {"items":["t1"]}'
step "diffcast finds the system socket by itself" expect_in 't1' \
  as_user alice diffcast get feed
step "a non-member is refused" expect_in "Permission denied" \
  in_guest runuser -u bob -- sh -c 'echo ping | nc -U -N -w 2 /run/diffcast/diffcast.sock' 
in_guest systemctl status diffcast.service --no-pager >"$work/status.txt" 2>&1
pid=$(main_pid)
echo "main pid: $pid"
step "systemctl reload keeps the daemon running" sh -c \
  "nsenter -t $guest -a systemctl reload diffcast.service && sleep 0.5 && [ \"\$(nsenter -t $guest -a systemctl show -p MainPID --value diffcast.service)\" = $pid ]"
step "kill -9 of the main pid restarts it" sh -c \
  "[ -n '$pid' ] && [ '$pid' != 0 ] && nsenter -t $guest -a kill -9 $pid; for i in \$(seq 100); do p=\$(nsenter -t $guest -a systemctl show -p MainPID --value diffcast.service); [ -n \"\$p\" ] && [ \"\$p\" != 0 ] && [ \"\$p\" != $pid ] && exit 0; sleep 0.1; done; exit 1"
step "acknowledged writes survive kill -9" expect_in '"items":["t1"]' request alice 'get feed'
in_guest systemctl stop diffcast.service diffcast.socket
in_guest systemctl start diffcast.socket
step "stop and start keep the state" expect_in '"version":2' request alice 'get feed'
cp "$root/etc/diffcast/diffcastd.yaml" "$work/config.yaml"
echo "max_connections: -5" >>"$root/etc/diffcast/diffcastd.yaml"
in_guest systemctl reload diffcast.service
sleep 0.5
cp "$work/config.yaml" "$root/etc/diffcast/diffcastd.yaml"
step "journalctl -p warning shows the rejected reload" expect_in "reload failed" \
  in_guest journalctl -u diffcast.service -p warning --no-pager -o cat
step "info lines are not warnings" sh -c \
  "nsenter -t $guest -a journalctl -u diffcast.service --no-pager -o cat | grep -q '^ready' && ! nsenter -t $guest -a journalctl -u diffcast.service -p warning --no-pager -o cat | grep -q '^ready'"
step "the ready line names the inherited socket" sh -c \
  "nsenter -t $guest -a journalctl -u diffcast.service --no-pager -o cat | grep '^ready' | tail -1 | grep /run/diffcast/diffcast.sock"
mkdir -p "$root/etc/systemd/system/diffcast.service.d"
# A short watchdog for the test; the abort timeout too (SIGABRT waits while the process is
# stopped, then SIGKILL follows after TimeoutAbortSec).
printf '[Service]\nWatchdogSec=3s\nTimeoutAbortSec=2s\n' >"$root/etc/systemd/system/diffcast.service.d/watchdog.conf"
in_guest systemctl daemon-reload
in_guest systemctl restart diffcast.service
wait_active >/dev/null
pid=$(main_pid)
signal_guest -STOP "$pid"
step "the watchdog restarts a stopped daemon" sh -c \
  "for i in \$(seq 300); do p=\$(nsenter -t $guest -a systemctl show -p MainPID --value diffcast.service); [ -n \"\$p\" ] && [ \"\$p\" != 0 ] && [ \"\$p\" != $pid ] && exit 0; sleep 0.1; done; exit 1"
step "after the watchdog restart the state is there" expect_in '"version":2' request alice 'get feed'
score=$(in_guest systemd-analyze security diffcast.service --no-pager 2>/dev/null | grep 'Overall exposure level' | grep -oE '[0-9]+\.[0-9]+' | head -1)
step "systemd-analyze security scores it at most 1.5" sh -c "echo 'exposure ${score:-unknown}'; awk 'BEGIN { exit !(\"${score:-9}\" + 0 <= 1.5) }'"
step "dpkg -r removes it cleanly" sh -c \
  "nsenter -t $guest -a dpkg -r diffcast | grep -q 'Removing diffcast' && ! nsenter -t $guest -a test -e /usr/bin/diffcastd && ! nsenter -t $guest -a systemctl is-active --quiet diffcast.socket"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
