#!/usr/bin/env bash
# How much of the wire does `offload gso` give back from a bare receiver-side
# capture of kernel GRO output?
#
# Two namespaces joined by two veth pairs, one at MTU 1500 and one at MTU
# 9000. The sender has TSO off (its stack cuts GSO packets of up to 185000
# bytes into wire-sized segments before veth); the receiver has veth GRO on
# with BIG TCP (all four size knobs 185000 on both ends, set with `offload
# tune` over rtnetlink: iproute2 6.1 has no IPv4 keywords), so its capture
# holds the kernel's GRO super-packets of up to 185000 bytes (IPv6 ones
# with the jumbo Hop-by-Hop option, hence the capture filter below:
# `tcp` misses them), as plain pcap without any GSO metadata. For each pair IPv4
# and IPv6 transfers run, with the default MSS and with TCP_MAXSEG (536 to
# 8948 over the flows), while tcpdump captures on both ends.
#
#   wire.pcap      the sender's veths: the frames on the wire (the truth)
#   receiver.pcap  the receiver's veths: what GRO made of them
#   gso.pcap       `offload gso receiver.pcap` (no --mss, no --mtu)
#   gso-nosyn.pcap the same from receiver.pcap without its SYNs (a capture
#                  joined late: no MSS option to read), scored against the
#                  wire without its SYNs
#
# The receiver's packets above 64 KiB (BIG TCP GRO) are counted apart, with
# the wire frames inside them and how many of those each gso output holds.
#
# The score compares TCP frames by (addresses, ports, sequence, payload
# length, flags, IPv4 ID) with tshark, not with offload's own reader:
# reproduced = wire frames found in gso.pcap; excess = gso.pcap frames that
# were never on the wire.
#
# Needs root, ip, ethtool, tcpdump, tshark, mergecap, python3 and a release
# build (cargo build --release -p offload-cli). Everything it creates (two
# namespaces oflgso-*, their veths, the tune state files) is removed on
# every exit path.
#
# Usage: scripts/gso-receiver-check.sh [OUT_DIR] [BYTES_PER_TRANSFER]
set -euo pipefail

[ "$(id -u)" = 0 ] || { echo "gso-receiver-check: needs root (network namespaces)" >&2; exit 1; }
for t in ip tcpdump tshark mergecap ethtool python3; do
    command -v "$t" >/dev/null || { echo "gso-receiver-check: $t not found" >&2; exit 1; }
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OFFLOAD=${OFFLOAD:-$ROOT/target/release/offload}
[ -x "$OFFLOAD" ] || { echo "gso-receiver-check: build $OFFLOAD first (cargo build --release -p offload-cli)" >&2; exit 1; }
OUT=$(realpath -m "${1:-$(mktemp -d)}")
BYTES=${2:-3000000}
GRO_MAX=${GRO_MAX:-185000}
mkdir -p "$OUT"
WORK=$(mktemp -d)
A="oflgso-a-$$"
B="oflgso-b-$$"
PIDS=()
LOGS=()

cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

inA() { ip netns exec "$A" "$@"; }
inB() { ip netns exec "$B" "$@"; }

ip netns add "$A"
ip netns add "$B"
inA ip link set lo up
inB ip link set lo up
# pair 1: MTU 1500 (10.78.1.0/24, fd78:1::/64); pair 2: MTU 9000 (10.78.2.0/24, fd78:2::/64)
for n in 1 2; do
    mtu=$([ $n = 1 ] && echo 1500 || echo 9000)
    ip link add "oflg-a$n" netns "$A" type veth peer name "oflg-b$n" netns "$B"
    inA ip link set "oflg-a$n" mtu "$mtu"
    inB ip link set "oflg-b$n" mtu "$mtu"
    inA ip addr add "10.78.$n.1/24" dev "oflg-a$n"
    inB ip addr add "10.78.$n.2/24" dev "oflg-b$n"
    inA ip -6 addr add "fd78:$n::1/64" dev "oflg-a$n" nodad
    inB ip -6 addr add "fd78:$n::2/64" dev "oflg-b$n" nodad
    # As the lab's big-tcp experiment does (crates/offload-lab/src/experiments/big_tcp.rs):
    # TSO off, so that the sender's TCP hands GSO packets of up to its
    # gso_max_size to the stack, which cuts them into wire-sized segments in
    # software before veth (validate_xmit_skb, net/core/dev.c); the
    # receiving veth runs NAPI GRO on them (veth_skb_is_eligible_for_gro,
    # drivers/net/veth.c). The four size knobs on both ends, IPv6 ones
    # first (an IPv6 value <= 64 KiB also overwrites the IPv4 knob), over
    # rtnetlink with `offload tune` (iproute2 6.1 has no IPv4 keywords).
    # With GSO off the sender sends one segment per packet and the
    # receiver's GRO stopped at 65226 bytes although gro_max_size read back
    # 185000.
    inA ethtool -K "oflg-a$n" tso off >/dev/null
    inB ethtool -K "oflg-b$n" tso off gro on >/dev/null
    for end in "$A:oflg-a$n" "$B:oflg-b$n"; do
        "$OFFLOAD" tune --netns "${end%%:*}" --apply --state "$WORK/tune-${end#*:}.json" \
            --set "${end#*:}:gso_max_size=$GRO_MAX" --set "${end#*:}:gro_max_size=$GRO_MAX" \
            --set "${end#*:}:gso_ipv4_max_size=$GRO_MAX" --set "${end#*:}:gro_ipv4_max_size=$GRO_MAX" >/dev/null
    done
    inA ip link set "oflg-a$n" up
    inB ip link set "oflg-b$n" up
