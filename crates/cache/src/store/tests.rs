//! The store: lookups by key and variant, limits, S3-FIFO's scan resistance and ghost, and
//! its accounting checked after every step of generated operation sequences.

use super::*;
use crate::Time;
use crate::entry::{ENTRY_OVERHEAD, Timing};
use crate::facts::Response;
use crate::key::{Variant, Vary};

fn key(path: &str) -> Key {
    Key::new(b"http", b"a.example", path.as_bytes()).unwrap()
}

fn entry_with(path: &str, body: usize, vary: &Vary, req: &[Field]) -> Entry {
    let resp = Response {
        status: 200,
        fields: &[(b"Cache-Control", b"max-age=60")],
    };
    let t = Timing {
        request_time: Time(1),
        response_time: Time(1),
    };
    Entry::new(
        key(path),
        Variant::of(vary, req),
        &resp,
        vec![0u8; body].into(),
        t,
    )
}

fn entry(path: &str, body: usize) -> Entry {
    entry_with(path, body, &Vary::None, &[])
}

fn shard(capacity: usize) -> Shard {
    Shard::new(
        Limits {
            capacity,
            max_object: capacity,
            shards: 1,
        },
        Arc::default(),
    )
}

fn found(s: &mut Shard, path: &str) -> bool {
    matches!(s.get(&key(path), &[]), Lookup::Found(_))
}

/// Checks the shard's bookkeeping against its slots (the INVARIANT on `Shard`).
fn check(s: &Shard) {
    let live: Vec<&Slot> = s.slots.iter().filter(|x| x.entry.is_some()).collect();
    let bytes = |q| {
        live.iter()
            .filter(|x| x.queue == q)
            .map(|x| x.size)
            .sum::<usize>()
    };
    assert_eq!(s.small_bytes, bytes(Queue::Small));
    assert_eq!(s.main_bytes, bytes(Queue::Main));
    assert_eq!(s.live, live.len());
    assert!(s.bytes() <= s.limits.capacity, "over capacity");
    assert_eq!(s.counters.bytes.load(Relaxed), s.bytes() as u64);
    assert_eq!(s.counters.objects.load(Relaxed), s.live as u64);
    let queued = s
        .small
        .iter()
        .chain(&s.main)
        .filter(|p| s.live_slot(**p).is_some())
        .count();
    assert_eq!(queued, s.live, "every live slot queued once");
    let mapped: usize = s.map.values().map(Vec::len).sum();
    assert_eq!(mapped, s.live);
    assert!(
        s.small.len() + s.main.len() <= 2 * s.live + 65,
        "stale positions compacted"
    );
}

#[test]
fn lookup_by_key_and_variant() {
    let mut s = shard(1 << 20);
    assert!(matches!(s.get(&key("/x"), &[]), Lookup::UriMiss));
    let vary = Vary::Fields(vec![b"accept-language"[..].into()]);
    s.insert(entry_with("/x", 10, &vary, &[(b"Accept-Language", b"en")]));
    s.insert(entry_with("/x", 20, &vary, &[(b"Accept-Language", b"de")]));
    let got = |s: &mut Shard, lang: &[u8]| match s.get(&key("/x"), &[(b"accept-language", lang)]) {
        Lookup::Found(e) => Some(e.body.len()),
        Lookup::VaryMiss => None,
        Lookup::UriMiss => panic!("uri miss"),
    };
    assert_eq!(got(&mut s, b"en"), Some(10), "§4.1");
    assert_eq!(got(&mut s, b"DE"), Some(20), "§4.1: normalised");
    assert_eq!(got(&mut s, b"fr"), None, "§4.1: vary miss");
    // The same variant again replaces (§4.3.4), others stay.
    s.insert(entry_with("/x", 30, &vary, &[(b"Accept-Language", b"en")]));
    assert_eq!(got(&mut s, b"en"), Some(30));
    assert_eq!(s.len(), 2);
    check(&s);
}

#[test]
fn newest_matching_variant_wins() {
    // §4.1: when more than one stored response matches, the most recent is used. A response
    // without Vary stored after one with Vary matches every request.
    let mut s = shard(1 << 20);
    let vary = Vary::Fields(vec![b"foo"[..].into()]);
    s.insert(entry_with("/x", 10, &vary, &[(b"foo", b"1")]));
    s.insert(entry("/x", 20));
    let Lookup::Found(e) = s.get(&key("/x"), &[(b"foo", b"1")]) else {
        panic!()
    };
    assert_eq!(e.body.len(), 20);
}

