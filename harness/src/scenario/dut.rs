//! A `[[dut]]` table read into a [`DutSpec`]: what runs, on which
//! backend, held to which limits (for the whole DUT or per family), with
//! which engine settings and peer timers; each key checked against the
//! sessions it will run.

use super::parse::In;
use super::programs::{self};
use super::{
    echo_expectation, expectation, DutImplementation, DutSpec, ExcusedGaps, Expectation, Family,
    PeerTimers, RawDut, RtThrottling, Sessions, WireAuth,
};
use linecard_api::config::EngineSettings;
use linecard_api::{BackendKind, InputError};
use serde::Deserialize;

impl In<'_> {
    /// `dut[i]`, its label already checked.
    pub(super) fn dut(
        &self,
        i: usize,
        d: &RawDut,
        sessions: &Sessions,
        over_ssh: bool,
    ) -> Result<DutSpec, InputError> {
        let key = |k: &str| format!("dut[{i}].{k}");
        let implementation = self.implementation(&key, d)?;
        // Features only linecardd has, each with why FRR cannot.
        let linecardd_only = [
            (
                sessions.auth.is_some(),
                "sessions.auth needs linecardd: FRR bfdd 8.4.4 has no BFD authentication, and its dataplane protocol carries no keys",
            ),
            (
                sessions.demand.is_some(),
                "sessions.demand needs linecardd: FRR bfdd 8.4.4 has no Demand mode (its dataplane protocol's flag is never set)",
            ),
        ];
        if let Some((_, why)) = linecardd_only.iter().find(|(asked, _)| *asked) {
            if !matches!(implementation, DutImplementation::Linecardd { .. }) {
                return Err(self.invalid(&key("implementation"), &d.implementation, why));
            }
        }
        let rt_throttling = match d.rt_throttling.as_deref().unwrap_or("shipped") {
            "shipped" => RtThrottling::Shipped,
            "off" => RtThrottling::Off,
            "half" => RtThrottling::Half,
            t => {
                return Err(self.invalid(&key("rt_throttling"), &t, "must be shipped, off or half"))
            }
        };
        // Above L4's hogs (SCHED_FIFO 50) to be of use; any RT priority is
        // the user's to choose (`crate::softirq_threads`).
        let ksoftirqd_priority = match d.ksoftirqd_priority.unwrap_or(0) {
            p @ 0..=99 => p as u8,
            p => {
                return Err(self.invalid(
                    &key("ksoftirqd_priority"),
                    &p,
                    "must be 0 (as the kernel ships it) or a SCHED_FIFO priority 1-99",
                ))
            }
        };
        let (expect, per_family) = self.limits(&key, d, sessions)?;
        let offload_only = self.offload_only(&key, d, &implementation)?;
        let engine = match (&d.engine, &implementation) {
            (None, _) => EngineSettings::default(),
            (Some(_), DutImplementation::Frr) => {
                return Err(self.invalid(
                    &key("engine"),
                    &"(table)",
                    "engine settings are linecardd's; FRR takes none",
                ))
            }
            (Some(t), _) => {
                let settings =
                    EngineSettings::deserialize(toml::Value::Table(t.clone())).map_err(|e| {
                        self.invalid(
                            &key("engine"),
                            &t,
                            &format!("not linecardd's [engine] settings: {e}"),
                        )
                    })?;
                if settings.control_socket.is_some() {
                    return Err(self.invalid(
                        &key("engine.control_socket"),
                        &"(set)",
                        "the runner places the control socket",
                    ));
                }
                settings
            }
        };
        let peer_timers = match &d.peer_timers {
            None => None,
            Some(_) if over_ssh => {
                return Err(self.invalid(
                    &key("peer_timers"),
                    &"(set)",
                    "the peer's own timers are the local lab's only",
                ))
            }
            Some(t) => Some(PeerTimers {
                tx_interval_ms: self.interval(
                    &key("peer_timers.tx_interval_ms"),
                    Some(
                        t.tx_interval_ms
                            .unwrap_or(i64::from(sessions.tx_interval_ms)),
                    ),
                )?,
                rx_interval_ms: self.interval(
                    &key("peer_timers.rx_interval_ms"),
                    Some(
                        t.rx_interval_ms
                            .unwrap_or(i64::from(sessions.rx_interval_ms)),
                    ),
                )?,
            }),
        };
        let programs = programs::Programs::read(
            &d.programs(),
            self.base(),
            programs::dut_keys(&implementation),
            &format!("implementation = {:?}", d.implementation),
        )
        .map_err(|(k, v, why)| self.invalid(&key(&k), &v, &why))?;
        Ok(DutSpec {
            programs,
            step: None,
            peer_timers,
            label: d.label.clone(),
            implementation,
            rt_throttling,
            ksoftirqd_priority,
            engine,
            expect,
            offload_only,
            per_family,
        })
    }

    /// `implementation` and `backend`.
    fn implementation(
        &self,
        key: &dyn Fn(&str) -> String,
        d: &RawDut,
    ) -> Result<DutImplementation, InputError> {
        Ok(match (d.implementation.as_str(), d.backend.as_deref()) {
            ("frr", None) => DutImplementation::Frr,
            ("frr", Some(b)) => {
                return Err(self.invalid(
                    &key("backend"),
                    &b,
                    "FRR bfdd has no backends; drop the key",
                ))
            }
            ("linecardd", Some(b)) => DutImplementation::Linecardd {
                backend: b.parse().map_err(|()| {
                    self.invalid(
                        &key("backend"),
                        &b,
                        &format!("must be one of {}", BackendKind::names()),
                    )
                })?,
            },
            ("linecardd", None) => {
                return Err(self.invalid(&key("backend"), &"(none)", "linecardd needs a backend"))
            }
            ("frr_dataplane", b) => {
                let b = b.unwrap_or("xdp");
                let refused = || {
                    self.invalid(
                        &key("backend"),
                        &b,
                        "must be one of naive, rt, deadline, xdp (txtime needs an interface per session, which bfdd does not always send)",
                    )
                };
                let backend: BackendKind = b.parse().map_err(|()| refused())?;
                if backend == BackendKind::Txtime {
                    return Err(refused());
                }
                DutImplementation::FrrDataplane { backend }
            }
            (other, _) => {
                return Err(self.invalid(
                    &key("implementation"),
                    &other,
                    "must be frr, linecardd or frr_dataplane",
                ))
            }
        })
    }

    /// The DUT's limits: for the whole DUT, or per family (dual stack
    /// only, and then every limit is a family's); authentication and
    /// Demand mode are the sessions', judged on every DUT.
    fn limits(
        &self,
        key: &dyn Fn(&str) -> String,
        d: &RawDut,
        sessions: &Sessions,
    ) -> Result<(Expectation, Vec<(Family, Expectation)>), InputError> {
        let mut expect = expectation(d.positive_control, d.max_flaps, d.max_gap_ms)
            .map_err(|(k, v, why)| self.invalid(&key(k), &v, why))?;
        (expect.peer_echo, expect.own_echo) =
            echo_expectation(d.peer_echo.as_deref(), d.own_echo, sessions.echo)
                .map_err(|(k, v, why)| self.invalid(&key(k), &v, why))?;
        let mut per_family = Vec::new();
        for (family, limits) in [(Family::Ipv4, &d.ipv4), (Family::Ipv6, &d.ipv6)] {
            let Some(l) = limits else { continue };
            let name = format!("{family:?}").to_lowercase();
            if !sessions.dual_stack {
                return Err(self.invalid(
                    &key(&name),
                    &"(table)",
                    "limits per family need sessions.family = \"dual\"",
                ));
            }
            let at = |k: &str| key(&format!("{name}.{k}"));
            let mut limits = expectation(l.positive_control, l.max_flaps, l.max_gap_ms)
                .map_err(|(k, v, why)| self.invalid(&at(k), &v, why))?;
            (limits.peer_echo, limits.own_echo) =
                echo_expectation(l.peer_echo.as_deref(), l.own_echo, sessions.echo)
                    .map_err(|(k, v, why)| self.invalid(&at(k), &v, why))?;
            per_family.push((family, limits));
        }
        if !per_family.is_empty() && expect != Expectation::default() {
            return Err(self.invalid(
                &key("max_flaps"),
                &"(set)",
                "with limits per family (ipv4, ipv6), put every limit in them",
            ));
        }
        let excused_gaps = match d.excused_gaps.as_deref() {
            None | Some("pass") => ExcusedGaps::Pass,
            Some("invalid") => ExcusedGaps::Invalid,
            Some(other) => {
                return Err(self.invalid(&key("excused_gaps"), &other, "must be pass or invalid"))
            }
        };
        let wire_auth = sessions.auth.as_ref().map(WireAuth::of);
        expect.auth = wire_auth;
        expect.demand = sessions.demand;
        expect.excused_gaps = excused_gaps;
        for (_, limits) in &mut per_family {
            limits.auth = wire_auth;
            limits.demand = sessions.demand;
            limits.excused_gaps = excused_gaps;
        }
        Ok((expect, per_family))
    }

    /// `offload`: the one family kept on the kernel's fast path (xdp only).
    fn offload_only(
        &self,
        key: &dyn Fn(&str) -> String,
        d: &RawDut,
        implementation: &DutImplementation,
    ) -> Result<Option<Family>, InputError> {
        match (d.offload.as_deref(), implementation) {
            (None | Some("all"), _) => Ok(None),
            (
                Some(f @ ("ipv4" | "ipv6")),
                DutImplementation::Linecardd {
                    backend: BackendKind::Xdp,
                },
            ) => Ok(Some(if f == "ipv4" {
                Family::Ipv4
            } else {
                Family::Ipv6
            })),
            (Some(f @ ("ipv4" | "ipv6")), _) => Err(self.invalid(
                &key("offload"),
                &f,
                "only linecardd's xdp backend offloads sessions",
            )),
            (Some(other), _) => Err(self.invalid(
                &key("offload"),
                &other,
                "must be all, ipv4 or ipv6 (the family kept on the kernel's fast path)",
            )),
        }
    }
}
