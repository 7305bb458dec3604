//! The one room where linerate-http1 uses `unsafe`: vector scans of request-head bytes.
//!
//! Two kinds, both x86_64 only (other architectures use the scans in `chars.rs`):
//! - field values, with SSE2: their class (VCHAR, obs-text, SP, HTAB) is three compares wide,
//!   so sixteen bytes cost a handful of instructions. SSE2 is part of the x86_64 baseline, so
//!   nothing is detected at run time;
//! - the token, target and Host classes, with SSSE3: two `pshufb` lookups in a [`Class`]'s
//!   nibble tables classify sixteen bytes. SSSE3 is detected once per [`crate::RequestHead`];
//!   an [`Ssse3`] value exists only where the CPU has it, and the parser is compiled a second
//!   time with the feature enabled ([`Ssse3::parse`]) so these scans inline.
//!
//! Every unsafe block carries a SAFETY comment; clippy denies undocumented ones.
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{Ssse3, value_stops};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_andnot_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8,
        _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8, _mm_setzero_si128, _mm_shuffle_epi8,
        _mm_srli_epi16,
    };

    use crate::chars::{self, Class, Scanner};
    use crate::error::ParseError;
    use crate::head::{Parsed, RequestHead};
    use crate::limits::Limits;

    /// Bit `k` is set when byte `k` of `chunk` ends a field value: a control byte other than
    /// HTAB (this includes CR, LF and NUL), or DEL.
    #[inline(always)]
    pub(crate) fn value_stops(chunk: &[u8; 16]) -> u32 {
        // SAFETY: SSE2 is enabled for every x86_64 target, so the intrinsics exist on every
        // CPU that runs this; the unaligned load reads exactly the 16 bytes `chunk` borrows.
        unsafe {
            let x = _mm_loadu_si128(chunk.as_ptr().cast());
            // max(b, 0x1f) == 0x1f exactly when b <= 0x1f (unsigned).
            let ctl = _mm_cmpeq_epi8(_mm_max_epu8(x, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
            let tab = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\t' as i8));
            let del = _mm_cmpeq_epi8(x, _mm_set1_epi8(0x7f));
            _mm_movemask_epi8(_mm_or_si128(_mm_andnot_si128(tab, ctl), del)) as u32
        }
    }

    /// Proof that this CPU has SSSE3: made only by [`Ssse3::detect`].
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct Ssse3(());

    impl Ssse3 {
        /// `Some` when the CPU has SSSE3 (virtually every x86_64 CPU since 2006).
        pub(crate) fn detect() -> Option<Ssse3> {
            std::arch::is_x86_feature_detected!("ssse3").then_some(Ssse3(()))
        }

        /// [`RequestHead::parse`] compiled with SSSE3, so the class scans below inline.
        #[inline(always)]
        pub(crate) fn parse(
            self,
            head: &mut RequestHead,
            buf: &[u8],
            limits: &Limits,
        ) -> Result<Parsed, ParseError> {
            // SAFETY: `self` exists only when the CPU has SSSE3, the one feature this enables.
            unsafe { parse_ssse3(self, head, buf, limits) }
        }
    }

    #[target_feature(enable = "ssse3")]
    fn parse_ssse3(
        cpu: Ssse3,
        head: &mut RequestHead,
        buf: &[u8],
        limits: &Limits,
    ) -> Result<Parsed, ParseError> {
        head.parse_with(cpu, buf, limits)
    }

    impl Scanner for Ssse3 {
        #[inline(always)]
        fn scan(self, s: &[u8], mut i: usize, class: &Class) -> usize {
            while let Some(c) = s.get(i..i + 16) {
                // SAFETY: `self` exists only when the CPU has SSSE3.
                let stops = unsafe { class_stops(c.try_into().unwrap(), class) };
                if stops != 0 {
                    return i + stops.trailing_zeros() as usize;
                }
                i += 16;
            }
            chars::scan(s, i, class.table)
        }
    }

    /// Bit `k` is set when byte `k` of `chunk` is not in `class`.
    #[target_feature(enable = "ssse3")]
    #[inline]
    fn class_stops(chunk: &[u8; 16], class: &Class) -> u32 {
        let load = |b: &[u8; 16]| -> __m128i {
            // SAFETY: an unaligned load of exactly the 16 bytes `b` borrows.
            unsafe { _mm_loadu_si128(b.as_ptr().cast()) }
        };
        let x = load(chunk);
        let nibble = _mm_set1_epi8(0x0f);
        let lo = _mm_shuffle_epi8(load(&class.lo), _mm_and_si128(x, nibble));
        let hi = _mm_shuffle_epi8(load(&class.hi), _mm_and_si128(_mm_srli_epi16(x, 4), nibble));
        let outside = _mm_cmpeq_epi8(_mm_and_si128(lo, hi), _mm_setzero_si128());
        _mm_movemask_epi8(outside) as u32
    }
}
