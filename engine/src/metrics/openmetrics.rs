//! The OpenMetrics text format's primitives the exposition writes with:
//! quoting, numbers, families' metadata, samples with their label sets,
//! histogram series (with an exemplar on one bucket). No metric of ours
//! is named here (`exposition.rs` names them).

use std::fmt::Write;

/// A label value as OpenMetrics quotes it.
pub(super) fn escape(value: &str) -> std::borrow::Cow<'_, str> {
    if !value.contains(['\\', '"', '\n']) {
        return value.into();
    }
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
        .into()
}

/// A float as OpenMetrics and prometheus-client write it: integral values
/// with a `.0`.
pub(super) fn float(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

/// The exposition being written.
pub(super) struct Text(pub(super) String);

impl Text {
    /// A family's metadata: `name` is the metric's name with its unit, if
    /// any (`..._seconds`).
    pub(super) fn family(&mut self, name: &str, help: &str, unit: Option<&str>, kind: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
        if let Some(unit) = unit {
            let _ = writeln!(self.0, "# UNIT {name} {unit}");
        }
    }

    /// One sample: `name{first,labels,extra} value`, any part of the
    /// label set possibly empty.
    pub(super) fn sample(
        &mut self,
        name: &str,
        first: &str,
        labels: &str,
        extra: &str,
        value: &str,
    ) {
        self.labels(name, first, labels, extra);
        self.0.push_str(value);
        self.0.push('\n');
    }

    /// [`Text::sample`] of an integer, written in place.
    pub(super) fn count(&mut self, name: &str, first: &str, labels: &str, extra: &str, value: u64) {
        self.labels(name, first, labels, extra);
        let _ = writeln!(self.0, "{value}");
    }

    /// `name{first,labels,extra} `.
    pub(super) fn labels(&mut self, name: &str, first: &str, labels: &str, extra: &str) {
        self.0.push_str(name);
        self.0.push('{');
        let mut parts = [first, labels, extra].into_iter().filter(|p| !p.is_empty());
        if let Some(part) = parts.next() {
            self.0.push_str(part);
        }
        for part in parts {
            self.0.push(',');
            self.0.push_str(part);
        }
        self.0.push_str("} ");
    }

    /// One histogram series: sum, count, then its buckets cumulated; the
    /// bucket `exemplar` names (by index) carries it.
    pub(super) fn histogram(
        &mut self,
        names: &HistogramNames,
        labels: &str,
        series: (f64, u64, Vec<u64>),
        exemplar: Option<(usize, String)>,
    ) {
        let (sum, count, buckets) = series;
        self.sample(&names.sum, "", labels, "", &float(sum));
        self.count(&names.count, "", labels, "", count);
        let mut cumulative = 0;
        for (i, (le, n)) in names.les.iter().zip(buckets).enumerate() {
            cumulative += n;
            match &exemplar {
                Some((bucket, text)) if *bucket == i => {
                    self.labels(&names.bucket, le, labels, "");
                    let _ = writeln!(self.0, "{cumulative} {text}");
                }
                _ => self.count(&names.bucket, le, labels, "", cumulative),
            }
        }
    }
}

/// A histogram family's sample names and bucket labels, made once.
pub(super) struct HistogramNames {
    pub(super) sum: String,
    pub(super) count: String,
    pub(super) bucket: String,
    pub(super) les: Vec<String>,
}

impl HistogramNames {
    pub(super) fn new(name: &str, les: Vec<String>) -> Self {
        Self {
            sum: format!("{name}_sum"),
            count: format!("{name}_count"),
            bucket: format!("{name}_bucket"),
            les,
        }
    }
}
