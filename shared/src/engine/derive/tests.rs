use aws_sdk_dynamodb::types::AttributeValue;

use super::implied::{contribution_deltas, sum_contributions};
use super::*;
use crate::file::test_support::item as image;
use crate::item::s;
use crate::ledger;

/// Ledger index keys stay within DynamoDB's key limits for the longest
/// index name (a GSI partition value of 2,048 bytes) and the longest
/// member; short ones keep their readable, pinned form.
#[test]
fn ledger_index_keys_are_bounded_for_maximal_values() {
    let index = format!(
        "GSI1#{}",
        "p".repeat(crate::limits::MAX_PARTITION_KEY_BYTES)
    );
    for member in [
        "m".repeat(crate::limits::MAX_SORT_KEY_BYTES),
        "m".repeat(crate::limits::MAX_SORT_KEY_BYTES + 1),
        "m".repeat(2 * crate::limits::MAX_PARTITION_KEY_BYTES),
    ] {
        let item = index_item(&index, &member);
        let pk = ledger::as_s(item.get(ledger::PK)).unwrap();
        let sk = ledger::as_s(item.get(ledger::SK)).unwrap();
        assert!(pk.len() <= crate::limits::MAX_PARTITION_KEY_BYTES);
        assert!(sk.len() <= crate::limits::MAX_SORT_KEY_BYTES);
        assert_eq!(pk, index_pk(&index), "readers find the partition");
        assert_eq!(ledger::sk_value(&item), Some(member.as_str()));
        assert_eq!(
            key_of(&item, &[ledger::PK, ledger::SK]),
            index_key(&index, &member)
        );
    }
    assert_eq!(index_pk(&index), index_pk(&index), "stable");
    assert_ne!(index_pk(&index), index_pk(&format!("{index}q")));
    let short = index_item("GSI1#T#1", "U#2");
    assert_eq!(short, ledger::key("IDX#GSI1#T#1", "U#2"));
}

fn projection() -> Projection {
    Projection {
        attrs: vec![("G", Some(s("x#1"))), ("H", None)],
        sources: vec!["x", "y"],
    }
}

#[test]
fn no_update_when_image_already_projected() {
    let img = image(&[("PK", s("a")), ("x", s("1")), ("G", s("x#1"))]);
    assert!(projection_update(&["PK", "SK"], &img, &projection()).is_none());
}

#[test]
fn update_sets_removes_and_guards_sources() {
    let img = image(&[
        ("PK", s("a")),
        ("SK", s("b")),
        ("x", s("1")),
        ("H", s("old")),
    ]);
    let u = projection_update(&["PK", "SK"], &img, &projection()).unwrap();
    assert_eq!(u.update_expression, "SET #p0 = :p0 REMOVE #p1");
    assert_eq!(
        u.condition_expression.as_deref(),
        Some("attribute_exists(#k0) AND #s0 = :s0 AND attribute_not_exists(#s1)")
    );
    assert_eq!(u.key.len(), 2);
    assert!(u.values.contains(&(":s0".to_string(), s("1"))));
    assert!(u.values.contains(&(":p0".to_string(), s("x#1"))));
}

fn counter(pk: &str) -> Counter {
    Counter {
        key: vec![("PK", pk.to_string()), ("SK", "count".to_string())],
        attrs: &["a", "b"],
        create: Some(vec![]),
        remove_at_zero: false,
    }
}

#[test]
fn sums_that_overflow_an_i64_are_errors_never_wrapped() {
    let c = |v: i64| Contribution {
        counter: counter("u#1"),
        values: vec![("a", v)],
    };
    assert!(sum_contributions(&[c(i64::MAX), c(1)]).is_err());
    assert!(sum_contributions(&[c(i64::MIN), c(-1)]).is_err());
    let ok = sum_contributions(&[c(i64::MAX), c(-1)]).unwrap();
    assert_eq!(ok["PK=S:u#1|SK=S:count"].1["a"], i64::MAX - 1);
    // Deltas between any two i64 sums fit.
    let new = Implied {
        contributions: sum_contributions(&[c(i64::MAX)]).unwrap(),
        ..Implied::default()
    };
    let old = Implied {
        contributions: sum_contributions(&[c(i64::MIN)]).unwrap(),
        ..Implied::default()
    };
    let d = contribution_deltas(&new, &old);
    assert_eq!(
        d["PK=S:u#1|SK=S:count"].1["a"],
        i128::from(i64::MAX) - i128::from(i64::MIN)
    );
}

