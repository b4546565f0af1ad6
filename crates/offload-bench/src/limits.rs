//! What a bench server allows, and the accounting of what it has handed
//! out: every test reserves its memory, threads and flows here BEFORE
//! anything is allocated or spawned, and gives them back when it ends.
//!
//! The defaults fit a small host: whatever clients send, the server's own
//! memory stays within `max_memory` plus what its control connections cost
//! (each at most [`crate::proto::MAX_CLIENT_FRAME`] of buffered frame and a
//! small stack), well under 1 GiB. Kernel socket buffers are the kernel's
//! (bounded by net.core.rmem_max / wmem_max and tcp_mem).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::TestKind;
use crate::config::TestSpec;

/// Limits of one server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerLimits {
    /// Control connections at once, handshaking or not.
    pub max_connections: usize,
    /// Control connections that have not completed their handshake (Hello
    /// and, with a secret, the challenge) at once; a new connection beyond
    /// this evicts the oldest of them.
    pub max_handshaking: usize,
    /// Time a new connection has to complete its handshake, in total (not
    /// per read: a client that drips one byte at a time is dropped).
    pub handshake_timeout: Duration,
    /// Time an established control connection may take to deliver its next
    /// whole frame between tests.
    pub idle_timeout: Duration,
    /// Tests running at once.
    pub max_tests: usize,
    /// Threads of all running tests together (workers plus one setup
    /// thread per test).
    pub max_threads: u32,
    /// Data flows (TCP connections or UDP sockets) of all running tests.
    pub max_flows: u32,
    /// Estimated memory of one test, in bytes ([`test_memory`]).
    pub max_test_memory: u64,
    /// Estimated memory of all running tests, in bytes.
    pub max_memory: u64,
    /// Longest test (warm-up plus window) a client may ask for, in seconds.
    pub max_test_seconds: f64,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 32,
            max_handshaking: 16,
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(60),
            max_tests: 4,
            max_threads: 64,
            max_flows: 65_536,
            max_test_memory: 256 << 20,
            max_memory: 512 << 20,
            max_test_seconds: 3600.0,
        }
    }
}

/// What one thread costs beyond its buffers: the stack pages it touches and
/// its bookkeeping (counted generously).
pub const THREAD_COST: u64 = 256 << 10;
/// What one flow costs in the server's memory: its socket object, epoll
/// and engine state, its TCP_INFO row and that row in the report (about
/// 300 bytes of JSON, sent once and copied once).
pub const FLOW_COST: u64 = 2 << 10;
/// Fixed cost of a test (listeners, report, slots).
pub const TEST_COST: u64 = 1 << 20;

/// The server memory a test needs, estimated from its spec before anything
/// is allocated: buffers per worker (what the engines allocate), threads
/// and flows. Saturates instead of overflowing.
pub fn test_memory(spec: &TestSpec) -> u64 {
    let req = u64::from(spec.request);
    let resp = u64::from(spec.response);
    let batch = u64::from(spec.knobs.batch.max(1));
    let per_worker = match spec.kind {
        TestKind::TcpRr | TestKind::TcpCrr => req.saturating_add(resp),
        TestKind::TcpStream => req.max(resp),
        // Response, one receive buffer, a recvmmsg batch of 64 KiB buffers.
        TestKind::UdpRr => resp
            .saturating_add(64 << 10)
            .saturating_add(batch.saturating_mul((64 << 10) + 256)),
        TestKind::UdpStream => {
            let size = if spec.knobs.udp_gro {
                64 << 10
            } else {
                req.max(resp)
            };
            batch.saturating_mul(size.saturating_add(256))
        }
    };
    let workers = u64::from(spec.server_threads);
    workers
        .saturating_mul(per_worker.saturating_add(THREAD_COST))
        .saturating_add(THREAD_COST)
        .saturating_add(u64::from(spec.flows).saturating_mul(FLOW_COST))
        .saturating_add(TEST_COST)
}

/// Threads a test runs: its workers and its setup thread.
pub fn test_threads(spec: &TestSpec) -> u32 {
    spec.server_threads.saturating_add(1)
}

/// Resources handed out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Tests running.
    pub tests: usize,
    /// Threads of the running tests.
    pub threads: u32,
    /// Flows of the running tests.
    pub flows: u32,
    /// Estimated memory of the running tests.
    pub memory: u64,
}

/// The server's account of what its tests hold.
#[derive(Debug)]
pub struct Budget {
    limits: ServerLimits,
    used: Mutex<Usage>,
}

/// Resources a running test holds; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<Budget>,
    taken: Usage,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Ok(mut u) = self.budget.used.lock() {
            u.tests -= self.taken.tests;
            u.threads -= self.taken.threads;
            u.flows -= self.taken.flows;
            u.memory -= self.taken.memory;
        }
    }
}

/// Bytes as MiB or GiB for a refusal message.
pub fn human_bytes(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30))
    } else {
        format!("{:.0} MiB", (b as f64 / f64::from(1u32 << 20)).ceil())
    }
}

impl Budget {
    /// An empty account under these limits.
    pub fn new(limits: ServerLimits) -> Arc<Self> {
        Arc::new(Budget {
            limits,
            used: Mutex::new(Usage::default()),
        })
    }

    /// The limits.
    pub fn limits(&self) -> &ServerLimits {
        &self.limits
    }

    /// What the running tests hold now.
    pub fn usage(&self) -> Usage {
        self.used.lock().map(|u| *u).unwrap_or_default()
    }

