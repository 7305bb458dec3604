//! Files a comparison's servers serve, made fresh for each run: the `{fixtures}` placeholder.
//!
//! Owns writing them and removing them: `static/f1k.bin` (1 KiB, a small answer any peer can
//! serve), `static/f64k.bin` (64 KiB that do not compress, for the file workload),
//! `static/f1m.bin` (1 MiB), `static/t58k.txt` (58,000 bytes of text that compress about as
//! prose does, for the compression workloads) and a self-signed certificate with its key in `tls/cert.pem` and
//! `tls/key.pem` (P-256, for `localhost` and 127.0.0.1, for the HTTPS workload). The default suite needs nothing prepared by hand, so it runs on a clean host.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The sizes of the files under `static/`, by name.
pub const FILES: &[(&str, usize)] = &[
    ("f1k.bin", 1024),
    ("f64k.bin", 64 * 1024),
    ("f1m.bin", 1024 * 1024),
];

/// The text files under `static/`, by name and size: words drawn from a fixed vocabulary.
pub const TEXT_FILES: &[(&str, usize)] = &[("t58k.txt", 58_000)];

/// A directory of fixtures, removed when dropped.
pub struct Fixtures {
    dir: PathBuf,
}

impl Fixtures {
    /// Writes the fixtures into a new private temporary directory.
    pub fn create() -> anyhow::Result<Fixtures> {
        let dir = std::env::temp_dir().join(format!(
            "linerate-lab-fixtures-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        let fixtures = Fixtures { dir };
        fixtures
            .write()
            .with_context(|| format!("cannot write the fixtures in {}", fixtures.dir.display()))?;
        Ok(fixtures)
    }

    /// Where they are: the value of `{fixtures}`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn write(&self) -> anyhow::Result<()> {
        let files = self.dir.join("static");
        std::fs::create_dir_all(&files)?;
        for (name, len) in FILES {
            std::fs::write(files.join(name), noise(*len))?;
        }
        for (name, len) in TEXT_FILES {
            std::fs::write(files.join(name), text(*len))?;
        }
        let tls = self.dir.join("tls");
        std::fs::create_dir_all(&tls)?;
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        let cert = rcgen::generate_simple_self_signed(names)?;
        std::fs::write(tls.join("cert.pem"), cert.cert.pem())?;
        std::fs::write(tls.join("key.pem"), cert.signing_key.serialize_pem())?;
        Ok(())
    }
}

impl Drop for Fixtures {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `len` bytes from a fixed xorshift sequence: the same every run, and incompressible, so no
/// server can shrink them and a file workload measures moving bytes.
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

/// `len` bytes of lines of words picked by the same xorshift sequence from a vocabulary of 64:
/// the same every run, compressible (gzip 1 makes it about a third) but not trivially.
fn text(len: usize) -> Vec<u8> {
    const WORDS: [&str; 64] = [
        "the",
        "of",
        "and",
        "to",
        "in",
        "a",
        "is",
        "that",
        "for",
        "it",
        "as",
        "was",
        "with",
        "be",
        "by",
        "on",
        "not",
        "he",
        "this",
        "are",
        "or",
        "his",
        "from",
        "at",
        "which",
        "but",
        "have",
        "an",
        "had",
        "they",
        "you",
        "were",
        "server",
        "request",
        "answer",
        "proxy",
        "cache",
        "latency",
        "connection",
        "header",
        "field",
        "stream",
        "window",
        "buffer",
        "worker",
        "socket",
        "kernel",
        "packet",
        "segment",
        "client",
        "upstream",
        "status",
        "length",
        "chunk",
        "frame",
        "table",
        "index",
        "value",
        "token",
        "route",
        "site",
        "file",
        "byte",
        "line",
    ];
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut out = Vec::with_capacity(len + 16);
    let mut col = 0;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let w = WORDS[(x >> 58) as usize];
        out.extend_from_slice(w.as_bytes());
        col += w.len() + 1;
        out.push(if col > 72 { b'\n' } else { b' ' });
        if col > 72 {
            col = 0;
        }
    }
    out.truncate(len);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixtures_are_written_and_removed() {
        let f = Fixtures::create().unwrap();
        let dir = f.dir().to_path_buf();
        for (name, len) in FILES {
            let bytes = std::fs::read(dir.join("static").join(name)).unwrap();
            assert_eq!(bytes.len(), *len);
        }
        for (name, len) in TEXT_FILES {
            let text = std::fs::read_to_string(dir.join("static").join(name)).unwrap();
            assert_eq!(text.len(), *len);
            assert!(text.lines().count() > *len / 100, "lines of words: {name}");
        }
        let cert = std::fs::read_to_string(dir.join("tls/cert.pem")).unwrap();
        let key = std::fs::read_to_string(dir.join("tls/key.pem")).unwrap();
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"), "{cert}");
        assert!(key.contains("PRIVATE KEY-----"), "{key}");
        drop(f);
        assert!(!dir.exists());
    }

    #[test]
    fn noise_does_not_compress() {
        use std::io::Write as _;
        let data = noise(64 * 1024);
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&data).unwrap();
        let packed = z.finish().unwrap();
        assert!(packed.len() > data.len() * 99 / 100, "{}", packed.len());
    }
}