#[test]
fn variants_per_key_are_bounded() {
    let mut s = shard(1 << 22);
    let vary = Vary::Fields(vec![b"foo"[..].into()]);
    for i in 0..MAX_VARIANTS + 5 {
        s.insert(entry_with(
            "/x",
            1,
            &vary,
            &[(b"foo", i.to_string().as_bytes())],
        ));
    }
    assert_eq!(s.len(), MAX_VARIANTS);
    assert!(
        matches!(s.get(&key("/x"), &[(b"foo", b"0")]), Lookup::VaryMiss),
        "oldest went"
    );
    let last = (MAX_VARIANTS + 4).to_string();
    assert!(matches!(
        s.get(&key("/x"), &[(b"foo", last.as_bytes())]),
        Lookup::Found(_)
    ));
    check(&s);
}

#[test]
fn objects_over_the_limit_are_not_stored() {
    let mut s = Shard::new(
        Limits {
            capacity: 1 << 20,
            max_object: 1000,
            shards: 1,
        },
        Arc::default(),
    );
    assert_eq!(s.insert(entry("/big", 1001)), Inserted::TooBig);
    assert_eq!(s.insert(entry("/ok", 10)), Inserted::Stored);
    assert!(!found(&mut s, "/big") && found(&mut s, "/ok"));
    // The limit is the body's, as `Fill` collects it: an answer of exactly `max_object`
    // bytes is stored (its head counts against the shard's bytes, not against the limit).
    assert_eq!(s.insert(entry("/edge", 1000)), Inserted::Stored);
    assert!(
        entry("/ok", 10).size() > ENTRY_OVERHEAD + 10,
        "head and key count too"
    );
    check(&s);
}

#[test]
fn bytes_stay_under_capacity_and_evictions_are_counted() {
    let one = entry("/0000", 1000).size();
    let mut s = shard(one * 10);
    for i in 0..100 {
        s.insert(entry(&format!("/{i:04}"), 1000));
        check(&s);
    }
    assert_eq!(s.len(), 10);
    assert_eq!(s.counters.evictions.load(Relaxed), 90);
    assert_eq!(s.counters.stored.load(Relaxed), 100);
}

#[test]
fn an_answer_larger_than_the_small_share_stored_into_a_full_shard_is_kept() {
    // Once, room was made after the new entry went into the small FIFO, and one
    // larger than that FIFO's share (SMALL_PERCENT of the shard) was evicted by it at once,
    // while `insert` said Stored and Cache-Status `stored`.
    let one = entry("/0000", 1000).size();
    let mut s = shard(one * 40);
    // A full shard whose bytes are mostly in main (each entry hit once, then promoted when
    // later inserts make room), so the small FIFO holds little besides the newcomer.
    for i in 0..40 {
        s.insert(entry(&format!("/{i:04}"), 1000));
        assert!(found(&mut s, &format!("/{i:04}")));
    }
    for i in 40..45 {
        s.insert(entry(&format!("/{i:04}"), 1000));
    }
    assert!(s.bytes() > s.limits.capacity - one, "the shard is full");
    assert!(s.main_bytes > s.small_bytes, "most of it in main");
    let big = 1000 * 10; // ten small entries: a quarter of the shard, over its 10 % share
    assert_eq!(s.insert(entry("/big", big)), Inserted::Stored);
    check(&s);
    assert!(found(&mut s, "/big"), "stored, then gone at once");
    assert!(s.bytes() <= s.limits.capacity);
}

#[test]
fn a_scan_of_one_hit_objects_does_not_evict_the_hot_set() {
    // S3-FIFO's point: 20 objects hit again survive 2,000 objects seen once. (Under LRU the
    // scan would have pushed every one of them out: it is 20 times the capacity.)
    let one = entry("/hot00", 100).size();
    let mut s = shard(one * 100);
    for i in 0..20 {
        s.insert(entry(&format!("/hot{i:02}"), 100));
    }
    for i in 0..20 {
        assert!(found(&mut s, &format!("/hot{i:02}")));
    }
    for i in 0..2000 {
        s.insert(entry(&format!("/s{i:04}"), 100));
        check(&s);
    }
    for i in 0..20 {
        assert!(
            found(&mut s, &format!("/hot{i:02}")),
            "hot{i:02} evicted by a scan"
        );
    }
}

