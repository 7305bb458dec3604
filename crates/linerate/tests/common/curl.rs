//! curl as the tests' HTTP/2 client: one request, its final answer's version, status,
//! fields and body (files under the test's own directory, removed after reading).

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::Resp;

/// One answer curl read: its version beside the answer ([`Resp`]: status, fields, body,
/// `header`, `text`).
#[derive(Debug)]
pub struct Got {
    /// `%{http_version}`: "1.1" or "2".
    pub version: String,
    /// The final answer (after any 100 Continue).
    pub resp: Resp,
}

impl std::ops::Deref for Got {
    type Target = Resp;
    fn deref(&self) -> &Resp {
        &self.resp
    }
}

static CURL_RUNS: AtomicUsize = AtomicUsize::new(0);

/// `curl FLAGS ARGS URL`, bounded by `--max-time`; its files go in `dir`.
pub fn curl_url(dir: &Path, url: &str, flags: &[&str], args: &[&str]) -> Got {
    let n = CURL_RUNS.fetch_add(1, Ordering::Relaxed);
    let body = dir.join(format!("curl-{n}.body"));
    let head = dir.join(format!("curl-{n}.head"));
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "60", "-o"])
        .arg(&body)
        .arg("-D")
        .arg(&head)
        .args(["-w", "%{http_version} %{response_code}"])
        .args(flags)
        .args(args)
        .arg(url)
        .output()
        .expect("curl (with HTTP/2 support) must be installed for these tests");
    assert!(
        out.status.success(),
        "curl {url} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let w = String::from_utf8(out.stdout).unwrap();
    let (version, status) = w.split_once(' ').expect("curl -w output");
    let head = std::fs::read_to_string(&head).unwrap();
    // With a 100 Continue first there are two heads: the last is the answer.
    let last = head
        .split("\r\n\r\n")
        .filter(|h| !h.trim().is_empty())
        .last()
        .unwrap_or("");
    let headers = last
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_string(), v.trim().to_string()))
        .collect();
    // With -I (HEAD) curl writes the head where the body would go, and reads no body.
    let head_only = args.contains(&"-I");
    let got = Got {
        version: version.to_string(),
        resp: Resp {
            status: status.parse().unwrap(),
            headers,
            body: if head_only {
                Vec::new()
            } else {
                std::fs::read(&body).unwrap_or_default()
            },
        },
    };
    let _ = std::fs::remove_file(&body);
    let _ = std::fs::remove_file(&head);
    got
}
