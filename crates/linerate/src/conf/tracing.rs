//! `[tracing]`: OpenTelemetry tracing's settings in the file, the same
//! settings as OpenTelemetry's variables (which fill in what the file leaves out), and the
//! top-level `request_id_header`. Every refusal is at the key's FILE:LINE:COLUMN.
#![forbid(unsafe_code)]

use serde::Deserialize;
use toml::Spanned;

use linerate_server::trace::TracingSettings;

use super::{ConfError, Cx};

/// `[tracing]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTracing {
    /// `http://collector:4318`: spans go to its `/v1/traces`.
    endpoint: Option<Spanned<String>>,
    service_name: Option<Spanned<String>>,
    /// An `OTEL_TRACES_SAMPLER` name.
    sampler: Option<Spanned<String>>,
    /// The ratio of the `*traceidratio` samplers.
    ratio: Option<Spanned<f64>>,
    /// How often batches go (a duration: `5s`, `200ms`).
    schedule_delay: Option<Spanned<String>>,
    max_queue_size: Option<Spanned<usize>>,
    max_export_batch_size: Option<Spanned<usize>>,
    /// How long an export may take (a duration).
    timeout: Option<Spanned<String>>,
    /// Resource attributes (`deployment.environment = "prod"`).
    #[serde(default)]
    resource: std::collections::BTreeMap<String, Spanned<String>>,
    /// Fields sent with each export (an API key).
    #[serde(default)]
    headers: std::collections::BTreeMap<String, Spanned<String>>,
    /// `false`: off, whatever the variables say.
    enabled: Option<bool>,
}

impl Cx<'_> {
    /// `[tracing]` as settings, each key checked where it is written.
    pub(super) fn tracing(&self, t: &Spanned<RawTracing>) -> Result<TracingSettings, ConfError> {
        let raw = t.get_ref();
        let text = |v: &Option<Spanned<String>>| v.as_ref().map(|s| s.get_ref().clone());
        let ms = |v: &Option<Spanned<String>>, key: &str| -> Result<Option<String>, ConfError> {
            v.as_ref()
                .map(|d| {
                    self.duration_or_zero(d, key)
                        .map(|d| d.as_millis().to_string())
                })
                .transpose()
        };
        let encode = |m: &std::collections::BTreeMap<String, Spanned<String>>| {
            (!m.is_empty()).then(|| {
                m.iter()
                    .map(|(k, v)| format!("{k}={}", percent_encode(v.get_ref())))
                    .collect::<Vec<_>>()
                    .join(",")
            })
        };
        let settings = TracingSettings {
            endpoint: text(&raw.endpoint),
            service_name: text(&raw.service_name),
            sampler: text(&raw.sampler),
            sampler_arg: raw.ratio.as_ref().map(|r| r.get_ref().to_string()),
            schedule_delay: ms(&raw.schedule_delay, "schedule_delay")?,
            max_queue_size: raw.max_queue_size.as_ref().map(|n| n.get_ref().to_string()),
            max_export_batch_size: raw
                .max_export_batch_size
                .as_ref()
                .map(|n| n.get_ref().to_string()),
            timeout: ms(&raw.timeout, "timeout")?,
            resource_attributes: encode(&raw.resource),
            headers: encode(&raw.headers),
            disabled: raw.enabled == Some(false),
            ..TracingSettings::default()
        };
        // Checked as the server will read them (with a stand-in endpoint when the file names
        // none: the variables may), each mistake at its key.
        let probe = TracingSettings {
            endpoint: settings
                .endpoint
                .clone()
                .or_else(|| Some("http://127.0.0.1:4318".into())),
            disabled: false,
            ..settings.clone()
        };
        if let Err(e) = probe.build() {
            let span = match e.setting {
                "OTEL_EXPORTER_OTLP_ENDPOINT" => raw.endpoint.as_ref().map(Spanned::span),
                "OTEL_TRACES_SAMPLER" => raw
                    .ratio
                    .as_ref()
                    .map(Spanned::span)
                    .or(raw.sampler.as_ref().map(Spanned::span)),
                "OTEL_BSP_MAX_QUEUE_SIZE" => raw.max_queue_size.as_ref().map(Spanned::span),
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" => {
                    raw.max_export_batch_size.as_ref().map(Spanned::span)
                }
                "OTEL_EXPORTER_OTLP_HEADERS" => raw.headers.values().next().map(Spanned::span),
                _ => None,
            }
            .unwrap_or_else(|| t.span());
            return Err(self.err(span, e.why));
        }
        Ok(settings)
    }

    /// `request_id_header`: the field proxied requests carry their id in; `""` sends none.
    pub(super) fn request_id_header(
        &self,
        v: &Spanned<String>,
    ) -> Result<Option<String>, ConfError> {
        let name = v.get_ref();
        if name.is_empty() {
            return Ok(None);
        }
        let token = name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            return Err(self.err(v.span(), format!("{name:?} is not a field name")));
        }
        Ok(Some(name.clone()))
    }
}

/// `v` with `,`, `=`, `%` and bytes outside visible ASCII percent-encoded (the variables'
/// list format decodes it back).
fn percent_encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_graphic() && !matches!(b, b',' | b'=' | b'%') || b == b' ' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
