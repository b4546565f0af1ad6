#!/usr/bin/env bash
# Runs `offload bench` side by side with netperf, neper and sockperf on
# loopback, with the same CPU placement and the same thread and flow counts
# on both sides, interleaved so that slow periods of a shared machine hit
# every tool, and writes the figures, the ratios and the exact command each
# side ran into docs/performance.md under "## offload bench".
#
# What it measures (the "done" criteria of offload bench):
#   1. 1-byte TCP_RR, one flow, client on CPU 0 and server on CPU 1, PAIRS
#      interleaved pairs of offload bench and netperf (order alternates);
#      the figure is the median of the per-pair ratios.
#   2. 1-byte TCP_RR with 1,000, 10,000 and 30,000 flows over 2 client and
#      2 server threads, offload bench and neper tcp_rr (-T 2 -F FLOWS) in
#      turn, ROUNDS rounds. A tool that cannot run is reported with its
#      error, never dropped. Where the open-file limit cannot hold neper's
#      flows in one process, neper runs as 2 processes of 1 thread started
#      together, for SPLIT_DUR s of steady state plus SPLIT_SETUP s for
#      their connection setup, and its rate is taken over the window in
#      which all flows of both processes ran; offload bench then measures
#      SPLIT_DUR s too.
#   3. 32-byte UDP flood, client on CPU 0 and server on CPU 1: offload bench
#      udp-stream with --reuseport --batch 32 --udp-gro --rx-usecs 50
#      against sockperf throughput (its server reading in a loop until
#      EAGAIN), PAIRS interleaved pairs, on loopback and between two
#      namespaces over veth (GRO, rx-udp-gro-forwarding, threaded NAPI on
#      CPU 1); received, sent and dropped datagrams of both.
#
# Peers: netperf and neper are not Debian packages: build them from source
# outside this repository and point NETPERF_DIR (holding netperf and
# netserver) and NEPER_DIR (holding tcp_rr) at the build directories.
# sockperf is looked up in PATH (Debian package `sockperf`).
#
# Usage: NETPERF_DIR=... NEPER_DIR=... benches/bench-peers.sh
#        PAIRS=3 ROUNDS=1 DUR=5 by default; --no-write prints only.
# Needs root (to raise limits), 2 or more CPUs.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p offload-cli
export OFL="$PWD/target/release/offload"
export PAIRS="${PAIRS:-3}" ROUNDS="${ROUNDS:-1}" DUR="${DUR:-5}"
export WRITE=1
[ "${1:-}" = "--no-write" ] && WRITE=0
export NETPERF_DIR="${NETPERF_DIR:-}" NEPER_DIR="${NEPER_DIR:-}"
exec python3 - <<'PY'
import datetime, json, os, re, shutil, signal, statistics, subprocess, sys, tempfile, time

OFL = os.environ["OFL"]
PAIRS, ROUNDS, DUR = int(os.environ["PAIRS"]), int(os.environ["ROUNDS"]), int(os.environ["DUR"])
WRITE = os.environ["WRITE"] == "1"


def which(name, d=""):
    for p in ([os.path.join(d, name)] if d else []) + [os.path.join(x, name) for x in os.environ["PATH"].split(":")]:
        if os.access(p, os.X_OK):
            return p
    return None


NETPERF = which("netperf", os.environ.get("NETPERF_DIR", ""))
NETSERVER = which("netserver", os.environ.get("NETPERF_DIR", ""))
NEPER = which("tcp_rr", os.environ["NEPER_DIR"]) if os.environ.get("NEPER_DIR") else None
SOCKPERF = which("sockperf")
SCRATCH = tempfile.mkdtemp(prefix="ofl-bench-peers-")  # neper writes log files
procs = []
commands = {}  # label -> (client command, server command)


def show(cmd):
    return " ".join(os.path.basename(c) if i == 0 or c in (OFL, NETPERF, NETSERVER, NEPER, SOCKPERF) else c
                    for i, c in enumerate(cmd))


def run(cmd, timeout=None):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout or DUR * 6 + 120, cwd=SCRATCH)
    if r.returncode != 0:
        raise RuntimeError(f"exit {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}")
    return r.stdout


def start(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=SCRATCH)
    procs.append(p)
    time.sleep(0.5)
    return p