done

# TCP, and IPv6 jumbograms: a Hop-by-Hop header (next header 0) whose
# next header is TCP (`tcp` alone misses them). Not `ip or ip6`: IPv6
# neighbour discovery after the transfers reached a receiver-side capture
# between its drain and its stop, and tcpdump exits without writing the
# frames of its last ring block (2 frames "received by filter" and never
# captured, in 2 of 8 runs).
FILTER='tcp or (ip6 and ip6[6] == 0 and ip6[40] == 6)'

# tcpdump in namespace $1 on device $2 into $3 (pcap, whole frames).
# No --immediate-mode: with it libpcap uses TPACKET_V2, whose fixed slots
# are sized for the largest frame the device could deliver (64 KiB and
# more on a veth with GSO), and a loaded run's sender-side capture dropped
# 776 and 900 frames that gso's correct split was then scored as "extra".
# Without it libpcap uses TPACKET_V3, whose blocks pack frames of any size;
# frames wait in a block until it fills or its 1 s timeout retires it, so
# the captures are drained (SIGUSR1 counts) before they are stopped, as in
# crates/offload-cli/tests/common/capture.rs.
start_capture() {
    local log="$WORK/$(basename "$3").log"
    ip netns exec "$1" tcpdump -i "$2" -s 0 -B 65536 -U -n -w "$3" "$FILTER" 2>"$log" &
    PIDS+=($!)
    LOGS+=("$log")
    for _ in $(seq 50); do
        grep -q "listening on" "$log" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "gso-receiver-check: tcpdump did not start" >&2
    cat "$log" >&2
    exit 1
}

# The last "N packets captured, N packets received by filter, N packets
# dropped by kernel" counts of a tcpdump log, as "captured received dropped".
counts() {
    tr '\n' ' ' <"$1" | grep -oE '[0-9]+ packets captured,? +[0-9]+ packets received by filter,? +[0-9]+ packets dropped by kernel' |
        tail -n 1 | grep -oE '[0-9]+' | tr '\n' ' '
}

# Waits until tcpdump $1 (log $2) has written every frame it received and
# the counts stayed the same over 300 ms; counts that stay still for 3 s
# with frames received but never written and no kernel drop are accepted
# and reported (the shared test helper's rule). Prints the frames left.
drain_capture() {
    local last="" still=0 now c r d
    for _ in $(seq 66); do
        sleep 0.3
        kill -USR1 "$1"
        sleep 0.05
        now=$(counts "$2")
        read -r c r d <<<"$now"
        if [ "$now" = "$last" ]; then still=$((still + 1)); else still=0; fi
        if [ -n "$now" ] && [ "$c" = "$r" ] && [ "$still" -ge 1 ]; then echo 0; return 0; fi
        if [ -n "$now" ] && [ "$d" = 0 ] && [ "$still" -ge 10 ]; then
            echo "gso-receiver-check: $(basename "$2" .log): $((r - c)) frame(s) received, never written, counts still for 3 s: $now" >&2
            echo $((r - c))
            return 0
        fi
        last=$now
    done
    echo "gso-receiver-check: $(basename "$2" .log) not drained after 20 s: $now" >&2
    exit 1
}

