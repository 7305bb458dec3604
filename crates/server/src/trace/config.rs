//! Tracing's settings: where spans go (OTLP over HTTP, protobuf), what the service is
//! called, which requests are sampled, how often batches leave. Read from OpenTelemetry's
//! standard variables (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_SERVICE_NAME`,
//! `OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`, `OTEL_BSP_*`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT`) and a config file's
//! `[tracing]`, whose keys win where both say.
//!
//! Owns the settings' meaning and checks (each mistake one line naming its key); pure: the
//! caller supplies the variables.
#![forbid(unsafe_code)]

use std::time::Duration;

use super::sampler::Sampler;

/// Spans kept waiting for export before new ones are dropped (`OTEL_BSP_MAX_QUEUE_SIZE`'s
/// default).
pub const DEFAULT_MAX_QUEUE_SPANS: usize = 2048;
/// Spans in one export request at most (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`'s default).
pub const DEFAULT_MAX_EXPORT_BATCH: usize = 512;
/// How long an export may take before it is given up (`OTEL_EXPORTER_OTLP_TIMEOUT`'s
/// default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The delay between two exports (`OTEL_BSP_SCHEDULE_DELAY`'s default).
pub const DEFAULT_SCHEDULE_DELAY: Duration = Duration::from_secs(5);

/// The settings as written, each key optional: a file's `[tracing]` or the environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TracingSettings {
    /// The collector's base URL (`/v1/traces` is appended), `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub endpoint: Option<String>,
    /// The whole URL spans are posted to, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`.
    pub traces_endpoint: Option<String>,
    pub service_name: Option<String>,
    pub sampler: Option<String>,
    pub sampler_arg: Option<String>,
    /// Milliseconds.
    pub schedule_delay: Option<String>,
    pub max_queue_size: Option<String>,
    pub max_export_batch_size: Option<String>,
    /// Milliseconds.
    pub timeout: Option<String>,
    /// `key=value,key=value` (values percent-encoded, as OpenTelemetry's variable).
    pub resource_attributes: Option<String>,
    /// `name=value,name=value`: fields sent with every export (an API key).
    pub headers: Option<String>,
    /// `OTEL_SDK_DISABLED=true`, or `enabled = false` in the file.
    pub disabled: bool,
}

