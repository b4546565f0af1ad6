#!/usr/bin/env bash
# Makes a capture of real kernel traffic for benches/analyze-peers.sh:
# iperf3 IPv4 and IPv6 bulk TCP between two network namespaces joined by a
# veth pair, captured with tcpdump on the receiver's side (data and ACKs,
# full snap length). TSO/GSO/GRO are off on the veth pair so that the capture
# holds wire-sized segments (1448-byte payloads), the hardest case for an
# analyser: most frames per byte. Transmit checksumming is off too, so every
# segment carries a full checksum, as on a physical receiver, and the
# analysers verify them.
#
# Usage: benches/real-capture.sh OUT.pcap [MEGABYTES]   (root; default 500 MB)
# The namespaces (ofl-rc-<pid>-a/b) are removed on every exit path.
#
# COMPARE=1 then runs the peers side by side on that capture (warm page
# cache, best wall time of RUNS=5 runs, with its user+system CPU time) and
# prints the table of docs/performance.md: offload analyze with one thread,
# the default and --threads 2, `tcptrace -l`, `tshark -q -z conv,tcp`.
# OFFLOAD=path/to/offload (default target/release/offload). Run it under the
# shared lock: flock /tmp/offload-bench.lock nice env COMPARE=1 benches/real-capture.sh ...
set -euo pipefail

OUT=${1:?usage: real-capture.sh OUT.pcap [MEGABYTES]}
MB=${2:-500}
for t in ip iperf3 tcpdump ethtool; do
    command -v "$t" >/dev/null || { echo "real-capture: $t not found (apt-get install iproute2 iperf3 tcpdump ethtool)" >&2; exit 1; }
done
A="ofl-rc-$$-a"
B="ofl-rc-$$-b"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$A"
ip netns add "$B"
ip link add va netns "$A" type veth peer name vb netns "$B"
ip -n "$A" addr add 10.77.0.1/24 dev va
ip -n "$B" addr add 10.77.0.2/24 dev vb
ip -n "$A" addr add fd77::1/64 dev va nodad
ip -n "$B" addr add fd77::2/64 dev vb nodad
for ns in "$A" "$B"; do
    ip -n "$ns" link set lo up
done
ip -n "$A" link set va up
ip -n "$B" link set vb up
ip netns exec "$A" ethtool -K va tx off tso off gso off gro off >/dev/null
ip netns exec "$B" ethtool -K vb tx off tso off gso off gro off >/dev/null

ip netns exec "$B" iperf3 -s -p 5201 -D --pidfile "/tmp/ofl-rc-$$.4.pid" >/dev/null
ip netns exec "$B" iperf3 -s -p 5202 -D --pidfile "/tmp/ofl-rc-$$.6.pid" >/dev/null
sleep 0.5
PIDS+=("$(cat "/tmp/ofl-rc-$$.4.pid")" "$(cat "/tmp/ofl-rc-$$.6.pid")")
rm -f "/tmp/ofl-rc-$$.4.pid" "/tmp/ofl-rc-$$.6.pid"

ip netns exec "$B" tcpdump -i vb -s 0 -B 524288 -w "$OUT" tcp 2>"$OUT.tcpdump.log" &
PIDS+=("$!")
sleep 1
# Half the bytes over IPv4, half over IPv6, at the same time; a rate cap
# keeps tcpdump from dropping (a dropped frame would be a gap in the data).
HALF=$((MB / 2))
ip netns exec "$A" iperf3 -c 10.77.0.2 -p 5201 -n "${HALF}M" -b 300M -l 64K >/dev/null &
C4=$!
ip netns exec "$A" iperf3 -c fd77::2 -p 5202 -n "${HALF}M" -b 300M -l 64K >/dev/null &
C6=$!
wait "$C4" "$C6"
sleep 1
kill -INT "${PIDS[2]}"
wait "${PIDS[2]}" 2>/dev/null || true
cat "$OUT.tcpdump.log" >&2
rm -f "$OUT.tcpdump.log"

[ -n "${COMPARE:-}" ] || exit 0
# The capture is done: stop the namespaces before measuring.
cleanup
trap - EXIT
OFFLOAD=${OFFLOAD:-$(dirname "$0")/../target/release/offload}
RUNS=${RUNS:-5}
T=$(mktemp -d /tmp/ofl-rc-cmp.XXXXXX)
trap 'rm -rf "$T"' EXIT
cat "$OUT" >/dev/null
BYTES=$(stat -c %s "$OUT")
best_of() {
    local best_wall="" best_cpu=""
    for _ in $(seq "$RUNS"); do
        /usr/bin/time -f "%e %U %S" -o "$T/time" "$@" >/dev/null 2>"$T/err" || {
            echo "real-capture: failed: $*" >&2; cat "$T/err" >&2; exit 1; }
        read -r wall user sys <"$T/time"
        cpu=$(printf '%.3f' "$(echo "$user + $sys" | bc -l)")
        if [ -z "$best_wall" ] || [ "$(echo "$wall < $best_wall" | bc -l)" = 1 ]; then
            best_wall=$wall; best_cpu=$cpu
        fi
    done
    echo "$best_wall $best_cpu"
}
read -r a1w a1c < <(best_of "$OFFLOAD" analyze "$OUT" --json --threads 1)
read -r adw adc < <(best_of "$OFFLOAD" analyze "$OUT" --json)
read -r a2w a2c < <(best_of "$OFFLOAD" analyze "$OUT" --json --threads 2)
read -r tw tc < <(best_of tcptrace -l "$OUT")
read -r sw sc < <(best_of tshark -q -z conv,tcp -r "$OUT")
mbps() { printf '%.0f' "$(echo "$BYTES / 1000000 / $1" | bc -l)"; }
ratio() { printf '%.1f' "$(echo "$1 / $2" | bc -l)"; }
echo "capture: $BYTES bytes; $(date -u '+%Y-%m-%d %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg); best of $RUNS"
echo
echo "| tool | wall s | CPU s (user+sys) | MB per CPU-second | CPU / offload analyze --threads 1 |"
echo "|---|---|---|---|---|"
echo "| offload analyze --threads 1 | $a1w | $a1c | $(mbps "$a1c") | 1.0 |"
echo "| offload analyze (default) | $adw | $adc | $(mbps "$adc") | $(ratio "$adc" "$a1c") |"
echo "| offload analyze --threads 2 | $a2w | $a2c | $(mbps "$a2c") | $(ratio "$a2c" "$a1c") |"
echo "| tcptrace -l | $tw | $tc | $(mbps "$tc") | $(ratio "$tc" "$a1c") |"
echo "| tshark -q -z conv,tcp | $sw | $sc | $(mbps "$sc") | $(ratio "$sc" "$a1c") |"
