//! README.md's CLI reference shows real commands with their real output.
//! Output drifts as the tools improve; this test reruns every example whose
//! input ships with the repository (the bundled `samples/`, or no input)
//! and requires each line the README shows to be printed, in the README's
//! order within each of stdout and stderr. A line `...` in the README
//! stands for lines left out. Examples that need a live host, a namespace
//! or a capture made elsewhere (bench, inspect, tune, lab, several capture
//! points) are not rerun here; their own tests cover the commands. A
//! shown line ending in `...` is the start of a longer printed line.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::BIN;

/// One fenced example: the command after `$ ` and the lines shown below it.
struct Example {
    line: usize,
    command: String,
    shown: Vec<String>,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The fenced blocks that hold exactly one `$ offload` command, first.
fn examples(readme: &str) -> Vec<Example> {
    let mut out = Vec::new();
    let mut lines = readme.lines().enumerate();
    while let Some((n, l)) = lines.next() {
        // An opening fence may name a language (```sh); a closing one not.
        if !l.starts_with("```") {
            continue;
        }
        let mut block = Vec::new();
        for (_, l) in lines.by_ref() {
            if l.trim_end() == "```" {
                break;
            }
            block.push(l.to_string());
        }
        let commands = block.iter().filter(|l| l.starts_with("$ ")).count();
        if commands == 1 && block[0].starts_with("$ offload ") {
            out.push(Example {
                line: n + 2,
                command: block[0][2..].to_string(),
                shown: block[1..].to_vec(),
            });
        }
    }
    out
}

/// The example's arguments with `/tmp/NAME` outputs moved into `scratch`,
/// or None when an input is not part of the repository.
fn runnable(command: &str, scratch: &Path) -> Option<Vec<String>> {
    let words: Vec<&str> = command.split_whitespace().collect();
    // The capture tools are deterministic on a given file; the live-host
    // commands measure this machine, so their figures are not rerun.
    if !matches!(words.get(1), Some(&("gro" | "gso" | "analyze"))) {
        return None;
    }
    if words.iter().any(|w| matches!(*w, "|" | ">" | "&" | "<")) {
        return None;
    }
    let mut args = Vec::new();
    let mut after_output = false;
    for w in &words[1..] {
        let is_path = w.contains('/') || w.ends_with(".pcap") || w.ends_with(".pcapng");
        if after_output && w.starts_with("/tmp/") {
            args.push(scratch.join(&w[5..]).display().to_string());
        } else if is_path && !w.starts_with("samples/") {
            return None;
        } else {
            args.push(w.to_string());
        }
        after_output = matches!(*w, "-o" | "--output");
    }
    Some(args)
}

/// Where the README's lines are missing from `printed`, or out of order
/// within one stream: one message per line.
fn mismatches(ex: &Example, stdout: &str, stderr: &str, scratch: &Path) -> Vec<String> {
    // The README writes outputs under /tmp; the run wrote them in scratch.
    let unmove = |s: &str| s.replace(&format!("{}/", scratch.display()), "/tmp/");
    let streams = [unmove(stdout), unmove(stderr)];
    let streams: Vec<Vec<&str>> = streams
        .iter()
        .map(|s| s.lines().map(str::trim_end).collect())
        .collect();
    let mut next = [0usize; 2];
    let mut bad = Vec::new();
    for (i, shown) in ex.shown.iter().enumerate() {
        let shown = shown.trim_end();
        if shown.trim() == "..." || shown.is_empty() {
            continue;
        }
        // A line ending in `...` shows only the start of a long line.
        let matches = |l: &&str| match shown.strip_suffix("...") {
            Some(start) => l.starts_with(start),
            None => *l == shown,
        };
        let found = (0..2).find_map(|s| {
            streams[s][next[s]..]
                .iter()
                .position(matches)
                .map(|p| (s, next[s] + p))
        });
        match found {
            Some((s, at)) => next[s] = at + 1,
            None => {
                let anywhere = streams.iter().flatten().any(matches);
                bad.push(format!(
                    "README.md:{}: `{}`: {}: {shown}",
                    ex.line + 1 + i,
                    ex.command,
                    if anywhere {
                        "printed, but not in the README's order"
                    } else {
                        "not printed"
                    },
                ));
            }
        }
    }
    bad
}

#[test]
fn readme_examples_print_what_the_readme_shows() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("read README.md");
    let scratch = tempfile::tempdir().unwrap();
    let mut ran = Vec::new();
    let mut bad = Vec::new();
    for ex in examples(&readme) {
        let Some(args) = runnable(&ex.command, scratch.path()) else {
            continue;
        };
        let out = Command::new(BIN)
            .args(&args)
            .current_dir(&root)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", ex.command));
        assert!(
            out.status.success(),
            "README.md:{}: `{}` failed: {}",
            ex.line,
            ex.command,
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        bad.extend(mismatches(&ex, &stdout, &stderr, scratch.path()));
        ran.push(ex.command);
    }
    // The bundled-sample examples of gro, gso and analyze: if the README
    // loses them or this parser stops finding them, say so rather than
    // pass on nothing.
    for needed in ["gro samples/", "gso samples/", "analyze"] {
        assert!(
            ran.iter()
                .any(|c| c.starts_with(&format!("offload {needed}"))),
            "no README example of `offload {needed}` was rerun (rerun: {ran:?})"
        );
    }
    assert!(
        bad.is_empty(),
        "{} README line(s) differ from the real output:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
