//! The shapes a scenario value must have before it may reach a command on
//! someone else's machine. Each is checked when the scenario is read (the
//! error names file, key and value), and every command line that carries
//! one still quotes it with [`quote`]: validation says what a value may
//! be, quoting makes sure the shell sees it as one word whatever it is.
//!
//! The rules are stricter than the programs they feed (ssh, ip, qm):
//! a name with a shell or option meaning (`;`, `$`, a leading `-`) is
//! refused, not escaped, so that what a reviewer reads in `--dry-run` is
//! what runs.

/// Quotes `s` as one word for a POSIX shell (the `shlex` crate's rules):
/// the one way a value enters a remote command line. A NUL byte, which
/// no shell word (and no `execve` argument) can hold, is kept as it is:
/// the `ssh` that would carry the line then fails to start, so nothing
/// else runs in its place.
pub fn quote(s: &str) -> String {
    match shlex::try_quote(s) {
        Ok(quoted) => quoted.into_owned(),
        Err(_) => s.to_string(),
    }
}

/// `user@host`, `host`, `user@[v6::addr]` or an alias of ~/.ssh/config:
/// letters, digits and `@._-:[]`, never starting with `-` (ssh would
/// read an option).
pub fn ssh_target(s: &str) -> Result<(), &'static str> {
    let plain = !s.is_empty()
        && !s.starts_with('-')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "@._-:[]".contains(c));
    plain.then_some(()).ok_or(
        "must be user@host or an ssh alias (letters, digits and @._-:[] only, not starting with -)",
    )
}

/// A login name as useradd(8) takes it (its default NAME_REGEX, 32 bytes).
pub fn user_name(s: &str) -> Result<(), &'static str> {
    let mut chars = s.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let ok = first_ok
        && s.len() <= 32
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-".contains(c));
    ok.then_some(())
        .ok_or("must be a user name ([a-z_][a-z0-9_-]*, at most 32 characters)")
}

/// A network interface or bridge name: the kernel's rules (at most
/// IFNAMSIZ - 1 = 15 bytes, not `.` or `..`, no `/`, `:` or whitespace;
/// `dev_valid_name`), narrowed to letters, digits and `._-@`, not starting
/// with `-`.
pub fn interface_name(s: &str) -> Result<(), &'static str> {
    let ok = !s.is_empty()
        && s.len() <= 15
        && s != "."
        && s != ".."
        && !s.starts_with('-')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-@".contains(c));
    ok.then_some(())
        .ok_or("must be an interface name (1 to 15 letters, digits and ._-@, not starting with -)")
}

/// The largest CPU number a list may name (the kernel's default
/// NR_CPUS on x86_64 is 8192; a number is bounded before a range is
/// expanded).
pub const MAX_CPU: usize = 8191;

/// A CPU list as taskset(1) and `qm set --affinity` read it: `2`, `2-3`,
/// `0,2-3`; ranges ascending, numbers at most [`MAX_CPU`].
pub fn cpu_list(s: &str) -> Result<(), &'static str> {
    const WHY: &str =
        "must be a CPU list such as 2, 2-3 or 0,2-3 (ascending ranges, CPUs up to 8191)";
    let number = |t: &str| -> Option<usize> {
        (!t.is_empty() && t.len() <= 4 && t.chars().all(|c| c.is_ascii_digit()))
            .then(|| t.parse().ok())
            .flatten()
            .filter(|&n| n <= MAX_CPU)
    };
    if s.is_empty() {
        return Err(WHY);
    }
    for part in s.split(',') {
        let ok = match part.split_once('-') {
            Some((a, b)) => matches!((number(a), number(b)), (Some(a), Some(b)) if a <= b),
            None => number(part).is_some(),
        };
        if !ok {
            return Err(WHY);
        }
    }
    Ok(())
}

