//! Stress profiles (`stress-profiles/*.toml`): a level of the stress ladder
//! with stressor counts per DUT CPU, turned into the exact stress-ng command
//! line for a DUT with a given number of CPUs.

use linecard_api::InputError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// stress-ng's scheduling policies we accept.
const POLICIES: [&str; 3] = ["fifo", "rr", "other"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    schema_version: i64,
    name: String,
    what: String,
    #[serde(default)]
    stressors: BTreeMap<String, f64>,
    sched: Option<RawSched>,
    canary: Option<RawCanary>,
    /// Other profiles of the same directory, each run beside this one as
    /// its own stress-ng process (with its own scheduling).
    #[serde(default)]
    with: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSched {
    policy: String,
    priority: Option<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCanary {
    min_stall_ms: f64,
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Profile {
    pub name: String,
    pub what: String,
    /// stress-ng stressor and instances per DUT CPU, in name order.
    pub stressors: Vec<(String, f64)>,
    /// Scheduling policy and priority of the stressors.
    pub sched: Option<(String, u8)>,
    /// The stress bit when a normal-priority canary on the DUT's CPUs
    /// stalled at least this long in the phase.
    pub canary_min_stall_ms: Option<f64>,
    /// Profiles run at the same time, each as a stress-ng process of its
    /// own (`with = ["L3", "L4"]`: the timer storm and the real-time hogs
    /// together, each scheduled as its level says).
    #[serde(default)]
    pub with: Vec<Profile>,
}

/// The header every versioned input shares: `schema_version = 1` and a
/// `name` fit for a file or directory name (`why` says what it names).
pub(crate) fn check_header(
    file: &str,
    schema_version: i64,
    name: &str,
    why: &str,
) -> Result<(), InputError> {
    if schema_version != 1 {
        return Err(InputError::invalid(
            file,
            "schema_version",
            &schema_version,
            "this linecard reads version 1",
        ));
    }
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(InputError::invalid(file, "name", &name, why));
    }
    Ok(())
}

impl Profile {
    /// Reads a profile, and the ones its `with` names from the same
    /// directory.
    pub fn load(path: &Path) -> Result<Self, InputError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| InputError::read(&file, e))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::parse_with(&file, &text, &|name| {
            // One level deep: an included profile's own `with` is refused.
            let path = dir.join(format!("{name}.toml"));
            let included_file = path.display().to_string();
            let text =
                std::fs::read_to_string(&path).map_err(|e| InputError::read(&included_file, e))?;
            Self::parse_with(&included_file, &text, &|inner| {
                Err(InputError::invalid(
                    &included_file,
                    "with",
                    &inner,
                    "an included profile includes profiles itself; name them all in one",
                ))
            })
        })
    }

    /// A profile without `with`.
    pub fn parse(file: &str, text: &str) -> Result<Self, InputError> {
        Self::parse_with(file, text, &|name| {
            Err(InputError::invalid(
                file,
                "with",
                &name,
                "profiles are included from a profile file's directory",
            ))
        })
    }

    fn parse_with(
        file: &str,
        text: &str,
        include: &dyn Fn(&str) -> Result<Profile, InputError>,
    ) -> Result<Self, InputError> {
        let raw: RawProfile = toml::from_str(text).map_err(|e| InputError::syntax(file, e))?;
        let invalid = |key: &str, value: &dyn std::fmt::Display, why: &str| {
            InputError::invalid(file, key, value, why)
        };
        check_header(
            file,
            raw.schema_version,
            &raw.name,
            "letters, digits, - and _ only",
        )?;
        for (stressor, count) in &raw.stressors {
            if !stressor
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            {
                return Err(invalid(
                    &format!("stressors.{stressor}"),
                    count,
                    "not a stress-ng stressor name",
                ));
            }
            if !(count.is_finite() && *count > 0.0 && *count <= 64.0) {
                return Err(invalid(
                    &format!("stressors.{stressor}"),
                    count,
                    "instances per DUT CPU must be above 0 and at most 64",
                ));
            }
        }
        let sched = match raw.sched {
            None => None,
            Some(s) => {
                if !POLICIES.contains(&s.policy.as_str()) {
                    return Err(invalid(
                        "sched.policy",
                        &s.policy,
                        "must be fifo, rr or other",
                    ));
                }
                let priority = s.priority.unwrap_or(0);
                let range = if s.policy == "other" { 0..=0 } else { 1..=99 };
                if !range.contains(&priority) {
                    return Err(invalid(
                        "sched.priority",
                        &priority,
                        "fifo and rr take 1-99; other takes none",
                    ));
                }
                Some((s.policy, priority as u8))
            }
        };
        if sched.is_some() && raw.stressors.is_empty() {
            return Err(invalid(
                "sched.policy",
                &"(set)",
                "a profile without stressors has nothing to schedule",
            ));
        }
        let with = raw
            .with
            .iter()
            .map(|name| include(name))
            .collect::<Result<Vec<Profile>, _>>()?;
        let canary_min_stall_ms = match raw.canary {
            Some(c) if !(c.min_stall_ms.is_finite() && c.min_stall_ms > 0.0) => {
                return Err(invalid(
                    "canary.min_stall_ms",
                    &c.min_stall_ms,
                    "must be above 0",
                ))
            }
            // Included levels bite together at least as hard as alone.
            None => with
                .iter()
                .filter_map(|p| p.canary_min_stall_ms)
                .reduce(f64::max),
            c => c.map(|c| c.min_stall_ms),
        };
        Ok(Self {
            name: raw.name,
            what: raw.what,
            stressors: raw.stressors.into_iter().collect(),
            sched,
            canary_min_stall_ms,
            with,
        })
    }

    /// Whether this profile loads the machine at all.
    pub fn is_idle(&self) -> bool {
        self.stressors.is_empty() && self.with.is_empty()
    }

    /// The stress-ng processes of a phase: this profile's own stressors
    /// (if any) and each included profile's, as argument lists.
    pub fn stress_ng_processes(&self, dut_cpus: usize, seconds: u64) -> Vec<Vec<String>> {
        let own = (!self.stressors.is_empty()).then(|| self.stress_ng_args(dut_cpus, seconds));
        own.into_iter()
            .chain(
                self.with
                    .iter()
                    .flat_map(|p| p.stress_ng_processes(dut_cpus, seconds)),
            )
            .collect()
    }

    /// stress-ng's arguments for `seconds` on a DUT with `dut_cpus` CPUs:
    /// counts per CPU multiplied out and rounded up, at least one each.
    fn stress_ng_args(&self, dut_cpus: usize, seconds: u64) -> Vec<String> {
        let mut args = Vec::new();
        for (stressor, per_cpu) in &self.stressors {
            let n = ((per_cpu * dut_cpus as f64).ceil() as u64).max(1);
            args.push(format!("--{stressor}"));
            args.push(n.to_string());
        }
        if let Some((policy, priority)) = &self.sched {
            args.push("--sched".into());
            args.push(policy.clone());
            if *priority > 0 {
                args.push("--sched-prio".into());
                args.push(priority.to_string());
            }
        }
        args.push("--timeout".into());
        args.push(format!("{seconds}s"));
        args.push("--quiet".into());
        args
    }
}