#[test]
fn a_key_back_soon_after_eviction_goes_to_main() {
    // The ghost queue: an object evicted from the small queue and inserted again is placed
    // in main, where the next scan cannot reach it before its lap.
    let one = entry("/a", 100).size();
    let mut s = shard(one * 20);
    s.insert(entry("/a", 100));
    for i in 0..30 {
        s.insert(entry(&format!("/s{i:02}"), 100));
    }
    assert!(!found(&mut s, "/a"));
    s.insert(entry("/a", 100));
    let id = s.map[&key("/a")][0];
    assert_eq!(s.slots[id as usize].queue, Queue::Main);
    check(&s);
}

#[test]
fn remove_and_remove_prefix() {
    let mut s = shard(1 << 20);
    for p in ["/items/1", "/items/2", "/users/1"] {
        s.insert(entry(p, 10));
    }
    assert!(s.remove(&key("/items/1")));
    assert!(!s.remove(&key("/items/1")));
    assert_eq!(s.remove_prefix(b"http://a.example/items/"), 1);
    assert!(found(&mut s, "/users/1") && s.len() == 1);
    check(&s);
}

#[test]
fn replacing_one_key_forever_keeps_the_queues_small() {
    // Replacement without eviction leaves stale queue positions; compaction bounds them.
    let mut s = shard(1 << 24);
    for _ in 0..10_000 {
        s.insert(entry("/same", 10));
    }
    assert_eq!(s.len(), 1);
    check(&s);
}

#[test]
fn property_generated_operations_keep_the_accounting() {
    let mut g: u64 = 0x1234_5678;
    let mut next = || {
        g ^= g << 13;
        g ^= g >> 7;
        g ^= g << 17;
        g
    };
    let mut s = shard(entry("/k00", 0).size() * 40 + 5000);
    for _ in 0..20_000 {
        let path = format!("/k{:02}", next() % 80);
        match next() % 10 {
            0..=4 => {
                s.insert(entry(&path, (next() % 400) as usize));
            }
            5..=8 => {
                s.get(&key(&path), &[]);
            }
            _ => {
                s.remove(&key(&path));
            }
        }
        check(&s);
    }
}

#[test]
fn shared_store_shards_and_counters() {
    let store = Store::new(Limits {
        capacity: 1 << 20,
        max_object: 1 << 16,
        shards: 4,
    });
    assert_eq!(store.shard_count(), 4);
    for i in 0..100 {
        assert_eq!(store.insert(entry(&format!("/{i}"), 10)), Inserted::Stored);
    }
    assert!(matches!(store.get(&key("/7"), &[]), Lookup::Found(_)));
    assert_eq!(store.remove_prefix(b"http://a.example/1"), 11);
    let snap = store.counters().snapshot();
    assert_eq!((snap.stored, snap.objects), (100, 89));
    store.counters().record(Event::Hit);
    store.counters().record(Event::Bypass);
    let snap = store.counters().snapshot();
    assert_eq!((snap.hits, snap.bypass, snap.misses), (1, 1, 0));
}

#[test]
fn a_lookup_by_the_keys_bytes_finds_what_the_key_finds() {
    // `get_bytes` must reach the same shard and map slot as `get`: every stored key found by
    // its bytes, in a store of several shards, and an unknown one missed.
    let store = Store::new(Limits {
        capacity: 1 << 20,
        max_object: 1 << 16,
        shards: 4,
    });
    assert_eq!(store.shard_count(), 4);
    for i in 0..50 {
        store.insert(entry(&format!("/{i}"), 10));
    }
    for i in 0..50 {
        let k = key(&format!("/{i}"));
        let Lookup::Found(e) = store.get_bytes(k.as_bytes(), &[]) else {
            panic!("/{i} not found by its bytes");
        };
        assert_eq!(e.key, k);
    }
    assert!(matches!(
        store.get_bytes(key("/50").as_bytes(), &[]),
        Lookup::UriMiss
    ));
}