/// An absolute directory path of letters, digits and `/._-`, with no
/// `..` component.
pub fn absolute_path(s: &str) -> Result<(), &'static str> {
    let ok = s.starts_with('/')
        && s.len() > 1
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
        && !s.split('/').any(|part| part == "..");
    ok.then_some(())
        .ok_or("must be an absolute path of letters, digits and /._- (no ..)")
}

/// An ssh `-o` option, `Key=value`: a key of letters, and a value on one
/// line. The value may hold shell text on purpose (a `ProxyCommand` is a
/// command): it reaches ssh as one argument, and the scenario that names
/// it is as trusted as a script (README, "Scenarios are code").
pub fn ssh_option(s: &str) -> Result<(), &'static str> {
    let ok = s.split_once('=').is_some_and(|(key, value)| {
        !key.is_empty()
            && key.chars().all(|c| c.is_ascii_alphabetic())
            && !value.chars().any(|c| c.is_control())
    });
    ok.then_some(())
        .ok_or("each is an ssh -o option, Key=value on one line (the key letters only)")
}

/// A program's path: any characters a file name may hold but control
/// characters (it reaches a command as one quoted argument).
pub fn program_path(s: &str) -> Result<(), &'static str> {
    (!s.is_empty() && !s.chars().any(|c| c.is_control()))
        .then_some(())
        .ok_or("must be a path on one line (no control characters)")
}

/// What an attacker would put in a value that reaches a root shell.
#[cfg(test)]
pub(crate) const HOSTILE: [&str; 11] = [
    "a;touch /tmp/x",
    "a$(touch /tmp/x)",
    "a`touch /tmp/x`",
    "a'b",
    "a\"b",
    "a|b",
    "a&b",
    "a\nb",
    "a)b",
    "a(b",
    "a\\b",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_hostile_character_passes_a_name_rule() {
        for s in HOSTILE {
            assert!(ssh_target(s).is_err(), "{s:?}");
            assert!(user_name(s).is_err(), "{s:?}");
            assert!(interface_name(s).is_err(), "{s:?}");
            assert!(cpu_list(s).is_err(), "{s:?}");
            assert!(absolute_path(&format!("/{s}")).is_err(), "{s:?}");
        }
        assert!(program_path("a\nb").is_err());
        assert!(ssh_option("ProxyCommand=a\nb").is_err());
    }

    #[test]
    fn what_users_write_passes() {
        assert!(ssh_target("root@pve.example.net").is_ok());
        assert!(ssh_target("root@[2001:db8::1]").is_ok());
        assert!(ssh_target("-oProxyCommand=x").is_err(), "an option to ssh");
        assert!(user_name("root").is_ok());
        assert!(user_name("Root").is_err());
        assert!(interface_name("lcbr0").is_ok());
        assert!(interface_name("vlan.100").is_ok());
        assert!(interface_name("sixteen-chars-xx").is_err(), "IFNAMSIZ");
        assert!(interface_name("..").is_err());
        assert!(cpu_list("2-3").is_ok());
        assert!(cpu_list("0,2-3,7").is_ok());
        assert!(cpu_list("3-2").is_err());
        assert!(
            cpu_list("0-4000000000").is_err(),
            "bounded before expansion"
        );
        assert!(cpu_list("1,").is_err());
        assert!(absolute_path("/var/tmp/linecard").is_ok());
        assert!(absolute_path("/var/../etc").is_err());
        assert!(absolute_path("var/tmp").is_err());
        assert!(ssh_option("StrictHostKeyChecking=accept-new").is_ok());
        assert!(ssh_option("ProxyCommand=ssh -W %h:%p bastion").is_ok());
        assert!(ssh_option("Proxy Command=x").is_err());
    }

    #[test]
    fn quoting_makes_one_word_of_anything_but_nul() {
        for s in HOSTILE {
            let q = quote(s);
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {q}"))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), s);
        }
        let nul = std::process::Command::new("sh")
            .arg("-c")
            .arg(quote("a\0b"))
            .output();
        assert!(nul.is_err(), "no command line carries a NUL");
    }
}
