//! Scenario files as tests: each file under `tests/scenarios/<model>/`
//! names the model it plays (`model:`), writes as an application would,
//! and says what must then hold after every step: items and attributes,
//! absent keys, exact item counts, query results, records refused as bad
//! input, `verify` clean, nothing dead-lettered (SPEC §8; the format is
//! `shared::file::scenario`). One test per file, in parallel, each on a
//! fresh engine; a failure lists every difference.

use std::path::{Path, PathBuf};

/// `name => "folder/name.yaml"`: one `#[tokio::test]` per scenario file,
/// named as the file.
macro_rules! scenarios {
    ($($name:ident => $file:literal,)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                play(stringify!($name), $file).await;
            }
        )*
        /// Every file the list names.
        const LISTED: &[&str] = &[$($file),*];
    };
}

scenarios! {
    a_notice_two_orders_imply_lives_while_either_does =>
        "tickets/a_notice_two_orders_imply_lives_while_either_does.yaml",
    a_refund_of_one_order_keeps_the_notice_another_implies =>
        "tickets/a_refund_of_one_order_keeps_the_notice_another_implies.yaml",
    an_order_re_created_twice_keeps_the_line_put_last =>
        "orders/an_order_re_created_twice_keeps_the_line_put_last.yaml",
    lines_written_before_their_invoice_wait_in_the_ledger_and_land_when_it_appears =>
        "invoices/lines_written_before_their_invoice_wait_in_the_ledger_and_land_when_it_appears.yaml",
    a_play_whose_once_key_is_refused_is_bad_input_as_a_whole =>
        "plays/a_play_whose_once_key_is_refused_is_bad_input_as_a_whole.yaml",
    a_files_suggestions_follow_relevance_requests_matches_and_closing =>
        "board/a_files_suggestions_follow_relevance_requests_matches_and_closing.yaml",
    a_lookup_lives_while_any_of_its_postings_does =>
        "hr/a_lookup_lives_while_any_of_its_postings_does.yaml",
    a_re_posted_job_keeps_its_lookup_item =>
        "hr/a_re_posted_job_keeps_its_lookup_item.yaml",
    an_employee_moved_to_another_org_keeps_its_dept_employee =>
        "hr/an_employee_moved_to_another_org_keeps_its_dept_employee.yaml",
    bad_ids_and_enums_are_skipped_counted_and_block_nothing =>
        "hr/bad_ids_and_enums_are_skipped_counted_and_block_nothing.yaml",
    employees_before_their_department_are_counted_when_it_appears =>
        "hr/employees_before_their_department_are_counted_when_it_appears.yaml",
    moves_deactivations_deletes_and_re_creates =>
        "hr/moves_deactivations_deletes_and_re_creates.yaml",
    the_open_jobs_index_is_sparse_and_lookups_follow_postings =>
        "hr/the_open_jobs_index_is_sparse_and_lookups_follow_postings.yaml",
    writers_values_of_processor_attributes_are_brought_back =>
        "hr/writers_values_of_processor_attributes_are_brought_back.yaml",
    requested_and_matched_pairs_are_never_suggested_and_closing_removes_all =>
        "jobboard/requested_and_matched_pairs_are_never_suggested_and_closing_removes_all.yaml",
    suggestions_follow_the_relevance_function_and_move_when_rescored =>
        "jobboard/suggestions_follow_the_relevance_function_and_move_when_rescored.yaml",
    the_library_queries_filter_by_state_and_read_the_sparse_index_from_a_time =>
        "library/the_library_queries_filter_by_state_and_read_the_sparse_index_from_a_time.yaml",
    pickem_bad_input_changes_nothing_and_blocks_nothing =>
        "pickem/pickem_bad_input_changes_nothing_and_blocks_nothing.yaml",
    pickem_corrections_and_removals_rescore_and_resum =>
        "pickem/pickem_corrections_and_removals_rescore_and_resum.yaml",
    pickem_padding_and_clamping_keep_true_values =>
        "pickem/pickem_padding_and_clamping_keep_true_values.yaml",
    a_standings_item_a_writer_overwrites_or_deletes_is_brought_back =>
        "pickem/a_standings_item_a_writer_overwrites_or_deletes_is_brought_back.yaml",
    a_new_follow_pulls_recent_posts_and_an_unfollow_removes_them =>
        "social/a_new_follow_pulls_recent_posts_and_an_unfollow_removes_them.yaml",
    bad_input_is_counted_and_skipped_without_blocking_later_records =>
        "social/bad_input_is_counted_and_skipped_without_blocking_later_records.yaml",
    follows_posts_and_likes_give_mirrors_counts_and_timelines =>
        "social/follows_posts_and_likes_give_mirrors_counts_and_timelines.yaml",
    a_catch_all_updated_rule_writes_no_entry_for_the_mirror =>
        "tasks/a_catch_all_updated_rule_writes_no_entry_for_the_mirror.yaml",
    a_change_no_rule_matches_writes_no_entry_and_is_not_drift =>
        "tasks/a_change_no_rule_matches_writes_no_entry_and_is_not_drift.yaml",
    a_root_deleted_and_recreated_in_a_later_batch_starts_over_at_one =>
        "tasks/a_root_deleted_and_recreated_in_a_later_batch_starts_over_at_one.yaml",
    a_count_the_compiled_tracker_left_is_counted_on =>
        "tracker/a_count_the_compiled_tracker_left_is_counted_on.yaml",
    cascade_deletes_every_stage_and_entry_without_removal_entries =>
        "tracker/cascade_deletes_every_stage_and_entry_without_removal_entries.yaml",
    every_snapshot_is_the_state_right_after_its_change_although_processing_lags =>
        "tracker/every_snapshot_is_the_state_right_after_its_change_although_processing_lags.yaml",
    scenario_produces_exactly_the_implied_derived_state =>
        "tracker/scenario_produces_exactly_the_implied_derived_state.yaml",
    a_time_that_is_no_iso_utc_time_is_bad_input_and_sorts_nowhere =>
        "tracker/a_time_that_is_no_iso_utc_time_is_bad_input_and_sorts_nowhere.yaml",
    a_filter_a_limit_and_pages_answer_an_event_listing =>
        "league/a_filter_a_limit_and_pages_answer_an_event_listing.yaml",
    job_board_triggers_follow_their_guards_from_bad_input_and_title_changes =>
        "jobboard/job_board_triggers_follow_their_guards_from_bad_input_and_title_changes.yaml",
    a_bad_job_or_profile_keeps_its_suggestions_and_fails_no_job =>
        "jobboard/a_bad_job_or_profile_keeps_its_suggestions_and_fails_no_job.yaml",
    an_approval_withdrawn_before_its_match_leaves_the_pair_suggested =>
        "jobboard/an_approval_withdrawn_before_its_match_leaves_the_pair_suggested.yaml",
    an_invoice_deleted_and_recreated_gets_the_totals_of_the_lines_as_they_are_then =>
        "invoices/an_invoice_deleted_and_recreated_gets_the_totals_of_the_lines_as_they_are_then.yaml",
    two_invoices_claiming_one_id_are_bad_input_and_neither_is_written_until_one_is_left =>
        "invoices/two_invoices_claiming_one_id_are_bad_input_and_neither_is_written_until_one_is_left.yaml",
    bad_lines_are_bad_input_and_move_no_total =>
        "invoices/bad_lines_are_bad_input_and_move_no_total.yaml",
    an_invoice_moved_to_another_account_takes_its_totals_and_the_old_key_stays_empty =>
        "invoices/an_invoice_moved_to_another_account_takes_its_totals_and_the_old_key_stays_empty.yaml",
    nothing_is_written_onto_a_counter_item_its_rules_reject_and_it_is_one_bad_input =>
        "hr/nothing_is_written_onto_a_counter_item_its_rules_reject_and_it_is_one_bad_input.yaml",
    a_model_files_counter_deleted_by_a_writer_comes_back =>
        "library/a_model_files_counter_deleted_by_a_writer_comes_back.yaml",
    removes_of_facts_with_int_key_names_start_their_jobs =>
        "seats/removes_of_facts_with_int_key_names_start_their_jobs.yaml",
    a_key_name_a_join_set_cannot_carry_is_bad_input_not_silence =>
        "seats/a_key_name_a_join_set_cannot_carry_is_bad_input_not_silence.yaml",
    a_line_written_just_before_its_order_starts_no_adoption =>
        "orders/a_line_written_just_before_its_order_starts_no_adoption.yaml",
    orders_keyed_under_their_customer_keep_their_own_histories =>
        "customer_orders/orders_keyed_under_their_customer_keep_their_own_histories.yaml",
    a_via_an_index_lists_members_of_a_partition_value_of_maximal_length =>
        "teams/a_via_an_index_lists_members_of_a_partition_value_of_maximal_length.yaml",
    a_member_written_while_its_root_is_deleted_joins_the_recreated_root =>
        "tasks/a_member_written_while_its_root_is_deleted_joins_the_recreated_root.yaml",
    an_edited_dept_employee_goes_with_its_employee =>
        "hr/an_edited_dept_employee_goes_with_its_employee.yaml",
    a_scope_of_more_than_98_rows_is_refused_and_its_values_wait =>
        "activity/a_scope_of_more_than_98_rows_is_refused_and_its_values_wait.yaml",
    a_channel_the_rules_reject_gets_no_computed_value_and_is_no_drift =>
        "activity/a_channel_the_rules_reject_gets_no_computed_value_and_is_no_drift.yaml",
    an_effect_skipped_for_a_required_item_is_made_when_it_appears =>
        "hiring/an_effect_skipped_for_a_required_item_is_made_when_it_appears.yaml",
    a_computed_value_a_writer_drops_or_overwrites_is_brought_back =>
        "pickem/a_computed_value_a_writer_drops_or_overwrites_is_brought_back.yaml",
    delete_and_recreate_with_the_same_id_cascades_only_the_old_incarnation =>
        "tracker/delete_and_recreate_with_the_same_id_cascades_only_the_old_incarnation.yaml",
    fractional_numbers_are_compared_rendered_and_copied_exactly =>
        "rides/fractional_numbers_are_compared_rendered_and_copied_exactly.yaml",
    questions_are_counted_and_listed_per_tag_exactly =>
        "qa_tags/questions_are_counted_and_listed_per_tag_exactly.yaml",
    a_value_that_cannot_be_computed_is_bad_input_and_freezes_no_other =>
        "catalog/a_value_that_cannot_be_computed_is_bad_input_and_freezes_no_other.yaml",
}

