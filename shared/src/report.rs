//! Plain-text tables for demos and reports.

use aws_sdk_dynamodb::types::AttributeValue;

use crate::item::Item;

/// Renders rows as an aligned text table.
pub fn render_table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        cells
            .iter()
            .enumerate()
            // Padded by hand: `format!`'s width stops at 65,535.
            .map(|(i, c)| format!("{c}{}", " ".repeat(widths[i] - c.chars().count())))
            .collect::<Vec<_>>()
            .join(" | ")
            .trim_end()
            .to_string()
    };
    let mut out = vec![line(headers.to_vec())];
    out.push(
        widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .join("-+-"),
    );
    for r in rows {
        out.push(line(r.iter().map(String::as_str).collect()));
    }
    out.join("\n")
}

/// Readable rows of items: the given attributes (`-` when absent).
pub fn rows(items: &[Item], attrs: &[&str]) -> Vec<Vec<String>> {
    items
        .iter()
        .map(|i| {
            attrs
                .iter()
                .map(|a| match i.get(*a) {
                    Some(AttributeValue::S(v)) => v.clone(),
                    Some(AttributeValue::N(v)) => v.clone(),
                    Some(AttributeValue::Bool(v)) => v.to_string(),
                    Some(AttributeValue::Ss(v)) => v.join(","),
                    Some(_) => "?".into(),
                    None => "-".into(),
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_aligned() {
        let t = render_table(&["a", "bb"], &[vec!["xyz".into(), "1".into()]]);
        assert_eq!(t, "a   | bb\n----+---\nxyz | 1");
    }

    /// A value of 65,536 characters or more (a long title) is a cell like
    /// any other: `format!`'s width stops at 65,535 and panicked (user6's
    /// U02: `query` and `demo` exited 101).
    #[test]
    fn a_cell_past_65535_characters_is_padded_like_any_other() {
        let long = "x".repeat(70_000);
        let t = render_table(
            &["title", "n"],
            &[vec![long.clone(), "1".into()], vec!["a".into(), "2".into()]],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[2], format!("{long} | 1"));
        assert_eq!(lines[3], format!("a{} | 2", " ".repeat(69_999)));
        assert_eq!(lines[0], format!("title{} | n", " ".repeat(69_995)));
    }
}
