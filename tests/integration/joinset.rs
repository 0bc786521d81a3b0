//! Join set jobs (`shared::engine::joinset`) against the embedded engine:
//! the timeline's scopes paged and their write counts, an anti-join with a
//! computed value, late and duplicated jobs.

use std::sync::Arc;

use crate::seed_items::social as keys;
use crate::seed_items::social::{follow_item, post_item, user_item};
use crate::seed_items::timeline;
use shared::engine::joinset::{
    FactDecl, JoinSet, KeyTemplate, TargetDecl, UnlessDecl, Value, Vars,
};
use shared::engine::setjob::{apply, Applied, Reads, SetJob};
use shared::item::{s, Item};
use shared::store::Store;

use crate::items::{apply_plan, delete, get, put, put_all};
use crate::social::{iso, post_id, timeline_len};
use crate::support::{model_env, ModelEnv};

fn mirror(follower: &str, followed: &str, at: &str) -> Item {
    let mut m = keys::mirror_key(follower, followed);
    m.insert(keys::TYPE.into(), s(keys::TYPE_FOLLOWER));
    m.insert("createdAt".into(), s(at));
    m
}

/// `n` followers of `star` (`<prefix>0000`...): their names, and their
/// follows and mirrors.
pub(crate) fn followers(n: usize, prefix: &str, star: &str, at: &str) -> (Vec<String>, Vec<Item>) {
    let fans: Vec<String> = (0..n).map(|i| format!("{prefix}{i:04}")).collect();
    let items = fans
        .iter()
        .flat_map(|f| [follow_item(f, star, at), mirror(f, star, at)])
        .collect();
    (fans, items)
}

/// Engine + tables only: the jobs are run by hand (no stream processing).
async fn social() -> ModelEnv {
    model_env("social", |_| {}).await
}

fn reads(env: &ModelEnv, store: &Store) -> Reads {
    let store = store.clone();
    Reads {
        store,
        ..crate::items::reads(env)
    }
}

/// Runs `body` and every follow-up page it starts, in order; the sum of
/// what they applied and how many jobs ran.
async fn run_pages(job: &dyn SetJob, r: &Reads, body: String) -> (Applied, usize) {
    let mut total = Applied::default();
    let mut queue = vec![body];
    let mut jobs = 0;
    while let Some(body) = queue.pop() {
        jobs += 1;
        let plan = job.plan(&body, r).await.expect("plan");
        let a = apply_plan(job, r, &plan).await;
        total.add(&a);
        queue.extend(plan.ahead.into_iter().map(|m| m.body));
        queue.extend(plan.then.into_iter().map(|m| m.body));
    }
    (total, jobs)
}

