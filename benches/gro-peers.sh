#!/usr/bin/env bash
# GRO beside its peers: offload's engine, tun-rs, wireguard-go and DPDK's
# lib/gro on the same frame trains, in the same batches, on the same CPU,
# interleaved, in CPU nanoseconds per frame; plus the memcpy, checksum and
# copy-and-checksum floors. Prints a table of medians and ratios. Never run by CI.
#
# What it builds (dependencies fetched at build time, nothing vendored):
#   benches/gro-peers/rust   offload (path) + tun-rs (crates.io), floors
#   benches/gro-peers/go     wireguard-go's tun GRO (Go module proxy)
#   benches/gro-peers/dpdk   DPDK lib/gro (Debian's libdpdk-dev, apt)
# into target/gro-peers/.
#
# Frames: 4096-frame trains of 1514-byte TCP frames (timestamps option, DF,
# incrementing IP ID), IPv4 and IPv6, 1, 8 and 30 000 flows interleaved
# round-robin, made by the Rust harness (`gro-peers gen`). With KERNEL=1
# (root, iperf3, tcpdump, ethtool) it also captures trains of real kernel
# traffic between two namespaces joined by veth (sender TSO/GSO/checksum
# offload off, receiver GRO off; iperf3 -P 1 and -P 8, IPv4 and IPv6) and
# runs every engine on them too.
#
# offload runs three ways, with its default zero-copy delivery (payloads
# stay in the receive buffers, delivered as Delivered::frags): `offload`
# verifies TCP checksums, `offload-valid` gets the verdict a NIC or a vnet
# DATA_VALID header gives (receive_with_checksum with
# RxChecksum::Unnecessary), `offload-noverify` has
# GroConfig::verify_checksums off. `offload-copy` and `offload-valid-copy`
# are `offload` and `offload-valid` asking for contiguous super-packets
# (GroEngine::set_zero_copy(false): each payload copied, as tun-rs and
# wireguard-go do). offload-valid is the fair arm against DPDK, which
# verifies no checksum and chains mbufs instead of copying. (Before
# 2026-11-23 the copying arms were `offload`/`offload-valid` and the
# zero-copy ones `offload-zc`/`offload-valid-zc`: docs/performance.md
# keeps older tables under their names of the time.)
#
# Method: every harness loads each batch of BATCH frames (128) into its own
# receive buffers untimed, then times GRO over the batch with the thread's
# CPU clock; the median over REPS trains is one sample. ROUNDS rounds run
# every (case, engine) once, the engine order reversed in every other round
# (ABBA...), all pinned with taskset to CPU (1) and niced; the table gives
# the median over rounds.
#
# Usage: benches/gro-peers.sh                 (ROUNDS=5 REPS=30 BATCH=128 CPU=1)
#        KERNEL=1 benches/gro-peers.sh        (adds kernel-made trains; root)
#        ROUNDS=1 REPS=5 benches/gro-peers.sh (quick look)
#        KEEP=DIR benches/gro-peers.sh        (trains kept in DIR; default target/gro-peers/trains)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ROUNDS=${ROUNDS:-5} REPS=${REPS:-30} BATCH=${BATCH:-128} CPU=${CPU:-1} KERNEL=${KERNEL:-0}
OUT=$ROOT/target/gro-peers
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/gro-peers.XXXXXX)
NS_A=oflgp-$$-a NS_B=oflgp-$$-b
cleanup() {
    ip netns pids "$NS_A" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns pids "$NS_B" 2>/dev/null | xargs -r kill 2>/dev/null || true
    ip netns del "$NS_A" 2>/dev/null || true
    ip netns del "$NS_B" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "gro-peers: $*" >&2; }

# ---------------------------------------------------------------- build
if ! pkg-config --exists libdpdk 2>/dev/null; then
    log "installing Debian's libdpdk-dev (apt)"
    apt-get install -y -q --no-install-recommends libdpdk-dev pkg-config >&2
fi
log "building the Rust harness (offload, tun-rs)"
CARGO_TARGET_DIR=$OUT nice cargo build --release -q --manifest-path benches/gro-peers/rust/Cargo.toml
log "building the Go harness (wireguard-go)"
(cd benches/gro-peers/go && GOFLAGS=-mod=mod nice go build -o "$OUT/wg-gro" .)
log "building the C harness (DPDK $(pkg-config --modversion libdpdk))"
nice make -s -C benches/gro-peers/dpdk OUT="$OUT" >&2
RS=$OUT/release/gro-peers WG=$OUT/wg-gro DP=$OUT/dpdk-gro

