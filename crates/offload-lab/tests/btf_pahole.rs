//! The cache-line groups `offload lab run many-flows` reads from the running
//! kernel's BTF agree with pahole's reading of the same BTF (dwarves,
//! `pahole -C STRUCT /sys/kernel/btf/vmlinux`): each structure's size, and
//! each group's offset and length from its `__cacheline_group_begin__NAME`
//! and `__cacheline_group_end__NAME` markers. pahole is installed by
//! .ci/install; the test fails, never skips, without it.

use std::collections::BTreeMap;
use std::process::Command;

use offload_lab::experiments::btf;

/// (size, group name -> (begin offset, end offset)) as pahole prints them.
fn pahole(name: &str) -> (u32, BTreeMap<String, (u32, u32)>) {
    let out = Command::new("pahole")
        .args(["-C", name, "/sys/kernel/btf/vmlinux"])
        .output()
        .expect("pahole (Debian package pahole; .ci/install)");
    assert!(out.status.success(), "pahole -C {name}: {out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut size = None;
    let mut groups: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for line in text.lines() {
        // "/* size: 784, cachelines: 13, members: 94 */"
        if let Some(rest) = line.trim().strip_prefix("/* size: ") {
            size = rest.split(',').next().and_then(|v| v.trim().parse().ok());
            continue;
        }
        // "__u8 __cacheline_group_begin__sock_write_rx[0]; /*   136     0 */"
        let Some((decl, comment)) = line.split_once("/*") else {
            continue;
        };
        let offset: Option<u32> = comment
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok());
        for (marker, begin) in [
            ("__cacheline_group_begin__", true),
            ("__cacheline_group_end__", false),
        ] {
            if let Some(i) = decl.find(marker) {
                let group: String = decl[i + marker.len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let e = groups.entry(group).or_default();
                let o = offset.unwrap_or_else(|| panic!("offset of {line}"));
                if begin {
                    e.0 = o;
                } else {
                    e.1 = o;
                }
            }
        }
    }
    (
        size.unwrap_or_else(|| panic!("no size in pahole's {name}:\n{text}")),
        groups,
    )
}

#[test]
fn cacheline_groups_agree_with_pahole() {
    let ours = btf::running_kernel().expect("the running kernel's BTF");
    assert_eq!(ours.len(), btf::STRUCTS.len(), "{ours:?}");
    for s in &ours {
        let (size, groups) = pahole(&s.name);
        assert_eq!(s.size, size, "struct {} size", s.name);
        let mine: BTreeMap<String, (u32, u32)> = s
            .groups
            .iter()
            .map(|g| (g.name.clone(), (g.offset, g.offset + g.bytes)))
            .collect();
        assert_eq!(mine, groups, "struct {}", s.name);
        for g in &s.groups {
            let lines = (g.offset + g.bytes.max(1) - 1) / 64 - g.offset / 64 + 1;
            assert_eq!(g.cache_lines, lines, "struct {} group {}", s.name, g.name);
        }
    }
}