#[test]
fn implied_round_trips_through_its_ledger_record() {
    let implied = Implied::from_rules(
        &[
            Contribution {
                counter: counter("u#1"),
                values: vec![("a", 1), ("b", 2)],
            },
            Contribution {
                counter: counter("u#1"),
                values: vec![("a", 3)],
            },
            Contribution {
                counter: counter("u#2"),
                values: vec![("b", -1)],
            },
        ],
        &[image(&[("PK", s("d")), ("SK", s("1")), ("x", s("y"))])],
        &["PK", "SK"],
    );
    assert_eq!(implied.contributions.len(), 2);
    let one = &implied.contributions["PK=S:u#1|SK=S:count"].1;
    assert_eq!(one["a"], 4, "contributions to one attribute add up");
    assert_eq!(one["b"], 2);
    assert_eq!(implied.derived.len(), 1);
    assert_eq!(
        implied.derived["PK=S:d|SK=S:1"].len(),
        3,
        "the item as written"
    );
    let back = Implied::from_record(&implied.to_attrs()).unwrap();
    assert_eq!(back, implied);
    assert!(Implied::from_record(&Item::new()).unwrap().is_empty());
}

/// Rules that count how often an image is asked about.
#[derive(Default)]
struct Counting(std::sync::atomic::AtomicUsize);

impl Rules for Counting {
    fn key_names(&self) -> &'static [&'static str] {
        &["PK", "SK"]
    }
    fn projection(&self, _image: &Item) -> Result<Option<Projection>, crate::error::InputError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Some(projection()))
    }
}

/// A deriver over `rules` (its store is never called here).
fn deriver(rules: Arc<dyn Rules>) -> Deriver {
    let conf = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("test"))
        .build();
    Deriver {
        rules,
        store: crate::store::Store::new(aws_sdk_dynamodb::Client::from_conf(conf)),
        table: "t".into(),
        ledger_table: "l".into(),
        processor: "derive",
        concurrency: 1,
        now: Utc::now,
        limits: KeyLimits::default(),
    }
}

/// An item read exactly as the latest image of its records was is not
/// asked about again: the aspects the stream read of that image are its
/// (rules are pure). One that differs (or came with no record) is.
#[test]
fn an_item_read_as_its_records_image_is_not_asked_again() {
    let rules = Arc::new(Counting::default());
    let d = deriver(rules.clone());
    let key = image(&[("PK", s("a")), ("SK", s("1"))]);
    let item = image(&[("PK", s("a")), ("SK", s("1")), ("x", s("1"))]);
    let current: HashMap<String, Item> = [(item_id(&key), item.clone())].into();
    let seen = rules.aspects(&item);
    let asked = |hints: &HashMap<String, Hint<'_>>| {
        let before = rules.0.load(std::sync::atomic::Ordering::Relaxed);
        let a = d.assess(
            std::slice::from_ref(&key),
            0,
            &HashMap::new(),
            &current,
            hints,
            &mut BTreeMap::new(),
        );
        assert_eq!(a.updates.len(), 1, "the projection to write, either way");
        rules.0.load(std::sync::atomic::Ordering::Relaxed) - before
    };
    let hint = |image| Hint {
        implied_something: false,
        seen: Some((image, &seen)),
        steps: &[],
    };
    assert_eq!(asked(&[(item_id(&key), hint(&item))].into()), 0);
    let other = image(&[("PK", s("a")), ("SK", s("1")), ("x", s("2"))]);
    assert_eq!(asked(&[(item_id(&key), hint(&other))].into()), 1);
    assert_eq!(asked(&HashMap::new()), 1);
}