def stop(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def cleanup(*_):
    for p in procs:
        stop(p)
    for ns in (NS_A, NS_B):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    shutil.rmtree(SCRATCH, ignore_errors=True)


signal.signal(signal.SIGTERM, lambda *a: (cleanup(), sys.exit(1)))
signal.signal(signal.SIGINT, lambda *a: (cleanup(), sys.exit(1)))


def udp_in(ns=None):
    """(Udp InDatagrams, Udp RcvbufErrors) of /proc/net/snmp: datagrams
    read by applications and datagrams dropped on full receive buffers."""
    text = subprocess.run(["ip", "netns", "exec", ns, "cat", "/proc/net/snmp"], capture_output=True,
                          text=True).stdout if ns else open("/proc/net/snmp").read()
    for line in text.splitlines():
        if line.startswith("Udp:") and line.split()[1].isdigit():
            return int(line.split()[1]), int(line.split()[5])
    return 0, 0


def ofl_udp_figures(j):
    """offload bench udp-stream: (received/s, receive-buffer drops, sent/s).
    Its `sent` counts the whole test, warm-up (1 s here) included."""
    return j["packets_per_sec"], j["udp"]["kernel_rcvbuf_errors"], j["udp"]["sent"] / (j["cpu"]["window_seconds"] + 1)


def sockperf_figures(out, a, b):
    """sockperf throughput: (received/s, drops, sent/s) from the kernel's
    counters around the client's run and the client's own summary."""
    m = re.search(r"Total of (\d+) messages sent in ([\d.]+) sec", out)
    return (b[0] - a[0]) / DUR, b[1] - a[1], int(m.group(1)) / float(m.group(2)) if m else None


# Namespaces of part 4, removed on every exit path (cleanup()).
VETH = SOCKPERF is not None and os.environ.get("VETH", "1") == "1"
NS_A, NS_B = f"oflbp-a-{os.getpid()}", f"oflbp-b-{os.getpid()}"
VETH_A, VETH_B = "10.209.0.1", "10.209.0.2"


def veth_setup():
    sh = lambda *c: subprocess.run(list(c), check=True, capture_output=True)
    sh("ip", "netns", "add", NS_A)
    sh("ip", "netns", "add", NS_B)
    sh("ip", "link", "add", "oflbp0", "netns", NS_A, "type", "veth", "peer", "name", "oflbp1", "netns", NS_B)
    for ns, dev, addr in ((NS_A, "oflbp0", VETH_A), (NS_B, "oflbp1", VETH_B)):
        sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "netns", "exec", ns, "ethtool", "-K", dev, "gro", "on")
    # veth hands a locally sent UDP skb to its peer's NAPI (and so to the
    # threaded NAPI below, off the sender's CPU) only if the receiving
    # device has rx-udp-gro-forwarding or rx-gro-list
    # (veth_skb_is_eligible_for_gro, drivers/net/veth.c, 5.13+); without it
    # veth_xmit falls back to netif_rx and the whole receive path runs in
    # the sender's softirq on CPU 0, as on loopback. Datagrams for sockets
    # without UDP_GRO (sockperf's) are segmented again before delivery.
    sh("ip", "netns", "exec", NS_B, "ethtool", "-K", "oflbp1", "rx-udp-gro-forwarding", "on")
    sh("ip", "netns", "exec", NS_B, "sh", "-c", "echo 1 > /sys/class/net/oflbp1/threaded")
    # The receiving veth's NAPI thread goes to the server's CPU.
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and open(f"/proc/{pid}/comm").read().startswith("napi/oflbp1"):
                os.sched_setaffinity(int(pid), {1})
        except OSError:
            pass


# The open-file limit: as high as fs.nr_open where the hard limit may be
# raised (root with CAP_SYS_RESOURCE), else the soft limit up to the hard
# one. Every tool started below inherits it.
import resource
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
try:
    _want = int(open("/proc/sys/fs/nr_open").read())
    resource.setrlimit(resource.RLIMIT_NOFILE, (_want, _want))
except (OSError, ValueError):
    resource.setrlimit(resource.RLIMIT_NOFILE, (_hard, _hard))
FD_LIMIT = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
FLOWS = [int(x) for x in os.environ.get("FLOWS", "1 100 1000 10000 30000").split()]
# Where neper must be split into processes: the steady-state window both
# tools measure (SPLIT_DUR s) and the time neper's -l must add for its
# connection setup, which it counts in its test length.
SPLIT_DUR, SPLIT_SETUP = int(os.environ.get("SPLIT_DUR", "20")), int(os.environ.get("SPLIT_SETUP", "10"))


