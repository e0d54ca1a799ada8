//! Writing what a run measured: `results.json` (everything, for `--from-json` and for other
//! tools), `RESULTS.md` (the tables) and the SVG charts next to it. Output directories are
//! checked before a benchmark starts, so a long run does not end in a write error.

use std::fs;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use serde::Serialize;

use super::chart::LineChart;

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Refuses output files whose directory does not exist, before a benchmark starts.
pub fn check_output_dirs<'a>(paths: impl IntoIterator<Item = &'a Path>) -> anyhow::Result<()> {
    for path in paths {
        if path.as_os_str().is_empty() {
            bail!("empty output file name");
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            bail!(
                "{}: directory {} does not exist",
                path.display(),
                dir.display()
            );
        }
    }
    Ok(())
}

/// Writes `value` as pretty JSON with a final newline.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    write_text(path, &(text + "\n"))
}

/// Writes `text` to `path`, naming the path in the error.
pub fn write_text(path: &Path, text: &str) -> anyhow::Result<()> {
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Writes each `(file name, chart)` into `dir` and returns `(title, link)` of each, the link
/// relative to the Markdown file `markdown` when that is in or above `dir` (the file name
/// otherwise).
pub fn write_charts(
    dir: &Path,
    charts: &[(String, LineChart)],
    markdown: Option<&Path>,
) -> anyhow::Result<Vec<(String, String)>> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let base = markdown.map(|md| md.parent().unwrap_or(Path::new("")));
    let mut out = Vec::new();
    for (file, chart) in charts {
        let path = dir.join(file);
        write_text(&path, &chart.render())?;
        let link = match base {
            Some(base) => path
                .strip_prefix(base)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned(),
            None => file.clone(),
        };
        out.push((chart.title.clone(), link));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_output_directories_are_named() {
        let dir = tempfile::tempdir().unwrap();
        check_output_dirs([dir.path().join("r.json").as_path(), Path::new("x.md")]).unwrap();
        let e = check_output_dirs([dir.path().join("no/r.json").as_path()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist"), "{e}");
    }

    #[test]
    fn charts_are_linked_relative_to_the_markdown() {
        let dir = tempfile::tempdir().unwrap();
        let chart = LineChart {
            title: "T".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_ticks: Vec::new(),
            series: Vec::new(),
            rules: Vec::new(),
            bars: false,
        };
        let charts = [("a.svg".to_string(), chart)];
        let md = dir.path().join("RESULTS.md");
        let links = write_charts(&dir.path().join("c"), &charts, Some(&md)).unwrap();
        assert_eq!(links, [("T".to_string(), "c/a.svg".to_string())]);
        assert!(dir.path().join("c/a.svg").is_file());
    }
}
