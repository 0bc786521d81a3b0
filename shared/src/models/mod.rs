//! The data models: declarative rules over the engine, and their tables.

pub mod jobboard;
pub mod table;
pub mod tracker;
