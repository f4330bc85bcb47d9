#!/bin/sh
# A 3-node NATS JetStream cluster on loopback, for the backbone's tests, benchmark and README.
#   scripts/nats-cluster.sh start DIR [PORT]   servers on PORT, PORT+1, PORT+2 (default 14222:
#                                              Debian's nats-server service takes 4222);
#                                              routes on PORT+100…, monitoring on PORT+200…
#   scripts/nats-cluster.sh stop DIR           stops the servers started with DIR
# Each server keeps its config, JetStream store, log and pid in DIR/nN/.
set -eu
command=${1:?usage: nats-cluster.sh start|stop DIR [PORT]}
dir=${2:?usage: nats-cluster.sh start|stop DIR [PORT]}
port=${3:-14222}

case $command in
start)
    command -v nats-server >/dev/null || { echo "nats-server is not installed (apt-get install nats-server)" >&2; exit 1; }
    routes="nats://127.0.0.1:$((port + 100)), nats://127.0.0.1:$((port + 101)), nats://127.0.0.1:$((port + 102))"
    for n in 0 1 2; do
        mkdir -p "$dir/n$n/store"
        cat > "$dir/n$n/nats.conf" <<CONF
server_name: n$n
listen: 127.0.0.1:$((port + n))
http: 127.0.0.1:$((port + 200 + n))
max_payload: 8MB
# A server cut off is found out in seconds, not after the default 2-minute pings: until then its
# clients' queue subscriptions (the daemons that take leases) still get requests routed to them.
ping_interval: "1s"
ping_max: 3
jetstream { store_dir: "$dir/n$n/store" }
cluster { name: diffcast, listen: 127.0.0.1:$((port + 100 + n)), routes: [$routes] }
CONF
        nats-server -c "$dir/n$n/nats.conf" > "$dir/n$n/log" 2>&1 &
        echo $! > "$dir/n$n/pid"
    done
    # Ready once every server answers and a JetStream meta leader is elected (each server's /jsz
    # names it). Two servers elect one without the third: a server that exited (its port taken)
    # fails the start at once.
    for _ in $(seq 100); do
        for n in 0 1 2; do
            if ! kill -0 "$(cat "$dir/n$n/pid")" 2>/dev/null; then
                echo "nats-server n$n exited; see $dir/n$n/log:" >&2
                tail -n 3 "$dir/n$n/log" >&2
                exit 1
            fi
        done
        if curl -fs "http://127.0.0.1:$((port + 200))/jsz" 2>/dev/null | grep -q '"leader"' &&
            curl -fs "http://127.0.0.1:$((port + 201))/jsz" >/dev/null 2>&1 &&
            curl -fs "http://127.0.0.1:$((port + 202))/jsz" >/dev/null 2>&1; then
            echo "nats: nats://127.0.0.1:$port,nats://127.0.0.1:$((port + 1)),nats://127.0.0.1:$((port + 2))"
            exit 0
        fi
        sleep 0.1
    done
    echo "the NATS cluster did not elect a leader; see $dir/n*/log" >&2
    exit 1
    ;;
stop)
    for pidfile in "$dir"/n*/pid; do
        [ -e "$pidfile" ] || continue
        kill "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
    done
    ;;
*)
    echo "usage: nats-cluster.sh start|stop DIR [PORT]" >&2
    exit 2
    ;;
esac
