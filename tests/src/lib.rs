//! Integration tests live in integration/.
