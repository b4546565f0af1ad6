#!/usr/bin/env python3
"""Header-only copies of other projects' captures keep analyze's verdicts.

For every .pcap/.pcapng/.cap under the given directories that holds a TCP
flow, runs `offload analyze --json --no-checksum-check` on the whole file
and on a copy cut to SNAPLEN bytes per frame (`editcap -s SNAPLEN`, wire
lengths kept), and compares the findings (kind, severity, flow) and the
GRO what-if (without its notes). Checksums stay unverified on both sides:
a cut frame cannot show them. A file whose cut copy lost a header GRO
reads (a frame cut inside its headers, or an IP fragment cut short) is
expected to differ, with the snaplen it needs named: it is listed as CUT.
Any other difference is listed as DIFFERS. Prints one line per such file
and the totals; docs/analyze.md ("Header-only captures") quotes them.

    scripts/header-only-sweep.py OFFLOAD_BINARY SNAPLEN DIR [DIR ...]

Needs editcap (tshark's package). The cut copy goes into a private
temporary directory, removed at the end.
"""
import json
import os
import subprocess
import sys
import tempfile


def analyze(binary, path):
    r = subprocess.run([binary, "analyze", path, "--json", "--no-checksum-check"],
                       capture_output=True, timeout=300)
    return json.loads(r.stdout) if r.returncode == 0 else None


def verdicts(report, path):
    def flow(f):
        # A flow's id is its order of first appearance: it moves when a
        # cut hides other flows, while the flow it names stays the same.
        return {k: v for k, v in f.items() if k not in ("capture", "id")} if f else f
    findings = sorted(json.dumps({"kind": x["kind"], "severity": x["severity"],
                                  "flow": flow(x["flow"])}, sort_keys=True)
                      for x in report["findings"])
    what_if = [{k: v for k, v in w.items() if k != "notes"} for w in report["what_if"]]
    return findings, json.dumps(what_if, sort_keys=True).replace(path, "CAPTURE")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    binary, snaplen, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
    files = sorted(os.path.join(d, f) for top in dirs for d, _, fs in os.walk(top)
                   for f in fs if f.endswith((".pcap", ".pcapng", ".cap")))
    checked = differ = cut_short = 0
    with tempfile.TemporaryDirectory() as tmp:
        cut = os.path.join(tmp, "cut.pcapng")
        for path in files:
            whole = analyze(binary, path)
            if not whole or not any(f["protocol"] == "tcp" for f in whole["flows"]):
                continue
            if subprocess.run(["editcap", "-s", snaplen, path, cut],
                              capture_output=True).returncode != 0:
                continue
            part = analyze(binary, cut)
            checked += 1
            if part is None or verdicts(whole, path) != verdicts(part, cut):
                facts = (part or {}).get("inputs", [{}])[0]
                in_headers = facts.get("cut_in_headers_frames") or 0
                frags = (facts.get("fragments") or {}).get("cut_fragments") or 0
                if in_headers or frags:
                    cut_short += 1
                    print(f"CUT {path} ({in_headers} frames cut inside their headers, "
                          f"{frags} fragments cut; snaplen needed "
                          f"{facts.get('snaplen_needed')}, for fragments "
                          f"{(facts.get('fragments') or {}).get('snaplen_needed_for_fragments')})")
                else:
                    differ += 1
                    print(f"DIFFERS {path}")
    print(f"{checked} TCP captures cut to {snaplen} bytes: {differ} differ with every "
          f"header captured; {cut_short} lost a header GRO reads and name the snaplen it needs")


if __name__ == "__main__":
    main()
