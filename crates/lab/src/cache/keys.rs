//! Which key each request names: keys are `key:` and a zero-padded ten-digit index (the same
//! 14 bytes for every key and both servers), drawn in order (a fill), uniformly, or from a
//! Zipf distribution (a few keys hot, a long tail: how cache traffic looks).
//!
//! No I/O and no clock; the random source is a small seeded generator, so a run's key sequence
//! repeats for a given seed and each load thread draws its own.

/// Bytes of every key.
pub const KEY_LEN: usize = 14;

/// Writes key `i`'s bytes.
pub fn key(i: u64) -> [u8; KEY_LEN] {
    let mut k = *b"key:0000000000";
    let mut n = i;
    for b in k[4..].iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
    k
}

/// xorshift64*: fast, and good enough to pick keys (not for anything secret).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // A zero state would stay zero.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// How a run picks keys among `n`.
#[derive(Clone, Debug)]
pub enum Keys {
    /// 0, 1, 2, … (each thread its own stride, so threads never repeat a key).
    Sequential {
        next: u64,
        stride: u64,
    },
    Uniform {
        n: u64,
    },
    /// Rank r (0 = hottest) with probability ∝ 1/(r+1)^s: the cumulative weights, searched.
    Zipf {
        cdf: std::sync::Arc<[f64]>,
    },
}

/// The cumulative distribution of Zipf(`s`) over `n` ranks (8 bytes per rank: 8 MB at 1M keys,
/// built once per run and shared by the threads).
pub fn zipf_cdf(n: u64, s: f64) -> std::sync::Arc<[f64]> {
    let mut acc = 0.0;
    let mut v: Vec<f64> = (1..=n)
        .map(|r| {
            acc += (r as f64).powf(-s);
            acc
        })
        .collect();
    for x in &mut v {
        *x /= acc;
    }
    v.into()
}

impl Keys {
    /// The next key's index.
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        match self {
            Keys::Sequential { next, stride } => {
                let k = *next;
                *next += *stride;
                k
            }
            Keys::Uniform { n } => rng.next_u64() % (*n).max(1),
            Keys::Zipf { cdf } => {
                let u = rng.unit();
                // Rank r is key r: both servers hash keys, so which keys are hot does not
                // matter, only how often each is asked for.
                (cdf.partition_point(|&c| c < u) as u64).min(cdf.len() as u64 - 1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_one_length() {
        assert_eq!(&key(0), b"key:0000000000");
        assert_eq!(&key(1_234_567), b"key:0001234567");
        assert_eq!(&key(9_999_999_999), b"key:9999999999");
    }

    #[test]
    fn sequential_keys_stride() {
        let mut k = Keys::Sequential { next: 1, stride: 2 };
        let mut rng = Rng::new(1);
        let got: Vec<u64> = (0..3).map(|_| k.next(&mut rng)).collect();
        assert_eq!(got, [1, 3, 5]);
    }

    #[test]
    fn zipf_makes_a_few_keys_hot() {
        let n = 1000;
        let mut k = Keys::Zipf {
            cdf: zipf_cdf(n, 0.99),
        };
        let mut rng = Rng::new(7);
        let mut counts = vec![0u32; n as usize];
        for _ in 0..100_000 {
            let i = k.next(&mut rng);
            assert!(i < n);
            counts[i as usize] += 1;
        }
        counts.sort_unstable_by(|a, b| b.cmp(a));
        // Zipf(0.99) over 1000 ranks: the top rank holds about 13% of draws, the top 10 about
        // 39%; uniform would give 0.1% and 1%.
        let top1 = f64::from(counts[0]) / 1e5;
        let top10: u32 = counts[..10].iter().sum();
        assert!((0.10..0.16).contains(&top1), "top key {top1}");
        assert!(
            (0.33..0.45).contains(&(f64::from(top10) / 1e5)),
            "top 10 {top10}"
        );
    }
}
