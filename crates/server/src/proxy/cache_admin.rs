//! The proxy caches as the admin listener and a reload see them: each mount's cache labelled
//! `SITE PREFIX`, its counters for `/metrics`, its stored answers listed, purges by URL,
//! prefix, tag or of everything (and through the shared tier, on every edge; what a URL names
//! is `proxy/purge.rs`'s), and a reload's hand-over of the caches whose settings did not
//! change. No request passes here.
#![forbid(unsafe_code)]

use std::sync::Arc;

use super::cache::MountCache;
use super::tier::Purge;
use crate::stats::PurgeAsk;

/// A mount's cache with its metrics label, for the admin listener.
#[derive(Debug)]
struct View {
    label: String,
    cache: Arc<MountCache>,
    /// The server's TCP listeners' ports: a purge by URL purges its keys under each.
    ports: Arc<[u16]>,
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

    fn purge(&self, ask: &PurgeAsk) -> Option<crate::stats::Purged> {
        let ports = &self.ports;
        // Every edge sharing the tier forgets too: each key's entry deleted and announced in
        // the purge log, or, by prefix or for everything, the generation moved
        // (docs/cache.md). Done before memory is emptied here, under the fence: what the
        // tier answers meanwhile is not used to fill memory again (`SharedTier::usable`).
        let (removed, took, named) = match ask {
            PurgeAsk::Url(url) => {
                let keys = super::purge::url_keys(url, ports, self.cache.opts.key.as_deref())?;
                let (removed, took) = self.cache.purge_keys(&keys);
                (removed, took, url.clone())
            }
            PurgeAsk::Prefix(url) => {
                let prefixes =
                    super::purge::prefix_keys(url, ports, self.cache.opts.key.as_deref())?;
                let took = self
                    .cache
                    .tier
                    .as_ref()
                    .is_none_or(|t| t.purge_many(vec![Purge::All]));
                let removed = prefixes
                    .iter()
                    .map(|p| self.cache.store.remove_prefix(p))
                    .sum();
                (removed, took, format!("every answer (a purge of {url}*)"))
            }
            PurgeAsk::All => {
                let (removed, took) = self.cache.purge_all();
                (removed, took, "every answer".to_string())
            }
            PurgeAsk::Soft { url, tag } => {
                let keys = match url {
                    Some(url) => {
                        super::purge::url_keys(url, ports, self.cache.opts.key.as_deref())?
                    }
                    None => Vec::new(),
                };
                let (softened, took) = self
                    .cache
                    .soft_purge(&keys, tag.as_deref().map(str::as_bytes));
                let named = match (url, tag) {
                    (Some(url), _) => format!("{url} (soft)"),
                    (None, tag) => format!("every answer tagged {tag:?} (soft)"),
                };
                (softened, took, named)
            }
            PurgeAsk::Tag(tag) => {
                let (removed, took) = self.cache.purge_tag(tag.as_bytes());
                (removed, took, format!("every answer tagged {tag:?}"))
            }
        };
        let mut pending = Vec::new();
        if let Some(t) = self.cache.tier.as_ref().filter(|_| !took) {
            pending.push(format!(
                "{named} in cache tier {} of {}: not reached; kept, and purged there \
                 when it answers again",
                t.name(),
                self.label
            ));
        }
        Some(crate::stats::Purged { removed, pending })
    }

    fn list(&self, prefix: Option<&str>, max: usize) -> Option<serde_json::Value> {
        let prefix = match prefix {
            Some(url) => super::purge::list_prefix(url, self.cache.opts.key.as_deref())?,
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
                    ports: sites.sites.ports.clone(),
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
