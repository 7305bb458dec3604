//! Purges as operators ask for them: what a purge of a URL names as cache
//! keys (every scheme and port the URL can be keyed under on this server), and a mount's
//! cache purged of them, here and through its shared tier on every edge. Both the admin
//! listener (`POST /purge`) and the `PURGE` method (`app/phase/content/purge.rs`) come here.
//!
//! Owns the URL → keys mapping, through the mount's key rules (`key`, `query_drop`)
//! as a request's plan maps it. Must not wait in a worker: [`MountCache::purge_keys_then`] answers through its
//! callback, on the tier's thread.
#![forbid(unsafe_code)]

use std::sync::Arc;

use linerate_cache::{Key, KeyRules, key_for};

use super::cache::MountCache;
use super::tier::Purge;

/// The most ports a purge by URL names (with the URL's own and the default one): a server's
/// TCP listeners rarely number more; past it the later listeners' ports are left out.
pub(crate) const MAX_PURGED_PORTS: usize = 16;

/// The schemes a URL's answers can be stored under: a purge of one purges both.
const SCHEMES: [&[u8]; 2] = [b"http", b"https"];

/// Every key `url` (`http://host[:port]/path?query`, or `https://…`) can be stored under on a
/// server listening on `ports`: both schemes, each with no port (the scheme's default), the
/// URL's own port and every listener's port. A client's Host keeps the port it was sent with
/// (RFC 9110 §7.2), so `http://t/x`, `http://t:8080/x` and `https://t/x` are three keys of
/// one resource: a purge of any of them purges all. Each is mapped through the mount's key
/// `rules` (a key without scheme or port folds them into one). `None` where `url` is not
/// http(s) or its host or target is not one a key takes.
pub(crate) fn url_keys(url: &str, ports: &[u16], rules: Option<&KeyRules>) -> Option<Vec<Key>> {
    let (scheme, rest) = url.split_once("://")?;
    if !SCHEMES
        .iter()
        .any(|s| scheme.as_bytes().eq_ignore_ascii_case(s))
    {
        return None;
    }
    let (authority, target) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    let (host, port) = split_port(authority);
    // The URL's own form first: one that no key takes is refused, not silently skipped.
    let key = |s: &[u8], a: &[u8]| key_for(rules, s, a, target.as_bytes(), &[]);
    let own = key(scheme.as_bytes(), authority.as_bytes()).ok()?;
    let mut keys = vec![own];
    let mut wanted: Vec<Option<u16>> = vec![None];
    wanted.extend(port.map(Some));
    wanted.extend(ports.iter().take(MAX_PURGED_PORTS).map(|&p| Some(p)));
    for s in SCHEMES {
        for p in &wanted {
            let authority = match p {
                Some(p) => format!("{host}:{p}"),
                None => host.to_string(),
            };
            if let Ok(k) = key(s, authority.as_bytes())
                && !keys.contains(&k)
            {
                keys.push(k);
            }
        }
    }
    Some(keys)
}

/// Every key prefix a purge by prefix of `url` names: its origin under both schemes and each
/// port of [`url_keys`], then the rest of `url` as given.
pub(crate) fn prefix_keys(
    url: &str,
    ports: &[u16],
    rules: Option<&KeyRules>,
) -> Option<Vec<Vec<u8>>> {
    let (scheme, rest) = url.split_once("://")?;
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    let origins = url_keys(&format!("{scheme}://{authority}/"), ports, rules)?;
    Some(
        origins
            .iter()
            .map(|k| {
                let mut p = k.origin().to_vec();
                p.extend_from_slice(tail.as_bytes());
                p
            })
            .collect(),
    )
}

/// The start of the keys a listing of `url` names (the admin's `GET /cache?prefix=`): its
/// origin as the mount's key `rules` write it, then the rest of `url` as given.
pub(crate) fn list_prefix(url: &str, rules: Option<&KeyRules>) -> Option<Vec<u8>> {
    let (scheme, rest) = url.split_once("://")?;
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    let k = url_keys(&format!("{scheme}://{authority}/"), &[], rules)?;
    let mut p = k.first()?.origin().to_vec();
    p.extend_from_slice(tail.as_bytes());
    Some(p)
}

