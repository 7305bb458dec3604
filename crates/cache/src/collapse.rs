//! Collapsed forwarding, as bookkeeping: the first miss for a key leads (goes upstream), later
//! ones wait on it; when the leader lands, its waiters are handed back to the caller to look
//! again. Tokens in, tokens out: no threads, wakers or clocks (the caller passes "now" and asks
//! for the next deadline). A flight that outlives its timeout releases its waiters to go
//! upstream alone, and a late leader's landing is then ignored.

use std::collections::HashMap;

use crate::Time;
use crate::key::Key;

/// The most requests that wait on one flight; more go upstream alone. High enough for
/// 1,000 concurrent clients on one cold key; bounds the memory a flight holds.
pub const MAX_WAITERS: usize = 16_384;

/// A flight's number, so a leader lands only its own flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlightId(u64);

/// What a request that missed does.
#[derive(Debug, PartialEq, Eq)]
pub enum Role<T> {
    /// Go upstream; call [`Flights::land`] with this id when the answer is stored, refused
    /// or failed (every end, or the waiters wait for the timeout).
    Lead(FlightId),
    /// Wait: the token comes back from `land` or `expired`.
    Wait(FlightId),
    /// The flight is full: go upstream alone (the token is given back).
    Alone(T),
}

#[derive(Debug)]
struct Flight<T> {
    id: FlightId,
    deadline: Time,
    waiters: Vec<T>,
}

/// The flights in progress, by key. One per store (shared by the workers that share it), so
/// concurrent misses on different workers collapse too.
#[derive(Debug)]
pub struct Flights<T> {
    flights: HashMap<Key, Flight<T>>,
    next: u64,
    /// How long waiters wait on a leader before going upstream themselves.
    timeout: u64,
}

impl<T> Flights<T> {
    /// Flights whose waiters give up after `timeout_s` seconds.
    pub fn new(timeout_s: u64) -> Self {
        Flights {
            flights: HashMap::new(),
            next: 0,
            timeout: timeout_s,
        }
    }

    /// A miss for `key` at `now`; `waiter` names the request if it has to wait.
    pub fn join(&mut self, key: &Key, waiter: T, now: Time) -> Role<T> {
        if let Some(f) = self.flights.get_mut(key) {
            if f.waiters.len() >= MAX_WAITERS {
                return Role::Alone(waiter);
            }
            f.waiters.push(waiter);
            return Role::Wait(f.id);
        }
        Role::Lead(self.join_new(key, now))
    }

    /// A flight for `key` led by a request nobody waits on (a background validation,
    /// stale-while-revalidate): its id, or `None` when one is in progress already (then no
    /// second request goes up).
    pub fn lead_if_idle(&mut self, key: &Key, now: Time) -> Option<FlightId> {
        if self.flights.contains_key(key) {
            return None;
        }
        Some(self.join_new(key, now))
    }

    fn join_new(&mut self, key: &Key, now: Time) -> FlightId {
        let id = FlightId(self.next);
        self.next += 1;
        let deadline = Time(now.0.saturating_add(self.timeout));
        self.flights.insert(
            key.clone(),
            Flight {
                id,
                deadline,
                waiters: Vec::new(),
            },
        );
        id
    }