impl TracingSettings {
    /// The standard variables, read through `get`.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> TracingSettings {
        let v = |name: &str| get(name).filter(|s| !s.trim().is_empty());
        TracingSettings {
            endpoint: v("OTEL_EXPORTER_OTLP_ENDPOINT"),
            traces_endpoint: v("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            service_name: v("OTEL_SERVICE_NAME"),
            sampler: v("OTEL_TRACES_SAMPLER"),
            sampler_arg: v("OTEL_TRACES_SAMPLER_ARG"),
            schedule_delay: v("OTEL_BSP_SCHEDULE_DELAY"),
            max_queue_size: v("OTEL_BSP_MAX_QUEUE_SIZE"),
            max_export_batch_size: v("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"),
            timeout: v("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
                .or_else(|| v("OTEL_EXPORTER_OTLP_TIMEOUT")),
            resource_attributes: v("OTEL_RESOURCE_ATTRIBUTES"),
            headers: v("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
                .or_else(|| v("OTEL_EXPORTER_OTLP_HEADERS")),
            disabled: v("OTEL_SDK_DISABLED").is_some_and(|s| s.trim().eq_ignore_ascii_case("true")),
        }
    }

    /// These settings, with `other`'s where these say nothing.
    pub fn or(self, other: TracingSettings) -> TracingSettings {
        TracingSettings {
            endpoint: self.endpoint.or(other.endpoint),
            traces_endpoint: self.traces_endpoint.or(other.traces_endpoint),
            service_name: self.service_name.or(other.service_name),
            sampler: self.sampler.or(other.sampler),
            sampler_arg: self.sampler_arg.or(other.sampler_arg),
            schedule_delay: self.schedule_delay.or(other.schedule_delay),
            max_queue_size: self.max_queue_size.or(other.max_queue_size),
            max_export_batch_size: self.max_export_batch_size.or(other.max_export_batch_size),
            timeout: self.timeout.or(other.timeout),
            resource_attributes: self.resource_attributes.or(other.resource_attributes),
            headers: self.headers.or(other.headers),
            disabled: self.disabled || other.disabled,
        }
    }

    /// The tracing these settings ask for: `None` when no endpoint is named (tracing is off
    /// unless a collector is given) or it is disabled. An error names the setting.
    pub fn build(&self) -> Result<Option<TracingConfig>, SettingError> {
        if self.disabled {
            return Ok(None);
        }
        let endpoint = match (&self.traces_endpoint, &self.endpoint) {
            (Some(url), _) => Endpoint::parse(url, false)
                .map_err(|e| SettingError::new("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", e))?,
            (None, Some(base)) => Endpoint::parse(base, true)
                .map_err(|e| SettingError::new("OTEL_EXPORTER_OTLP_ENDPOINT", e))?,
            (None, None) => return Ok(None),
        };
        let sampler = Sampler::parse(self.sampler.as_deref(), self.sampler_arg.as_deref())
            .map_err(|e| SettingError::new("OTEL_TRACES_SAMPLER", e))?;
        let ms = |key: &'static str, v: &Option<String>, default: Duration| match v {
            None => Ok(default),
            Some(s) => s
                .trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| SettingError::new(key, format!("must be milliseconds, not {s:?}"))),
        };
        let count = |key: &'static str, v: &Option<String>, default: usize| match v {
            None => Ok(default),
            Some(s) => match s.trim().parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(SettingError::new(
                    key,
                    format!("must be a count above 0, not {s:?}"),
                )),
            },
        };
        let max_queue_spans = count(
            "OTEL_BSP_MAX_QUEUE_SIZE",
            &self.max_queue_size,
            DEFAULT_MAX_QUEUE_SPANS,
        )?;
        let max_export_batch = count(
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
            &self.max_export_batch_size,
            DEFAULT_MAX_EXPORT_BATCH,
        )?
        .min(max_queue_spans);
        let resource = match &self.resource_attributes {
            Some(s) => pairs(s).map_err(|e| SettingError::new("OTEL_RESOURCE_ATTRIBUTES", e))?,
            None => Vec::new(),
        };
        let headers = match &self.headers {
            Some(s) => pairs(s).map_err(|e| SettingError::new("OTEL_EXPORTER_OTLP_HEADERS", e))?,
            None => Vec::new(),
        };
        for (name, value) in &headers {
            let ok_name = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !ok_name || value.bytes().any(|b| b < 0x20 && b != b'\t' || b == 0x7f) {
                return Err(SettingError::new(
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    format!("{name:?} is not a field a request can carry"),
                ));
            }
        }
        // OTEL_SERVICE_NAME wins over a service.name in the resource attributes.
        let service_name = self
            .service_name
            .clone()
            .or_else(|| {
                resource
                    .iter()
                    .find(|(k, _)| k == "service.name")
                    .map(|(_, v)| v.clone())
            })
            .unwrap_or_else(|| "linerate".to_string());
        Ok(Some(TracingConfig {
            endpoint,
            service_name,
            sampler,
            schedule_delay: ms(
                "OTEL_BSP_SCHEDULE_DELAY",
                &self.schedule_delay,
                DEFAULT_SCHEDULE_DELAY,
            )?,
            timeout: ms("OTEL_EXPORTER_OTLP_TIMEOUT", &self.timeout, DEFAULT_TIMEOUT)?,
            max_queue_spans,
            max_export_batch,
            resource: resource
                .into_iter()
                .filter(|(k, _)| k != "service.name")
                .collect(),
            headers,
        }))
    }
}

/// A setting that cannot be used: which, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettingError {
    /// The variable's name (the file's key is its lowercase tail).
    pub setting: &'static str,
    pub why: String,
}

impl SettingError {
    fn new(setting: &'static str, why: impl Into<String>) -> SettingError {
        SettingError {
            setting,
            why: why.into(),
        }
    }
}

impl std::fmt::Display for SettingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.setting, self.why)
    }
}

impl std::error::Error for SettingError {}

/// Tracing as the server runs it.
#[derive(Clone, Debug, PartialEq)]
pub struct TracingConfig {
    pub endpoint: Endpoint,
    pub service_name: String,
    pub sampler: Sampler,
    pub schedule_delay: Duration,
    pub timeout: Duration,
    pub max_queue_spans: usize,
    pub max_export_batch: usize,
    /// Resource attributes besides `service.name`.
    pub resource: Vec<(String, String)>,
    /// Fields sent with every export.
    pub headers: Vec<(String, String)>,
}

/// Where spans are posted: an `http://` URL's host, port and path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// As the URL wrote it (a name or an address; an IPv6 one without brackets).
    pub host: String,
    pub port: u16,
    pub path: String,
}

