//! offload-bench: the load generator and server behind `offload bench`.
//!
//! One binary replaces netperf, neper, iperf3 and sockperf for the tests the
//! offload work needs: `tcp-rr`, `tcp-crr`, `tcp-stream`, `udp-rr` and
//! `udp-stream`, from one flow to tens of thousands, with latency
//! percentiles from an HDR histogram and CPU cost per transaction (machine
//! user, system and softirq time plus each side's threads), all taken over
//! the same steady-state window with the warm-up excluded.
//!
//! * [`server::Server`] serves every test, to many clients, in turn or at
//!   once, over the versioned control protocol of [`proto`].
//! * [`client::run_once`], [`client::run_many`] and [`client::compare`] run a
//!   [`config::ClientConfig`] and return [`report::BenchResult`]s.
//! * [`netns::NetnsPair`] builds throw-away namespace pairs for tests.
//!
//! The data path ([`engine`]) avoids async runtimes: one blocking thread per
//! flow where that is fastest, edge-triggered epoll where a thread carries
//! many flows, recvmmsg/sendmmsg for UDP batches (see docs/decisions/0030).
#![deny(unsafe_code)]

pub mod auth;
pub mod client;
pub mod compare;
pub mod config;
pub mod cpu;
pub mod engine;
pub mod error;
pub mod limits;
pub mod netns;
pub mod output;
pub mod proto;
pub mod report;
pub mod server;
pub mod sock;
// The one module that makes raw syscalls (socket options, rlimits,
// descriptor tables); every block there carries its SAFETY comment.
#[allow(unsafe_code)]
pub mod sys;

pub use auth::Secret;
pub use client::{compare, run_many, run_once};
pub use config::{ClientConfig, CloseMode, Direction, SocketKnobs, TestKind, TestSpec};
pub use error::BenchError;
pub use report::{BenchResult, CompareReport, RunsReport};
pub use server::{Server, ServerHandle, ServerLimits, ServerOptions};
