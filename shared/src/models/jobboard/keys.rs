//! Every key format of the job board (seed 000), in one place.

pub const PK: &str = "pk";
pub const SK: &str = "sk";
pub const GSI1PK: &str = "GSI1PK";
pub const GSI1SK: &str = "GSI1SK";
pub const TTL: &str = "ttl";
pub const ENTITY_TYPE: &str = "entityType";

/// `<city>` in keys: lower case, spaces to `-`.
pub fn normalize_city(city: &str) -> String {
    city.trim()
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join("-")
}

/// `job#<city>`: jobs and suggestions of a city.
pub fn job_pk(city: &str) -> String {
    format!("job#{}", normalize_city(city))
}

/// `j#<YYYY-MM-DD>#<zip>#<jobId>`: a job's sort key (and its GSI1SK).
pub fn job_sk(posted: &str, zip: &str, job_id: &str) -> String {
    format!("j#{posted}#{zip}#{job_id}")
}

/// `employer#<employerId>`: an employer's partition (profile, requests) and
/// GSI1 partition of its jobs and matches.
pub fn employer_pk(employer_id: &str) -> String {
    format!("employer#{employer_id}")
}

/// `seeker#<seekerId>`: a seeker's partition (profile, matches) and GSI1
/// partition of their requests and suggestions.
pub fn seeker_pk(seeker_id: &str) -> String {
    format!("seeker#{seeker_id}")
}

pub const PROFILE_SK: &str = "profile";

/// `city#<city>`: GSI1 partition of a city's seekers.
pub fn city_gsi1pk(city: &str) -> String {
    format!("city#{}", normalize_city(city))
}

/// `r#<jobId>#<seekerId>`: a request's sort key.
pub fn request_sk(job_id: &str, seeker_id: &str) -> String {
    format!("r#{job_id}#{seeker_id}")
}

/// `r#<YYYY-MM-DD>#<jobId>`: a request's GSI1SK.
pub fn request_gsi1sk(requested: &str, job_id: &str) -> String {
    format!("r#{requested}#{job_id}")
}

/// `s#<jobId>#<seekerId>`: a suggestion's sort key.
pub fn suggestion_sk(job_id: &str, seeker_id: &str) -> String {
    format!("s#{job_id}#{seeker_id}")
}

/// `j#R<1-3>#<YYYY-MM-DD>#<zip>#<jobId>`: a suggestion's GSI1SK.
pub fn suggestion_gsi1sk(level: u8, posted: &str, zip: &str, job_id: &str) -> String {
    format!("j#R{level}#{posted}#{zip}#{job_id}")
}

/// `j#<YYYY-MM-DD>#<jobId>`: a match's sort key.
pub fn match_sk(matched: &str, job_id: &str) -> String {
    format!("j#{matched}#{job_id}")
}

/// `m#<YYYY-MM-DD>#<jobId>#<seekerId>`: a match's GSI1SK.
pub fn match_gsi1sk(matched: &str, job_id: &str, seeker_id: &str) -> String {
    format!("m#{matched}#{job_id}#{seeker_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_formats_of_the_seed() {
        assert_eq!(normalize_city(" New York "), "new-york");
        assert_eq!(job_pk("Montreal"), "job#montreal");
        assert_eq!(job_sk("2023-08-01", "H2X", "101"), "j#2023-08-01#H2X#101");
        assert_eq!(employer_pk("301"), "employer#301");
        assert_eq!(seeker_pk("201"), "seeker#201");
        assert_eq!(city_gsi1pk("San Francisco"), "city#san-francisco");
        assert_eq!(request_sk("101", "201"), "r#101#201");
        assert_eq!(request_gsi1sk("2023-08-02", "101"), "r#2023-08-02#101");
        assert_eq!(suggestion_sk("101", "201"), "s#101#201");
        assert_eq!(
            suggestion_gsi1sk(1, "2023-08-01", "H2X", "101"),
            "j#R1#2023-08-01#H2X#101"
        );
        assert_eq!(match_sk("2023-08-03", "101"), "j#2023-08-03#101");
        assert_eq!(
            match_gsi1sk("2023-08-03", "101", "201"),
            "m#2023-08-03#101#201"
        );
    }
}