def neper_overlap_rate(paths):
    """Transactions per second of several neper clients over the window in
    which every flow of every one of them was running, from their -A files
    (one row per flow and 1 s sample: tid,flow_id,time,transactions,...;
    transactions are the flow's running total). Returns (rate, window
    start, window end, each process's own window length)."""
    flows_of, own = [], []
    for path in paths:
        per_flow = {}
        with open(path) as fh:
            next(fh)
            for line in fh:
                tid, fid, t, things = line.split(",", 4)[:4]
                per_flow.setdefault((tid, fid), []).append((float(t), int(things)))
        flows_of.append(per_flow)
        own.append(max(s[-1][0] for s in per_flow.values()) - min(s[0][0] for s in per_flow.values()))
    every = [sorted(s) for per_flow in flows_of for s in per_flow.values()]
    a = max(s[0][0] for s in every)   # the last flow's first transaction
    b = min(s[-1][0] for s in every)  # the first flow's last sample
    if b <= a:
        return 0.0, a, a, own

    def at(s, t):
        for (t0, n0), (t1, n1) in zip(s, s[1:]):
            if t0 <= t <= t1:
                return n0 + (n1 - n0) * (t - t0) / (t1 - t0) if t1 > t0 else n1
        return s[-1][1]

    return sum(at(s, b) - at(s, a) for s in every) / (b - a), a, b, own

def idle_entries():
    """Entries into halting idle states (every cpuidle state but POLL) of
    every CPU so far: on a VM each is a halt the hypervisor must wake."""
    total = 0
    base = "/sys/devices/system/cpu"
    for cpu in os.listdir(base):
        d = os.path.join(base, cpu, "cpuidle")
        if not re.fullmatch(r"cpu\d+", cpu) or not os.path.isdir(d):
            continue
        for st in os.listdir(d):
            try:
                if open(os.path.join(d, st, "name")).read().strip() != "POLL":
                    total += int(open(os.path.join(d, st, "usage")).read())
            except OSError:
                pass
    return total