# ---------------------------------------------------------------- frames
"$RS" gen "$WORK"
KEEP=${KEEP:-$OUT/trains}
keep() { mkdir -p "$KEEP" && cp "$WORK"/*.pcap "$KEEP"/; }
CASES="tcp4-1 tcp4-8 tcp6-1 tcp6-8 tcp4-30000 tcp6-30000"

# Real kernel traffic: two namespaces, veth, iperf3 at full rate (tcpdump's
# 64 MiB buffer holds the 9000 frames it keeps, so none is dropped); the
# first 4096 full-sized frames of the receiver's capture.
kernel_train() { # NAME FAMILY STREAMS
    local name=$1 fam=$2 streams=$3 dst=10.77.0.2
    [ "$fam" = 6 ] && dst=fd77::2
    ip netns exec "$NS_B" tcpdump -q -i vb -s 1600 -B 65536 -c 9000 -w "$WORK/$name.raw.pcap" \
        "tcp and dst port 5201 and greater 1500" 2>/dev/null &
    local tcpd=$!
    sleep 1
    ip netns exec "$NS_A" iperf3 -c "$dst" -t 2 -P "$streams" >/dev/null || true
    wait "$tcpd" || true
    "$RS" extract "$WORK/$name.raw.pcap" "$WORK/$name.pcap" "$streams"
    rm -f "$WORK/$name.raw.pcap"
}
if [ "$KERNEL" = 1 ]; then
    for t in ip iperf3 tcpdump ethtool; do command -v $t >/dev/null || { log "KERNEL=1 needs $t"; exit 1; }; done
    log "capturing kernel-made trains (namespaces $NS_A, $NS_B)"
    ip netns add "$NS_A"
    ip netns add "$NS_B"
    ip -n "$NS_A" link add va type veth peer name vb netns "$NS_B"
    ip -n "$NS_A" addr add 10.77.0.1/24 dev va
    ip -n "$NS_B" addr add 10.77.0.2/24 dev vb
    ip -n "$NS_A" addr add fd77::1/64 dev va nodad
    ip -n "$NS_B" addr add fd77::2/64 dev vb nodad
    ip -n "$NS_A" link set va up
    ip -n "$NS_B" link set vb up
    ip -n "$NS_A" link set lo up
    ip -n "$NS_B" link set lo up
    # Wire-sized segments with full checksums, as a NIC would receive them.
    ip netns exec "$NS_A" ethtool -K va tso off gso off tx off >/dev/null
    ip netns exec "$NS_B" ethtool -K vb gro off >/dev/null
    ip netns exec "$NS_B" iperf3 -s -D
    sleep 1
    kernel_train kern-tcp4-1 4 1
    kernel_train kern-tcp4-8 4 8
    kernel_train kern-tcp6-1 6 1
    kernel_train kern-tcp6-8 6 8
    CASES="$CASES kern-tcp4-1 kern-tcp4-8 kern-tcp6-1 kern-tcp6-8"
fi

keep

# ---------------------------------------------------------------- runs
ENGINES="offload offload-copy offload-valid offload-valid-copy offload-noverify tun-rs wireguard-go dpdk dpdk-parse memcpy checksum checksum-tun-rs copy-checksum"
run_one() { # ENGINE PCAP
    local e=$1 p=$2
    case $e in
        wireguard-go) nice taskset -c "$CPU" "$WG" -batch "$BATCH" -reps "$REPS" "$p" ;;
        dpdk | dpdk-parse)
            # DPDK 22.11 has no TCP/IPv6 GRO: the harness refuses IPv6 (exit 3).
            local rc=0
            nice taskset -c "$CPU" "$DP" "$e" "$p" "$BATCH" "$REPS" 2>"$WORK/dpdk.err" || rc=$?
            [ $rc = 0 ] || [ $rc = 3 ] || { cat "$WORK/dpdk.err" >&2; return 1; } ;;
        *) nice taskset -c "$CPU" "$RS" run "$e" "$p" --batch "$BATCH" --reps "$REPS" ;;
    esac
}
RESULTS=$WORK/results.txt
: >"$RESULTS"
for r in $(seq 1 "$ROUNDS"); do
    order=$ENGINES
    [ $((r % 2)) = 0 ] && order=$(echo "$ENGINES" | tr ' ' '\n' | tac | tr '\n' ' ')
    log "round $r/$ROUNDS"
    for c in $CASES; do
        for e in $order; do
            run_one "$e" "$WORK/$c.pcap" | sed "s/^RESULT /RESULT round=$r /" >>"$RESULTS"
        done
    done
done

# ---------------------------------------------------------------- table
cp "$RESULTS" "$OUT/results-last.txt" # every run's figure, for a second look
echo "# gro-peers $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p')), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# trains kept in $KEEP (rerun one engine: $RS run ENGINE $KEEP/CASE.pcap)"
echo "# rounds $ROUNDS, $REPS trains of 4096 frames per run, batch $BATCH, CPU $CPU; median over rounds of CPU ns per frame"
echo "# versions: tun-rs $(sed -n '/name = "tun-rs"/{n;s/version = //p}' benches/gro-peers/rust/Cargo.lock | tr -d '"'), wireguard-go $(sed -n 's/.*golang.zx2c4.com\/wireguard \(v[^ ]*\).*/\1/p' benches/gro-peers/go/go.mod | head -1), DPDK $(pkg-config --modversion libdpdk), $(go version | cut -d' ' -f3), $(rustc --version | cut -d' ' -f1-2)"
python3 - "$RESULTS" "$CASES" <<'PY'
import statistics, sys, collections
path, cases = sys.argv[1], sys.argv[2].split()
ns = collections.defaultdict(list)
by_round = collections.defaultdict(dict)
out = {}
for line in open(path):
    kv = dict(f.split("=", 1) for f in line.split()[1:])
    ns[(kv["case"], kv["engine"])].append(float(kv["ns_per_frame"]))
    by_round[(kv["case"], kv["engine"])][kv["round"]] = float(kv["ns_per_frame"])
    out[(kv["case"], kv["engine"])] = kv["out"]
med = {k: statistics.median(v) for k, v in ns.items()}
# Ratios are paired: the two times of one round (run seconds apart, the
# same case's engines back to back) give one ratio, and the table gives
# the median of those ratios. This VM's speed shifts by up to 1.5x
# between minutes (host neighbours); a ratio of medians taken over
# different rounds mixes states, a per-round ratio does not.
def paired(ka, kb):
    a, b = by_round.get(ka, {}), by_round.get(kb, {})
    rs = [a[r] / b[r] for r in a if r in b and b[r] > 0]
    return statistics.median(rs) if rs else None
cols = ["offload", "offload-copy", "offload-valid", "offload-valid-copy", "offload-noverify", "tun-rs", "wireguard-go", "dpdk", "dpdk-parse",
        "memcpy", "checksum", "checksum-tun-rs", "copy-checksum"]
def cell(c, e):
    v = med.get((c, e))
    return "-" if v is None else f"{v:.1f}"
print("\nCPU ns per frame (median of rounds); packets out per 4096 frames in brackets\n")
print("| case | " + " | ".join(cols) + " |")
print("|---|" + "---:|" * len(cols))
for c in cases:
    row = []
    for e in cols:
        v = cell(c, e)
        if v != "-" and e not in ("memcpy", "checksum", "checksum-tun-rs", "copy-checksum"):
            v += f" [{out[(c, e)]}]"
        row.append(v)
    print(f"| {c} | " + " | ".join(row) + " |")
def ratio(c, a, b):
    v = paired((c, a), (c, b))
    return "-" if v is None else f"{v:.2f}"
print("\nRatios (time of the first / time of the second; median over rounds of each round's ratio)\n")
hdr = ["tun-rs / offload", "tun-rs / offload-copy", "wireguard-go / offload", "offload-valid / dpdk",
       "offload-valid / dpdk-parse", "offload-valid-copy / dpdk", "offload-noverify / dpdk",
       "offload-copy / checksum floor", "offload-copy / copy-checksum floor"]
print("| case | " + " | ".join(hdr) + " |")
print("|---|" + "---:|" * len(hdr))
for c in cases:
    print(f"| {c} | " + " | ".join([ratio(c, "tun-rs", "offload"), ratio(c, "tun-rs", "offload-copy"),
          ratio(c, "wireguard-go", "offload"), ratio(c, "offload-valid", "dpdk"),
          ratio(c, "offload-valid", "dpdk-parse"), ratio(c, "offload-valid-copy", "dpdk"),
          ratio(c, "offload-noverify", "dpdk"), ratio(c, "offload-copy", "checksum"),
          ratio(c, "offload-copy", "copy-checksum")]) + " |")
# Engines that verify checksums and follow the same TCP rules should make
# the same number of packets; say so where they do not (the train is kept).
for c in cases:
    outs = {e: out.get((c, e)) for e in ("offload", "offload-copy", "offload-valid", "tun-rs", "wireguard-go")}
    if len({v for v in outs.values() if v is not None}) > 1:
        print(f"\nNote: {c}: packets out differ: " + ", ".join(f"{e} {v}" for e, v in outs.items()))
# Every round, for the record: the goal's ratio per round.
print("\ntun-rs / offload, round by round\n")
rounds = sorted({r for k in by_round for r in by_round[k]}, key=int)
print("| case | " + " | ".join(f"round {r}" for r in rounds) + " |")
print("|---|" + "---:|" * len(rounds))
for c in cases:
    a, b = by_round.get((c, "tun-rs"), {}), by_round.get((c, "offload"), {})
    print(f"| {c} | " + " | ".join(f"{a[r] / b[r]:.2f}" if r in a and r in b else "-" for r in rounds) + " |")
print("\nFlow scaling: time per frame / the 1-flow time of the same arm (median over rounds of each round's ratio)\n")
print("| arm | family | 8 flows | 30 000 flows |")
print("|---|---|---:|---:|")
for arm in ("offload", "offload-valid", "offload-copy"):
    for fam in ("tcp4", "tcp6"):
        one = (fam + "-1", arm)
        f = lambda n: "-" if (v := paired((fam + n, arm), one)) is None else f"{v:.2f}"
        print(f"| {arm} | {fam} | {f('-8')} | {f('-30000')} |")
PY
