//! The timer wheel: at most one deadline per connection, filed by tick.
//!
//! Owns when connections are looked at again, and nothing about why. Arming, moving and
//! cancelling are O(1) (an entry knows its place in its bucket); expiry visits only the ticks
//! that passed and only the entries filed there, so its cost does not grow with the number of
//! idle connections — there is no periodic sweep. A deadline that moves later keeps its entry
//! (the common case: every answer pushes the keep-alive deadline back): the entry fires at the
//! old time, the caller sees the connection's real deadline has not come and files it again.
//! So a busy connection costs one re-file per keep-alive period, not one per request. Deadlines
//! beyond one revolution stay in their bucket and are skipped until their tick (a hashed wheel).
//! The connections' wheel ticks every [`TICK_MS`]; QUIC's timers (pacing, ACK delay, loss
//! detection) go in one of 1 ms ticks (`Wheel<1>`).
#![forbid(unsafe_code)]

/// Milliseconds per tick of the connections' wheel: deadlines fire up to this late, never
/// early.
pub(crate) const TICK_MS: u64 = 8;
/// Buckets: one revolution is `SLOTS × TICK` (≈ 32.8 s at 8 ms).
const SLOTS: usize = 4096;
const WORDS: usize = SLOTS / 64;
/// `at` value of a connection with no entry.
const NONE: (u64, u32) = (u64::MAX, u32::MAX);

/// A wheel of `TICK` ms per tick.
pub(crate) struct Wheel<const TICK: u64 = TICK_MS> {
    buckets: Vec<Vec<u32>>,
    /// Per connection slot: (tick it is filed under, its index in that bucket), or `NONE`.
    at: Vec<(u64, u32)>,
    /// Ticks up to this one have been expired.
    done: u64,
    /// One bit per non-empty bucket, to find the next wake-up without scanning them all.
    occupied: [u64; WORDS],
    len: usize,
    /// No entry is filed before this tick (exact after a scan; a cancel can leave it early,
    /// which costs one early wake-up and a rescan, never a late one).
    next: u64,
}

impl<const TICK: u64> Wheel<TICK> {
    /// A wheel whose first tick is the one containing `now_ms`.
    pub(crate) fn new(now_ms: u64) -> Wheel<TICK> {
        Wheel {
            buckets: (0..SLOTS).map(|_| Vec::new()).collect(),
            at: Vec::new(),
            done: now_ms / TICK,
            occupied: [0; WORDS],
            len: 0,
            next: u64::MAX,
        }
    }

    /// Entries filed.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Makes sure `slot` is looked at no later than `deadline_ms`; returns the time (ms) its
    /// entry fires, so the caller can skip calls that would change nothing (any deadline at
    /// or after it).
    pub(crate) fn arm(&mut self, slot: u32, deadline_ms: u64) -> u64 {
        let tick = deadline_ms.div_ceil(TICK).max(self.done + 1);
        if let Some(&(filed, _)) = self.at.get(slot as usize)
            && filed <= tick
        {
            return filed * TICK; // fires earlier; the caller files it again then
        }
        self.cancel(slot);
        self.file(slot, tick);
        tick * TICK
    }

    /// Removes `slot`'s entry, if any.
    pub(crate) fn cancel(&mut self, slot: u32) {
        let Some(&(tick, pos)) = self.at.get(slot as usize) else {
            return;
        };
        if (tick, pos) == NONE {
            return;
        }
        let b = (tick % SLOTS as u64) as usize;
        let bucket = &mut self.buckets[b];
        bucket.swap_remove(pos as usize);
        if let Some(&moved) = bucket.get(pos as usize) {
            self.at[moved as usize].1 = pos;
        }
        if bucket.is_empty() {
            self.occupied[b / 64] &= !(1 << (b % 64));
        }
        self.at[slot as usize] = NONE;
        self.len -= 1;
    }

    fn file(&mut self, slot: u32, tick: u64) {
        let s = slot as usize;
        if self.at.len() <= s {
            self.at.resize(s + 1, NONE);
        }
        let b = (tick % SLOTS as u64) as usize;
        self.at[s] = (tick, self.buckets[b].len() as u32);
        self.buckets[b].push(slot);
        self.occupied[b / 64] |= 1 << (b % 64);
        self.len += 1;
        self.next = self.next.min(tick);
    }

    /// Whether [`Wheel::expire`] has anything to do at `now_ms` (a tick passed since the last
    /// call, and something may be filed there).
    #[inline(always)]
    pub(crate) fn due(&self, now_ms: u64) -> bool {
        let now = now_ms / TICK;
        now > self.done && now >= self.next
    }