/// `authority`'s host and its port, when it names a numeric one (an IPv6 literal's colons
/// are inside its brackets).
fn split_port(authority: &str) -> (&str, Option<u16>) {
    match authority.rsplit_once(':') {
        Some((host, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            (host, port.parse().ok())
        }
        _ => (authority, None),
    }
}

impl MountCache {
    /// Whether a `PURGE` from `client` is taken: its cache's `purge_from` names it.
    pub(crate) fn purge_allowed(&self, client: std::net::IpAddr) -> bool {
        self.conf.purge_from.iter().any(|r| r.contains(client))
    }

    /// Removes every variant of `keys` from this edge's memory and, through the shared tier,
    /// from every edge's, without waiting; `done` gets how many keys memory held and whether
    /// the tier took all of it (`true` without a tier), on the tier's thread, or here at once.
    pub(crate) fn purge_keys_then(
        self: &Arc<MountCache>,
        keys: Vec<Key>,
        done: impl FnOnce(usize, bool) + Send + 'static,
    ) {
        match &self.tier {
            Some(t) => {
                let what = self.tier_purges(&keys);
                t.purge_then(what, || self.remove_keys(&keys), done);
            }
            None => done(self.remove_keys(&keys), true),
        }
    }

    /// [`MountCache::purge_keys_then`] for the admin listener's thread, which waits: how many
    /// keys memory held, and whether the tier took the purge.
    pub(crate) fn purge_keys(&self, keys: &[Key]) -> (usize, bool) {
        // The tier first, under its fence: what it answers meanwhile does not fill memory
        // again (`SharedTier::usable`).
        let took = match &self.tier {
            Some(t) => t.purge_many(self.tier_purges(keys)),
            None => true,
        };
        (self.remove_keys(keys), took)
    }

    /// Removes every answer, here and (the tier's generation moved) on every edge; how many
    /// keys memory held, and whether the tier took it.
    pub(crate) fn purge_all(&self) -> (usize, bool) {
        let took = match &self.tier {
            Some(t) => t.purge_many(vec![Purge::All]),
            None => true,
        };
        (self.store.remove_prefix(b""), took)
    }

    /// Removes every answer tagged `tag` here and, through the tier's purge log, on every
    /// edge (each refuses the tier's entries with the tag stored before it learned of the
    /// purge); how many answers memory held, and whether the tier took it.
    pub(crate) fn purge_tag(&self, tag: &[u8]) -> (usize, bool) {
        let took = match &self.tier {
            Some(t) => t.purge_many(vec![Purge::Tag(tag.into())]),
            None => true,
        };
        (self.store.remove_tagged(tag), took)
    }

    /// A soft purge (Fastly's): every variant of `keys`, and with `tag` every answer tagged
    /// so, made stale here (freshness ends now: the next request revalidates, and a
    /// stale-serving rule may still serve it) and, through the tier's purge log, on every
    /// edge. The tier's own entries of `keys` are deleted and its entries with `tag` refused
    /// (it cannot rewrite what it holds): an edge that does not hold the answer fetches it.
    /// How many answers memory made stale, and whether the tier took it.
    /// On a mount whose key adds a cookie or a field, every value's answer of a URL is made
    /// stale here (it was removed: the soft purge was a purge); the tier cannot name those
    /// entries, so its generation moves as for a purge, and the other edges start cold.
    pub(crate) fn soft_purge(&self, keys: &[Key], tag: Option<&[u8]>) -> (usize, bool) {
        let took = match &self.tier {
            Some(t) => t.purge_many(match tag {
                Some(tag) => vec![Purge::SoftTag(tag.into())],
                None if self.key_adds() => self.tier_purges(keys),
                None => keys.iter().cloned().map(Purge::SoftKey).collect(),
            }),
            None => true,
        };
        if tag.is_none() && self.key_adds() {
            let now = super::cache::now();
            let softened = url_parts(keys)
                .iter()
                .map(|p| {
                    self.store
                        .replace_prefix(p, |e| stale_now(e, &self.opts, now))
                })
                .sum();
            return (softened, took);
        }
        let softened = match tag {
            Some(tag) => self.soften_tagged(tag),
            None => keys.iter().map(|k| self.soften(k)).sum(),
        };
        (softened, took)
    }

    /// Makes every variant of `key` stale now; how many were fresh.
    pub(crate) fn soften(&self, key: &Key) -> usize {
        let now = super::cache::now();
        self.store.replace(key, |e| stale_now(e, &self.opts, now))
    }

    /// Makes every answer tagged `tag` stale now; how many were fresh.
    pub(crate) fn soften_tagged(&self, tag: &[u8]) -> usize {
        let now = super::cache::now();
        self.store
            .replace_tagged(tag, |e| stale_now(e, &self.opts, now))
    }

    /// Whether the mount's key adds a cookie or a field (`key = [..., "cookie:NAME"]`): a
    /// URL then has one entry per value, every one's key starting with the URL's part and a
    /// space.
    fn key_adds(&self) -> bool {
        self.opts.key.as_deref().is_some_and(KeyRules::adds)
    }

    /// What the tier is told for a purge of `keys`: each key, or, where the key adds a
    /// cookie or a field (entries the edges cannot name), everything (its generation moved).
    fn tier_purges(&self, keys: &[Key]) -> Vec<Purge> {
        if self.key_adds() {
            return vec![Purge::All];
        }
        keys.iter().cloned().map(Purge::Key).collect()
    }

    /// Removes every variant of `keys` from memory (with added key parts, every entry of
    /// each key's URL part); how many keys or entries memory held.
    fn remove_keys(&self, keys: &[Key]) -> usize {
        if !self.key_adds() {
            return keys.iter().filter(|k| self.store.remove(k)).count();
        }
        url_parts(keys)
            .iter()
            .map(|p| self.store.remove_prefix(p))
            .sum()
    }
}

/// Where the mount's key adds a cookie or a field: the prefix every entry of each of
/// `keys`' URLs starts with (the URL's part and a space), once each.
fn url_parts(keys: &[Key]) -> Vec<Vec<u8>> {
    let mut parts: Vec<Vec<u8>> = keys
        .iter()
        .map(|k| {
            let url = k
                .as_bytes()
                .split(|&b| b == b' ')
                .next()
                .unwrap_or_default();
            let mut p = url.to_vec();
            p.push(b' ');
            p
        })
        .collect();
    parts.sort();
    parts.dedup();
    parts
}

/// The most times [`stale_now`] moves an entry's timing back: each move makes up what the
/// last fell short by (a `Date` the move passes takes its apparent age away).
const STALE_STEPS: usize = 4;

/// `entry` as it is when its freshness ends at `now`: the same answer with its request and
/// response times moved back until its current age (RFC 9111 §4.2.3) reaches its freshness
/// lifetime, so it is stale by nothing yet (a `stale-while-revalidate` or `stale-if-error`
/// window starts now). `None` when it is stale already.
pub(crate) fn stale_now(
    entry: &linerate_cache::Entry,
    opts: &linerate_cache::Options,
    now: linerate_cache::Time,
) -> Option<linerate_cache::Entry> {
    use linerate_cache::freshness::{current_age, lifetime};
    use linerate_cache::{Time, Timing};
    let life = lifetime(&entry.facts, entry.timing.response_time, opts);
    if current_age(&entry.facts, entry.timing, now) >= life {
        return None;
    }
    let moved = |back: u64| Timing {
        request_time: Time(entry.timing.request_time.0.saturating_sub(back)),
        response_time: Time(entry.timing.response_time.0.saturating_sub(back)),
    };
    let mut back = 0;
    for _ in 0..STALE_STEPS {
        let timing = moved(back);
        let age = current_age(&entry.facts, timing, now);
        let life = lifetime(&entry.facts, timing.response_time, opts);
        if age >= life {
            break;
        }
        back += life - age;
    }
    let timing = moved(back);
    let stale = current_age(&entry.facts, timing, now)
        >= lifetime(&entry.facts, timing.response_time, opts);
    // Short after every step (a lifetime that grows as the timing moves): its whole lifetime
    // and age back, past which no answer is fresh.
    let timing = if stale {
        timing
    } else {
        moved(life.saturating_add(current_age(&entry.facts, entry.timing, now)))
    };
    Some(linerate_cache::Entry::from_stored(
        entry.key.clone(),
        entry.variant.clone(),
        entry.status,
        entry.fields.clone(),
        entry.body.clone(),
        timing,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url_keys_plain(url: &str, ports: &[u16]) -> Option<Vec<Key>> {
        url_keys(url, ports, None)
    }

    fn rules(parts: &[&str], drop: &[&str]) -> KeyRules {
        let s = |l: &[&str]| l.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        KeyRules::parse(&s(parts), &s(drop), false).unwrap()
    }

    /// A mount keyed without scheme and port has one key for every form of
    /// a URL, and a purge names it as a request's plan does: the dropped parameters left out.
    #[test]
    fn a_url_names_the_keys_the_mounts_key_rules_make() {
        let folded = rules(&["host", "path", "query"], &["utm_*"]);
        assert_eq!(
            strs(url_keys(
                "https://T:8443/x?a=1&utm_source=m",
                &[8080],
                Some(&folded)
            )),
            ["*://t/x?a=1"]
        );
        assert_eq!(
            list_prefix("http://t:81/x", Some(&folded)).unwrap(),
            b"*://t/x".to_vec()
        );
        assert_eq!(
            list_prefix("http://t:81/x", None).unwrap(),
            b"http://t:81/x".to_vec()
        );
    }

    fn strs(keys: Option<Vec<Key>>) -> Vec<String> {
        keys.unwrap()
            .iter()
            .map(|k| String::from_utf8(k.as_bytes().to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn a_url_names_its_keys_under_both_schemes_and_every_port() {
        assert_eq!(
            strs(url_keys_plain("http://T/x?a", &[])),
            ["http://t/x?a", "https://t/x?a"]
        );
        assert_eq!(
            strs(url_keys_plain("https://t:8443/x", &[8080, 443])),
            [
                "https://t:8443/x",
                "http://t/x",
                "http://t:8443/x",
                "http://t:8080/x",
                "http://t:443/x",
                "https://t/x",
                "https://t:8080/x",
            ]
        );
        assert_eq!(
            strs(url_keys_plain("http://[::1]:81/", &[])),
            [
                "http://[::1]:81/",
                "http://[::1]/",
                "https://[::1]/",
                "https://[::1]:81/"
            ]
        );
        assert!(url_keys_plain("ftp://t/x", &[]).is_none());
        assert!(url_keys_plain("http:///x", &[]).is_none());
        assert!(url_keys_plain("http://t/a b", &[]).is_none());
        let many: Vec<u16> = (1000..1100).collect();
        assert_eq!(
            url_keys_plain("http://t/", &many).unwrap().len(),
            2 * (1 + MAX_PURGED_PORTS)
        );
    }

    #[test]
    fn a_soft_purged_entry_is_stale_now_and_otherwise_the_same() {
        use linerate_cache::freshness::{current_age, lifetime};
        use linerate_cache::{Entry, Response, Time, Timing, Variant, Vary};
        let opts = linerate_cache::Options::default();
        // Ten seconds after the Date below (784111777).
        let now = Time(784_111_787);
        let date = "Sun, 06 Nov 1994 08:49:37 GMT";
        for cc in ["max-age=600", "max-age=600, stale-while-revalidate=30"] {
            let fields: Vec<(&[u8], &[u8])> = vec![
                (b"Cache-Control", cc.as_bytes()),
                (b"Date", date.as_bytes()),
                (b"Age", b"5"),
                (b"ETag", b"\"v1\""),
            ];
            let e = Entry::new(
                Key::new(b"http", b"t", b"/x").unwrap(),
                Variant::of(&Vary::None, &[]),
                &Response {
                    status: 200,
                    fields: &fields,
                },
                b"body"[..].into(),
                Timing {
                    request_time: Time(now.0 - 10),
                    response_time: Time(now.0 - 10),
                },
            );
            let life = lifetime(&e.facts, e.timing.response_time, &opts);
            assert!(current_age(&e.facts, e.timing, now) < life, "fresh before");
            let s = stale_now(&e, &opts, now).unwrap();
            let age = current_age(&s.facts, s.timing, now);
            assert!(age >= life, "{cc}: age {age}, lifetime {life}");
            assert!(age < life + 60, "{cc}: stale by {} s", age - life);
            assert_eq!(
                (&s.body[..], &s.fields, s.size()),
                (&e.body[..], &e.fields, e.size())
            );
            assert!(stale_now(&s, &opts, now).is_none(), "stale already");
        }
    }

    #[test]
    fn a_prefix_names_its_origins_under_both_schemes() {
        let p: Vec<String> = prefix_keys("http://t/p/", &[8080], None)
            .unwrap()
            .into_iter()
            .map(|p| String::from_utf8(p).unwrap())
            .collect();
        assert_eq!(
            p,
            [
                "http://t/p/",
                "http://t:8080/p/",
                "https://t/p/",
                "https://t:8080/p/"
            ]
        );
    }
}
