//! `from:` on a join set's fact (models/jobboard.yaml: jobs of the last 30
//! days): what check-model refuses, with line:col and suggestions.

use super::set_also_tests::replaced;
use super::test_support::{assert_at, position, problems};

const FROM: &str = "from: { postedAt: \"day(now - 30 * 86400)\" }";

#[test]
fn from_names_a_variable_of_the_facts_sort_key() {
    let text = replaced(FROM, "from: { postedat: \"day(now - 30 * 86400)\" }");
    let p = problems(&text);
    let (l, c) = position(&text, "\"day(now - 30 * 86400)\"");
    assert_at(&p, (l, c), "set `suggestions`: fact `job`: from `postedat` is not a variable of its sort key `j#${postedAt}#${zip}#${jobId}` (did you mean `postedAt`?)");
}

#[test]
fn from_reads_now_only_and_one_variable() {
    let text = replaced(FROM, "from: { postedAt: \"day(today - 30 * 86400)\" }");
    let p = problems(&text);
    let (l, c) = position(&text, "\"day(today");
    assert_at(&p, (l, c), "set `suggestions`: fact `job`: from `postedAt`: unknown name `today` in `day(today - 30 * 86400)` (it reads `now` only");
    let text = replaced(FROM, "from: { postedAt: \"day(now - '30')\" }");
    let p = problems(&text);
    let (l, c) = position(&text, "\"day(now - '30')");
    assert_at(&p, (l, c), "from `postedAt`: `day(now - '30')`:");
    let text = replaced(
        FROM,
        "from: { postedAt: \"day(now - 30 * 86400)\", zip: \"'A'\" }",
    );
    let p = problems(&text);
    let (l, c) = position(&text, "\"'A'\"");
    assert_at(&p, (l, c), "fact `job`: one variable under `from`");
}

#[test]
fn from_bounds_a_facts_own_listing_only() {
    let text = replaced(
        "seeker: { entity: seeker, via: GSI1,",
        "seeker: { entity: seeker, from: { seekerId: \"'a'\" }, via: GSI1,",
    );
    let p = problems(&text);
    let (l, c) = position(&text, "\"'a'\"");
    assert_at(&p, (l, c), "set `suggestions`: fact `seeker`: `from` bounds the listing of the fact's own partition, and `via` lists it elsewhere");
    let text = replaced(
        "requested: { entity: request,",
        "requested: { entity: request, from: { jobId: \"'a'\" },",
    );
    let p = problems(&text);
    let (l, c) = position(&text, "\"'a'\" }");
    assert_at(&p, (l, c), "set `suggestions`: unless `requested`: `from` bounds a fact's listing; an `unless` fact is read by its key");
}
