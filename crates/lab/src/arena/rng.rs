//! The arena's random inputs: a small xorshift generator seeded from the clock and the process
//! id, so every run draws operands, counts and bodies no server could have prepared for
//! (HttpArena's anti-cheat). Not cryptographic, and not meant to be.

use std::time::{SystemTime, UNIX_EPOCH};

/// xorshift64* (Vigna): plenty for test inputs.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is moved off the fixed point).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    /// A generator seeded from the time and the process id.
    pub fn from_clock() -> Rng {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        Rng::new(t ^ (u64::from(std::process::id()) << 32))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    /// `n` printable ASCII letters and digits (a text message, an upload body).
    pub fn text(&mut self, n: usize) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        (0..n)
            .map(|_| A[self.next_u64() as usize % A.len()] as char)
            .collect()
    }
}