LOAD_START = open("/proc/loadavg").read().split()[:3]
OPORT = 13867
ofl_srv = start([OFL, "bench", "server", "--listen", f"127.0.0.1:{OPORT}"])
ofl_common = ["-H", f"127.0.0.1:{OPORT}", "--duration", str(DUR), "--warmup", "1", "--json", "-q"]
netserver = start([NETSERVER, "-L", "127.0.0.1", "-p", "14865", "-D"]) if NETPERF and NETSERVER else None
rr, rr_poll, flows, udp, veth_udp = [], [], {}, [], []
try:
    # 1. TCP_RR, one flow, client CPU 0, server CPU 1.
    ofl_rr = [OFL, "bench", "tcp-rr", "--pin", "0", "--server-pin", "1", *ofl_common]
    np_rr = [NETPERF, "-H", "127.0.0.1", "-p", "14865", "-t", "TCP_RR", "-l", str(DUR), "-T", "0,1", "-P", "0",
             "--", "-r", "1,1", "-o", "THROUGHPUT,P50_LATENCY,P99_LATENCY"] if NETPERF else None
    commands["rr offload"] = (show(ofl_rr), f"offload bench server --listen 127.0.0.1:{OPORT} (workers pinned by --server-pin 1)")
    if np_rr:
        commands["rr netperf"] = (show(np_rr), "netserver -L 127.0.0.1 -p 14865 -D (child pinned to CPU 1 by -T 0,1)")
    # Twice: with the machine's own idle states, then with the idle loop
    # polling (a PM QoS request of 0 us on /dev/cpu_dma_latency, held by
    # this script for both tools alike), which takes the vCPU halts out of
    # each transaction (docs/bench.md, "Pinned TCP_RR on a VM").
    for regime in ("halt", "poll"):
        qos = None
        if regime == "poll":
            try:
                qos = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
                os.write(qos, (0).to_bytes(4, "little"))
            except OSError as e:
                print(f"no PM QoS request ({e}): idle-poll table skipped", file=sys.stderr)
                break
        try:
            for i in range(PAIRS):
                print(f"TCP_RR ({regime}) pair {i + 1}/{PAIRS}", file=sys.stderr)
                pair = {}
                for tool in (["offload", "netperf"] if i % 2 == 0 else ["netperf", "offload"]):
                    h0 = idle_entries()
                    if tool == "offload":
                        j = json.loads(run(ofl_rr))
                        fig = (j["transactions_per_sec"], j["latency_us"]["p50"], j["latency_us"]["p99"])
                    elif np_rr:
                        fig = tuple(float(x) for x in run(np_rr).strip().splitlines()[-1].split(","))
                    else:
                        continue
                    # Halts per transaction: idle entries of both CPUs over
                    # the whole command (warm-up included) per transaction
                    # at the measured rate over the same span.
                    span = DUR + (1 if tool == "offload" else 0)
                    pair[tool] = fig + ((idle_entries() - h0) / max(fig[0] * span, 1),)
                (rr if regime == "halt" else rr_poll).append(pair)
        finally:
            if qos is not None:
                os.close(qos)

    # 2. Many flows against neper, 2 client and 2 server threads, unpinned.
    for rnd in range(ROUNDS):
        for n in FLOWS:
            print(f"flows {n} round {rnd + 1}/{ROUNDS}", file=sys.stderr)
            th = min(2, n)  # one flow is one thread on each side, for both tools
            split = NEPER is not None and n + 200 > FD_LIMIT  # neper as several processes (below)
            ofl_cmd = [OFL, "bench", "tcp-rr", "--flows", str(n), "--threads", str(th), "--server-threads", str(th),
                       *ofl_common]
            if split:  # the same steady-state length as the split neper's common window
                ofl_cmd[ofl_cmd.index("--duration") + 1] = str(SPLIT_DUR)
            commands[f"flows {n} offload"] = (show(ofl_cmd), f"offload bench server ({th} worker threads for this test)")
            row = flows.setdefault(n, {"offload": [], "neper": [], "neper_error": None, "notes": []})
            try:
                j = json.loads(run(ofl_cmd, timeout=DUR * 6 + 300))
                row["offload"].append((j["transactions_per_sec"], j["latency_us"]["p50"], j["latency_us"]["p99"],
                                       (j.get("tcp_info") or {}).get("rtt_us", {}).get("p99")))
                row["notes"] = j["settings"].get("notes", [])
            except Exception as e:
                row["offload_error"] = str(e)
            if NEPER:
                # neper keeps all its flows in one process, so its open-file
                # limit must hold them all (plus a margin for listeners and
                # logs). The limit was raised above as far as this host
                # allows; where even the hard limit is too small, neper runs
                # as one process per thread (-T 1, FLOWS / 2 flows each, own
                # ports): the same 2 threads per side and the same flow count
                # as offload bench, whose threads each hold their flows in a
                # descriptor table of their own (decision 0034).
                nproc = 2 if split else 1
                per_t, per_f = (th, n) if nproc == 1 else (1, n // 2)
                # Split processes are started together and run long enough
                # (SPLIT_DUR s of steady state after their connection
                # setup, which neper counts in -l) that their windows
                # overlap for nearly all of the test; their rate is then
                # measured on the window where every flow of every process
                # is running (from neper's per-flow samples, --all-samples).
                n_len = DUR if nproc == 1 else SPLIT_DUR + SPLIT_SETUP
                srv_cmds, cli_cmds = [], []
                for k in range(nproc):
                    cp, dp = str(14866 + 10 * k), str(14867 + 10 * k)
                    samples = [f"--all-samples=neper-{n}-{k}.csv"] if nproc > 1 else []
                    srv_cmds.append([NEPER, "-T", str(per_t), "-F", str(per_f), "-l", str(n_len + 2), "-C", cp, "-P", dp])
                    cli_cmds.append([NEPER, "-c", "-H", "127.0.0.1", "-T", str(per_t), "-F", str(per_f), "-l",
                                     str(n_len), "-C", cp, "-P", dp, *samples])
                join = " & ".join
                commands[f"flows {n} neper"] = (join(show(c) for c in cli_cmds), join(show(c) for c in srv_cmds))
                if nproc > 1:
                    row["neper_note"] = (f"the open-file hard limit ({FD_LIMIT}) cannot hold {n} flows in one neper "
                                         f"process: {nproc} neper processes of 1 thread and {per_f} flows each per "
                                         f"side, started together")
                srvs = [start(c) for c in srv_cmds]
                try:
                    clis = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=SCRATCH)
                            for c in cli_cmds]
                    procs.extend(clis)
                    outs = []
                    for c in clis:
                        out, _ = c.communicate(timeout=n_len * 6 + 300)
                        if c.returncode != 0:
                            raise RuntimeError(f"exit {c.returncode}: {out.strip()[-300:]}")
                        outs.append(dict(l.split("=", 1) for l in out.splitlines() if "=" in l))
                    # Latency percentiles cannot be merged: the worst
                    # process's are kept.
                    p50 = max(float(kv.get("latency_p50", "nan")) for kv in outs) * 1e6
                    p99 = max(float(kv.get("latency_p99", "nan")) for kv in outs) * 1e6
                    if nproc == 1:
                        row["neper"].append((float(outs[0]["throughput"]), p50, p99))
                    else:
                        rate, a, b, own = neper_overlap_rate([os.path.join(SCRATCH, f"neper-{n}-{k}.csv")
                                                              for k in range(nproc)])
                        row["neper_window"] = b - a
                        row["neper_comparable"] = b - a >= 0.8 * SPLIT_DUR
                        row["neper"].append((rate, p50, p99))
                        row["neper_note"] += (
                            f"; all {n} flows of the {nproc} processes ran together for {b - a:.1f} s (the processes' "
                            f"own windows: {', '.join(f'{w:.1f} s' for w in own)}), and the figure is the sum of "
                            f"their transactions in that common window divided by its length (neper's per-flow "
                            f"samples, --all-samples, interpolated linearly between a flow's 1 s samples); the sum of the "
                            f"processes' own throughputs was {sum(float(kv['throughput']) for kv in outs):,.0f}"
                            + ("" if row["neper_comparable"] else ": common window too short, no ratio"))
                except Exception as e:
                    srv_out = []
                    for srv in srvs:
                        stop(srv)
                        srv_out += (srv.stdout.read() or "").strip().splitlines()[-1:] if srv.stdout else []
                    row["neper_error"] = f"{e} {' '.join(srv_out)}".strip()[-300:]
                for srv in srvs:
                    stop(srv)

    # 3. UDP flood, 32-byte datagrams, client CPU 0, server CPU 1.
    ofl_udp = [OFL, "bench", "udp-stream", "--request", "32", "--flows", "2", "--server-threads", "2", "--reuseport",
               "--batch", "32", "--udp-gro", "--rx-usecs", "50", "--rcvbuf", "4M", "--pin", "0", "--server-pin", "1",
               *ofl_common]
    ofl_gso = ofl_udp[:3] + ["--udp-gso", "32"] + ofl_udp[3:]
    commands["udp offload"] = (show(ofl_udp), "offload bench server (2 SO_REUSEPORT receivers on CPU 1, recvmmsg 32, "
                                              "UDP_GRO, 50 us coalescing sleep after a read that empties the socket)")
    commands["udp offload + GSO"] = (show(ofl_gso), "offload bench server (as above)")
    # sockperf's own receive batching: non-blocking sockets read in a loop
    # until EAGAIN before it waits in epoll again (it has no recvmmsg, and
    # its sender no sendmmsg: one sendto per datagram, on an unconnected
    # socket).
    # Both tools' receivers get the same 4 MiB receive buffer (net.core.
    # rmem_max here; sockperf's --buffer-size sets send and receive
    # buffers): with the default 208 KiB, about 270 queued 32-byte
    # datagrams, a receiver preempted for a millisecond by another job of
    # the shared machine drops, and the drops, not the tools, decided pairs.
    SP_RX = ["--nonblocked", "--recv_looping_num=-1", "--buffer-size", "4194304"]
    sp_srv = [SOCKPERF, "server", "-i", "127.0.0.1", "-p", "14868", *SP_RX] if SOCKPERF else None
    sp_cli = [SOCKPERF, "throughput", "-i", "127.0.0.1", "-p", "14868", "-m", "32", "-t", str(DUR)] if SOCKPERF else None
    if SOCKPERF:
        commands["udp sockperf"] = ("taskset -c 0 " + show(sp_cli), "taskset -c 1 " + show(sp_srv))
    for i in range(PAIRS):
        print(f"UDP pair {i + 1}/{PAIRS}", file=sys.stderr)
        pair = {}
        order = ["offload", "gso", "sockperf"]
        for tool in (order if i % 2 == 0 else order[::-1]):
            if tool in ("offload", "gso"):
                j = json.loads(run(ofl_udp if tool == "offload" else ofl_gso))
                pair[tool] = ofl_udp_figures(j)
            elif SOCKPERF:
                srv = start(["taskset", "-c", "1"] + sp_srv)
                time.sleep(0.5)
                a = udp_in()
                out = run(["taskset", "-c", "0"] + sp_cli)
                b = udp_in()
                stop(srv)
                # Datagrams delivered to sockets over the client's run
                # (/proc/net/snmp Udp InDatagrams; sockperf's server does
                # not report what it received).
                pair[tool] = sockperf_figures(out, a, b)
        udp.append(pair)

    # 4. The same flood between two namespaces over veth, the topology of a
    # container or VM host: GRO on the receiving veth (so UDP_GRO sockets
    # get coalesced datagrams), threaded NAPI with the receive work pinned
    # to the server's CPU 1, so the sender's CPU 0 only sends.
    if VETH:
        veth_setup()
        vsrv = start(["ip", "netns", "exec", NS_B, OFL, "bench", "server", "--listen", f"{VETH_B}:{OPORT}"])
        v_common = ["-H", f"{VETH_B}:{OPORT}", "--duration", str(DUR), "--warmup", "1", "--json", "-q"]
        v_ofl = ["ip", "netns", "exec", NS_A] + ofl_udp[:ofl_udp.index("-H")] + v_common
        v_gso = v_ofl[:7] + ["--udp-gso", "32"] + v_ofl[7:]
        v_sp_srv = ["ip", "netns", "exec", NS_B, "taskset", "-c", "1", SOCKPERF, "server", "-i", VETH_B, "-p", "14868",
                    *SP_RX]
        v_sp_cli = ["ip", "netns", "exec", NS_A, "taskset", "-c", "0", SOCKPERF, "throughput", "-i", VETH_B, "-p",
                    "14868", "-m", "32", "-t", str(DUR)]
        commands["veth udp offload"] = (show(v_ofl), f"ip netns exec {NS_B} offload bench server --listen {VETH_B}:{OPORT}")
        commands["veth udp offload + GSO"] = (show(v_gso), "(as above)")
        commands["veth udp sockperf"] = (show(v_sp_cli), show(v_sp_srv))
        for i in range(PAIRS):
            print(f"veth UDP pair {i + 1}/{PAIRS}", file=sys.stderr)
            pair = {}
            order = ["offload", "gso", "sockperf"]
            for tool in (order if i % 2 == 0 else order[::-1]):
                if tool in ("offload", "gso"):
                    j = json.loads(run(v_ofl if tool == "offload" else v_gso))
                    pair[tool] = ofl_udp_figures(j)
                else:
                    srv = start(v_sp_srv)
                    time.sleep(0.5)
                    a = udp_in(NS_B)
                    out = run(v_sp_cli)
                    b = udp_in(NS_B)
                    stop(srv)
                    pair[tool] = sockperf_figures(out, a, b)
            veth_udp.append(pair)
        stop(vsrv)
