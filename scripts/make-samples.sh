#!/usr/bin/env bash
# Makes the sample captures bundled with `offload analyze` (samples/*.pcapng)
# from real kernel traffic between two network namespaces joined by veth.
#
#   healthy-tcp    IPv4 TCP, sender TSO/GSO off, receiver GRO off: wire-sized
#                  segments captured on the receiver's veth (Ethernet).
#   tso-sender     IPv4 TCP, TSO on, captured on the sender with `-i any`
#                  (direction known), headers only: super-packets before
#                  segmentation.
#   gro-receiver   IPv4 TCP, sender TSO/GSO off, receiver veth GRO on,
#                  captured on the receiver with `-i any`, headers only:
#                  super-packets built by the receiver's GRO.
#   vxlan-broken   TCP over a vxlan device (VNI 42), captured on the
#                  receiver's underlay; then POST-PROCESSED by
#                  crates/offload-analyze/examples/scramble_outer_ids.rs:
#                  outer DF cleared and outer IP IDs scrambled, as a
#                  misbehaving tunnel endpoint or middlebox would send them.
#                  Everything else is the kernel's own traffic.
#   bigtcp-sender  IPv6 TCP with BIG TCP (gso_max_size 185000), TSO on,
#                  captured on the sender with `-i any`, headers only:
#                  185000-byte super-packets.
#   bigtcp         the same BIG TCP sender with TSO off (software GSO cuts
#                  its 185000-byte packets into wire segments), captured on
#                  the receiver's veth with GRO off: what a NIC would hand
#                  to GRO; the what-if shows the BIG TCP gain.
#
# Needs root, ip, tcpdump, editcap (Wireshark), ethtool and python3. Everything it creates (two
# namespaces named oflsmp-*, their veth and vxlan devices) lives inside the
# namespaces and is removed on every exit path.
#
# Usage: scripts/make-samples.sh [OUT_DIR]   (default: samples/)
set -euo pipefail

[ "$(id -u)" = 0 ] || { echo "make-samples: needs root (network namespaces)" >&2; exit 1; }
for t in ip tcpdump editcap ethtool python3 cargo; do
    command -v "$t" >/dev/null || { echo "make-samples: $t not found" >&2; exit 1; }
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(realpath -m "${1:-$ROOT/samples}")
mkdir -p "$OUT"
WORK=$(mktemp -d)
A="oflsmp-a-$$"
B="oflsmp-b-$$"
DUMP_PID=""
BYTES=262144