    /// The leader of flight `id` for `key` is done: its waiters, to look in the store again
    /// (a hit if the answer was stored; if not — private, too big, an error — each goes
    /// upstream alone rather than leading a new flight, which would serialise them).
    /// Empty when the flight is no longer this one (it expired, or another replaced it).
    pub fn land(&mut self, key: &Key, id: FlightId) -> Vec<T> {
        // Removed first, put back in the rare case it is another flight: the key is hashed
        // once on the usual path (a `get` then a `remove` hashed it twice).
        match self.flights.remove_entry(key) {
            Some((_, f)) if f.id == id => f.waiters,
            Some((k, f)) => {
                self.flights.insert(k, f);
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    /// Flights past their deadline at `now`, removed: their waiters go upstream alone.
    pub fn expired(&mut self, now: Time) -> Vec<(Key, Vec<T>)> {
        let keys: Vec<Key> = self
            .flights
            .iter()
            .filter(|(_, f)| f.deadline <= now)
            .map(|(k, _)| k.clone())
            .collect();
        keys.into_iter()
            .filter_map(|k| self.flights.remove(&k).map(|f| (k, f.waiters)))
            .collect()
    }

    /// When [`expired`](Self::expired) next has something to return ("wake me at").
    pub fn deadline(&self) -> Option<Time> {
        self.flights.values().map(|f| f.deadline).min()
    }

    /// Flights in progress.
    pub fn len(&self) -> usize {
        self.flights.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flights.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_background_leader_starts_only_when_no_flight_is_in_progress() {
        let mut f: Flights<u32> = Flights::new(5);
        let id = f.lead_if_idle(&key("/a"), Time(0)).unwrap();
        assert_eq!(f.lead_if_idle(&key("/a"), Time(0)), None);
        // A miss meanwhile waits on it.
        assert!(matches!(f.join(&key("/a"), 7, Time(0)), Role::Wait(_)));
        assert_eq!(f.land(&key("/a"), id), vec![7]);
        assert!(f.lead_if_idle(&key("/a"), Time(1)).is_some());
    }

    fn key(p: &str) -> Key {
        Key::new(b"http", b"a", p.as_bytes()).unwrap()
    }

    #[test]
    fn a_thousand_misses_make_one_leader() {
        // 1,000 concurrent clients for one cold key make one upstream request.
        let mut f = Flights::new(5);
        let k = key("/cold");
        let Role::Lead(id) = f.join(&k, 0, Time(100)) else {
            panic!("first leads")
        };
        for i in 1..1000 {
            assert_eq!(f.join(&k, i, Time(100)), Role::Wait(id));
        }
        let waiters = f.land(&k, id);
        assert_eq!(waiters, (1..1000).collect::<Vec<_>>());
        assert!(f.is_empty());
        assert!(
            matches!(f.join(&k, 0, Time(101)), Role::Lead(_)),
            "the next miss leads anew"
        );
    }

    #[test]
    fn keys_fly_apart() {
        let mut f = Flights::new(5);
        assert!(matches!(f.join(&key("/a"), 1, Time(0)), Role::Lead(_)));
        assert!(matches!(f.join(&key("/b"), 2, Time(0)), Role::Lead(_)));
        assert_eq!(f.len(), 2);
    }

    #[test]
    fn timeout_releases_waiters_and_a_late_leader_lands_nothing() {
        let mut f = Flights::new(5);
        let k = key("/slow");
        let Role::Lead(old) = f.join(&k, 0, Time(100)) else {
            panic!()
        };
        f.join(&k, 1, Time(101));
        assert_eq!(f.deadline(), Some(Time(105)));
        assert!(f.expired(Time(104)).is_empty());
        assert_eq!(f.expired(Time(105)), vec![(k.clone(), vec![1])]);
        assert_eq!(f.deadline(), None);
        let Role::Lead(new) = f.join(&k, 2, Time(106)) else {
            panic!()
        };
        f.join(&k, 3, Time(106));
        assert!(
            f.land(&k, old).is_empty(),
            "the old leader cannot land the new flight"
        );
        assert_eq!(f.land(&k, new), vec![3]);
    }

    #[test]
    fn a_full_flight_sends_the_rest_alone() {
        let mut f = Flights::new(5);
        let k = key("/x");
        f.join(&k, 0usize, Time(0));
        for i in 0..MAX_WAITERS {
            assert!(matches!(f.join(&k, i, Time(0)), Role::Wait(_)));
        }
        assert_eq!(f.join(&k, 7, Time(0)), Role::Alone(7));
    }
}
