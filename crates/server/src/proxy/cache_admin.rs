//! The proxy caches as the admin listener and a reload see them: each mount's cache labelled
//! `SITE PREFIX`, its counters for `/metrics`, purges by URL or prefix (and through the
//! shared tier, on every edge), and a reload's hand-over of the caches whose settings did not
//! change. No request passes here.
#![forbid(unsafe_code)]

use std::sync::Arc;

use linerate_cache::{Key, KeyRules, key_for};

use super::cache::MountCache;
use super::tier::Purge;

/// A mount's cache with its metrics label, for the admin listener.
#[derive(Debug)]
struct View {
    label: String,
    cache: Arc<MountCache>,
}

impl crate::stats::CacheAdmin for View {
    fn label(&self) -> &str {
        &self.label
    }

    fn counts(&self) -> crate::stats::CacheCounts {
        let s = self.cache.store.counters().snapshot();
        crate::stats::CacheCounts {
            hits: s.hits,
            misses: s.misses,
            stale: s.stale,
            revalidated: s.revalidated,
            bypass: s.bypass,
            stored: s.stored,
            evictions: s.evictions,
            bytes: s.bytes,
            objects: s.objects,
            waiting: self
                .cache
                .waiting
                .load(std::sync::atomic::Ordering::Relaxed),
            tier: self.cache.tier.as_ref().map(|t| t.counts()),
        }
    }

    fn purge(&self, url: &str, prefix: bool) -> Option<crate::stats::Purged> {
        let target = View::target(url, prefix, self.cache.opts.key.as_deref())?;
        let mut pending = Vec::new();
        if let Some(t) = &self.cache.tier {
            // Every edge sharing the tier forgets too: the URL's entry deleted and announced
            // in the purge log, or, by prefix, the generation moved (docs/cache.md). Done
            // before memory is emptied here, under the fence: what the tier answers
            // meanwhile is not used to fill memory again (`SharedTier::usable`).
            let (what, named) = match &target {
                Target::Key(key) => (Purge::Key(key.clone()), url.to_string()),
                Target::Prefix(_) => (Purge::All, format!("every answer (a purge of {url}*)")),
            };
            if !t.purge(what) {
                pending.push(format!(
                    "{named} in cache tier {} of {}: not reached; kept, and purged there \
                     when it answers again",
                    t.name(),
                    self.label
                ));
            }
        }
        let removed = match &target {
            Target::Key(key) => usize::from(self.cache.store.remove(key)),
            Target::Prefix(p) => self.cache.store.remove_prefix(p),
        };
        Some(crate::stats::Purged { removed, pending })
    }

    fn list(&self, prefix: Option<&str>, max: usize) -> Option<serde_json::Value> {
        let prefix = match prefix {
            Some(url) => match View::target(url, true, self.cache.opts.key.as_deref())? {
                Target::Prefix(p) => p,
                Target::Key(_) => return None,
            },
            None => Vec::new(),
        };
        Some(super::cache_list::list(&self.cache, &prefix, max))
    }

    fn shared(&self) -> Arc<dyn std::any::Any + Send + Sync> {
        Arc::clone(&self.cache) as Arc<dyn std::any::Any + Send + Sync>
    }
}

impl View {
    fn label_of(site: &str, route: &super::route::Route) -> String {
        let prefix = if route.mount.prefix.is_empty() {
            "/"
        } else {
            &route.mount.prefix
        };
        format!("{site} {prefix}")
    }

    /// What `url` names in a cache: a URL's key, or (`prefix`) the start of keys, mapped
    /// through the mount's key `rules` ([`linerate_cache::key_for`], as a request's plan
    /// maps it). A key that adds a cookie or a field holds one entry per value: the URL's
    /// purge removes them all (the start of their keys).
    fn target(url: &str, prefix: bool, rules: Option<&KeyRules>) -> Option<Target> {
        let (scheme, rest) = url.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return None;
        }
        let (authority, target) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, "/"),
        };
        if prefix {
            // The key's form: scheme and host lowercased, the default port left out.
            let key = key_for(rules, scheme.as_bytes(), authority.as_bytes(), b"/", &[]).ok()?;
            let mut p = key.origin().to_vec();
            p.extend_from_slice(target.as_bytes());
            return Some(Target::Prefix(p));
        }
        let key = key_for(
            rules,
            scheme.as_bytes(),
            authority.as_bytes(),
            target.as_bytes(),
            &[],
        )
        .ok()?;
        if rules.is_some_and(KeyRules::adds) {
            // `URL cookie:NAME=…`: every value's entry starts with the URL's part and a space.
            let url_part = key
                .as_bytes()
                .split(|&b| b == b' ')
                .next()
                .unwrap_or_default();
            let mut p = url_part.to_vec();
            p.push(b' ');
            return Some(Target::Prefix(p));
        }
        Some(Target::Key(key))
    }
}

/// What a purge removes.
enum Target {
    Key(Key),
    Prefix(Vec<u8>),
}

/// The caches of `sites`' proxy mounts, labelled `site prefix`.
pub(crate) fn admin_views(
    sites: &crate::app::sites::SiteSet,
) -> Vec<Arc<dyn crate::stats::CacheAdmin>> {
    let labels = sites.sites.labels();
    let mut out: Vec<Arc<dyn crate::stats::CacheAdmin>> = Vec::new();
    for (site, label) in sites.sites.iter().zip(labels) {
        for r in &site.proxies {
            if let Some(c) = &r.cache {
                out.push(Arc::new(View {
                    label: View::label_of(&label, r),
                    cache: Arc::clone(c),
                }));
            }
        }
    }
    out
}

/// A reload keeps what each cache holds: a mount of the new `sites` with the same site, prefix
/// and cache settings as one of `old` takes over its cache (store, flights, tier), as nginx's
/// and Varnish's caches outlive a reload. Changed settings start an empty cache.
pub(crate) fn carry_over(
    old: &[Arc<dyn crate::stats::CacheAdmin>],
    sites: &mut crate::app::sites::SiteSet,
) {
    let labels = sites.sites.labels();
    for (site, label) in sites.sites.iter_mut().zip(labels) {
        for r in &mut site.proxies {
            let Some(new) = &r.cache else {
                continue;
            };
            let wanted = View::label_of(&label, r);
            let same_mount: Vec<Arc<MountCache>> = old
                .iter()
                .filter(|v| v.label() == wanted)
                .filter_map(|v| v.shared().downcast::<MountCache>().ok())
                .collect();
            if let Some(c) = same_mount.iter().find(|c| c.conf == new.conf) {
                r.cache = Some(c.clone());
            } else if let Some(new_tier) = &new.tier {
                // A new cache on the same tier takes over the purges the old one had not got
                // to it yet (answered 202; the old mount's watch ends with the reload).
                for c in &same_mount {
                    if let Some(old_tier) = c.tier.as_ref().filter(|_| c.conf.tier == new.conf.tier)
                    {
                        new_tier.adopt_pending(old_tier);
                    }
                }
            }
        }
    }
}
