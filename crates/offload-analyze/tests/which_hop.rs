//! Which hop: the same VXLAN traffic captured before and after a hop that
//! clears the outer DF and scrambles the outer IP ID. The "after" capture
//! is the bundled kernel-made sample (samples/vxlan-broken.pcapng: the
//! kernel's VXLAN traffic with its outer headers rewritten as such a hop
//! does); the "before" capture is the same frames with the outer headers
//! as the sending kernel made them (DF set, IDs incrementing per flow);
//! a third point after the hop is the sample again. The report must name
//! the second capture as where the flow stops being mergeable, say what
//! changed, and label every flow with its capture.

use offload::link::dissect_l2;
use offload::wire::ipv4::Ipv4;
use offload::LinkKind;
use offload_analyze::{analyze, Options};
use offload_capture::{CaptureReader, CaptureWriter, Control, FrameMeta};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

fn sample() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../samples/vxlan-broken.pcapng")
}

/// The sample's VXLAN frames with outer DF set and outer IDs incrementing
/// per outer flow (source port), header checksums redone.
fn before_the_hop(dst: &Path) {
    let mut r = CaptureReader::open(sample()).unwrap();
    let mut w = CaptureWriter::create(dst, None).unwrap();
    let mut next: HashMap<u16, u16> = HashMap::new();
    while let Some(f) = r.next_frame().unwrap() {
        let mut data = f.data.to_vec();
        let link = LinkKind::from_linktype(f.link_type.0).unwrap();
        let off = dissect_l2(link, &data).unwrap().l3_offset;
        if data[off] >> 4 == 4 && data[off + 9] == 17 {
            let ihl = (data[off] & 0x0f) as usize * 4;
            let sport = u16::from_be_bytes([data[off + ihl], data[off + ihl + 1]]);
            let dport = u16::from_be_bytes([data[off + ihl + 2], data[off + ihl + 3]]);
            if dport == 4789 {
                let id = next.entry(sport).or_insert(100);
                let mut ip = Ipv4::new_checked(&mut data[off..]).unwrap();
                ip.set_ident(*id);
                *id = id.wrapping_add(1);
                let frag = ip.frag_word() | 0x4000;
                ip.set_frag_word(frag);
                ip.fill_header_checksum();
            }
        }
        let mut meta = FrameMeta::from(&f);
        meta.interface = None;
        w.write_frame(&meta, &data).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn the_hop_that_scrambles_outer_ids_is_named_and_flows_carry_their_capture() {
    let d = tempfile::tempdir().unwrap();
    let a = d.path().join("a-sender.pcapng");
    let c = d.path().join("c-receiver.pcapng");
    before_the_hop(&a);
    std::fs::copy(sample(), &c).unwrap();
    let b = sample();
    let cancel = AtomicBool::new(false);
    let mut progress = |_| {};
    let mut ctl = Control {
        on_progress: &mut progress,
        cancel: &cancel,
    };
    let pd = d.path().join("pq");
    std::fs::create_dir(&pd).unwrap();
    let opts = Options {
        parquet_dir: Some(pd.clone()),
        ..Options::default()
    };
    let an = analyze(&[a.clone(), b.clone(), c.clone()], &opts, &mut ctl).unwrap();
    let r = &an.report;
    let (a, b, c) = (
        a.display().to_string(),
        b.display().to_string(),
        c.display().to_string(),
    );
    // The data flow: inner TCP to 5201, seen at all three points.
    let h = r
        .hops
        .iter()
        .find(|h| h.flow.contains(":5201") && h.points.len() == 3)
        .unwrap_or_else(|| panic!("{:#?}", r.hops));
    let caps: Vec<&str> = h.points.iter().map(|p| p.capture.as_str()).collect();
    assert_eq!(caps, [a.as_str(), b.as_str(), c.as_str()]);
    assert!(h.points[0].mergeable, "{h:#?}");
    assert!(!h.points[1].mergeable && !h.points[2].mergeable, "{h:#?}");
    assert_eq!(h.first_unmergeable.as_deref(), Some(b.as_str()));
    assert!(
        h.points[0].stack_packets * 5 < h.points[1].stack_packets,
        "{h:#?}"
    );
    let change = &h.changes[0];
    assert!(change.starts_with(&format!("{a} -> {b}:")), "{change}");
    assert!(change.contains("outer DF set -> clear"), "{change}");
    assert!(
        change.contains("outer IP ID incrementing-per-flow -> random"),
        "{change}"
    );
    // Nothing changes between the two points after the hop.
    assert_eq!(h.changes.len(), 1, "{:?}", h.changes);
    // The finding names the hop.
    let f = r.findings.iter().find(|f| f.kind == "hop").unwrap();
    assert!(
        f.title
            .contains(&format!("mergeable at {a} but not at {b}")),
        "{}",
        f.title
    );
    // Every output labels flows with their capture.
    for p in [&a, &b, &c] {
        assert!(r.flows.iter().any(|f| &f.file == p));
    }
    // ... and every finding about a flow names the flow's capture.
    for f in &r.findings {
        if let Some(fl) = &f.flow {
            let flow = r.flows.iter().find(|x| x.id == fl.id).unwrap();
            assert_eq!(fl.capture.as_deref(), Some(flow.file.as_str()), "{f:?}");
        }
    }
    let ip_id_at_b = r
        .findings
        .iter()
        .find(|f| f.kind == "ip-id-rule")
        .expect("an ip-id-rule finding after the hop");
    assert_eq!(
        ip_id_at_b.flow.as_ref().unwrap().capture.as_deref(),
        ip_id_at_b.evidence.as_ref().map(|e| e.file.as_str())
    );
    let text = offload_analyze::text::render(r, 100);
    assert!(text.contains("Which hop"), "{text}");
    assert!(text.contains(&format!("[{b}]")), "{text}");
    assert!(
        text.contains(&format!("stops being mergeable at {b}")),
        "{text}"
    );
    // The finding lines lead with the flow's capture.
    assert!(text.contains(&format!("] [{b}] {}", f.title)), "{text}");
    let html = offload_analyze::html::render(&an);
    assert!(html.contains("<h2>Which hop</h2>"));
    assert!(html.contains(&format!("</a> [{}]", offload_report::html::escape(&b))));
    let json = serde_json::to_value(r).unwrap();
    assert_eq!(json["hops"].as_array().unwrap().len(), r.hops.len());
    offload_analyze::columnar::write_tables(r, &pd).unwrap();
    assert!(pd.join("hops.parquet").exists());
}

/// Captures of different traffic share only a host's link-local chatter
/// (neighbour discovery, MLD reports to ff02::16): that is never the same
/// traffic at two points, and GRO merges none of it. The bundled samples
/// are six such captures: no flow is matched across them.
#[test]
fn unrelated_captures_share_no_hop() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../samples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcapng"))
        .collect();
    files.sort();
    assert!(files.len() >= 2);
    let cancel = AtomicBool::new(false);
    let mut progress = |_| {};
    let mut ctl = Control {
        on_progress: &mut progress,
        cancel: &cancel,
    };
    let a = analyze(&files, &Options::default(), &mut ctl).unwrap();
    // The chatter is there, in several captures.
    let other = a
        .report
        .flows
        .iter()
        .filter(|f| f.protocol == "other")
        .count();
    assert!(other >= 2, "{other} non-TCP/UDP flows");
    assert!(a.report.hops.is_empty(), "{:#?}", a.report.hops);
}
