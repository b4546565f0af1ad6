//! Parquet output: written and read back with the feature, a clear error
//! without it (one of the two tests exists in every build).

use offload_analyze::{analyze, Options};
use offload_capture::Control;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../samples")
        .join(name)
}

fn run(dir: &std::path::Path) -> Result<offload_analyze::Analysis, offload_analyze::AnalyzeError> {
    let cancel = AtomicBool::new(false);
    let mut progress = |_| {};
    let mut ctl = Control {
        on_progress: &mut progress,
        cancel: &cancel,
    };
    let opts = Options {
        parquet_dir: Some(dir.to_path_buf()),
        ..Options::default()
    };
    analyze(&[sample("vxlan-broken.pcapng")], &opts, &mut ctl)
}

#[cfg(feature = "parquet")]
#[test]
fn parquet_tables_hold_every_packet_and_flow() {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let d = tempfile::tempdir().unwrap();
    let a = run(d.path()).unwrap();
    offload_analyze::columnar::write_flows(&a.report, d.path()).unwrap();
    let rows = |name: &str| {
        let f = std::fs::File::open(d.path().join(name)).unwrap();
        let r = SerializedFileReader::new(f).unwrap();
        let md = r.metadata().file_metadata();
        let names: Vec<String> = md
            .schema_descr()
            .columns()
            .iter()
            .map(|c| c.name().to_string())
            .collect();
        (md.num_rows(), names)
    };
    let (packets, cols) = rows("packets.parquet");
    let dissected = a.report.inputs[0].frames - a.report.inputs[0].unparsed_frames;
    assert_eq!(packets as u64, dissected);
    assert!(cols.contains(&"outer_ip_id".to_string()));
    let (flows, cols) = rows("flows.parquet");
    assert_eq!(flows as usize, a.report.flows.len());
    assert!(cols.contains(&"stack_packets_185000".to_string()));
}

#[cfg(not(feature = "parquet"))]
#[test]
fn parquet_without_the_feature_is_an_error_saying_how_to_get_it() {
    let d = tempfile::tempdir().unwrap();
    let e = run(d.path()).unwrap_err();
    assert!(e.to_string().contains("offload-analyze/parquet"), "{e}");
}
