//! Writing what a run measured: `results.json` (everything, for `--from-json` and for other
//! tools), `RESULTS.md` (the tables) and the SVG charts next to it. Output directories are
//! checked before a benchmark starts, so a long run does not end in a write error.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::chart::LineChart;

/// What a benchmark writes, and where: the same four flags on every benchmark.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ReportFlags {
    /// Write the whole report (every figure, every repetition or sample) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the report as Markdown (the charts linked relative to it).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Write the charts (SVG) into DIR.
    #[arg(long, value_name = "DIR")]
    pub charts: Option<PathBuf>,
    /// Measure nothing: print the report a previous run wrote with --json, and write its
    /// --markdown and --charts again (after a change to the report's layout).
    #[arg(long, value_name = "FILE")]
    pub from_json: Option<PathBuf>,
}

impl ReportFlags {
    /// Refuses empty file names (no I/O: part of checking the command line).
    pub fn check_names(&self) -> anyhow::Result<()> {
        for (flag, path) in [
            ("json", &self.json),
            ("markdown", &self.markdown),
            ("charts", &self.charts),
        ] {
            if path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                bail!("--{flag}: empty file name");
            }
        }
        Ok(())
    }

    /// Checks, before anything is measured, that the files can be written: their names, and
    /// that their directories exist (the charts' is created).
    pub fn check(&self) -> anyhow::Result<()> {
        self.check_names()?;
        check_output_dirs(
            [&self.json, &self.markdown]
                .into_iter()
                .flatten()
                .map(PathBuf::as_path),
        )?;
        if let Some(dir) = &self.charts {
            fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        Ok(())
    }

    /// The report `--from-json` names, if it does.
    pub fn from_json<T: DeserializeOwned>(&self, what: &str) -> anyhow::Result<Option<T>> {
        let Some(path) = &self.from_json else {
            return Ok(None);
        };
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text)
            .map(Some)
            .with_context(|| format!("{}: not a {what} report", path.display()))
    }

    /// The report: `--from-json`'s, or what `measure` returns once the output files have been
    /// checked.
    pub fn measure_or_replay<T: DeserializeOwned>(
        &self,
        what: &str,
        measure: impl FnOnce() -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        match self.from_json(what)? {
            Some(report) => Ok(report),
            None => {
                self.check()?;
                measure()
            }
        }
    }

    /// Writes the `charts`, the JSON (of a measured report only: `--from-json` leaves its
    /// file alone) and the Markdown that `markdown` makes with the charts' (title, link);
    /// returns that Markdown.
    pub fn write<T: Serialize>(
        &self,
        report: &T,
        charts: &[(String, LineChart)],
        markdown: impl FnOnce(&[(String, String)]) -> String,
    ) -> anyhow::Result<String> {
        let links = match &self.charts {
            Some(dir) => write_charts(dir, charts, self.markdown.as_deref())?,
            None => Vec::new(),
        };
        if let Some(path) = self.json.as_ref().filter(|_| self.from_json.is_none()) {
            write_json(path, report)?;
        }
        let text = markdown(&links);
        if let Some(path) = &self.markdown {
            write_text(path, &text)?;
        }
        Ok(text)
    }
}

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
