//! Man pages and shell completions from a program's clap definition, so
//! that what `--help` teaches and what `man` shows are one text (the
//! packages ship both: `scripts/package.sh`).

use std::path::Path;

/// What `PROGRAM generate` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Generated {
    /// Man pages in section `section`: the program's and one per
    /// subcommand (`PROGRAM-SUBCOMMAND.N`).
    Man,
    /// Completions for bash, zsh and fish, in their own folders
    /// (`bash-completion/completions`, `zsh/vendor-completions`,
    /// `fish/vendor_completions.d`, as Debian lays them out).
    Completions,
}

/// Writes `what` for `command` into `dir`, man pages in `section`.
pub fn generate(
    mut command: clap::Command,
    what: Generated,
    section: &str,
    dir: &Path,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    match what {
        Generated::Man => {
            command.build();
            write_pages(&command, section, dir)
        }
        Generated::Completions => {
            use clap_complete::Shell;
            let name = command.get_name().to_string();
            for (shell, folder, file) in [
                (Shell::Bash, "bash-completion/completions", name.clone()),
                (Shell::Zsh, "zsh/vendor-completions", format!("_{name}")),
                (
                    Shell::Fish,
                    "fish/vendor_completions.d",
                    format!("{name}.fish"),
                ),
            ] {
                let folder = dir.join(folder);
                std::fs::create_dir_all(&folder)?;
                let mut out = std::fs::File::create(folder.join(file))?;
                clap_complete::generate(shell, &mut command, name.clone(), &mut out);
            }
            Ok(())
        }
    }
}

/// `command`'s page as `NAME.section`, then its visible subcommands'
/// (NAME is clap's display name once built: `linecardd-ctl-list`).
fn write_pages(command: &clap::Command, section: &str, dir: &Path) -> std::io::Result<()> {
    let name = command.get_display_name().unwrap_or(command.get_name());
    let mut out = std::fs::File::create(dir.join(format!("{name}.{section}")))?;
    clap_mangen::Man::new(command.clone())
        .section(section)
        .render(&mut out)?;
    // clap's own `help` subcommand is `--help`, which every page has.
    for sub in command
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        write_pages(sub, section, dir)?;
    }
    Ok(())
}
