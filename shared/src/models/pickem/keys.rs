//! Every key format of the Pick'Em league (seed 004, SPEC §5.3), in one
//! place, with the zero padding of its sort keys.
//!
//! | item | PK | SK | GSI_PK | GSI_SK |
//! |---|---|---|---|---|
//! | user | `USER#<user>` | `USER` | | |
//! | event | `EVENT` | `EVENT#<YYYY-MM-DD>#<slug>` | `EVENT#<eventId>` | `EVENT` |
//! | match | `EVENT#<eventId>` | `MATCH#<matchId>` | `EVENT#<eventId>` | `MATCH#<order, 2 digits>` |
//! | prediction | `USER#<user>` | `EVENT#<eventId>` | `EVENT#<eventId>` | `SCORE#<points, 3 digits>#<user>` |
//! | standings | `USER#<user>` | `STANDINGS#<year>` | `STANDINGS#<year>` | `SCORE#<points, 5 digits>#<user>` |
//!
//! `<eventId>` is `<YYYY-MM-DD>-<slug>`; its year is its first four
//! characters.

pub const TABLE: &str = "pickem";
pub const PK: &str = "PK";
pub const SK: &str = "SK";
pub const GSI: &str = "GSI";
pub const GSI_PK: &str = "GSI_PK";
pub const GSI_SK: &str = "GSI_SK";
/// The entity type attribute.
pub const TYPE: &str = "type";
/// `USER#<user>` on predictions and standings (the filter of pattern 3).
pub const BELONGSTO: &str = "belongsto";

pub const USER_SK: &str = "USER";
pub const EVENTS_PK: &str = "EVENT";
pub const EVENT_GSI_SK: &str = "EVENT";

pub const USER_PREFIX: &str = "USER#";
pub const EVENT_PREFIX: &str = "EVENT#";
pub const MATCH_PREFIX: &str = "MATCH#";
pub const STANDINGS_PREFIX: &str = "STANDINGS#";
pub const SCORE_PREFIX: &str = "SCORE#";

/// Widths of the padded numbers in sort keys.
pub const ORDER_DIGITS: u32 = 2;
pub const PREDICTION_POINTS_DIGITS: u32 = 3;
pub const STANDINGS_POINTS_DIGITS: u32 = 5;

/// The sort key of the ledger-only version of an event's set of matches
/// (see [`matches_version_key`]).
pub const MATCHES_SK: &str = "MATCHES";

/// `USER#<user>`: a user's partition (profile, predictions, standings) and
/// the `belongsto` of their predictions and standings.
pub fn user_pk(user: &str) -> String {
    format!("{USER_PREFIX}{user}")
}

/// `<YYYY-MM-DD>-<slug>`.
pub fn event_id(date: &str, slug: &str) -> String {
    format!("{date}-{slug}")
}

/// `EVENT#<YYYY-MM-DD>#<slug>`: an event's sort key in the `EVENT` partition.
pub fn event_sk(date: &str, slug: &str) -> String {
    format!("{EVENT_PREFIX}{date}#{slug}")
}

/// `EVENT#<eventId>`: an event's GSI partition (event, matches,
/// predictions), the partition of its matches, a prediction's sort key.
pub fn event_key(event_id: &str) -> String {
    format!("{EVENT_PREFIX}{event_id}")
}

/// The year of an event id (its first four characters).
pub fn year_of(event_id: &str) -> &str {
    event_id.get(..4).unwrap_or(event_id)
}

/// `MATCH#<matchId>`: a match's sort key.
pub fn match_sk(match_id: &str) -> String {
    format!("{MATCH_PREFIX}{match_id}")
}

/// `STANDINGS#<year>`: a standings item's sort key and GSI partition.
pub fn standings_key(year: &str) -> String {
    format!("{STANDINGS_PREFIX}{year}")
}

/// A number zero-padded to `digits`, clamped to the largest value that fits
/// (and to 0 below). Returns the text and whether it was clamped.
pub fn pad(value: i64, digits: u32) -> (String, bool) {
    let max = 10_i64.pow(digits) - 1;
    let clamped = value.clamp(0, max);
    (
        format!("{clamped:0width$}", width = digits as usize),
        clamped != value,
    )
}

/// `MATCH#<order, 2 digits>`: a match's GSI sort key (and whether the
/// order was clamped to 99).
pub fn match_gsi_sk(order: i64) -> (String, bool) {
    let (p, clamped) = pad(order, ORDER_DIGITS);
    (format!("{MATCH_PREFIX}{p}"), clamped)
}