cleanup() {
    if [ -n "$DUMP_PID" ]; then kill "$DUMP_PID" 2>/dev/null || true; fi
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

inA() { ip netns exec "$A" "$@"; }
inB() { ip netns exec "$B" "$@"; }

setup() {
    ip netns add "$A"
    ip netns add "$B"
    ip link add ofl-va netns "$A" type veth peer name ofl-vb netns "$B"
    inA ip link set lo up
    inB ip link set lo up
    inA ip addr add 10.77.0.1/24 dev ofl-va
    inB ip addr add 10.77.0.2/24 dev ofl-vb
    inA ip -6 addr add fd77::1/64 dev ofl-va nodad
    inB ip -6 addr add fd77::2/64 dev ofl-vb nodad
    inA ip link set ofl-va up
    inB ip link set ofl-vb up
}

teardown() {
    ip netns del "$A"
    ip netns del "$B"
}

# Starts tcpdump in namespace $1 on device $2 writing pcapng $3, keeping
# ${SNAP:-0} bytes per frame. The large buffer matters: veth delivers a
# transfer in a few milliseconds and a default-sized buffer drops frames.
start_capture() {
    : >"$WORK/tcpdump.log"
    ip netns exec "$1" tcpdump -i "$2" -s "${SNAP:-0}" -B 262144 -U -n --immediate-mode -w "$3" "ip or ip6" 2>"$WORK/tcpdump.log" &
    DUMP_PID=$!
    # tcpdump prints "listening on" once the socket is bound.
    for _ in $(seq 50); do
        grep -q "listening on" "$WORK/tcpdump.log" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "make-samples: tcpdump did not start" >&2
    cat "$WORK/tcpdump.log" >&2
    exit 1
}

stop_capture() {
    sleep 0.3
    kill -INT "$DUMP_PID"
    wait "$DUMP_PID" || true
    DUMP_PID=""
}

# Sends $BYTES from namespace A to address $1 (server in B on port 5201).
transfer() {
    inB python3 - <<'PY' &
import socket
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", 5201))
s.listen(1)
s.settimeout(20)
c, _ = s.accept()
while c.recv(1 << 20):
    pass
c.close()
PY
    local srv=$!
    sleep 0.5
    inA python3 - "$1" "$BYTES" <<'PY'
import socket, sys
addr, n = sys.argv[1], int(sys.argv[2])
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
c = socket.socket(fam, socket.SOCK_STREAM)
c.settimeout(20)
c.connect((addr, 5201))
buf = bytes(range(256)) * 4096  # 1 MiB writes: BIG TCP packets need writes above 64 KiB
sent = 0
while sent < n:
    sent += c.send(buf[: min(len(buf), n - sent)])
c.shutdown(socket.SHUT_WR)
c.recv(1)
c.close()
PY
    wait "$srv"
}

echo "make-samples: healthy-tcp"
setup
inA ethtool -K ofl-va tso off gso off >/dev/null
start_capture "$B" ofl-vb "$WORK/healthy-tcp.pcapng"
# Long enough for the congestion window to pass 64 KiB, so that GRO runs
# (and the BIG TCP what-if) are not limited by slow start.
BYTES=524288 transfer 10.77.0.2
stop_capture
teardown

echo "make-samples: tso-sender"
setup
inA ethtool -K ofl-va tso on gso on >/dev/null
SNAP=200 start_capture "$A" any "$WORK/tso-sender.pcapng"
transfer 10.77.0.2
stop_capture
teardown

echo "make-samples: gro-receiver"
setup
inA ethtool -K ofl-va tso off gso off >/dev/null
inB ethtool -K ofl-vb gro on >/dev/null
SNAP=200 start_capture "$B" any "$WORK/gro-receiver.pcapng"
transfer 10.77.0.2
stop_capture
teardown

echo "make-samples: vxlan-broken"
setup
inA ip link add ofl-vx0 type vxlan id 42 local 10.77.0.1 remote 10.77.0.2 dstport 4789 dev ofl-va
inB ip link add ofl-vx0 type vxlan id 42 local 10.77.0.2 remote 10.77.0.1 dstport 4789 dev ofl-vb
inA ip addr add 10.78.0.1/24 dev ofl-vx0
inB ip addr add 10.78.0.2/24 dev ofl-vx0
inA ip link set ofl-vx0 up
inB ip link set ofl-vx0 up
# Segment in software before the underlay, so that the capture shows the
# frames a physical wire would carry.
inA ethtool -K ofl-va tso off gso off tx-udp_tnl-segmentation off tx-udp_tnl-csum-segmentation off >/dev/null
start_capture "$B" ofl-vb "$WORK/vxlan-real.pcapng"
transfer 10.78.0.2
stop_capture
teardown
(cd "$ROOT" && cargo run -q --release -p offload-analyze --example scramble_outer_ids -- \
    "$WORK/vxlan-real.pcapng" "$WORK/vxlan-broken.pcapng" 4789)

bigtcp_setup() {
    setup
    inA ip link set ofl-va gso_max_size 185000 gro_max_size 185000
    inB ip link set ofl-vb gso_max_size 185000 gro_max_size 185000
}

echo "make-samples: bigtcp-sender"
bigtcp_setup
inA ethtool -K ofl-va tso on gso on >/dev/null
# Headers only: the packets reach 185000 bytes; their lengths stay in the
# capture's original-length field.
SNAP=200 start_capture "$A" any "$WORK/bigtcp-sender.pcapng"
BYTES=4194304 transfer fd77::2
stop_capture
teardown

echo "make-samples: bigtcp"
bigtcp_setup
inA ethtool -K ofl-va tso off >/dev/null
start_capture "$B" ofl-vb "$WORK/bigtcp.pcapng"
BYTES=1048576 transfer fd77::2
stop_capture
teardown

# tcpdump writes classic pcap whatever the file is called: convert, so that
# every sample is what its name says (editcap keeps frames and timestamps).
for s in healthy-tcp tso-sender gro-receiver vxlan-broken bigtcp-sender bigtcp; do
    editcap -F pcapng "$WORK/$s.pcapng" "$OUT/$s.pcapng"
done
ls -l "$OUT"
