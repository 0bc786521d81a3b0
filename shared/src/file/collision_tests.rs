//! Names and keys that collide: two derives that can imply one item of a
//! processor entity (hostile13 #4), and an attribute named like the
//! table's entity-type stamp (hostile13 #5). Each is refused at load, where
//! it is written, with what to do.

use super::test_support::{assert_at, position, problems};

/// `d` and `e` both derive `c` keyed by the id alone: `D#x` and `E#x` imply
/// one `C#x`, and the delete of either would take the item the other still
/// implies (hostile13 #4: `verify` then reports drift).
const TWO_SOURCES: &str = r#"jobstream: 1
name: collide
table: { name: collide, pk: PK, sk: SK }
entities:
  c:
    owner: processor
    key: { PK: "C#${id}", SK: "C" }
    attributes: { id: string, v: string }
  d:
    key: { PK: "D#${id}", SK: "D" }
    attributes: { id: string }
    derive:
      - entity: c
        with: { id: id, v: "'one'" }
  e:
    key: { PK: "E#${id}", SK: "E" }
    attributes: { id: string }
    derive:
      - entity: c
        with: { id: id, v: "'three'" }
"#;

/// Two entities whose derives can imply one key of an entity that is not
/// `shared: true`: refused at the later derive, naming both, the key they
/// share, and `shared: true`; shared, the file loads (the item lives while
/// any source implies it).
#[test]
fn two_entities_deriving_one_key_of_an_unshared_entity_are_refused() {
    let p = problems(TWO_SOURCES);
    assert_eq!(p.len(), 1, "{p:#?}");
    let at = (position(TWO_SOURCES, "'three'").0 - 1, 17);
    assert_at(&p, at, "e: derive `c` and `d`'s derive `c` (line 13)");
    assert_at(&p, at, "PK=C#x, SK=C");
    assert_at(&p, at, "mark `c` `shared: true`");
    let shared = TWO_SOURCES.replace("owner: processor", "owner: processor\n    shared: true");
    assert_eq!(problems(&shared), vec![]);
}

/// One entity deriving one item twice with different values (hostile13
/// #4's `d`: `v: 'one'` and `v: 'two'`): which value the item holds would
/// depend on the order of the derives, so it is refused whether or not the
/// entity is shared, saying to write one derive; the same values twice are
/// refused unshared (one derive with both conditions says it).
#[test]
fn one_entity_deriving_one_item_twice_is_refused() {
    let text = r#"jobstream: 1
name: collide
table: { name: collide, pk: PK, sk: SK }
entities:
  c:
    owner: processor
    key: { PK: "C#${id}", SK: "C" }
    attributes: { id: string, v: string }
  d:
    key: { PK: "D#${id}", SK: "D" }
    attributes: { id: string, note: string }
    derive:
      - entity: c
        with: { id: id, v: "'one'" }
      - entity: c
        with: { id: id, v: "'two'" }
        when: "note != ''"
"#;
    let p = problems(text);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_at(&p, (15, 17), "d: derive `c` and `d`'s derive `c` (line 13)");
    assert_at(&p, (15, 17), "`v`: `'one'` and `'two'`");
    assert_at(&p, (15, 17), "write one derive");
    let shared = text.replace("owner: processor", "owner: processor\n    shared: true");
    let p = problems(&shared);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_at(&p, (16, 17), "`v`: `'one'` and `'two'`");
    // The same values twice: one derive whose `when` joins the two.
    let same = text.replace("'two'", "'one'");
    let p = problems(&same);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_at(&p, (15, 17), "write one derive");
    let shared_same = shared.replace("'two'", "'one'");
    assert_eq!(problems(&shared_same), vec![]);
}

/// Derives whose keys differ by a literal (a constant bound into the
/// derived key) never imply one item: they load, unshared; the same
/// constant twice is refused.
#[test]
fn derives_whose_keys_differ_by_a_literal_load() {
    let text = TWO_SOURCES
        .replace("C#${id}", "C#${src}#${id}")
        .replace(
            "attributes: { id: string, v: string }",
            "attributes: { id: string, src: string, v: string }",
        )
        .replace(
            "{ id: id, v: \"'one'\" }",
            "{ id: id, src: \"'d'\", v: \"'one'\" }",
        )
        .replace(
            "{ id: id, v: \"'three'\" }",
            "{ id: id, src: \"'e'\", v: \"'three'\" }",
        );
    assert_eq!(problems(&text), vec![]);
    let same = text.replace("src: \"'e'\"", "src: \"'d'\"");
    let p = problems(&same);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_at(&p, (position(&same, "'three'").0 - 1, 17), "PK=C#d#x, SK=C");
    // A constant and a name: the name may hold the constant.
    let open = text.replace("src: \"'e'\"", "src: id");
    assert_eq!(problems(&open).len(), 1, "{:#?}", problems(&open));
}

