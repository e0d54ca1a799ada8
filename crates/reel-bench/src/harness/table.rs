//! Tables for the terminal (aligned columns) and for Markdown.

use std::fmt::Write as _;

/// A Markdown table; columns from `right_from` on are right-aligned (the numbers).
pub fn markdown_table(header: &[&str], rows: &[Vec<String>], right_from: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let align: Vec<&str> = (0..header.len())
        .map(|i| if i >= right_from { "---:" } else { "---" })
        .collect();
    let _ = writeln!(out, "|{}|", align.join("|"));
    for row in rows {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out
}

/// A table of aligned columns two spaces apart: the first `left` columns (labels) aligned
/// left, the others (numbers) right; no trailing blanks.
pub fn text_table(header: &[&str], rows: &[Vec<String>], left: usize) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i < left {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string()
    };
    let mut out = line(header.iter().map(ToString::to_string).collect());
    out.push('\n');
    for row in rows {
        out.push_str(&line(row.clone()));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables() {
        let rows = vec![
            vec!["64K".to_string(), "1234".to_string()],
            vec!["1M".to_string(), "5".to_string()],
        ];
        assert_eq!(
            markdown_table(&["size", "MB/s"], &rows, 1),
            "| size | MB/s |\n|---|---:|\n| 64K | 1234 |\n| 1M | 5 |\n"
        );
        assert_eq!(
            text_table(&["size", "MB/s"], &rows, 1),
            "size  MB/s\n64K   1234\n1M       5\n"
        );
        assert_eq!(
            text_table(&["size", "MB/s"], &rows, 0),
            "size  MB/s\n 64K  1234\n  1M     5\n"
        );
    }
}
