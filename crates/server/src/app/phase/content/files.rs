//! The site's static files: the mount below which the path lies resolved by `app/files/` (and
//! compressed on the fly by `static_gz` when no sibling serves), or 404 when no route and no
//! mount serves the path.
//!
//! Owns turning a file answer into a `Response`; must not decide anything `files/` resolves
//! (safety, confinement, validators, ranges).
#![forbid(unsafe_code)]

use std::borrow::Cow;

use linerate_http1::RequestHead;

use crate::app::ConnApp;
use crate::app::dispatch::Pending;
use crate::app::files::{ALLOW, FileAnswer, HeadView, StaticFiles};
use crate::app::phase::headers::text_status;
use crate::app::response::{Body, FileBody, Response};
use crate::config::FilesMount;
use crate::h1::Decision;
use crate::stats::Kind;

impl<'a> ConnApp<'a> {
    /// No route: the site's static files answer, or 404. Out of line, so the routes' path
    /// through `request` stays small enough for the compiler to inline what it calls.
    #[inline(never)]
    pub(crate) fn files(&mut self, head: &RequestHead, buf: &[u8]) -> Decision<Pending> {
        let site = self.site_app;
        let resp = match site.mount(head.path_bytes(buf)) {
            Some((i, mount, rest)) => {
                self.kind = Kind::File;
                if self.io.trace.recorded() {
                    // Its span's `http.route`: the mount (`/` for the root's).
                    let prefix = if mount.prefix.is_empty() {
                        "/"
                    } else {
                        &mount.prefix
                    };
                    self.io.trace.route = Some(prefix.into());
                }
                let files = &self.io.files[self.site][i];
                let resp = file_response(files, mount, head, buf, rest);
                if site.compression.enabled && matches!(resp.body, Body::File(_)) {
                    let accept = || head.header(buf, "accept-encoding");
                    self.io.static_gz.apply(resp, accept, &site.compression)
                } else {
                    resp
                }
            }
            None => text_status(404),
        };
        self.respond(head, buf, resp)
    }
}

/// The static-file mount's answer to a request below it (`rest`: the path under the prefix).
fn file_response(
    files: &StaticFiles,
    mount: &FilesMount,
    head: &RequestHead,
    req: &[u8],
    rest: &[u8],
) -> Response {
    if rest.is_empty() {
        // `/static` → `/static/`, so relative links in its index resolve below the mount.
        return redirect(format!("{}/", mount.prefix));
    }
    let fields = |resp: Response, headers: crate::app::files::Headers| {
        headers.into_iter().fold(resp, |mut r, (name, value)| {
            if name.eq_ignore_ascii_case("content-type") {
                r.content_type = Some(Cow::Owned(value));
            } else if !name.eq_ignore_ascii_case("content-length") {
                // Written from the body's length; the module's fields are generated, not input.
                r.headers.push((Cow::Borrowed(name), Cow::Owned(value)));
            }
            r
        })
    };
    match files.resolve(head.method(), rest, &HeadView { head, buf: req }) {
        FileAnswer::Send {
            status,
            headers,
            file,
            offset,
            len,
            ..
        } => {
            fields(Response::new(status), headers).body(Body::File(FileBody { file, offset, len }))
        }
        FileAnswer::NotModified { headers } => fields(Response::new(304), headers),
        FileAnswer::PreconditionFailed { headers } => fields(Response::new(412), headers),
        FileAnswer::RangeNotSatisfiable { headers } => fields(Response::new(416), headers),
        FileAnswer::Redirect { location } => redirect(location),
        FileAnswer::Listing { content_type, body } => Response::new(200)
            .content_type(content_type)
            .body(Body::Owned(body.into_bytes())),
        FileAnswer::BadRequest => text_status(400),
        FileAnswer::Forbidden => text_status(403),
        FileAnswer::NotFound => text_status(404),
        FileAnswer::MethodNotAllowed => text_status(405)
            .try_header("Allow", ALLOW)
            .unwrap_or_else(|_| text_status(405)),
        FileAnswer::Error(e) => {
            tracing::warn!(error = %e, "static file could not be served");
            text_status(500)
        }
    }
}

/// `301` to `location`.
fn redirect(location: String) -> Response {
    text_status(301)
        .try_header("Location", location)
        .unwrap_or_else(|_| text_status(400))
}