/// The stress-ng command lines of a phase, as the manifest records them
/// (several processes run at once, joined by ` & `).
pub fn stress_ng_line(processes: &[Vec<String>]) -> String {
    processes
        .iter()
        .map(|args| format!("stress-ng {}", args.join(" ")))
        .collect::<Vec<_>>()
        .join(" & ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped(name: &str) -> Profile {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../stress-profiles")
            .join(format!("{name}.toml"));
        Profile::load(&path).unwrap()
    }

    #[test]
    fn the_shipped_ladder_reproduces_the_reference_on_four_cpus() {
        // docs/measurement.md, "The stress ladder" (4 vCPUs).
        let cmd = |name: &str| shipped(name).stress_ng_args(4, 120).join(" ");
        assert_eq!(cmd("L1"), "--cpu 4 --timeout 120s --quiet");
        assert_eq!(
            cmd("L2"),
            "--cpu 8 --switch 4 --yield 4 --timeout 120s --quiet"
        );
        assert_eq!(
            cmd("L3"),
            "--cpu 4 --hrtimers 2 --timer 8 --timerfd 4 --timeout 120s --quiet"
        );
        assert_eq!(
            cmd("L4"),
            "--cpu 4 --sched fifo --sched-prio 50 --timeout 120s --quiet"
        );
        assert!(shipped("soak").is_idle());
        assert_eq!(shipped("L4").canary_min_stall_ms, Some(30.0));
    }

    #[test]
    fn levels_run_together_as_processes_of_their_own() {
        let both = shipped("L3L4");
        assert!(!both.is_idle());
        assert_eq!(
            both.stress_ng_processes(1, 20)
                .iter()
                .map(|p| p.join(" "))
                .collect::<Vec<_>>(),
            [
                "--cpu 1 --hrtimers 1 --timer 2 --timerfd 1 --timeout 20s --quiet",
                "--cpu 1 --sched fifo --sched-prio 50 --timeout 20s --quiet",
            ]
        );
        // L4's bar for the canary, L3 having none.
        assert_eq!(both.canary_min_stall_ms, Some(30.0));
        assert_eq!(shipped("L4").stress_ng_processes(1, 20).len(), 1);
        assert!(shipped("idle").stress_ng_processes(1, 20).is_empty());
        // Included from a file's directory only, and one level deep.
        let with = "schema_version = 1\nname = \"X\"\nwhat = \"x\"\nwith = [\"L3\"]\n";
        assert!(Profile::parse("p.toml", with)
            .unwrap_err()
            .to_string()
            .contains("with = L3"));
        let dir = std::env::temp_dir().join(format!("linecard-profiles-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("a.toml"),
            with.replace("X", "a").replace("L3", "b"),
        )
        .unwrap();
        std::fs::write(
            dir.join("b.toml"),
            with.replace("X", "b").replace("L3", "a"),
        )
        .unwrap();
        let nested = Profile::load(&dir.join("a.toml")).unwrap_err().to_string();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(nested.contains("includes profiles itself"), "{nested}");
    }

    #[test]
    fn counts_scale_down_to_one_dut_cpu_without_vanishing() {
        assert_eq!(
            shipped("L3").stress_ng_args(1, 20).join(" "),
            "--cpu 1 --hrtimers 1 --timer 2 --timerfd 1 --timeout 20s --quiet"
        );
    }

    #[test]
    fn errors_name_file_key_and_value() {
        let e = |text: &str| Profile::parse("p.toml", text).unwrap_err().to_string();
        let base = "schema_version = 1\nname = \"X\"\nwhat = \"x\"\n";
        assert_eq!(
            e(&format!("{base}[stressors]\ncpu = 0.0\n")),
            "p.toml: stressors.cpu = 0: instances per DUT CPU must be above 0 and at most 64"
        );
        assert!(e(&format!(
            "{base}[stressors]\ncpu = 1.0\n[sched]\npolicy = \"deadline\"\n"
        ))
        .contains("sched.policy = deadline"));
        assert!(e(&format!(
            "{base}[stressors]\ncpu = 1.0\n[sched]\npolicy = \"fifo\"\npriority = 0\n"
        ))
        .contains("sched.priority = 0"));
        assert!(e(&base.replace("1", "2")).contains("schema_version = 2"));
        assert!(e(&format!("{base}colour = 1\n")).starts_with("p.toml: "));
        assert!(e(&format!("{base}[stressors]\n\"cpu; rm\" = 1.0\n"))
            .contains("not a stress-ng stressor name"));
    }
}
