//! A bare `offload bench` server in its own process, for tests that need
//! the server's file descriptors outside the client's process (10 000 flows
//! on both ends exceed one process's open-file limit) and for scripts.
//!
//! Usage: `ofl-bench-server [ADDR:PORT]` (default 127.0.0.1:0; an address
//! beyond loopback needs the secret in OFFLOAD_BENCH_SECRET). Prints the
//! bound address on the first line of standard output, then serves until
//! standard input reaches end of file, so it ends with the process that
//! spawned it.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::atomic::Ordering;

fn main() -> ExitCode {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let addr = match addr.parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ofl-bench-server: {addr:?}: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = match offload_bench::Secret::from_env() {
        Ok(secret) => offload_bench::ServerOptions {
            secret,
            ..Default::default()
        },
        Err(e) => {
            eprintln!("ofl-bench-server: {e}");
            return ExitCode::from(2);
        }
    };
    let server = match offload_bench::Server::bind_with(&[addr], opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ofl-bench-server: {e}");
            return ExitCode::from(2);
        }
    };
    let bound = match server.local_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ofl-bench-server: {e}");
            return ExitCode::from(2);
        }
    };
    println!("{bound}");
    let _ = std::io::stdout().flush();
    let stop = server.stop_flag();
    std::thread::spawn(move || {
        let mut line = String::new();
        let stdin = std::io::stdin();
        let mut lock = stdin.lock();
        while matches!(lock.read_line(&mut line), Ok(n) if n > 0) {
            line.clear();
        }
        stop.store(true, Ordering::Relaxed);
    });
    match server.serve() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ofl-bench-server: {e}");
            ExitCode::from(1)
        }
    }
}