/// One scenario through the timeline's four scopes (post fan-out, follow,
/// unfollow, post delete), paged by 50: the items written and the write
/// requests' actions. The figures are those the hand-written timeline made
/// for the same scenario (recorded before it was replaced by the join set).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeline_scopes_write_what_the_hand_written_timeline_wrote() {
    let env = social().await;
    let store = Store::new(env.rt.dynamodb.clone());
    let table = env.rt.config.table.clone();
    let at = iso(60);
    let (_, mut items) = followers(120, "fan", "star", &at);
    let star_post = post_id(1);
    items.push(post_item("star", &star_post, &iso(5), "hello"));
    let bob_posts: Vec<String> = (0..30).map(|i| post_id(100 + i)).collect();
    for p in &bob_posts {
        items.push(post_item("bob", p, &iso(30), "b"));
    }
    put_all(&env, items).await;
    let job = timeline::set(50);
    let r = reads(&env, &store);
    let writes = || {
        store
            .stats()
            .writes
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let mut figures: Vec<(&str, usize, usize, usize, u64)> = Vec::new();

    // 1. The post fans out to 120 followers: three pages.
    let post_job = timeline::post_job("star", &star_post);
    let w0 = writes();
    let (a, jobs) = run_pages(&job, &r, post_job.clone()).await;
    figures.push(("post", a.puts, a.deletes, jobs, writes() - w0));
    // Billed: every action of a transaction twice (all items under 1 KB).
    assert_eq!(a.actions as u64, writes() - w0);
    assert_eq!(a.write_units, 2 * 245);
    eprintln!(
        "write capacity units per timeline entry (fan-out, pages of 50): {:.3}",
        a.write_units as f64 / a.puts as f64
    );

    // 2. fan0000 follows bob (30 posts).
    store
        .put_items(
            &table,
            vec![
                follow_item("fan0000", "bob", &at),
                mirror("fan0000", "bob", &at),
            ],
        )
        .await
        .unwrap();
    let follow_job = timeline::follow_job("fan0000", "bob");
    let w0 = writes();
    let (a, jobs) = run_pages(&job, &r, follow_job.clone()).await;
    figures.push(("follow", a.puts, a.deletes, jobs, writes() - w0));

    // 3. ... and unfollows.
    store
        .delete_keys(
            &table,
            vec![
                keys::follow_key("fan0000", "bob"),
                keys::mirror_key("fan0000", "bob"),
            ],
        )
        .await
        .unwrap();
    let w0 = writes();
    let (a, jobs) = run_pages(&job, &r, follow_job.clone()).await;
    figures.push(("unfollow", a.puts, a.deletes, jobs, writes() - w0));

    // 4. The star's post is deleted.
    delete(&env, keys::post_key("star", &star_post)).await;
    let w0 = writes();
    let (a, jobs) = run_pages(&job, &r, post_job.clone()).await;
    figures.push(("delete", a.puts, a.deletes, jobs, writes() - w0));

    // 5. Every job again: nothing to write.
    let w0 = writes();
    run_pages(&job, &r, post_job).await;
    run_pages(&job, &r, follow_job).await;
    figures.push(("again", 0, 0, 0, writes() - w0));

    eprintln!("timeline write figures (scope, puts, deletes, jobs, actions): {figures:?}");
    // The hand-written timeline (before the join set), same scenario:
    // post (120, 0, 3 jobs, 245 actions), follow (30, 0, 1, 61), unfollow
    // (0, 30, 1, 31), delete (0, 120, 3, 123), again (0 actions). The join
    // set writes the same; its follow scope lists the author's posts, then
    // the follower's timeline, 50 candidates per job: the unfollow's 30
    // posts and 31 entries are two jobs.
    assert_eq!(
        figures,
        vec![
            ("post", 120, 0, 3, 245),
            ("follow", 30, 0, 1, 61),
            ("unfollow", 0, 30, 2, 31),
            ("delete", 0, 120, 3, 123),
            ("again", 0, 0, 0, 0),
        ]
    );
}

/// Runs one job by hand: plan, apply; the plan's follow-up bodies.
async fn run_one(job: &dyn SetJob, r: &Reads, body: &str) -> (Applied, Vec<String>) {
    let plan = job.plan(body, r).await.expect("plan");
    let a = apply_plan(job, r, &plan).await;
    let next = plan
        .ahead
        .into_iter()
        .chain(plan.then)
        .map(|m| m.body)
        .collect();
    (a, next)
}

