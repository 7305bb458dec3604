//! Which requests are traced: OpenTelemetry's samplers by their standard names
//! (`always_on`, `always_off`, `traceidratio`, and `parentbased_*` of each, the default
//! being `parentbased_always_on`). A parent-based sampler follows the sampled flag of the
//! `traceparent` a request brings, so a trace is kept or dropped whole across services.
//!
//! Owns the decision; pure.
#![forbid(unsafe_code)]

/// A sampler.
#[derive(Clone, Debug, PartialEq)]
pub enum Sampler {
    AlwaysOn,
    AlwaysOff,
    /// This fraction of traces, by trace id (the same trace decides the same on every node).
    Ratio(f64),
    /// The parent's decision where a request brings one; this sampler's otherwise.
    ParentBased(Box<Sampler>),
}

impl Sampler {
    /// The sampler `name` (`OTEL_TRACES_SAMPLER`) with its argument (`OTEL_TRACES_SAMPLER_ARG`,
    /// the ratio: 1.0 when absent).
    pub fn parse(name: Option<&str>, arg: Option<&str>) -> Result<Sampler, String> {
        let ratio = || -> Result<f64, String> {
            match arg.map(str::trim) {
                None => Ok(1.0),
                Some(a) => match a.parse::<f64>() {
                    Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
                    _ => Err(format!("the ratio must be a number from 0 to 1, not {a:?}")),
                },
            }
        };
        Ok(
            match name.map(str::trim).unwrap_or("parentbased_always_on") {
                "always_on" => Sampler::AlwaysOn,
                "always_off" => Sampler::AlwaysOff,
                "traceidratio" => Sampler::Ratio(ratio()?),
                "parentbased_always_on" => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
                "parentbased_always_off" => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
                "parentbased_traceidratio" => {
                    Sampler::ParentBased(Box::new(Sampler::Ratio(ratio()?)))
                }
                other => {
                    return Err(format!(
                        "{other:?} is not a sampler: always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio"
                    ));
                }
            },
        )
    }

    /// Whether a request of trace `trace_id` is recorded, `parent_flags` being its
    /// `traceparent`'s flags when it brought one.
    pub fn sampled(&self, trace_id: &[u8; 16], parent_flags: Option<u8>) -> bool {
        match self {
            Sampler::AlwaysOn => true,
            Sampler::AlwaysOff => false,
            Sampler::Ratio(r) => {
                // The id's last 8 bytes, as OpenTelemetry's SDKs compare them: below
                // ratio × 2^63 (the top bit left out).
                let low = u64::from_be_bytes(trace_id[8..].try_into().unwrap_or([0; 8])) >> 1;
                low < (r * (1u64 << 63) as f64) as u64
            }
            Sampler::ParentBased(root) => match parent_flags {
                Some(f) => f & super::context::SAMPLED != 0,
                None => root.sampled(trace_id, None),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions() {
        let id = [7u8; 16];
        let on = Sampler::parse(None, None).unwrap();
        assert!(on.sampled(&id, None));
        assert!(on.sampled(&id, Some(1)));
        assert!(!on.sampled(&id, Some(0)));
        let off = Sampler::parse(Some("parentbased_always_off"), None).unwrap();
        assert!(!off.sampled(&id, None));
        assert!(off.sampled(&id, Some(1)));
        assert!(!Sampler::AlwaysOff.sampled(&id, Some(1)));
        assert!(Sampler::AlwaysOn.sampled(&id, Some(0)));
        assert!(!Sampler::Ratio(0.0).sampled(&[0xff; 16], None));
        assert!(Sampler::Ratio(1.0).sampled(&[0xff; 16], None));
    }

    #[test]
    fn ratio_keeps_its_share() {
        let half = Sampler::parse(Some("traceidratio"), Some("0.5")).unwrap();
        let mut ids = super::super::context::Ids::new();
        let kept = (0..10_000)
            .filter(|_| half.sampled(&ids.id128(), None))
            .count();
        assert!((4_500..5_500).contains(&kept), "{kept} of 10000");
    }
}