/// A symmetric edge (a friendship implying both directions): two
/// friendships, (a, b) and (b, a), imply one edge, so unshared it is
/// refused; shared, and with the same values, it loads.
#[test]
fn a_symmetric_edge_is_refused_unless_shared() {
    let text = r#"jobstream: 1
name: friends
table: { name: friends, pk: PK, sk: SK }
entities:
  friendship:
    key: { PK: "F#${a}", SK: "F#${b}" }
    attributes: { a: string, b: string }
    derive:
      - entity: edge
        with: { from: a, to: b }
      - entity: edge
        with: { from: b, to: a }
  edge:
    owner: processor
    key: { PK: "U#${from}", SK: "E#${to}" }
"#;
    let p = problems(text);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_at(&p, (11, 17), "mark `edge` `shared: true`");
    let shared = text.replace("owner: processor", "owner: processor\n    shared: true");
    assert_eq!(problems(&shared), vec![]);
}

/// hostile13 #5: an attribute named like the entity-type stamp (`type`,
/// the default `table.entity_type`) with `writer_type: checked` (the
/// default): every item of the entity would be bad input (the stamp must be
/// the entity's name). Refused at the attribute, naming the clash; under
/// `writer_type: free` the writer's `type` is its own and loads; on a
/// processor entity the processor stamps it, so it is refused whatever
/// `writer_type` says.
#[test]
fn an_attribute_named_like_the_entity_type_stamp_is_refused() {
    let text = r#"jobstream: 1
name: stamp
table: { name: stamp, pk: PK, sk: SK }
entities:
  c:
    owner: processor
    key: { PK: "C#${id}", SK: "C" }
    attributes: { id: string }
  d:
    key: { PK: "D#${id}", SK: "D" }
    attributes: { id: string, type: int, note: string }
    derive:
      - entity: c
        with: { id: id }
"#;
    let p = problems(text);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_at(&p, (11, 37), "d.type: `type` is the table's `entity_type`");
    let free = text.replace("sk: SK }", "sk: SK, writer_type: free }");
    assert_eq!(problems(&free), vec![]);
    let processor = free.replace("{ id: string }", "{ id: string, type: string }");
    let p = problems(&processor);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_at(&p, (8, 37), "c.type: `type` is the table's `entity_type`");
    // Another stamp name: `type` is an attribute like any other.
    let kind = text.replace("sk: SK }", "sk: SK, entity_type: kind }");
    assert_eq!(problems(&kind), vec![]);
}

/// Other names the stamp collides with: the table's keys (the stamp would
/// overwrite a processor item's key, and a checked writer's key would have
/// to be its entity's name), the TTL attribute (a string never expires),
/// a counter's sum or a computed value (the processor would write a number
/// over the stamp): each refused where it is written, naming the stamp.
#[test]
fn names_that_collide_with_the_entity_type_stamp_are_refused() {
    let base = r#"jobstream: 1
name: stamp
table: { name: stamp, pk: PK, sk: SK }
entities:
  cnt:
    owner: processor
    key: { PK: "N#${channelId}", SK: "N" }
    counter: { attributes: [msgs], created_by: processor }
  channel:
    key: { PK: "CH#${channelId}", SK: "META" }
    attributes: { channelId: string }
    compute:
      over: { entity: message, as: ms }
      values: { total: "sum(ms.map(m, m.n))" }
      queue: activity
  message:
    key: { PK: "CH#${channelId}", SK: "MSG#${n}" }
    attributes: { channelId: string, n: int }
    count:
      - counter: cnt
        with: { channelId: channelId }
        add: { msgs: 1 }
"#;
    assert_eq!(problems(base), vec![]);
    let cases = [
        (
            "sk: SK }",
            "sk: SK, entity_type: PK }",
            "PK }",
            "the table's partition key",
        ),
        (
            "sk: SK }",
            "sk: SK, entity_type: SK }",
            "SK }",
            "the table's sort key",
        ),
        (
            "sk: SK }",
            "sk: SK, ttl: type }",
            "type }",
            "the table's TTL attribute",
        ),
        ("[msgs]", "[type]", "type]", "a sum of `cnt`"),
        (
            "{ total: \"sum",
            "{ type: \"sum",
            "\"sum",
            "computed by `channel`",
        ),
    ];
    for (from, to, at, says) in cases {
        let (text, pos) = super::test_support::broken(base, from, to, at);
        let p = problems(&text);
        assert_at(&p, pos, "`entity_type`");
        assert_at(&p, pos, says);
    }
}