#[test]
fn an_object_over_a_sixteenth_of_the_store_is_stored_up_to_max_object() {
    // Once, `size = "256MiB"`, `max_object = "64MiB"` made sixteen shards of 16 MiB,
    // which held no 17 MB or 50 MB answer (and Cache-Status said `stored`). The layout now
    // has fewer shards where one would hold fewer than LARGEST_PER_SHARD of the largest.
    let issue = Limits {
        capacity: 256 << 20,
        max_object: 64 << 20,
        shards: 16,
    };
    assert_eq!(issue.layout(), 1);
    let store = Store::new(issue);
    let head = entry("/x", 0).size();
    for body in [17_000_000, 50_000_000, 64 << 20] {
        assert!(store.admits(head + body, body), "{body} bytes");
    }
    assert!(!store.admits(head + (64 << 20) + 1, (64 << 20) + 1));
    // The same at a size a test can fill: 16 MiB with 4 MiB objects is one shard, and a
    // 1.1 MiB answer (over the sixteenth an even split gave) and a 4 MiB one are stored.
    let small = Store::new(Limits {
        capacity: 16 << 20,
        max_object: 4 << 20,
        shards: 16,
    });
    assert_eq!(small.shard_count(), 1);
    for (path, body) in [("/a", 1_100_000), ("/b", 4 << 20)] {
        assert_eq!(small.insert(entry(path, body)), Inserted::Stored, "{path}");
        assert!(matches!(small.get(&key(path), &[]), Lookup::Found(_)));
    }
    assert_eq!(small.counters().snapshot().stored, 2);
    // The default layout is unchanged: 64 MiB with 1 MiB objects is 16 shards of 4.
    let default = Limits {
        capacity: 64 << 20,
        max_object: 1 << 20,
        shards: 16,
    };
    assert_eq!(default.layout(), 16);
    // A store that cannot hold one largest answer is what a configuration refuses.
    assert!(default.holds_largest());
    assert!(
        !Limits {
            capacity: 64 << 20,
            max_object: 64 << 20,
            shards: 16
        }
        .holds_largest()
    );
}

