//! The hash of the configuration in use (`linerate_config_info{hash}`): the
//! SHA-256 of the configuration file's bytes as read, or of the command line when there is
//! no file, its first 16 hex digits. Nodes with the same hash run the same file (or flags).
//! Owns the hashing only; the server exposes it.
#![forbid(unsafe_code)]

/// Hex digits of the SHA-256 kept: 64 bits, enough to tell a fleet's configurations apart
/// (Kubernetes' pod-template-hash keeps fewer), short enough to read on a dashboard.
const HASH_HEX_DIGITS: usize = 16;

/// The hash of a configuration file's bytes.
pub fn of_file(text: &str) -> String {
    hex16(text.as_bytes())
}

/// The hash of the command line (every argument after the program's name, each ended by a
/// NUL so `a b` and `ab` differ): the configuration of a server started without a file.
/// The environment (`DATABASE_URL`…) is not in it.
pub fn of_flags(args: impl IntoIterator<Item = std::ffi::OsString>) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut bytes = Vec::new();
    for a in args {
        bytes.extend_from_slice(a.as_bytes());
        bytes.push(0);
    }
    hex16(&bytes)
}

fn hex16(bytes: &[u8]) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes);
    let mut hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    hex.truncate(HASH_HEX_DIGITS);
    hex
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_sha256s_first_16_hex_digits() {
        // `printf 'abc' | sha256sum`: ba7816bf8f01cfea414140de5dae2223b00361a3…
        assert_eq!(of_file("abc"), "ba7816bf8f01cfea");
        assert_ne!(of_flags(["a b".into()]), of_flags(["a".into(), "b".into()]));
    }
}
