//! Integration tests: the processors against the embedded DynamoDB engine
//! (Dynoxide over HTTP, through the AWS SDK), one fresh engine per test.

mod backfill;
mod bad_input;
mod cli;
mod counters;
mod deployed;
mod engine;
mod explain;
mod faults;
mod fidelity;
mod file_board;
mod file_once;
mod file_sets;
mod fixtures;
mod graph;
mod history_adoption;
mod hr;
mod hr_rules;
mod import;
mod invoices;
mod jobboard;
mod joinset;
mod js;
mod limits;
mod meter;
mod modelfile;
mod operations;
mod pickem;
mod pickem_file;
mod queries;
mod queues;
mod redelivery;
#[path = "../../cli/benches/common/seed_items.rs"]
mod seed_items;
mod social;
mod social_file;
mod stream_consumer;
mod support;
mod tables;
mod tracker;
mod tracker_file;
mod tracker_file_races;
mod ttl;
