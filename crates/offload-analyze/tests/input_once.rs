//! `offload analyze` reads its input once: a regular file is opened exactly
//! once however many jobs read it (the checksum probe and two jobs here), and
//! a FIFO, which can be read only once, gives the same report as the file.
//! (One test in its own binary: the open counter is process-wide.)

use offload::build::{FrameSpec, TcpSpec};
use offload_analyze::{analyze, Analysis, Options};
use offload_capture::{CaptureWriter, Control, FrameMeta, LinkType};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

fn run(path: &Path, opts: &Options) -> Analysis {
    let cancel = AtomicBool::new(false);
    let mut progress = |_| {};
    let mut ctl = Control {
        on_progress: &mut progress,
        cancel: &cancel,
    };
    analyze(&[path.to_path_buf()], opts, &mut ctl).unwrap()
}

/// Two bulk flows with ACKs, 400 frames: enough for every part of the pass.
fn capture(path: &Path) {
    let mut w = CaptureWriter::create(path, None).unwrap();
    for i in 0..100u32 {
        for (k, port) in [(0u32, 40000u16), (1, 40001)] {
            let mut d = FrameSpec::tcp4(
                [10, 0, 0, 2],
                [10, 0, 0, 1],
                TcpSpec::data(port, 5201, 1000 + i * 1448),
            )
            .payload(vec![k as u8; 1448]);
            d.v4_mut().id = i as u16;
            let a = FrameSpec::tcp4(
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                TcpSpec {
                    ack: 1000 + (i + 1) * 1448,
                    ..TcpSpec::data(5201, port, 1)
                },
            );
            for (j, f) in [d.build(), a.build()].into_iter().enumerate() {
                let ts = 1_000_000 + (i as i64 * 4 + k as i64 * 2 + j as i64) * 1000;
                w.write_frame(&FrameMeta::new(ts, LinkType(1), f.len()), &f)
                    .unwrap();
            }
        }
    }
    w.finish().unwrap();
}

fn report_json(a: &Analysis, path: &Path) -> String {
    serde_json::to_string_pretty(&a.report)
        .unwrap()
        .replace(&path.display().to_string(), "INPUT")
}

#[test]
fn a_file_is_opened_once_and_a_fifo_gives_the_same_report() {
    let dir = tempfile::tempdir().unwrap();
    let file: PathBuf = dir.path().join("in.pcapng");
    capture(&file);
    // Two threads: a statistics job and a what-if job on the one file.
    let opts = Options {
        threads: 2,
        ..Options::default()
    };
    let before = offload_capture::inputs_opened();
    let from_file = run(&file, &opts);
    assert_eq!(
        offload_capture::inputs_opened() - before,
        1,
        "opens of {file:?}"
    );
    assert_eq!(from_file.report.flows.len(), 4);
    assert_eq!(from_file.report.what_if[0].frames_in, 400);

    let fifo = dir.path().join("fifo.pcapng");
    let st = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(st.success());
    let bytes = std::fs::read(&file).unwrap();
    let (f2, b2) = (fifo.clone(), bytes.clone());
    let writer = std::thread::spawn(move || std::fs::write(f2, b2).unwrap());
    let from_fifo = run(&fifo, &opts);
    writer.join().unwrap();
    assert_eq!(
        report_json(&from_fifo, &fifo),
        report_json(&from_file, &file)
    );
}