fn vars(pairs: &[(&str, &str)]) -> Vars {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn template(pk: &str, sk: &str) -> KeyTemplate {
    KeyTemplate::parse(pk, sk).unwrap()
}

/// Whether `--model social`'s rules accept an item (else why not: bad
/// input).
fn accepted(i: &Item) -> Result<(), String> {
    static RULES: std::sync::OnceLock<Arc<dyn shared::engine::rules::Rules>> =
        std::sync::OnceLock::new();
    RULES
        .get_or_init(|| shared::models::find("social").expect("social").rules)
        .derived(i)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn follow_fact(reads: Vec<&'static str>) -> FactDecl {
    FactDecl {
        name: "follow".into(),
        key: template("u#${a}#following", "u#${b}"),
        via: Some(template("u#${b}#follower", "u#${a}")),
        via_ledger: None,
        valid: Arc::new(accepted),
        reads,
        also: vec![],
        from: None,
    }
}

/// "b has not followed a back": an anti-join with a copied and a computed
/// value. `u#<b>#pending`/`u#<a>` exists iff a follows b and b does not
/// follow a.
fn pending_set() -> JoinSet {
    JoinSet {
        name: "pending",
        queue: "pending",
        key_names: &[keys::PK, keys::SK],
        target: TargetDecl {
            key: template("u#${b}#pending", "u#${a}"),
            type_attr: Some((keys::TYPE, "pending".into())),
            values: vec![
                (
                    "since".into(),
                    Value::Attr {
                        fact: "follow".into(),
                        attr: "createdAt".into(),
                    },
                ),
                (
                    "note".into(),
                    Value::Computed(Arc::new(|row| {
                        if row.vars["a"] == "boom" {
                            return Err("the note overflows".into());
                        }
                        Ok(s(format!("{} waits for {}", row.vars["a"], row.vars["b"])))
                    })),
                ),
            ],
            ttl: None,
        },
        facts: vec![follow_fact(vec!["createdAt"])],
        unless: vec![UnlessDecl {
            name: "back".into(),
            key: template("u#${b}#following", "u#${a}"),
            also: vec![],
            once: None,
        }],
        when: vec![],
        volatile: &[],
        page: 10,
    }
}

/// A user's name on each follower's inbox: `u#<a>#inbox`... listed through
/// the follower mirrors, the value read from the user's info.
fn greetings_set(page: usize) -> JoinSet {
    JoinSet {
        name: "greetings",
        queue: "greetings",
        key_names: &[keys::PK, keys::SK],
        target: TargetDecl {
            key: template("u#${a}#inbox", "hello#${b}"),
            type_attr: Some((keys::TYPE, "greeting".into())),
            values: vec![(
                "from".into(),
                Value::Attr {
                    fact: "info".into(),
                    attr: "name".into(),
                },
            )],
            ttl: None,
        },
        facts: vec![
            FactDecl {
                name: "info".into(),
                key: template("u#${b}", "info"),
                via: None,
                via_ledger: None,
                valid: Arc::new(accepted),
                reads: vec!["name"],
                also: vec![],
                from: None,
            },
            follow_fact(vec![]),
        ],
        unless: vec![],
        when: vec![],
        volatile: &[],
        page,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anti_join_excludes_and_late_jobs_never_resurrect_or_wipe() {
    let env = social().await;
    let store = Store::new(env.rt.dynamodb.clone());
    let set = pending_set();
    assert_eq!(
        set.scopes()
            .unwrap()
            .iter()
            .map(|s| s.steps.len())
            .collect::<Vec<_>>(),
        vec![0, 0],
        "both scopes are one candidate"
    );
    let r = reads(&env, &store);
    let at = iso(10);
    let pending = keys::key("u#y#pending", "u#x");
    let follow_job = set.start("follow", vars(&[("a", "x"), ("b", "y")]));
    let back_job = set.start("back", vars(&[("a", "x"), ("b", "y")]));

    // x follows y: pending, with the copied and the computed value.
    put(&env, follow_item("x", "y", &at)).await;
    // A plan made now (it wants the item, guarded by "y does not follow x")...
    let stale_put = set.plan(&follow_job, &r).await.unwrap();
    let (a, next) = run_one(&set, &r, &follow_job).await;
    assert_eq!((a.puts, next.len()), (1, 0));
    let p = get(&env, pending.clone()).await.expect("pending");
    assert_eq!(p["since"], s(&at));
    assert_eq!(p["note"], s("x waits for y"));
    assert_eq!(p[keys::TYPE], s("pending"));
    assert_eq!(p.len(), 5);
    // The same job again (duplicate delivery): nothing written.
    let (a, _) = run_one(&set, &r, &follow_job).await;
    assert_eq!(a.writes(), 0);

    // y follows x back: the back scope removes it.
    put(&env, follow_item("y", "x", &at)).await;
    // A plan of the back scope made now (it deletes, guarded by "y follows x").
    let stale_delete = set.plan(&back_job, &r).await.unwrap();
    assert_eq!(stale_delete.existing.len(), 1);
    let (a, _) = run_one(&set, &r, &back_job).await;
    assert_eq!(a.deletes, 1);
    assert!(get(&env, pending.clone()).await.is_none());
    // ... the stale put, applied late, never resurrects it.
    let a = apply_plan(&set, &r, &stale_put).await;
    assert_eq!((a.puts, a.superseded), (0, 1));
    assert!(get(&env, pending.clone()).await.is_none());

    // y unfollows x: the back scope brings it back.
    delete(&env, keys::follow_key("y", "x")).await;
    let (a, _) = run_one(&set, &r, &back_job).await;
    assert_eq!(a.puts, 1);
    // ... and the stale delete (made while y followed x), applied late,
    // never wipes it.
    let a = apply_plan(&set, &r, &stale_delete).await;
    assert_eq!((a.deletes, a.superseded), (0, 1));
    assert!(get(&env, pending.clone()).await.is_some());

    // A follow that turns into bad input keeps what it implied.
    put(&env, follow_item("x", "y", "yesterday")).await;
    let (a, _) = run_one(&set, &r, &follow_job).await;
    assert_eq!(a.writes(), 0);
    assert_eq!(get(&env, pending.clone()).await.unwrap()["since"], s(&at));
    // Fixed with a new date: the value follows.
    let later = iso(1);
    put(&env, follow_item("x", "y", &later)).await;
    let (a, _) = run_one(&set, &r, &follow_job).await;
    assert_eq!(a.puts, 1);
    assert_eq!(get(&env, pending).await.unwrap()["since"], s(&later));

    // Bodies that do not fit the declaration are permanent failures.
    for bad in [
        set.start("nope", vars(&[("a", "x"), ("b", "y")])),
        set.start("follow", vars(&[("a", "x")])),
        set.start("follow", vars(&[("a", "x#1"), ("b", "y")])),
        greetings_set(10).start("info", vars(&[("b", "x")])),
        "{\"version\":1,\"set\":\"pending\"}".to_string(),
    ] {
        assert!(
            matches!(
                set.plan(&bad, &r).await,
                Err(shared::sqs::MessageError::Permanent { .. })
            ),
            "{bad}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_listed_through_a_mirror_is_paged_and_values_follow_the_fact() {
    let env = social().await;
    let store = Store::new(env.rt.dynamodb.clone());
    let set = greetings_set(10);
    let r = reads(&env, &store);
    let at = iso(10);
    let (_, mut items) = followers(25, "g", "ann", &at);
    items.push(user_item("ann", "Ann"));
    // A mirror whose follow is gone (the mirror lags): no greeting.
    items.push(mirror("ghost", "ann", &at));
    put_all(&env, items).await;
    let start = set.start("info", vars(&[("b", "ann")]));
    let (a, jobs) = run_pages(&set, &r, start.clone()).await;
    assert_eq!((a.puts, jobs), (25, 3), "26 mirrors in pages of 10");
    let greeting = |f: &str| keys::key(format!("u#{f}#inbox"), "hello#ann");
    assert!(get(&env, greeting("ghost")).await.is_none());
    assert_eq!(
        get(&env, greeting("g0024")).await.unwrap()["from"],
        s("Ann")
    );
    // Renamed: a first page planned now, applied after a second rename,
    // drops every put (its guard is the name as read).
    put(&env, user_item("ann", "Annie")).await;
    let stale = set.plan(&start, &r).await.unwrap();
    assert_eq!(stale.desired.len(), 10);
    put(&env, user_item("ann", "Anne")).await;
    let a = apply_plan(&set, &r, &stale).await;
    assert_eq!((a.puts, a.superseded), (0, 10));
    assert_eq!(
        get(&env, greeting("g0000")).await.unwrap()["from"],
        s("Ann")
    );
    let (a, _) = run_pages(&set, &r, start.clone()).await;
    assert_eq!(a.puts, 25, "every greeting follows the current name");
    assert_eq!(
        get(&env, greeting("g0000")).await.unwrap()["from"],
        s("Anne")
    );
    // The user's info goes: every greeting goes, guarded by its absence.
    delete(&env, keys::key("u#ann", "info")).await;
    let (a, _) = run_pages(&set, &r, start).await;
    assert_eq!(a.deletes, 25);
    // One check of the shared fact per chunk (a page each): 25 deletes + 3
    // checks, each action billed twice.
    assert_eq!(a.actions, 28);
    assert_eq!(a.write_units, 2 * 28);
}

/// A follow scope over more posts and entries than a page: paged through
/// the author's posts, then through the follower's timeline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeline_follow_scope_is_paged() {
    let env = social().await;
    let store = Store::new(env.rt.dynamodb.clone());
    let table = env.rt.config.table.clone();
    let at = iso(60);
    let posts: Vec<String> = (0..25).map(|i| post_id(500 + i)).collect();
    let mut items = vec![follow_item("fan", "bob", &at), mirror("fan", "bob", &at)];
    for p in &posts {
        items.push(post_item("bob", p, &iso(30), "b"));
    }
    // Other authors' entries on fan's timeline are not the scope's.
    let other = post_id(900);
    items.push(post_item("cid", &other, &iso(30), "c"));
    items.push(follow_item("fan", "cid", &at));
    put_all(&env, items).await;
    let job = timeline::set(10);
    let r = reads(&env, &store);
    let follow = |f: &str, a: &str| timeline::follow_job(f, a);
    run_pages(&job, &r, follow("fan", "cid")).await;
    let (a, jobs) = run_pages(&job, &r, follow("fan", "bob")).await;
    // 3 pages of posts, then 3 pages of fan's 26 entries.
    assert_eq!((a.puts, jobs), (25, 6));
    // Two of bob's posts are deleted while fan is not looking (their own
    // post jobs lost), then fan unfollows: the sweep finds those entries.
    store
        .delete_keys(
            &table,
            vec![
                keys::post_key("bob", &posts[0]),
                keys::post_key("bob", &posts[1]),
                keys::follow_key("fan", "bob"),
                keys::mirror_key("fan", "bob"),
            ],
        )
        .await
        .unwrap();
    let (a, _) = run_pages(&job, &r, follow("fan", "bob")).await;
    assert_eq!(a.deletes, 25);
    let left = timeline_len(&store, &table, "fan").await;
    assert_eq!(left, 1, "only cid's entry is left");
}

/// A celebrity's fan-out and its deletion, written through a proxy that
/// fails transactions (5xx) and throttles reads, with one SDK attempt: a
/// failed job is delivered again (as SQS would) and the concurrent chunks
/// end exact, with no entry written twice nor left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_under_faults_and_redelivery_ends_exact() {
    use jobstream::faults::{Fault, FaultProxy};
    let env = social().await;
    let table = env.rt.config.table.clone();
    let direct = Store::new(env.rt.dynamodb.clone());
    let proxy = FaultProxy::in_front_of(&env.engine.endpoint())
        .await
        .unwrap();
    let faulty = Store::with_backoff(
        aws_sdk_dynamodb::Client::new(
            &jobstream::local::engine::sdk_config(Some(&proxy.endpoint()), 1).await,
        ),
        shared::store::Backoff {
            max_times: 0,
            ..shared::store::Backoff::default()
        },
    );
    let at = iso(60);
    let (fans, mut items) = followers(300, "fan", "star", &at);
    let p = post_id(1);
    items.push(post_item("star", &p, &iso(5), "x"));
    direct.put_items(&table, items).await.unwrap();
    let job = &timeline::set(100);
    let r = reads(&env, &faulty);
    let body = timeline::post_job("star", &p);
    // Runs the chain; a job that fails is delivered again.
    let run = |body: String| {
        let r = r.clone();
        async move {
            let mut queue = vec![body];
            let (mut total, mut failures) = (Applied::default(), 0);
            while let Some(body) = queue.pop() {
                let plan = match job.plan(&body, &r).await {
                    Ok(plan) => plan,
                    Err(_) => {
                        failures += 1;
                        queue.push(body);
                        continue;
                    }
                };
                queue.extend(plan.ahead.iter().map(|m| m.body.clone()));
                match apply(
                    &r.store,
                    &r.table,
                    &r.ledger_table,
                    job.key_names(),
                    &[],
                    &plan,
                )
                .await
                {
                    Ok(a) => total.add(&a),
                    Err(_) => {
                        failures += 1;
                        queue.push(body);
                    }
                }
                assert!(failures < 100, "the faults are bounded");
            }
            (total, failures)
        }
    };
    proxy.inject(Fault::server_error("TransactWriteItems", 4).after(1));
    proxy.inject(Fault::throttle("BatchGetItem", 2).after(1));
    let (a, failures) = run(body.clone()).await;
    assert!(failures >= 2, "{failures} failed deliveries");
    assert!(proxy.injected() >= 6);
    for f in &fans {
        assert_eq!(timeline_len(&direct, &table, f).await, 1, "{f}");
    }
    // A redelivered page re-reads and skips what its first delivery wrote
    // (the puts of deliveries that failed part-way are not counted here).
    assert!(a.puts <= 300);
    let (again, _) = run(body.clone()).await;
    assert_eq!(again.writes(), 0, "once exact, a duplicate writes nothing");
    // The post goes: every entry goes, under faults again.
    direct
        .delete_keys(&table, vec![keys::post_key("star", &p)])
        .await
        .unwrap();
    proxy.inject(Fault::server_error("TransactWriteItems", 3).after(2));
    let (a, failures) = run(body).await;
    assert!(failures >= 1);
    assert!(a.deletes <= 300);
    for f in &fans {
        assert_eq!(timeline_len(&direct, &table, f).await, 0, "{f}");
    }
}

/// The pages of a fan-out planned, then fans unfollow (and their follow
/// jobs run) before the pages are written: the stale pages write every
/// other entry and resurrect none, concurrently chunked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_pages_of_a_fan_out_racing_unfollows_resurrect_nothing() {
    let env = social().await;
    let store = Store::new(env.rt.dynamodb.clone());
    let table = env.rt.config.table.clone();
    let at = iso(60);
    let (fans, mut items) = followers(250, "fan", "star", &at);
    let p = post_id(1);
    items.push(post_item("star", &p, &iso(5), "x"));
    put_all(&env, items).await;
    let job = timeline::set(100);
    let r = reads(&env, &store);
    let mut body = Some(timeline::post_job("star", &p));
    let mut plans = Vec::new();
    while let Some(b) = body.take() {
        let plan = job.plan(&b, &r).await.unwrap();
        body = plan.ahead.first().map(|m| m.body.clone());
        plans.push(plan);
    }
    assert_eq!(plans.len(), 3);
    // Every 10th fan unfollows; their follow jobs find nothing to remove.
    let gone: Vec<&String> = fans.iter().step_by(10).collect();
    let mut keys_gone = Vec::new();
    for f in &gone {
        keys_gone.push(keys::follow_key(f, "star"));
        keys_gone.push(keys::mirror_key(f, "star"));
    }
    store.delete_keys(&table, keys_gone).await.unwrap();
    for f in &gone {
        let (a, _) = run_pages(&job, &r, timeline::follow_job(f, "star")).await;
        assert_eq!(a.writes(), 0);
    }
    let mut total = Applied::default();
    for plan in &plans {
        let a = apply_plan(&job, &r, plan).await;
        total.add(&a);
    }
    assert_eq!((total.puts, total.superseded), (225, 25));
    for (i, f) in fans.iter().enumerate() {
        let n = timeline_len(&store, &table, f).await;
        assert_eq!(n, usize::from(i % 10 != 0), "{f}");
    }
}

/// A value that cannot be computed from valid facts is bad input: logged,
/// counted by the consumer, nothing written, and the job completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_that_cannot_be_computed_is_counted_and_writes_nothing() {
    use shared::engine::setjob::SetJobProcessor;
    use shared::metrics::names;
    let env = social().await;
    let store = Store::new(env.rt.dynamodb.clone());
    let table = env.rt.config.table.clone();
    put(&env, follow_item("boom", "y", &iso(1))).await;
    let set = pending_set();
    let body = set.start("follow", vars(&[("a", "boom"), ("b", "y")]));
    let consumer = SetJobProcessor::new(
        Arc::new(set),
        store.clone(),
        &table,
        &env.rt.config.ledger_table,
        None,
        Default::default(),
    );
    let outcome = consumer.run(&body).await.expect("the job completes");
    assert_eq!(outcome, shared::sqs::Outcome::Duplicate, "nothing written");
    use shared::sqs::MessageProcessor as _;
    assert_eq!(consumer.metrics().get(names::BAD_INPUT), 1);
    assert!(get(&env, keys::key("u#y#pending", "u#boom"))
        .await
        .is_none());
}