    /// Reserves what `spec` needs, or says which limit it would break.
    /// The spec's own ranges are checked before (the server's
    /// check_spec); this is about the host.
    pub fn reserve(self: &Arc<Self>, spec: &TestSpec) -> Result<Reservation, String> {
        let l = &self.limits;
        let memory = test_memory(spec);
        let threads = test_threads(spec);
        if spec.expected_seconds > l.max_test_seconds {
            return Err(format!(
                "the test would last {:.0} s, above this server's limit of {:.0} s",
                spec.expected_seconds, l.max_test_seconds
            ));
        }
        if memory > l.max_test_memory {
            return Err(format!(
                "the test needs about {} of server memory ({} threads with {} / {} byte \
                 messages, {} flows), above this server's per-test limit of {} \
                 (bench server --max-test-memory)",
                human_bytes(memory),
                spec.server_threads,
                spec.request,
                spec.response,
                spec.flows,
                human_bytes(l.max_test_memory)
            ));
        }
        if threads > l.max_threads {
            return Err(format!(
                "the test needs {threads} server threads, above this server's limit of {} \
                 (bench server --max-threads)",
                l.max_threads
            ));
        }
        if spec.flows > l.max_flows {
            return Err(format!(
                "the test asks for {} flows, above this server's limit of {} \
                 (bench server --max-flows)",
                spec.flows, l.max_flows
            ));
        }
        let mut u = self
            .used
            .lock()
            .map_err(|_| "the server's account is poisoned".to_string())?;
        let busy = |what: &str, now: String, limit: String| {
            format!(
                "the server is busy: {what} of the running tests ({now}) plus this one would \
                 exceed its limit of {limit}; try again when they end"
            )
        };
        if u.tests + 1 > l.max_tests {
            return Err(busy(
                "the count",
                u.tests.to_string(),
                format!("{} tests at once", l.max_tests),
            ));
        }
        if u.threads + threads > l.max_threads {
            return Err(busy(
                "the threads",
                u.threads.to_string(),
                format!("{} threads", l.max_threads),
            ));
        }
        if u.flows + spec.flows > l.max_flows {
            return Err(busy(
                "the flows",
                u.flows.to_string(),
                format!("{} flows", l.max_flows),
            ));
        }
        if u.memory + memory > l.max_memory {
            return Err(busy(
                "the memory",
                human_bytes(u.memory),
                human_bytes(l.max_memory),
            ));
        }
        let taken = Usage {
            tests: 1,
            threads,
            flows: spec.flows,
            memory,
        };
        u.tests += 1;
        u.threads += threads;
        u.flows += spec.flows;
        u.memory += memory;
        Ok(Reservation {
            budget: self.clone(),
            taken,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClientConfig;

    fn spec(kind: TestKind) -> TestSpec {
        let mut c = ClientConfig::new(kind, "127.0.0.1:1".parse().unwrap());
        c.validate().unwrap();
        c.spec
    }

    #[test]
    fn the_abusive_specs_of_record_are_refused_before_allocation() {
        let b = Budget::new(ServerLimits::default());
        // tcp-crr, 64 threads, 64 MiB responses: 2.93 GB once.
        let mut s = spec(TestKind::TcpCrr);
        s.server_threads = 64;
        s.response = 64 << 20;
        let e = b.reserve(&s).unwrap_err();
        assert!(e.contains("GiB") && e.contains("per-test limit"), "{e}");
        // tcp-rr, 1,000,000 flows, 1024 threads: 23.8 GB once.
        let mut s = spec(TestKind::TcpRr);
        s.flows = 1_000_000;
        s.server_threads = 1024;
        assert!(b.reserve(&s).is_err());
        s.server_threads = 8;
        let e = b.reserve(&s).unwrap_err();
        assert!(e.contains("limit"), "{e}");
        assert_eq!(b.usage(), Usage::default());
    }

    #[test]
    fn reservations_add_up_and_are_given_back() {
        let limits = ServerLimits {
            max_tests: 2,
            ..ServerLimits::default()
        };
        let b = Budget::new(limits);
        let s = spec(TestKind::TcpRr);
        let r1 = b.reserve(&s).unwrap();
        let r2 = b.reserve(&s).unwrap();
        assert_eq!(b.usage().tests, 2);
        assert_eq!(b.usage().threads, 2 * test_threads(&s));
        let e = b.reserve(&s).unwrap_err();
        assert!(e.contains("busy") && e.contains("2 tests"), "{e}");
        drop(r1);
        let r3 = b.reserve(&s).unwrap();
        drop((r2, r3));
        assert_eq!(b.usage(), Usage::default());
    }

    #[test]
    fn memory_of_many_tests_is_bounded_in_total() {
        let b = Budget::new(ServerLimits::default());
        let mut s = spec(TestKind::TcpRr);
        s.server_threads = 4;
        s.response = 40 << 20;
        let m = test_memory(&s);
        assert!(m > 160 << 20 && m < 256 << 20, "{m}");
        let held: Vec<_> = (0..3).filter_map(|_| b.reserve(&s).ok()).collect();
        assert_eq!(held.len(), 3, "three of 162 MiB fit in 512 MiB");
        let e = b.reserve(&s).unwrap_err();
        assert!(e.contains("memory"), "{e}");
        assert!(b.usage().memory <= ServerLimits::default().max_memory);
    }

    #[test]
    fn estimates_saturate_instead_of_overflowing() {
        let mut s = spec(TestKind::UdpStream);
        s.server_threads = u32::MAX;
        s.flows = u32::MAX;
        s.request = u32::MAX;
        s.knobs.batch = u32::MAX;
        assert_eq!(test_memory(&s), u64::MAX);
        assert_eq!(test_threads(&s), u32::MAX);
    }
}
