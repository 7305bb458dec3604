//! [`Cors`]: the CORS protocol (Fetch Standard §3.2) as a layer. A preflight (`OPTIONS` with
//! `Access-Control-Request-Method`) from an allowed origin is answered by the layer itself,
//! `204` with the policy's methods, fields and max age; any other request from an allowed
//! origin gets `Access-Control-Allow-Origin` (and credentials and exposed fields, as set) on
//! its answer, whoever made it. A disallowed origin gets no CORS field at all, so the browser
//! refuses the answer to the page; the request itself goes on as any would.
#![forbid(unsafe_code)]

use std::borrow::Cow;

use linerate_http1::Method;

use crate::layer::{Extensions, Layer};
use crate::request::Request;
use crate::response::Response;

/// Which origins may read answers.
#[derive(Clone, Debug)]
enum Origins {
    /// Every origin (`*`, or the origin echoed when credentials are allowed).
    Any,
    /// These serialized origins (`https://app.example`), compared exactly.
    List(Vec<String>),
}

/// A CORS policy. `Cors::origins(["https://app.example"])` or `Cors::any_origin()`, then the
/// builder methods; methods default to `GET, HEAD, POST`, request fields to whatever the
/// preflight asks for.
#[derive(Clone, Debug)]
pub struct Cors {
    origins: Origins,
    methods: String,
    /// `None`: the preflight's `Access-Control-Request-Headers` are allowed as asked.
    headers: Option<String>,
    expose: Option<String>,
    credentials: bool,
    max_age: Option<u32>,
}

/// An allowed origin, attached by `before` for `after`.
struct AllowedOrigin(String);

impl Cors {
    fn with(origins: Origins) -> Cors {
        Cors {
            origins,
            methods: "GET, HEAD, POST".into(),
            headers: None,
            expose: None,
            credentials: false,
            max_age: None,
        }
    }

    /// Every origin may read answers.
    pub fn any_origin() -> Cors {
        Cors::with(Origins::Any)
    }

    /// Only these origins (as browsers send them: `scheme://host[:port]`, no path).
    pub fn origins<I, S>(origins: I) -> Cors
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Cors::with(Origins::List(origins.into_iter().map(Into::into).collect()))
    }

    /// The methods a preflight allows.
    pub fn allow_methods(mut self, methods: &[Method]) -> Cors {
        self.methods = join(methods.iter().map(|m| m.as_str()));
        self
    }

    /// The request fields a preflight allows (instead of those it asks for).
    pub fn allow_headers<'a>(mut self, names: impl IntoIterator<Item = &'a str>) -> Cors {
        self.headers = Some(join(names));
        self
    }

    /// Response fields the page may read beyond the safelisted ones.
    pub fn expose_headers<'a>(mut self, names: impl IntoIterator<Item = &'a str>) -> Cors {
        self.expose = Some(join(names));
        self
    }

    /// Lets the page send cookies and read the answer (`Access-Control-Allow-Credentials`);
    /// the origin is then echoed, never `*`.
    pub fn allow_credentials(mut self) -> Cors {
        self.credentials = true;
        self
    }

    /// How long a browser may cache a preflight's answer, in seconds.
    pub fn max_age(mut self, seconds: u32) -> Cors {
        self.max_age = Some(seconds);
        self
    }

    fn allows(&self, origin: &str) -> bool {
        match &self.origins {
            Origins::Any => true,
            Origins::List(list) => list.iter().any(|o| o == origin),
        }
    }

    /// The `Access-Control-Allow-Origin` value for an allowed `origin`.
    fn allow_origin(&self, origin: &str) -> String {
        match self.origins {
            Origins::Any if !self.credentials => "*".into(),
            _ => origin.into(),
        }
    }

    /// Whether answers differ by Origin (so caches must keep them apart).
    fn varies(&self) -> bool {
        !matches!(self.origins, Origins::Any) || self.credentials
    }

    /// The fields every answer to an allowed origin carries.
    fn allow(&self, origin: &str, resp: &mut Response) {
        let _ = resp.set_header("Access-Control-Allow-Origin", self.allow_origin(origin));
        if self.credentials {
            let _ = resp.set_header("Access-Control-Allow-Credentials", "true");
        }
    }

    fn preflight(&self, origin: &str, req: &Request<'_>) -> Response {
        let mut resp = Response::new(204);
        self.allow(origin, &mut resp);
        let _ = resp.set_header("Access-Control-Allow-Methods", self.methods.clone());
        let asked = req
            .header("access-control-request-headers")
            .and_then(|v| std::str::from_utf8(v).ok());
        let headers = match (&self.headers, asked) {
            (Some(h), _) => Some(h.clone()),
            (None, Some(asked)) => Some(asked.to_string()),
            (None, None) => None,
        };
        if let Some(h) = headers
            && resp.set_header("Access-Control-Allow-Headers", h).is_err()
        {
            // Fields the preflight asked for that cannot be echoed: none allowed.
            resp.remove_header("Access-Control-Allow-Headers");
        }
        if let Some(age) = self.max_age {
            let _ = resp.set_header("Access-Control-Max-Age", age.to_string());
        }
        add_vary(
            &mut resp,
            if self.varies() {
                "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"
            } else {
                "Access-Control-Request-Method, Access-Control-Request-Headers"
            },
        );
        resp
    }
}

impl Layer for Cors {
    fn before(&self, req: &Request<'_>, ext: &mut Extensions) -> Option<Response> {
        let origin = req
            .header("origin")
            .and_then(|v| std::str::from_utf8(v).ok())?;
        if !self.allows(origin) {
            return None;
        }
        if req.method() == Method::Options && req.header("access-control-request-method").is_some()
        {
            return Some(self.preflight(origin, req));
        }
        ext.insert(AllowedOrigin(origin.to_string()));
        None
    }

    fn after(&self, ext: &Extensions, resp: &mut Response) {
        if self.varies() {
            add_vary(resp, "Origin");
        }
        let Some(AllowedOrigin(origin)) = ext.get::<AllowedOrigin>() else {
            return;
        };
        self.allow(origin, resp);
        if let Some(expose) = &self.expose {
            let _ = resp.set_header("Access-Control-Expose-Headers", expose.clone());
        }
    }
}

/// `names` as one comma-separated field value.
fn join<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    names.into_iter().collect::<Vec<_>>().join(", ")
}

/// Adds `value` to the answer's `Vary` (kept as one field), unless it is there or `*` is.
fn add_vary(resp: &mut Response, value: &'static str) {
    let joined = match resp.field("vary") {
        None => Cow::Borrowed(value),
        Some(v) if v.split(',').any(|t| t.trim() == "*") => return,
        Some(v) if v.split(',').any(|t| t.trim().eq_ignore_ascii_case(value)) => {
            return;
        }
        Some(v) => Cow::Owned(format!("{v}, {value}")),
    };
    let _ = resp.set_header("Vary", joined);
}
