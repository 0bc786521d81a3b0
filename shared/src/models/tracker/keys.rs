//! Every key format of the application tracker. Writers (the CLI, tests,
//! the demo) and processors call these same functions.

pub const PK: &str = "PK";
pub const SK: &str = "SK";
pub const GSI1PK: &str = "GSI1PK";
pub const GSI1SK: &str = "GSI1SK";
pub const GSI2PK: &str = "GSI2PK";
pub const GSI2SK: &str = "GSI2SK";
pub const HISTORY_SEQUENCE: &str = "historySequence";

/// Attributes only processors write; writers may omit them.
pub const PROCESSOR_OWNED: [&str; 5] = [GSI1PK, GSI1SK, GSI2PK, GSI2SK, HISTORY_SEQUENCE];

/// `APP#<id>`: partition of an application and its children.
pub fn app_pk(app_id: &str) -> String {
    format!("APP#{app_id}")
}

/// Sort key of the application item itself (same as its PK).
pub fn app_sk(app_id: &str) -> String {
    app_pk(app_id)
}

/// `STAGE#<id>`.
pub fn stage_sk(stage_id: &str) -> String {
    format!("STAGE#{stage_id}")
}

/// `HIST#<8-digit zero-padded sequence>`.
pub fn hist_sk(sequence: u64) -> String {
    format!("HIST#{sequence:08}")
}

pub const META_PK: &str = "META";
pub const COUNT_SK: &str = "COUNT";
pub const COUNT_ATTR: &str = "count";

/// `STATUS#<status>#ARCHIVED#<0|1>`.
pub fn gsi1pk(status: &str, archived: bool) -> String {
    format!("STATUS#{status}#ARCHIVED#{}", u8::from(archived))
}

/// `UPDATED#<updatedAt>#<id>` (GSI1SK and GSI2SK).
pub fn updated_sk(updated_at: &str, app_id: &str) -> String {
    format!("UPDATED#{updated_at}#{app_id}")
}

/// `ACTIVE`: GSI2's only partition, present while not archived.
pub const GSI2_ACTIVE: &str = "ACTIVE";

/// Item kinds, told apart by their sort key prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Application,
    Stage,
    History,
    Meta,
}

/// Classifies a key; `None` for a key this model does not know.
pub fn kind(pk: &str, sk: &str) -> Option<Kind> {
    if pk == META_PK {
        return Some(Kind::Meta);
    }
    let app = pk.strip_prefix("APP#")?;
    if sk == pk {
        Some(Kind::Application)
    } else if sk.starts_with("STAGE#") {
        Some(Kind::Stage)
    } else if sk.starts_with("HIST#") {
        Some(Kind::History)
    } else {
        let _ = app;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_formats() {
        assert_eq!(app_pk("a1"), "APP#a1");
        assert_eq!(stage_sk("s1"), "STAGE#s1");
        assert_eq!(hist_sk(1), "HIST#00000001");
        assert_eq!(hist_sk(12345678), "HIST#12345678");
        assert_eq!(gsi1pk("given offer", true), "STATUS#given offer#ARCHIVED#1");
        assert_eq!(gsi1pk("applied", false), "STATUS#applied#ARCHIVED#0");
        assert_eq!(
            updated_sk("2026-01-01T00:00:00Z", "a1"),
            "UPDATED#2026-01-01T00:00:00Z#a1"
        );
    }

    #[test]
    fn kinds() {
        assert_eq!(kind("APP#1", "APP#1"), Some(Kind::Application));
        assert_eq!(kind("APP#1", "STAGE#2"), Some(Kind::Stage));
        assert_eq!(kind("APP#1", "HIST#00000001"), Some(Kind::History));
        assert_eq!(kind("META", "COUNT"), Some(Kind::Meta));
        assert_eq!(kind("APP#1", "OTHER"), None);
        assert_eq!(kind("USER#1", "USER#1"), None);
    }
}