for n in 1 2; do
    start_capture "$A" "oflg-a$n" "$WORK/wire$n.pcap"
    start_capture "$B" "oflg-b$n" "$WORK/receiver$n.pcap"
done

# One transfer of $BYTES from A to address $1, with TCP_MAXSEG $2 if given.
transfer() {
    inB python3 - <<'PY' &
import socket
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", 5202))
s.listen(1)
s.settimeout(20)
c, _ = s.accept()
while c.recv(1 << 20):
    pass
c.close()
PY
    local srv=$!
    sleep 0.3
    inA python3 - "$1" "$BYTES" "${2:-0}" <<'PY'
import socket, sys
addr, n, mss = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
import time
deadline = time.monotonic() + 20
while True:  # the server may still be starting on a loaded machine
    c = socket.socket(fam, socket.SOCK_STREAM)
    if mss:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, mss)
    c.settimeout(20)
    try:
        c.connect((addr, 5202))
        break
    except ConnectionRefusedError:
        c.close()
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
buf = bytes(range(256)) * 1024
sent = 0
while sent < n:
    sent += c.send(buf[: min(len(buf), n - sent)])
c.shutdown(socket.SHUT_WR)
c.recv(1)
c.close()
PY
    wait "$srv"
}

# (address, TCP_MAXSEG): default MSS on both pairs and families, then
# clamped ones from 536 to the jumbo MTU's (payload = MSS - 12 bytes of
# timestamps), among them IPv6 payloads of 1400, 1440 and 8928 (the
# largest an IPv6 segment carries at MTU 9000) over the jumbo pair, in
# BIG TCP super-packets of up to 185000 bytes.
for flow in 10.78.1.2 fd78:1::2 10.78.2.2 fd78:2::2 \
    10.78.1.2,536 fd78:1::2,1000 10.78.2.2,1460 fd78:2::2,1452 10.78.2.2,4000 fd78:2::2,6000 \
    10.78.2.2,8960 fd78:2::2,1412; do
    transfer "${flow%%,*}" "$([ "${flow#*,}" != "$flow" ] && echo "${flow#*,}")"
done
# Every capture drained, stopped and complete: no kernel drop on either
# side (a frame the reference capture lost would be scored as an extra
# frame of gso's), nothing left unwritten beyond what drain reported.
for i in "${!PIDS[@]}"; do
    left=$(drain_capture "${PIDS[$i]}" "${LOGS[$i]}")
    kill -INT "${PIDS[$i]}"
    wait "${PIDS[$i]}" || true
    read -r c r d <<<"$(counts "${LOGS[$i]}")"
    echo "tcpdump $(basename "${LOGS[$i]}" .log): captured $c, received by filter $r, dropped by kernel $d"
    if [ "${d:-1}" != 0 ] || [ $((r - c)) -gt "$left" ]; then
        echo "gso-receiver-check: capture $(basename "${LOGS[$i]}" .log) incomplete: captured $c, received $r, dropped $d" >&2
        exit 1
    fi
done
PIDS=()

mergecap -F pcap -w "$OUT/wire.pcap" "$WORK/wire1.pcap" "$WORK/wire2.pcap"
mergecap -F pcap -w "$OUT/receiver.pcap" "$WORK/receiver1.pcap" "$WORK/receiver2.pcap"
"$OFFLOAD" gso "$OUT/receiver.pcap" -o "$OUT/gso.pcap" >"$OUT/gso-summary.txt"
cat "$OUT/gso-summary.txt"
# The same capture joined late: no handshake, so no MSS option to read.
tshark -r "$OUT/receiver.pcap" -Y "not tcp.flags.syn == 1" -F pcap -w "$OUT/receiver-nosyn.pcap"
"$OFFLOAD" gso "$OUT/receiver-nosyn.pcap" -o "$OUT/gso-nosyn.pcap" >"$OUT/gso-nosyn-summary.txt"
cat "$OUT/gso-nosyn-summary.txt"

fields() {
    tshark -r "$1" -Y tcp -T fields -E separator=, \
        -e ip.src -e ipv6.src -e ip.dst -e ipv6.dst -e tcp.srcport -e tcp.dstport \
        -e tcp.seq_raw -e tcp.len -e tcp.flags -e ip.id
}
fields "$OUT/wire.pcap" >"$WORK/wire.txt"
fields "$OUT/gso.pcap" >"$WORK/gso.txt"
fields "$OUT/receiver.pcap" >"$WORK/receiver.txt"
fields "$OUT/gso-nosyn.pcap" >"$WORK/gso-nosyn.txt"
# The receiver's super-packets above 64 KiB (IP packet longer than the
# 16-bit length fields hold: IPv4 total length 0, IPv6 jumbo option).
tshark -r "$OUT/receiver.pcap" -Y "tcp && frame.len > 65549" -T fields -E separator=, \
    -e ip.src -e ipv6.src -e ip.dst -e ipv6.dst -e tcp.srcport -e tcp.dstport \
    -e tcp.seq_raw -e tcp.len -e frame.len >"$WORK/big.txt"
python3 - "$WORK/wire.txt" "$WORK/gso.txt" "$WORK/receiver.txt" "$WORK/gso-nosyn.txt" "$WORK/big.txt" <<'PY'
import collections, sys
lines = [open(p).read().split("\n")[:-1] for p in sys.argv[1:5]]
big = [l.split(",") for l in open(sys.argv[5]).read().split("\n")[:-1]]
gso, rx, nosyn = (collections.Counter(l) for l in lines[1:])
# A segment the receiver's veth dropped (its ring holds 256 packets) never
# reaches the receiver's capture; the sender retransmits it, with another
# IPv4 ID. Such a segment counts once in the truth: the copy sent last.
# (ACKs without data repeat their fields legitimately: all are kept.)
# Excess is counted against every copy sent: a retransmission the sender
# made while the first copy was still on its way (a spurious timeout on a
# loaded machine) reaches the receiver twice, and gso rightly gives back
# both.
full = collections.Counter(lines[0])
last, acks = {}, []
for k in lines[0]:
    if k.split(",")[7] == "0":
        acks.append(k)
    else:
        last[k.rsplit(",", 1)[0]] = k
wire = collections.Counter(list(last.values()) + acks)
print(f"wire frames {len(lines[0])}, counted {sum(wire.values())} (the rest: retransmissions of dropped segments)")
def score(name, got):
    hit = sum((wire & got).values())
    total, n = sum(wire.values()), sum(got.values())
    print(f"{name:<14} frames {n:>7}  wire frames reproduced {hit}/{total} = {100 * hit / max(total, 1):.1f}%  excess {n - sum((full & got).values())}")
score("receiver.pcap", rx)
score("gso.pcap", gso)
# Per flow (addresses and ports), to see which one missed.
def flows(c):
    out = collections.defaultdict(collections.Counter)
    for k, n in c.items():
        f = k.split(",")
        out[tuple(f[:6])][k] += n
    return out
def per_flow(prefix, wire, got):
    wf, gf, ff = flows(wire), flows(got), flows(full)
    for key in sorted(wf):
        w, g = wf[key], gf.get(key, collections.Counter())
        hit = sum((w & g).values())
        sent = sum((ff[key] & g).values())
        print(f"  {prefix} {'/'.join(x for x in key if x):<48} wire {sum(w.values()):>6}  reproduced {100 * hit / max(sum(w.values()), 1):5.1f}%  excess {sum(g.values()) - sent}")
per_flow("flow", wire, gso)
# Without the handshake: score against the wire minus its SYNs.
nosyn_only = lambda c: collections.Counter({k: n for k, n in c.items() if k.split(",")[8] not in ("0x0002", "0x0012")})
wire, full = nosyn_only(wire), nosyn_only(full)
score("gso-nosyn.pcap", nosyn)
per_flow("nosyn", wire, nosyn)
# The wire frames inside the receiver's super-packets above 64 KiB, and how
# many of them each gso output holds (the wire without SYNs: none is inside).
spans = collections.defaultdict(list)
for f in big:
    spans[tuple(f[:6])].append((int(f[6]), int(f[7])))
inside = [k for k in wire if any((int(k.split(",")[6]) - s) % 2**32 < n
                                  for s, n in spans.get(tuple(k.split(",")[:6]), []))]
v4 = sum(1 for f in big if f[0])
print(f"above 64 KiB   super-packets {len(big)} (IPv4 {v4}, IPv6 {len(big) - v4}), largest "
      f"{max((int(f[8]) - 14 for f in big), default=0)} bytes of IP packet; wire frames inside {len(inside)}, "
      f"in gso.pcap {sum(1 for k in inside if gso[k])}, in gso-nosyn.pcap {sum(1 for k in inside if nosyn[k])}")
PY
echo "captures in $OUT"
