//! The one room where linerate-http1 uses `unsafe`: SSE2 for the field-value scan.
//!
//! A field value is most of a request head's bytes (User-Agent, Accept, Cookie), and its class
//! (VCHAR, obs-text, SP, HTAB) is three compares wide, so sixteen bytes are checked with a
//! handful of vector instructions. SSE2 is part of the x86_64 baseline: no CPU this code runs
//! on lacks it, so nothing is detected at run time. Other architectures use the word-at-a-time
//! scan in `chars.rs`. Every unsafe block carries a SAFETY comment; clippy denies
//! undocumented ones.
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

/// Bit `k` is set when byte `k` of `chunk` ends a field value: a control byte other than
/// HTAB (this includes CR, LF and NUL), or DEL.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn value_stops(chunk: &[u8; 16]) -> u32 {
    use std::arch::x86_64::{
        _mm_andnot_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8,
        _mm_or_si128, _mm_set1_epi8,
    };
    // SAFETY: SSE2 is enabled for every x86_64 target, so the intrinsics exist on every CPU
    // that runs this; the unaligned load reads exactly the 16 bytes `chunk` borrows.
    unsafe {
        let x = _mm_loadu_si128(chunk.as_ptr().cast());
        // max(b, 0x1f) == 0x1f exactly when b <= 0x1f (unsigned).
        let ctl = _mm_cmpeq_epi8(_mm_max_epu8(x, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
        let tab = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\t' as i8));
        let del = _mm_cmpeq_epi8(x, _mm_set1_epi8(0x7f));
        _mm_movemask_epi8(_mm_or_si128(_mm_andnot_si128(tab, ctl), del)) as u32
    }
}