/// The folder of the scenario files.
fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

/// A model file beside the scenarios (`teams/teams.yaml`), for the tests
/// that stay in Rust.
pub fn model_file(path: &str) -> PathBuf {
    dir().join(path)
}

/// Plays `file` (under [`dir`]) with every check on a fresh engine with
/// its model's runtime ([`crate::items::play_scenario`]); panics listing
/// each difference.
async fn play(name: &str, file: &str) {
    let path = dir().join(file);
    assert_eq!(
        path.file_stem().and_then(|s| s.to_str()),
        Some(name),
        "a scenario test is named as its file"
    );
    let env = crate::items::play_scenario(file, |_| {}).await;
    env.engine.stop().await;
}

/// Every scenario file under `tests/scenarios/` is listed (a file left
/// out would prove nothing, silently); the model files beside them
/// (`jobstream: 1`) are not scenarios.
#[test]
fn every_scenario_file_is_listed() {
    let mut found = Vec::new();
    for folder in std::fs::read_dir(dir()).expect("tests/scenarios") {
        let folder = folder.expect("an entry").path();
        for f in std::fs::read_dir(&folder).expect("a model's folder") {
            let path = f.expect("an entry").path();
            let text = std::fs::read_to_string(&path).expect("reads");
            if !text.lines().any(|l| l.starts_with("jobstream:")) {
                let rel = path.strip_prefix(dir()).expect("under the folder");
                found.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    found.sort();
    let mut listed: Vec<String> = LISTED.iter().map(|f| f.to_string()).collect();
    listed.sort();
    assert_eq!(
        found, listed,
        "tests/scenarios/ and the list in scenarios.rs"
    );
}
