//! Findings: what a command concluded, how bad it is, the evidence and the
//! fix. `offload analyze` (about flows in a capture), `offload inspect`
//! (about a host's devices) and `offload lab` (about an experiment's arms)
//! report the same [`Finding`], ranked by [`rank`], so that a finding reads
//! and serialises alike in each.

use std::fmt;

use serde::Serialize;

/// How bad a finding is; the declaration order is the ranking (High first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Costs throughput or drops packets now.
    High,
    /// A real loss of offload, or a setting that cannot do what it says.
    Medium,
    /// Worth knowing; no loss proven (an opportunity, a note).
    Info,
}

impl Severity {
    /// Lower-case name, as in JSON and in the text tables.
    pub fn name(self) -> &'static str {
        match self {
            Severity::High => "high",
            Severity::Medium => "medium",
            Severity::Info => "info",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The flow a finding is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlowRef {
    /// The flow's number in its report.
    pub id: usize,
    /// One line for people, e.g. `10.0.0.1:40000 -> 10.0.0.2:5201 (TCP)`.
    pub description: String,
    /// `tcp` or `udp`.
    pub protocol: &'static str,
    /// Source address.
    pub src: String,
    /// Destination address.
    pub dst: String,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// The encapsulation it travels in (`vxlan`, `geneve`, ...), if any.
    pub tunnel: Option<String>,
    /// The capture the flow was read from (a file as given on the command
    /// line), when the finding comes from captures: with captures of one
    /// traffic at several points, the same connection is one flow per
    /// capture, and this says which.
    pub capture: Option<String>,
}

/// The figures behind a finding.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Evidence {
    /// Where they were read: a capture file, a `/sys` path, an experiment.
    pub file: String,
    /// Frame numbers (1-based, as tshark numbers them) that show it.
    pub frames: Vec<u64>,
    /// Named counts backing the finding.
    pub counts: Vec<(String, u64)>,
}

/// One ranked, plain-language result.
///
/// Build one with [`Finding::new`] and the `with_*` methods, collect them,
/// then [`rank`] them. Every field is serialised in every command (absent
/// ones as `null`), so the JSON has one shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Position in the ranking, from 1 (0 until [`rank`] ran).
    pub rank: usize,
    /// How bad it is.
    pub severity: Severity,
    /// Stable machine name, e.g. `ip-id-rule`, `gro-off`, `big-tcp-gain`.
    pub kind: &'static str,
    /// The device it is about (`None` when not about one device).
    pub device: Option<String>,
    /// The flow it is about (`None` when not about one flow).
    pub flow: Option<FlowRef>,
    /// One line.
    pub title: String,
    /// Why it matters, with the values read.
    pub detail: String,
    /// The figures behind it, when they come from frames or counters.
    pub evidence: Option<Evidence>,
    /// The exact command or change that fixes it, when there is one.
    pub fix: Option<String>,
    /// Kernel versions the rule holds for, when it depends on them.
    pub kernel: Option<String>,
    /// Where the rule comes from: a kernel file and function, an RFC.
    pub citation: Option<String>,
    /// Extra packets the receiving stack handles because of it, when the
    /// finding is a measured cost (ranks costlier findings first).
    pub extra_packets: Option<u64>,
}

impl Finding {
    /// A finding with no subject, evidence, fix, kernel range or citation
    /// yet; add them with the `with_*` methods.
    pub fn new(
        severity: Severity,
        kind: &'static str,
        title: impl Into<String>,
        detail: impl Into<String>,
    ) -> Finding {
        Finding {
            rank: 0,
            severity,
            kind,
            device: None,
            flow: None,
            title: title.into(),
            detail: detail.into(),
            evidence: None,
            fix: None,
            kernel: None,
            citation: None,
            extra_packets: None,
        }
    }

    /// About this device.
    pub fn with_device(mut self, device: impl Into<String>) -> Finding {
        self.device = Some(device.into());
        self
    }

    /// About this flow.
    pub fn with_flow(mut self, flow: FlowRef) -> Finding {
        self.flow = Some(flow);
        self
    }

    /// Backed by these figures.
    pub fn with_evidence(mut self, evidence: Evidence) -> Finding {
        self.evidence = Some(evidence);
        self
    }

    /// Fixed by this command or change.
    pub fn with_fix(mut self, fix: impl Into<String>) -> Finding {
        self.fix = Some(fix.into());
        self
    }

    /// Holding for these kernel versions.
    pub fn with_kernel(mut self, kernel: impl Into<String>) -> Finding {
        self.kernel = Some(kernel.into());
        self
    }

    /// Resting on this source (kernel file and function, RFC).
    pub fn with_citation(mut self, citation: impl Into<String>) -> Finding {
        self.citation = Some(citation.into());
        self
    }

    /// Costing this many extra packets.
    pub fn with_extra_packets(mut self, extra_packets: u64) -> Finding {
        self.extra_packets = Some(extra_packets);
        self
    }
}

/// Orders findings for people and numbers them from 1: by severity, then
/// the costlier first (more extra packets), then by device and kind so the
/// order is stable run to run.
pub fn rank(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then_with(|| b.extra_packets.cmp(&a.extra_packets))
            .then_with(|| a.device.cmp(&b.device))
            .then_with(|| a.kind.cmp(b.kind))
    });
    for (i, f) in findings.iter_mut().enumerate() {
        f.rank = i + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranking_puts_severity_then_cost_first() {
        let mut f = vec![
            Finding::new(Severity::Info, "big-tcp-gain", "gain", "d"),
            Finding::new(Severity::High, "ip-id-rule", "small", "d").with_extra_packets(10),
            Finding::new(Severity::Medium, "gro-off", "off", "d").with_device("eth1"),
            Finding::new(Severity::High, "bad-checksum", "big", "d").with_extra_packets(500),
            Finding::new(Severity::Medium, "gro-off", "off", "d").with_device("eth0"),
        ];
        rank(&mut f);
        let order: Vec<(usize, &str)> = f.iter().map(|f| (f.rank, f.title.as_str())).collect();
        assert_eq!(
            order,
            [
                (1, "big"),
                (2, "small"),
                (3, "off"),
                (4, "off"),
                (5, "gain")
            ]
        );
        assert_eq!(f[2].device.as_deref(), Some("eth0"));
    }

    #[test]
    fn json_has_one_shape() {
        let f = Finding::new(Severity::Medium, "gro-off", "GRO is off", "rx-gro-hw off")
            .with_device("eth0")
            .with_fix("ethtool -K eth0 gro on")
            .with_citation("net/core/gro.c: dev_gro_receive");
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["severity"], "medium");
        assert_eq!(v["device"], "eth0");
        assert_eq!(v["fix"], "ethtool -K eth0 gro on");
        for key in ["flow", "evidence", "kernel", "extra_packets"] {
            assert!(v.as_object().unwrap()[key].is_null(), "{key}");
        }
        assert_eq!(Severity::High.to_string(), "high");
        assert!(Severity::High < Severity::Medium && Severity::Medium < Severity::Info);
    }
}
