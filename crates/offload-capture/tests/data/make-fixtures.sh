#!/usr/bin/env bash
# Regenerates the real-capture fixtures of tests/real_captures.rs (run as root;
# needs dumpcap, tcpdump, python3). Traffic stays on loopback: a short TCP
# exchange (messages of 100, 3000, 20000 and 9000 bytes, so loopback GSO/GRO
# gives frames up to about 20 KB) and three UDP datagrams, on ports 47011/47012.
#   multi.pcapng  dumpcap on lo (Ethernet) and any (Linux SLL): two interfaces
#   micro.pcap    tcpdump, microsecond pcap
#   nano96.pcap   tcpdump, nanosecond pcap with snaplen 96 (truncated frames)
set -euo pipefail
cd "$(dirname "$0")"
filter="host 127.0.0.1 and (port 47011 or port 47012)"
dumpcap -q -i lo -i any -f "$filter" -w multi.pcapng -a duration:4 &
d=$!
tcpdump -q -i lo -w micro.pcap "$filter" &
t1=$!
tcpdump -q -i lo --time-stamp-precision=nano -s 96 -w nano96.pcap "$filter" &
t2=$!
trap 'kill $t1 $t2 2>/dev/null || true' EXIT
sleep 2
python3 traffic.py 47011
sleep 1
kill "$t1" "$t2"
wait "$d"