/// A pending state keeps which aspects it holds (an empty one is not an
/// absent one) through its ledger attribute.
#[test]
fn a_pending_state_round_trips_aspect_by_aspect() {
    use super::trail::PerAspect;
    let sums = super::implied::sum_contributions(&[Contribution {
        counter: counter("u#1"),
        values: vec![("a", 1)],
    }])
    .unwrap();
    for p in [
        PerAspect::default(),
        PerAspect {
            contributions: Some(sums.clone()),
            ..PerAspect::default()
        },
        PerAspect {
            contributions: Some(sums),
            derived: Some(Default::default()),
            indexed: Some(Default::default()),
        },
        PerAspect {
            indexed: Some([("GSI1#x".to_string(), "m".to_string())].into()),
            ..PerAspect::default()
        },
    ] {
        let back = PerAspect::from_attr(Some(&p.to_attr())).unwrap();
        assert_eq!(back, p);
    }
    assert_eq!(PerAspect::from_attr(None).unwrap(), PerAspect::default());
    assert!(PerAspect::from_attr(Some(&s("x"))).is_err(), "not a map");
}

/// Counts `n` (an image without it is bad input for its contributions).
struct Tally;

impl Rules for Tally {
    fn key_names(&self) -> &'static [&'static str] {
        &["PK", "SK"]
    }
    fn contributions(&self, image: &Item) -> Result<Vec<Contribution>, crate::error::InputError> {
        match image.get("n") {
            Some(AttributeValue::N(v)) => Ok(vec![Contribution {
                counter: counter("u#1"),
                values: vec![("a", v.parse().expect("a number"))],
            }]),
            _ => Err(crate::error::InputError::Invalid {
                key: "PK=a, SK=1".into(),
                reason: "n is missing".into(),
            }),
        }
    }
}

/// What an item that is bad input now keeps, per batch shape: the last
/// valid image of a batch that reaches the item applies; one that does not
/// (the item moved on) is only pending, applied by the batch that does;
/// records at or before the record's sequence number give nothing; a
/// remove gives nothing to keep; a valid item read now clears what is
/// pending. Derived items (valid in every image here) are not touched.
#[test]
fn an_item_bad_now_keeps_its_last_valid_image_once_the_batch_reaches_it() {
    use super::trail::{Rejected, Trail};
    use crate::change::SequenceNumber;
    let d = deriver(Arc::new(Tally));
    let valid = |n: i64| image(&[("PK", s("a")), ("SK", s("1")), ("n", crate::item::n(n))]);
    let (v1, v2) = (valid(1), valid(2));
    let bad = image(&[("PK", s("a")), ("SK", s("1"))]);
    let aspects: Vec<(Item, Aspects)> = [&v1, &v2, &bad]
        .into_iter()
        .map(|i| (i.clone(), Tally.aspects(i)))
        .collect();
    let seqs: Vec<SequenceNumber> = (0..10)
        .map(|i| SequenceNumber::parse(&format!("10000000000000000000{i}")).unwrap())
        .collect();
    // (image index or None for a remove, sequence index)
    let steps = |s: &[(Option<usize>, usize)]| -> Vec<Step<'_>> {
        s.iter()
            .map(|(i, q)| Step {
                seq: &seqs[*q],
                new: i.map(|i| (&aspects[i].0, &aspects[i].1)),
                removed: i.is_none(),
            })
            .collect()
    };
    let a = |i: &Implied| i.contributions.values().map(|(_, v)| v["a"]).sum::<i64>();
    let run = |now: &Item, s: &[(Option<usize>, usize)], rec: Option<&(Implied, Trail)>| {
        let mut implied = Implied::default();
        let rejected_now = Tally.contributions(now).is_err();
        let rejected = Rejected {
            contributions: rejected_now,
            derived: false,
            indexed: false,
        };
        if !rejected_now {
            implied = Implied::from_rules(&Tally.contributions(now).unwrap(), &[], &["PK", "SK"]);
        }
        let steps = steps(s);
        let trail = d.follow_trail(
            Some(now),
            rejected,
            &steps,
            rec.map(|(i, t)| (i, t)),
            &mut implied,
        );
        (implied, trail)
    };
    // Valid then bad, one batch reaching the item: the valid state applies.
    let (i, t) = run(&bad, &[(Some(0), 0), (Some(2), 1)], None);
    assert_eq!((a(&i), t.seq.as_ref()), (1, Some(&seqs[1])));
    assert!(t.pending.is_empty());
    // The last valid state wins.
    let (i, _) = run(&bad, &[(Some(0), 0), (Some(1), 1), (Some(2), 2)], None);
    assert_eq!(a(&i), 2);
    // The valid record's batch alone, the item already bad: pending only.
    let first = run(&bad, &[(Some(0), 0)], None);
    assert_eq!(a(&first.0), 0, "nothing applies yet");
    assert!(first.1.pending.contributions.is_some());
    // The batch reaching the bad put applies it.
    let second = run(&bad, &[(Some(2), 1)], Some(&first));
    assert_eq!(a(&second.0), 1);
    assert!(second.1.pending.is_empty());
    // Replayed (all at or before the record's sequence number): nothing.
    for s in [&[(Some(1), 0)][..], &[(Some(1), 0), (Some(2), 1)][..]] {
        let (i, t) = run(&bad, s, Some(&second));
        assert_eq!((a(&i), &t), (1, &second.1));
    }
    // A remove between: nothing to keep.
    let (i, _) = run(&bad, &[(Some(0), 0), (None, 1), (Some(2), 2)], None);
    assert_eq!(a(&i), 0);
    // A valid item read now: pending goes, the read applies.
    let (i, t) = run(&v2, &[(Some(1), 3)], Some(&first));
    assert_eq!(a(&i), 2);
    assert!(t.pending.is_empty());
    // Backfill and repair (no images): the record stays.
    let (i, t) = run(&bad, &[], Some(&second));
    assert_eq!((a(&i), &t), (1, &second.1));
}