    /// Takes every entry whose tick has passed at `now_ms` into `due`.
    pub(crate) fn expire(&mut self, now_ms: u64, due: &mut Vec<u32>) {
        let now = now_ms / TICK;
        if now <= self.done {
            return;
        }
        // After a long stall every bucket is due at most once.
        let first = self.done + 1;
        let last = now.min(self.done + SLOTS as u64);
        for tick in first..=last {
            let b = (tick % SLOTS as u64) as usize;
            if self.occupied[b / 64] & (1 << (b % 64)) == 0 {
                continue;
            }
            let mut i = 0;
            while i < self.buckets[b].len() {
                let slot = self.buckets[b][i];
                if self.at[slot as usize].0 <= now {
                    self.cancel(slot);
                    due.push(slot);
                } else {
                    i += 1;
                }
            }
        }
        self.done = now;
        if self.next <= now {
            self.next = self.scan();
        }
    }

    /// When the next entry may be due (ms), or `None` when the wheel is empty. May be early
    /// (an entry of a later revolution shares the bucket, or the entry was cancelled), never
    /// late.
    #[inline]
    pub(crate) fn next_due(&self) -> Option<u64> {
        (self.len > 0).then(|| self.next.max(self.done + 1) * TICK)
    }

    /// The first tick after `done` whose bucket is not empty (`u64::MAX` when none is).
    fn scan(&self) -> u64 {
        if self.len == 0 {
            return u64::MAX;
        }
        let start = ((self.done + 1) % SLOTS as u64) as usize;
        for step in 0..=WORDS {
            let w = (start / 64 + step) % WORDS;
            let mut bits = self.occupied[w];
            if step == 0 {
                bits &= !0u64 << (start % 64);
            }
            if bits != 0 {
                let b = w * 64 + bits.trailing_zeros() as usize;
                let ahead = (b + SLOTS - start) % SLOTS;
                return self.done + 1 + ahead as u64;
            }
        }
        self.done + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expire(w: &mut Wheel, now: u64) -> Vec<u32> {
        let mut due = Vec::new();
        w.expire(now, &mut due);
        due.sort();
        due
    }

    #[test]
    fn deadlines_fire_once_at_or_after_their_time_never_before() {
        let mut w = Wheel::new(0);
        w.arm(1, 100);
        w.arm(2, 50);
        w.arm(3, 100_000); // beyond one revolution
        assert_eq!(expire(&mut w, 49), Vec::<u32>::new());
        assert_eq!(expire(&mut w, 56), [2]);
        assert_eq!(expire(&mut w, 99), Vec::<u32>::new());
        assert_eq!(expire(&mut w, 104), [1]);
        assert_eq!(expire(&mut w, 104), Vec::<u32>::new());
        // One revolution (32.8 s) later slot 3's bucket comes round: not yet due.
        assert_eq!(expire(&mut w, 100_000 - 1_000), Vec::<u32>::new());
        assert_eq!(expire(&mut w, 100_008), [3]);
        assert_eq!(w.len(), 0);
        assert_eq!(w.next_due(), None);
    }

    #[test]
    fn moving_earlier_refiles_and_later_keeps_the_entry() {
        let mut w = Wheel::new(0);
        w.arm(7, 60_000);
        w.arm(7, 2_000); // earlier: moved
        assert_eq!(w.len(), 1);
        w.arm(7, 30_000); // later: the entry stays at 2 s
        assert_eq!(w.len(), 1);
        assert_eq!(expire(&mut w, 2_000), [7]);
        w.arm(7, 30_000);
        assert_eq!(expire(&mut w, 29_999), Vec::<u32>::new());
        assert_eq!(expire(&mut w, 30_000), [7]);
    }

    #[test]
    fn cancel_keeps_the_other_entries_of_a_bucket_findable() {
        let mut w = Wheel::new(0);
        for s in 0..10 {
            w.arm(s, 1_000);
        }
        w.cancel(0); // moves the last entry into its place
        w.cancel(5);
        w.cancel(9);
        w.cancel(9); // twice is harmless
        assert_eq!(w.len(), 7);
        assert_eq!(expire(&mut w, 1_000), [1, 2, 3, 4, 6, 7, 8]);
    }

    #[test]
    fn next_due_is_the_nearest_filled_tick() {
        let mut w = Wheel::new(1_000);
        w.arm(1, 5_000);
        w.arm(2, 1_500);
        assert_eq!(w.next_due(), Some(1_504));
        expire(&mut w, 1_504);
        assert_eq!(w.next_due(), Some(5_000));
        // Past the bitmap's wrap-around.
        let mut w = Wheel::new(0);
        w.arm(1, 32_000);
        expire(&mut w, 31_000);
        w.arm(2, 33_000);
        assert_eq!(w.next_due(), Some(32_000));
    }

    #[test]
    fn a_long_stall_expires_everything_due() {
        let mut w = Wheel::new(0);
        for s in 0..100 {
            w.arm(s, u64::from(s) * 500);
        }
        let due = expire(&mut w, 10_000_000);
        assert_eq!(due.len(), 100);
    }
}