impl Endpoint {
    /// `http://HOST[:PORT][/PATH]`; a base URL (`base`) gets `/v1/traces` appended to its
    /// path. Port 4318 (OTLP/HTTP's) when none is given. `https://` is refused by name: TLS
    /// to the collector is not built (a local collector or agent is the usual hop).
    pub fn parse(url: &str, base: bool) -> Result<Endpoint, String> {
        let url = url.trim();
        let rest = match url.strip_prefix("http://") {
            Some(r) => r,
            None if url.starts_with("https://") => {
                return Err(format!(
                    "{url:?}: https is not supported; send to a local collector or agent over http://"
                ));
            }
            None => return Err(format!("{url:?} is not an http:// URL")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("{url:?}: unclosed [ in the host"))?;
            (h, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() || authority.contains('@') {
            return Err(format!("{url:?} names no host"));
        }
        let port = match port {
            None => 4318,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| format!("{url:?}: bad port {p:?}"))?,
        };
        if path.contains(['?', '#', ' ']) {
            return Err(format!(
                "{url:?}: a query or fragment has no place in the endpoint"
            ));
        }
        let path = if base {
            format!("{}/v1/traces", path.trim_end_matches('/'))
        } else if path.is_empty() {
            "/".to_string()
        } else {
            path.to_string()
        };
        Ok(Endpoint {
            host: host.to_string(),
            port,
            path,
        })
    }

    /// The `Host` field's value.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// `k=v,k=v` with percent-decoded values (W3C Baggage's format, which the variables use).
fn pairs(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?} is not key=value"))?;
        let k = k.trim();
        if k.is_empty() {
            return Err(format!("{item:?} has no key"));
        }
        out.push((k.to_string(), percent_decode(v.trim())?));
    }
    Ok(out)
}

fn percent_decode(v: &str) -> Result<String, String> {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{v:?}: bad percent escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{v:?} is not UTF-8 once decoded"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> TracingSettings {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TracingSettings::from_env(|n| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone()))
    }

    #[test]
    fn off_without_an_endpoint_or_when_disabled() {
        assert_eq!(env(&[]).build().unwrap(), None);
        assert_eq!(env(&[("OTEL_SERVICE_NAME", "x")]).build().unwrap(), None);
        let off = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ]);
        assert_eq!(off.build().unwrap(), None);
    }

    #[test]
    fn standard_variables() {
        let c = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
            ("OTEL_BSP_SCHEDULE_DELAY", "200"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "service.name=shop,deployment.environment=prod%2Ceu",
            ),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cr%3Dt"),
        ])
        .build()
        .unwrap()
        .unwrap();
        assert_eq!(c.endpoint.host, "collector");
        assert_eq!(c.endpoint.port, 4318);
        assert_eq!(c.endpoint.path, "/v1/traces");
        assert_eq!(c.service_name, "shop");
        assert_eq!(c.schedule_delay, Duration::from_millis(200));
        assert_eq!(
            c.resource,
            vec![("deployment.environment".into(), "prod,eu".into())]
        );
        assert_eq!(c.headers, vec![("api-key".into(), "s3cr=t".into())]);
        assert_eq!(
            c.sampler,
            Sampler::ParentBased(Box::new(Sampler::Ratio(0.25)))
        );
        // The traces URL is taken whole; the file's keys win over the variables.
        let c = TracingSettings {
            service_name: Some("edge".into()),
            ..Default::default()
        }
        .or(env(&[
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://[::1]:9000/otlp",
            ),
            ("OTEL_SERVICE_NAME", "other"),
        ]))
        .build()
        .unwrap()
        .unwrap();
        assert_eq!(
            (
                c.endpoint.host.as_str(),
                c.endpoint.port,
                c.endpoint.path.as_str()
            ),
            ("::1", 9000, "/otlp")
        );
        assert_eq!(c.endpoint.authority(), "[::1]:9000");
        assert_eq!(c.service_name, "edge");
    }

    #[test]
    fn mistakes_name_their_setting() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c")],
                "OTEL_EXPORTER_OTLP_ENDPOINT",
            ),
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "c:4318")],
                "OTEL_EXPORTER_OTLP_ENDPOINT",
            ),
            (
                &[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:0")],
                "OTEL_EXPORTER_OTLP_ENDPOINT",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_TRACES_SAMPLER", "sometimes"),
                ],
                "OTEL_TRACES_SAMPLER",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_TRACES_SAMPLER", "traceidratio"),
                    ("OTEL_TRACES_SAMPLER_ARG", "2"),
                ],
                "OTEL_TRACES_SAMPLER",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_BSP_SCHEDULE_DELAY", "5s"),
                ],
                "OTEL_BSP_SCHEDULE_DELAY",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
                ],
                "OTEL_BSP_MAX_QUEUE_SIZE",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_RESOURCE_ATTRIBUTES", "novalue"),
                ],
                "OTEL_RESOURCE_ATTRIBUTES",
            ),
            (
                &[
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
                    ("OTEL_EXPORTER_OTLP_HEADERS", "a b=c"),
                ],
                "OTEL_EXPORTER_OTLP_HEADERS",
            ),
        ];
        for (vars, setting) in cases {
            assert_eq!(env(vars).build().unwrap_err().setting, *setting, "{vars:?}");
        }
    }
}
