//! `tartanctl completion SHELL`: a completion script from the command
//! definition itself, so it never drifts from the real flags.
use clap::CommandFactory;

use crate::cli::Cli;
use crate::output;

pub fn run(shell: clap_complete::Shell) -> anyhow::Result<()> {
    output::print(&script(shell))
}

pub fn script(shell: clap_complete::Shell) -> String {
    let mut cmd = Cli::command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "tartanctl", &mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap_complete::Shell;

    #[test]
    fn scripts_know_the_subcommands() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let s = script(shell);
            assert!(s.contains("tartanctl"), "{shell}");
            assert!(s.contains("apply") && s.contains("label"), "{shell}");
        }
    }
}