/// An operator's listing of what is stored, by key prefix, across shards:
/// each answer with its variants, size and the hits it served; bounded, saying when more
/// matched; a replaced answer's hits start again.
#[test]
fn a_listing_by_prefix_shows_each_stored_answer_with_its_hits_bounded() {
    let store = Store::new(Limits {
        capacity: 1 << 20,
        max_object: 1 << 16,
        shards: 4,
    });
    let vary = Vary::Fields(vec![b"accept-language".to_vec().into()]);
    let en: &[Field] = &[(b"Accept-Language", b"en")];
    let fr: &[Field] = &[(b"Accept-Language", b"fr")];
    store.insert(entry_with("/docs/a", 10, &vary, en));
    store.insert(entry_with("/docs/a", 20, &vary, fr));
    store.insert(entry("/docs/b", 30));
    store.insert(entry("/other", 40));
    for _ in 0..3 {
        assert!(matches!(store.get(&key("/docs/a"), fr), Lookup::Found(_)));
    }
    assert!(matches!(store.get(&key("/docs/b"), &[]), Lookup::Found(_)));
    let prefix = b"http://a.example/docs/";
    let (mut listed, more) = store.list(prefix, 10);
    assert!(!more);
    listed.sort_by_key(|l| l.entry.body.len());
    let rows: Vec<(&[u8], usize, usize, u32)> = listed
        .iter()
        .map(|l| {
            (
                l.entry.key.as_bytes(),
                l.entry.body.len(),
                l.variants,
                l.hits,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (&b"http://a.example/docs/a"[..], 10, 2, 0),
            (&b"http://a.example/docs/a"[..], 20, 2, 3),
            (&b"http://a.example/docs/b"[..], 30, 1, 1),
        ]
    );
    assert_eq!(listed[0].size, listed[0].entry.size());
    let langs: Vec<_> = listed[0].entry.variant.fields().collect();
    assert_eq!(langs, [(&b"accept-language"[..], Some(&b"en"[..]))]);
    // Bounded: two of the three, and more said.
    let (two, more) = store.list(prefix, 2);
    assert_eq!((two.len(), more), (2, true));
    // Everything, with an empty prefix.
    assert_eq!(store.list(b"", 10).0.len(), 4);
    // A replaced answer counts its own hits.
    store.insert(entry_with("/docs/a", 21, &vary, fr));
    let (again, _) = store.list(b"http://a.example/docs/a", 10);
    let fr_hits: Vec<u32> = again
        .iter()
        .filter(|l| l.entry.body.len() == 21)
        .map(|l| l.hits)
        .collect();
    assert_eq!(fr_hits, [0]);
}

/// A purge of a tag removes every answer tagged so, under either field,
/// every variant that carries it and no other answer; the store's accounting stays right.
#[test]
fn a_tag_purge_removes_every_answer_with_the_tag_and_nothing_else() {
    let store = Store::new(Limits {
        capacity: 1 << 20,
        max_object: 1 << 16,
        shards: 4,
    });
    let tagged = |path: &str, field: &'static [u8], value: &'static [u8], lang: &str| {
        let fields: Vec<(&[u8], &[u8])> = vec![
            (b"Cache-Control", b"max-age=60"),
            (b"Vary", b"Accept-Language"),
            (field, value),
        ];
        let req: Vec<(&[u8], &[u8])> = vec![(b"Accept-Language", lang.as_bytes())];
        Entry::new(
            key(path),
            Variant::of(&Vary::parse(&fields), &req),
            &Response {
                status: 200,
                fields: &fields,
            },
            vec![0u8; 10].into(),
            Timing {
                request_time: Time(1),
                response_time: Time(1),
            },
        )
    };
    store.insert(tagged("/a", b"Surrogate-Key", b"product-1 list", "en"));
    store.insert(tagged("/a", b"Surrogate-Key", b"list", "fr"));
    store.insert(tagged("/b", b"Cache-Tag", b"product-2,product-1", "en"));
    store.insert(tagged("/c", b"Cache-Tag", b"product-10", "en"));
    store.insert(entry("/d", 10));
    assert_eq!(store.counters().snapshot().objects, 5);
    assert_eq!(store.remove_tagged(b"product-1"), 2);
    let en: Vec<(&[u8], &[u8])> = vec![(b"Accept-Language", b"en")];
    let fr: Vec<(&[u8], &[u8])> = vec![(b"Accept-Language", b"fr")];
    assert!(!matches!(store.get(&key("/a"), &en), Lookup::Found(_)));
    assert!(matches!(store.get(&key("/a"), &fr), Lookup::Found(_)));
    assert!(!matches!(store.get(&key("/b"), &en), Lookup::Found(_)));
    assert!(matches!(store.get(&key("/c"), &en), Lookup::Found(_)));
    assert!(matches!(store.get(&key("/d"), &[]), Lookup::Found(_)));
    assert_eq!(store.counters().snapshot().objects, 3);
    assert_eq!(store.remove_tagged(b"list"), 1);
    assert_eq!(store.remove_tagged(b"absent"), 0);
    assert_eq!(store.counters().snapshot().objects, 2);
}

/// A body derived from a stored answer after it went in (an encoded hit's)
/// is counted against the shard's bytes, evicting past the capacity as an insert does; a
/// soft purge's replacement, which has none, gives its bytes back. Before, the derived
/// bodies were held outside the limit.
#[test]
fn bodies_derived_after_insert_count_against_the_capacity() {
    let mut s = shard(10_000);
    let a: Arc<Entry> = entry("/a", 1_000).into();
    let size = a.size();
    s.insert(a.clone());
    s.insert(entry("/b", 1_000));
    let before = s.bytes();
    s.grow(&a, 500);
    assert_eq!(s.bytes(), before + 500);
    check(&s);
    // Another answer of the key (not this one) is not grown.
    let other: Arc<Entry> = entry("/a", 1_000).into();
    s.grow(&other, 500);
    assert_eq!(s.bytes(), before + 500);
    // Past the capacity, answers are evicted until the shard fits again.
    s.grow(&a, 20_000);
    assert!(s.bytes() <= 10_000, "{} bytes kept", s.bytes());
    check(&s);
    // A replacement without derived bodies takes its own size back.
    let mut t = shard(10_000);
    t.insert(a.clone());
    t.grow(&a, 700);
    assert_eq!(t.bytes(), size + 700);
    let ids: Vec<u32> = t.map.get(&a.key).cloned().unwrap_or_default();
    assert!(t.replace_slot(ids[0], &|e: &Entry| {
        Some(Entry::from_stored(
            e.key.clone(),
            e.variant.clone(),
            e.status,
            e.fields.clone(),
            e.body.clone(),
            e.timing,
        ))
    }));
    assert_eq!(t.bytes(), size);
    check(&t);
}
