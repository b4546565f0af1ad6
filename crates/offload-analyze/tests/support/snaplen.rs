//! Shared by the header-only tests of offload-analyze and offload-cli
//! (included with `#[path]`): a cut copy of a capture made as editcap makes
//! it, and the figures of an analysis that must not depend on the snapshot
//! length.

#![allow(dead_code)]

use offload_analyze::report::Report;
use offload_capture::{CaptureReader, CaptureWriter, FrameMeta};
use serde_json::{json, Value};
use std::path::Path;

/// Copies `src` to `dst` with every frame's data cut to `snaplen` bytes,
/// its wire length kept.
pub fn cut(src: &Path, dst: &Path, snaplen: usize) {
    let mut r = CaptureReader::open(src).unwrap();
    let mut w = CaptureWriter::create(dst, None).unwrap();
    while let Some(f) = r.next_frame().unwrap() {
        let meta = FrameMeta::from(&f);
        let n = f.data.len().min(snaplen);
        w.write_frame(&meta, &f.data[..n]).unwrap();
    }
    w.finish().unwrap();
}

/// What GRO made of the capture, per flow and in total, and the findings:
/// everything that must not depend on the snapshot length. Flow figures
/// that read payload (checksum states) are left out: a header-only capture
/// cannot show them, and says so.
pub fn verdicts(r: &Report, skip_flows: &[usize]) -> Value {
    let flows: Vec<Value> = r
        .flows
        .iter()
        .filter(|f| !skip_flows.contains(&f.id))
        .map(|f| {
            json!({
                "flow": f.description, "packets": f.packets, "bytes": f.bytes,
                "payload": f.payload_bytes, "above_mtu": f.above_mtu, "ip": f.ip,
                "outer": f.tunnel.as_ref().map(|t| &t.outer_ip),
                "what_if": f.what_if,
            })
        })
        .collect();
    let findings: Vec<Value> = r
        .findings
        .iter()
        .map(|f| {
            json!({
                "severity": f.severity, "kind": f.kind,
                "flow": f.flow.as_ref().map(|x| &x.description),
                "title": f.title, "detail": f.detail, "frames": f.evidence.as_ref().unwrap().frames,
                "counts": f.evidence.as_ref().unwrap().counts, "fix": f.fix, "extra": f.extra_packets,
            })
        })
        .collect();
    let totals: Vec<Value> = r
        .what_if
        .iter()
        .map(|w| {
            let reasons: Vec<Value> = w
                .flush_reasons
                .iter()
                .map(|x| {
                    json!([
                        x.reason,
                        x.count,
                        x.examples.iter().map(|e| e.frame).collect::<Vec<_>>()
                    ])
                })
                .collect();
            json!({
                "size": w.gro_max_size, "in": w.frames_in, "out": w.stack_packets,
                "super": w.super_packets, "largest": w.largest_packet, "reasons": reasons,
            })
        })
        .collect();
    json!({"flows": flows, "findings": findings, "what_if": totals})
}