finally:
    cleanup()


def med(v):
    v = [x for x in v if x is not None and x == x]
    return statistics.median(v) if v else None


def f(x, nd=0):
    return "-" if x is None else f"{x:,.{nd}f}"


kernel = open("/proc/sys/kernel/osrelease").read().strip()
L = ["## offload bench\n",
     f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC on kernel {kernel}, {os.cpu_count()} CPUs "
     f"(a shared 2-core machine: other jobs ran at the same time, which is why every comparison is interleaved and "
     f"reported as ratios of neighbouring runs), by `PAIRS={PAIRS} ROUNDS={ROUNDS} DUR={DUR} NETPERF_DIR=... NEPER_DIR=... "
     f"benches/bench-peers.sh` (SPLIT_DUR={SPLIT_DUR} SPLIT_SETUP={SPLIT_SETUP}). Loopback unless said otherwise, {DUR} s "
     f"windows (offload bench adds a 1 s warm-up that it excludes); {SPLIT_DUR} s where neper must run as several "
     f"processes (see the many-flow table). Load average (1, 5, 15 min) at the start: {' '.join(LOAD_START)}, at the "
     f"end: {' '.join(open('/proc/loadavg').read().split()[:3])}.\n"]

def rr_table(pairs, title, intro):
    L.append(title)
    L.append(intro)
    L.append("| pair | offload bench trans/s | netperf trans/s | ratio | offload P50 / P99 (us) | netperf P50 / P99 (us) | "
             "vCPU halts per transaction offload / netperf |")
    L.append("|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for i, p in enumerate(pairs):
        o, n = p.get("offload"), p.get("netperf")
        r = o[0] / n[0] if o and n else None
        if r:
            ratios.append(r)
        L.append(f"| {i + 1} | {f(o and o[0])} | {f(n and n[0])} | {f(r, 2)} | "
                 f"{f(o and o[1], 1)} / {f(o and o[2], 1)} | {f(n and n[1], 1)} / {f(n and n[2], 1)} | "
                 f"{f(o and o[3], 2)} / {f(n and n[3], 2)} |")
    L.append(f"\nMedian ratio offload bench / netperf: **{f(med(ratios), 2)}x** (per pair: "
             f"{', '.join(f(x, 2) for x in ratios)}).\n")
    return med(ratios), ratios


GOALS = []


def goal(what, value, line, detail=""):
    if value is None:
        GOALS.append(f"- {what}: **not measured** {detail}".rstrip())
        return
    verdict = "met" if value >= line else "not met"
    GOALS.append(f"- {what}: {value:.2f}x against a goal of {line:g}x: **{verdict}**{detail}")


rr_med, rr_all = rr_table(rr, "### 1-byte TCP_RR, one flow, client on CPU 0, server on CPU 1\n",
         "The machine's own idle states: an idle vCPU halts (cpuidle driver haltpoll with guest polling off, "
         "`haltpoll.guest_halt_poll_ns=0`), and each transaction waits for the hypervisor to wake the halted vCPU "
         "of the other side twice (the last column: entries into halt over the run per transaction). That wake-up, "
         "not either tool, sets the rate (docs/bench.md, \"Pinned TCP_RR on a VM\").\n")
goal("1-byte TCP_RR against netperf, client CPU 0, server CPU 1, machine's idle states (median of pairs)",
     rr_med, 1.0, f" (pairs {min(rr_all):.2f} to {max(rr_all):.2f})" if rr_all else "")
if rr_poll:
    poll_med, poll_all = rr_table(rr_poll, "### The same with the idle loop polling (PM QoS 0 us), both tools\n",
             "This script holds `/dev/cpu_dma_latency` at 0 us while both tools run: idle CPUs poll instead of "
             "halting, so a transaction costs what the two tools and the kernel do for it.\n")
    goal("the same with the idle loop polling", poll_med, 1.0,
         f" (pairs {min(poll_all):.2f} to {max(poll_all):.2f})" if poll_all else "")

L.append(f"### 1-byte TCP_RR, 1 to {max(FLOWS):,} flows, 2 client and 2 server threads (1 for one flow), unpinned\n")
L.append(f"Open-file limit of the script and of every tool it started: {FD_LIMIT} (hard limit; fs.nr_open is "
         f"{open('/proc/sys/fs/nr_open').read().strip()}, raised to it where the host allows).\n")
L.append("| flows | offload bench trans/s | neper trans/s | ratio | offload P50 / P99 (us) | offload TCP_INFO rtt p99 over flows (us) |")
L.append("|---:|---:|---:|---:|---:|---:|")
for n, row in flows.items():
    o = [x[0] for x in row["offload"]]
    ne = [x[0] for x in row["neper"]]
    r = med(o) / med(ne) if o and ne and row.get("neper_comparable", True) else None
    if n >= 1000:
        per_round = [a / b for a, b in zip(o, ne) if b]
        goal(f"{n:,} flows against neper (ratio of the medians of {len(o)} rounds)", r, 1.0,
             f" (per round: {', '.join(f'{x:.2f}' for x in per_round)})" if per_round else "")
    neper_cell = f(med(ne)) if ne else f"could not run: {row['neper_error'] or 'not available'}"
    L.append(f"| {n:,} | {f(med(o)) if o else 'failed: ' + row.get('offload_error', '?')} | {neper_cell} | {f(r, 2)} | "
             f"{f(med([x[1] for x in row['offload']]), 0)} / {f(med([x[2] for x in row['offload']]), 0)} | "
             f"{f(med([x[3] for x in row['offload']]), 0)} |")
    for note in row["notes"]:
        L.append(f"\n{n:,} flows, offload bench said: \"{note}\"")
    if row.get("neper_note"):
        L.append(f"\n{n:,} flows, neper: {row['neper_note']}")
L.append("")

def udp_table(pairs):
    """Rows of one UDP topology: received, sent and dropped per second for
    each tool, and the ratios of received and of sent datagrams."""
    L.append("| pair | offload bench received / sent / dropped per s | + UDP GSO received per s | sockperf received / sent / dropped per s | ratio received | ratio sent | ratio GSO received |")
    L.append("|---:|---:|---:|---:|---:|---:|---:|")
    rec, sent, gso = [], [], []
    for i, p in enumerate(pairs):
        o, g, s = p.get("offload"), p.get("gso"), p.get("sockperf")
        r = o[0] / s[0] if o and s and s[0] else None
        rs = o[2] / s[2] if o and s and s[2] else None
        rg = g[0] / s[0] if g and s and s[0] else None
        for acc, x in ((rec, r), (sent, rs), (gso, rg)):
            if x:
                acc.append(x)
        cell = lambda t: "-" if not t else f"{f(t[0])} / {f(t[2])} / {f(t[1] / DUR if t[1] is not None else None)}"
        L.append(f"| {i + 1} | {cell(o)} | {f(g and g[0])} | {cell(s)} | {f(r, 2)} | {f(rs, 2)} | {f(rg, 1)} |")
    return med(rec), med(sent), med(gso)


L.append("### 32-byte UDP flood, client on CPU 0, server on CPU 1\n")
rec, sent, gso = udp_table(udp)
goal("32-byte udp-stream on loopback, reuseport, sendmmsg/recvmmsg 32, UDP_GRO, no GSO, datagrams received",
     rec, 1.5)
goal("the same with UDP GSO on the sender (batching in the kernel, GRO whole on the receivers)", gso, 1.5)
L.append(f"\nMedian ratios to sockperf: **{f(rec, 2)}x** datagrams received (the headline; {f(sent, 2)}x datagrams "
         f"sent) with SO_REUSEPORT, sendmmsg/recvmmsg batches of 32, UDP_GRO, receivers that sleep 50 us after "
         f"a read that empties their socket (`--rx-usecs 50`, the default with `--batch`) and 4 MiB receive buffers "
         f"(sockperf's too); **{f(gso, 1)}x** when the "
         f"sender also batches with UDP GSO (`--udp-gso 32`: 64 datagrams of 32 bytes per send, which loopback hands "
         f"to the UDP_GRO receivers whole; counted as the datagrams they carry). On loopback the receive path runs "
         f"in the sender's softirq on CPU 0, including the wakeup of a receiver that sleeps on its socket: the "
         f"coalescing sleep removes that wakeup (docs/bench.md, \"Where a UDP sender's time goes\"). Received: "
         f"what offload bench's receivers read (cross-checked against the kernel's counters in its report) and, for "
         f"sockperf, whose server reports nothing in throughput mode, the kernel's Udp InDatagrams over the "
         f"client's run; sent: each sender's own count; dropped: receive-buffer errors (offload bench's report, "
         f"Udp RcvbufErrors for sockperf).\n")

if veth_udp:
    L.append("### 32-byte UDP flood between two namespaces over veth, client on CPU 0, server on CPU 1\n")
    L.append("GRO and rx-udp-gro-forwarding on the receiving veth (without the latter veth does not hand locally "
             "sent UDP to NAPI), threaded NAPI with its thread pinned to CPU 1: the receive work runs beside "
             "the receivers, not on the sender's CPU; same flags as above.\n")
    rec, sent, gso = udp_table(veth_udp)
    goal("32-byte udp-stream between namespaces over veth, no GSO, datagrams received", rec, 1.5)
    L.append(f"\nMedian ratios to sockperf over veth: **{f(rec, 2)}x** datagrams received ({f(sent, 2)}x sent; "
             f"sendmmsg 32, reuseport, UDP_GRO, `--rx-usecs 50`), **{f(gso, 1)}x** with UDP GSO on the sender. "
             f"sockperf's counts are those of the server's namespace.\n")

L.append("### Goals, this run\n")
L.extend(GOALS)
L.append("")
L.append("### Exact commands\n")
L.append("| measurement | client side | server side |")
L.append("|---|---|---|")
for k, (c, s) in commands.items():
    L.append(f"| {k} | `{c}` | `{s}` |")
L.append("\nPlacement is the same for both tools of a row (CPU 0 / CPU 1, or unpinned for the many-flow rows, "
         "where both run 2 threads per side); batching is each tool's own: netperf and neper send one request per "
         "write, sockperf one datagram per sendto (it has no sendmmsg) with its server reading in a loop until EAGAIN "
         "(`--nonblocked --recv_looping_num=-1`), offload bench udp-stream 32 per sendmmsg and recvmmsg as its flags "
         "say; both UDP receivers have a 4 MiB receive buffer (`--rcvbuf 4M`, `--buffer-size 4194304`).")
section = "\n".join(L) + "\n"
print(section)
if WRITE:
    path = "docs/performance.md"
    text = open(path).read()
    m = re.search(r"^## offload bench\n.*?(?=^## |\Z)", text, flags=re.M | re.S)
    text = text[:m.start()] + section + "\n" + text[m.end():] if m else text.rstrip("\n") + "\n\n" + section
    open(path, "w").write(text)
    print(f"written to {path}", file=sys.stderr)
PY
