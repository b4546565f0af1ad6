//! `offload completions SHELL` and `offload man`: shell completions and man
//! pages generated from the same clap definition the binary parses with, so
//! they can never disagree with the real options.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, CommandFactory};

/// Arguments of `offload completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// Shell to write completions for (bash, zsh, fish, elvish, powershell).
    pub shell: clap_complete::Shell,
}

/// Arguments of `offload man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write offload.1 and one page per subcommand (offload-gro.1, ...) into
    /// this directory instead of printing the main page to stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Prints the completion script for `args.shell` to stdout.
pub fn completions(args: CompletionsArgs) -> anyhow::Result<std::process::ExitCode> {
    let mut cmd = crate::Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "offload", &mut std::io::stdout());
    Ok(std::process::ExitCode::SUCCESS)
}

/// Prints the main man page, or writes every page into `args.dir`.
pub fn man(args: ManArgs) -> anyhow::Result<std::process::ExitCode> {
    let cmd = crate::Cli::command();
    match args.dir {
        None => clap_mangen::Man::new(cmd)
            .render(&mut std::io::stdout())
            .context("writing the man page to stdout")?,
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("creating the man page directory {}", dir.display()))?;
            clap_mangen::generate_to(cmd, &dir)
                .with_context(|| format!("writing man pages into {}", dir.display()))?;
            eprintln!("offload man: pages written to {}", dir.display());
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_name_every_subcommand() {
        let mut out = Vec::new();
        let mut cmd = crate::Cli::command();
        clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "offload", &mut out);
        let text = String::from_utf8(out).unwrap();
        for sub in crate::Cli::command().get_subcommands() {
            assert!(
                text.contains(sub.get_name()),
                "no completion for {}",
                sub.get_name()
            );
        }
        assert!(
            text.contains("--gro-max-size"),
            "gro's options are completed"
        );
    }

    #[test]
    fn man_pages_cover_every_subcommand() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("man");
        man(ManArgs {
            dir: Some(dir.clone()),
        })
        .unwrap();
        let mut pages: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        pages.sort();
        assert!(pages.contains(&"offload.1".to_string()));
        for sub in crate::Cli::command().get_subcommands() {
            let page = format!("offload-{}.1", sub.get_name());
            assert!(pages.contains(&page), "{page} missing from {pages:?}");
        }
    }
}