#[test]
fn a_derived_item_past_its_ttl_is_never_put() {
    use super::plan::{derived_write, DerivedWrite};
    let item = |ttl: i64| {
        let mut i = image(&[("PK", s("LIVE#s")), ("SK", s("MATCH#m"))]);
        i.insert("ttl".into(), crate::item::n(ttl));
        i
    };
    let (ttl, now) = (Some("ttl"), 1_000);
    let (ahead, past, older) = (item(1_001), item(1_000), item(900));
    // Ahead: put when absent or other, kept when as wanted.
    assert_eq!(
        derived_write(Some(&ahead), None, ttl, now),
        DerivedWrite::Put(&ahead)
    );
    assert_eq!(
        derived_write(Some(&ahead), Some(&past), ttl, now),
        DerivedWrite::Put(&ahead)
    );
    assert_eq!(
        derived_write(Some(&ahead), Some(&ahead), ttl, now),
        DerivedWrite::Keep
    );
    // Past: never put; another item in its place goes, one as wanted is
    // the sweep's.
    assert_eq!(
        derived_write(Some(&past), None, ttl, now),
        DerivedWrite::Keep
    );
    assert_eq!(
        derived_write(Some(&past), Some(&past), ttl, now),
        DerivedWrite::Keep
    );
    assert_eq!(
        derived_write(Some(&past), Some(&ahead), ttl, now),
        DerivedWrite::Delete
    );
    assert_eq!(
        derived_write(Some(&past), Some(&older), ttl, now),
        DerivedWrite::Delete
    );
    // No TTL attribute: nothing expires.
    assert_eq!(
        derived_write(Some(&past), None, None, now),
        DerivedWrite::Put(&past)
    );
    // Not wanted: deleted whatever it holds.
    assert_eq!(
        derived_write(None, Some(&older), ttl, now),
        DerivedWrite::Delete
    );
    assert_eq!(derived_write(None, None, ttl, now), DerivedWrite::Keep);
}