/// `SCORE#<points, 3 digits>#<user>`: a prediction's GSI sort key (and
/// whether the points were clamped to 999).
pub fn prediction_gsi_sk(points: i64, user: &str) -> (String, bool) {
    let (p, clamped) = pad(points, PREDICTION_POINTS_DIGITS);
    (format!("{SCORE_PREFIX}{p}#{user}"), clamped)
}

/// `SCORE#<points, 5 digits>#<user>`: a standings item's GSI sort key (and
/// whether the points were clamped to 99999).
pub fn standings_gsi_sk(points: i64, user: &str) -> (String, bool) {
    let (p, clamped) = pad(points, STANDINGS_POINTS_DIGITS);
    (format!("{SCORE_PREFIX}{p}#{user}"), clamped)
}

/// Key of the ledger-only counter that versions an event's set of matches:
/// each match contributes 1 to it, so the ledger totals of this key change
/// whenever a match is added or removed. The scoring job guards on that
/// version (a match added after it read the event's matches fails its
/// writes). No item with this key ever exists in the table.
pub fn matches_version_key(event_id: &str) -> (String, String) {
    (event_key(event_id), MATCHES_SK.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_formats_of_the_seed() {
        assert_eq!(user_pk("sam"), "USER#sam");
        assert_eq!(
            event_id("2024-03-03", "aew-revolution"),
            "2024-03-03-aew-revolution"
        );
        assert_eq!(
            event_sk("2024-03-03", "aew-revolution"),
            "EVENT#2024-03-03#aew-revolution"
        );
        assert_eq!(
            event_key("2024-03-03-aew-revolution"),
            "EVENT#2024-03-03-aew-revolution"
        );
        assert_eq!(year_of("2024-03-03-aew-revolution"), "2024");
        assert_eq!(match_sk("03973653"), "MATCH#03973653");
        assert_eq!(standings_key("2024"), "STANDINGS#2024");
        assert_eq!(match_gsi_sk(1), ("MATCH#01".into(), false));
        assert_eq!(
            prediction_gsi_sk(140, "sam"),
            ("SCORE#140#sam".into(), false)
        );
        assert_eq!(
            standings_gsi_sk(140, "sam"),
            ("SCORE#00140#sam".into(), false)
        );
        assert_eq!(
            matches_version_key("2024-03-03-x"),
            ("EVENT#2024-03-03-x".into(), "MATCHES".into())
        );
    }

    #[test]
    fn padding_and_clamping() {
        assert_eq!(pad(0, 2), ("00".into(), false));
        assert_eq!(pad(7, 3), ("007".into(), false));
        assert_eq!(pad(99, 2), ("99".into(), false));
        assert_eq!(pad(100, 2), ("99".into(), true));
        assert_eq!(pad(999, 3), ("999".into(), false));
        assert_eq!(pad(1000, 3), ("999".into(), true));
        assert_eq!(pad(99_999, 5), ("99999".into(), false));
        assert_eq!(pad(123_456, 5), ("99999".into(), true));
        assert_eq!(pad(-3, 3), ("000".into(), true));
        assert_eq!(match_gsi_sk(120), ("MATCH#99".into(), true));
        assert_eq!(prediction_gsi_sk(1500, "u"), ("SCORE#999#u".into(), true));
        assert_eq!(
            standings_gsi_sk(100_000, "u"),
            ("SCORE#99999#u".into(), true)
        );
    }

    #[test]
    fn padded_keys_sort_as_their_numbers_where_they_fit() {
        let values = [0_i64, 1, 2, 9, 10, 11, 99, 100, 101, 998, 999];
        for digits in [3_u32, 5] {
            let mut keys: Vec<(String, i64)> = values
                .iter()
                .map(|v| (prediction_or_standings(*v, digits), *v))
                .collect();
            keys.sort();
            let order: Vec<i64> = keys.iter().map(|(_, v)| *v).collect();
            assert_eq!(order, values, "{digits} digits");
        }
        // A clamped value sorts with the largest that fits, never below.
        assert!(prediction_gsi_sk(5000, "a").0 >= prediction_gsi_sk(999, "a").0);
        assert!(prediction_gsi_sk(5000, "a").0 > prediction_gsi_sk(998, "z").0);
    }

    fn prediction_or_standings(v: i64, digits: u32) -> String {
        if digits == 3 {
            prediction_gsi_sk(v, "u").0
        } else {
            standings_gsi_sk(v, "u").0
        }
    }
}
