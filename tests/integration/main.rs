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
mod file_sets;
mod fixtures;
mod graph;
mod history_adoption;
mod hr;
mod import;
mod jobboard;
mod joinset;
mod js;
mod limits;
mod modelfile;
mod operations;
mod pickem;
mod queues;
mod redelivery;
mod social;
mod social_file;
mod stream_consumer;
mod support;
mod tables;
mod tracker;
mod tracker_file;
mod tracker_file_races;
mod ttl;
