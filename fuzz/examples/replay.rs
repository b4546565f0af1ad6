//! A libFuzzer-free driver for the fuzz targets, for machines without a
//! nightly toolchain or cargo-fuzz (docs/decisions/0050-fuzzing-toolchain.md).
//!
//! `replay TARGET SECONDS DIR...` runs every file under the DIRs (seeds,
//! corpus, saved crashes) through TARGET, then mutates them at random
//! (byte flips, interesting 16-bit values, insertions, deletions,
//! truncations, splices) until SECONDS have passed. It is blind (no
//! coverage feedback), so it finds less than libFuzzer does; it exists so
//! that the smoke run never silently does nothing. A panic saves the input
//! to `artifacts/TARGET/crash-<hash>` next to this crate and exits 1.
//! `FUZZ_SEED` fixes the random sequence.

use std::panic;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// xorshift64*: small, fast and good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const INTERESTING: [u16; 10] = [
    0, 1, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xfffe, 0xffff,
];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..=rng.below(4) {
        let len = input.len();
        match rng.below(7) {
            0 if len > 0 => {
                let at = rng.below(len);
                input[at] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let at = rng.below(len);
                input[at] = rng.next() as u8;
            }
            2 if len > 1 => {
                let at = rng.below(len - 1);
                let v = INTERESTING[rng.below(INTERESTING.len())].to_be_bytes();
                input[at..at + 2].copy_from_slice(&v);
            }
            3 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(16);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                input.splice(at..at, bytes);
            }
            4 if len > 0 => {
                let at = rng.below(len);
                let n = 1 + rng.below((len - at).min(32));
                input.drain(at..at + n);
            }
            5 => input.truncate(rng.below(len + 1)),
            _ if !other.is_empty() => {
                let from = rng.below(other.len());
                let n = 1 + rng.below((other.len() - from).min(256));
                let at = rng.below(len + 1);
                input.splice(at..at, other[from..from + n].iter().copied());
            }
            _ => {}
        }
    }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn save_crash(target: &str, data: &[u8]) -> PathBuf {
    // FNV-1a names the file after its content.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("artifacts")
        .join(target);
    let path = dir.join(format!("crash-{h:016x}"));
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, data)) {
        eprintln!("replay: could not save {}: {e}", path.display());
    }
    path
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!(
            "usage: replay TARGET SECONDS DIR...  (targets: {:?})",
            offload_fuzz::TARGETS
        );
        std::process::exit(2);
    }
    let target = args[1].as_str();
    if !offload_fuzz::TARGETS.contains(&target) {
        eprintln!(
            "replay: unknown target {target:?}; targets: {:?}",
            offload_fuzz::TARGETS
        );
        std::process::exit(2);
    }
    let Ok(seconds) = args[2].parse::<u64>() else {
        eprintln!("replay: SECONDS must be a whole number, got {:?}", args[2]);
        std::process::exit(2);
    };
    let mut files = Vec::new();
    for d in &args[3..] {
        files_under(Path::new(d), &mut files);
    }
    files.sort();
    let mut corpus: Vec<Vec<u8>> = files.iter().filter_map(|f| std::fs::read(f).ok()).collect();
    if corpus.is_empty() {
        corpus.push(Vec::new());
    }

    let run_one = |data: &[u8]| -> bool {
        panic::catch_unwind(|| {
            offload_fuzz::run(target, data);
        })
        .is_ok()
    };
    for (i, c) in corpus.iter().enumerate() {
        if !run_one(c) {
            let name = files
                .get(i)
                .map(|f| f.display().to_string())
                .unwrap_or_default();
            eprintln!("replay: {target} crashed on corpus file {name}");
            std::process::exit(1);
        }
    }

    let seed = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    let mut rng = Rng(seed | 1);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut runs = 0u64;
    while Instant::now() < deadline {
        for _ in 0..256 {
            let base = rng.below(corpus.len());
            let other = rng.below(corpus.len());
            let mut input = corpus[base].clone();
            mutate(&mut rng, &mut input, &corpus[other]);
            runs += 1;
            if !run_one(&input) {
                let path = save_crash(target, &input);
                eprintln!(
                    "replay: {target} crashed after {runs} runs (FUZZ_SEED={seed}); input saved to {}",
                    path.display()
                );
                std::process::exit(1);
            }
            // Keep some mutants so that damage accumulates over time.
            if rng.below(64) == 0 && corpus.len() < 4096 {
                corpus.push(input);
            }
        }
    }
    println!(
        "replay: {target}: {} corpus inputs, {runs} mutated runs in {seconds} s, no crash (FUZZ_SEED={seed})",
        files.len()
    );
}