/// hostile13 #9: names a model file gives (an entity's, an attribute's)
/// are printed in every log line and message about them; one holding a
/// control character (a line break, an escape) would forge log lines or
/// terminal colours, so the file is refused, naming it escaped.
#[test]
fn names_holding_control_characters_are_refused() {
    let text = "jobstream: 1\nname: names\ntable: { name: names, pk: PK, sk: SK }\nentities:\n  \"a\\n  evil\":\n    key: { PK: \"A#${id}\", SK: \"A\" }\n    attributes: { id: string, \"x\\u001b[31m\": string }\n";
    let p = problems(text);
    assert_eq!(p.len(), 2, "{p:#?}");
    assert_at(
        &p,
        (6, 5),
        "entity `a\\n  evil`: a name holds a control character",
    );
    assert_at(
        &p,
        (7, 46),
        "attribute `x\\u{1b}[31m`: a name holds a control character",
    );
    let key = text.replace("pk: PK,", "pk: \"P\\rK\",");
    assert_at(
        &problems(&key),
        (3, 27),
        "table: attribute `P\\rK`: a name holds",
    );
    let plain = text
        .replace("\\n  evil", " evil")
        .replace("\\u001b[31m", "-y");
    assert_eq!(problems(&plain), vec![]);
}

/// hostile13 #17: two jobs on one queue (one `queue_name`, one logical
/// `queue:`, or a written name that is another job's default) have each
/// consumer take the other's jobs as bad messages and dead-letter them;
/// refused at the later one, naming both.
#[test]
fn two_jobs_on_one_queue_are_refused() {
    let text = r#"jobstream: 1
name: queues
table: { name: queues, pk: PK, sk: SK }
entities:
  row:
    key: { PK: "P#${p}", SK: "R#${r}" }
    attributes: { p: string, r: string, v: int }
  a:
    key: { PK: "P#${p}", SK: "A" }
    attributes: { p: string }
    compute:
      over: { entity: row, as: rows }
      values: { total: "sum(rows.map(x, x.v))" }
      queue: q
      queue_name: shared-name
  b:
    key: { PK: "P#${p}", SK: "B" }
    attributes: { p: string }
    compute:
      over: { entity: row, as: rows }
      values: { cnt: "size(rows)" }
      queue: q2
      queue_name: shared-name
"#;
    let p = problems(text);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_at(
        &p,
        (23, 19),
        "b's `compute:`: the SQS queue `shared-name` is also a's `compute:`'s (line 15)",
    );
    let apart = text.replacen("queue_name: shared-name", "queue_name: other-name", 1);
    assert_eq!(problems(&apart), vec![]);
    let logical = apart.replace("queue: q2", "queue: q");
    let p = problems(&logical);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_at(
        &p,
        (22, 14),
        "the consumer `q` is also a's `compute:`'s (line 14)",
    );
    // A written name that is another's default (`jobstream-<queue>-jobs`).
    let default = apart
        .replace("      queue: q2\n      queue_name: shared-name\n", "")
        .replace("other-name", "jobstream-b-compute-jobs");
    let p = problems(&default);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_at(
        &p,
        (20, 7),
        "the SQS queue `jobstream-b-compute-jobs` is also a's",
    );
}

/// import16 #2: two entities whose templates are the same but for the
/// names they bind (`USER#${userId}` / `PROFILE` twice, OneTable's
/// `Invoice` and `CreditNote` both `doc#${id}`) were told to type the
/// binder that holds the other's literal, which none does: the message
/// says what can apply (the README's answer for models told apart only by
/// the type field).
#[test]
fn templates_the_same_but_for_their_names_are_told_what_can_apply() {
    let text = r#"jobstream: 1
table: { name: tbl, pk: pk, sk: sk }
entities:
  userProfile:
    key: { pk: "USER#${userId}", sk: "PROFILE" }
    attributes: { userId: string, bio?: string }
  userSettings:
    key: { pk: "USER#${id}", sk: "PROFILE" }
    attributes: { id: ulid, theme?: string }
"#;
    let p = problems(text);
    assert_eq!(p.len(), 1, "{p:#?}");
    let m = &p[0].message;
    assert!(m.contains("both match the key pk="), "{m}");
    assert!(m.contains("the same but for the names they bind"), "{m}");
    assert!(!m.contains("type the binder that holds"), "{m}");
    assert!(m.contains("one entity with the attributes of both"), "{m}");
    assert!(m.contains("`writer_type: free`"), "{m}");
}
