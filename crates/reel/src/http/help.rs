//! The user guide (`docs/guide/`) served by the console under Help: its Markdown rendered to
//! HTML on request, with the configuration files it shows and the compatibility documents it
//! links. Everything is embedded in the binary at build time, so the guide a server shows is
//! the guide of the version it runs.

use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};

#[derive(rust_embed::Embed)]
#[folder = "../../docs/"]
#[include = "guide/*.md"]
#[include = "guide/examples/*"]
#[include = "compatibility.md"]
#[include = "compatibility-matrix.md"]
struct Docs;

/// Where Help starts.
pub const START: &str = "/docs/guide/README.md";

pub async fn start() -> Redirect {
    Redirect::to(START)
}

/// `/docs/{path}`: a Markdown page as HTML, anything else (the example configuration files) as
/// plain text.
pub async fn page(uri: Uri) -> Response {
    let path = uri.path().trim_start_matches("/docs/");
    let Some(file) = Docs::get(path) else {
        return (
            StatusCode::NOT_FOUND,
            format!("the guide has no page {path}; it starts at {START}"),
        )
            .into_response();
    };
    let (body, mime) = if path.ends_with(".md") {
        let text = String::from_utf8_lossy(&file.data);
        (render(&text).into_bytes(), "text/html; charset=utf-8")
    } else {
        (file.data.into_owned(), "text/plain; charset=utf-8")
    };
    let mut response = body.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    response
}

/// A whole HTML page for one Markdown document, styled by the console's stylesheet.
fn render(markdown: &str) -> String {
    use pulldown_cmark::{Options, Parser, html};
    let title = markdown
        .lines()
        .find_map(|l| l.strip_prefix("# "))
        .unwrap_or("reel user guide");
    let mut body = String::with_capacity(markdown.len() * 2);
    html::push_html(&mut body, Parser::new_ext(markdown, Options::ENABLE_TABLES));
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} — reel help</title><link rel=\"stylesheet\" href=\"/app.css\"></head>\
         <body class=\"help-page\"><header class=\"help-header\"><a href=\"/\">reel console</a> · \
         <a href=\"{START}\">user guide</a></header><main id=\"main\" class=\"help\">{body}</main>\
         </body></html>\n",
        escape(title)
    )
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The guide's copies of included files (checked by the tests below): every `<!-- include: examples/NAME ... -->` line and
/// the fenced block after it, as (NAME, block text).
#[cfg(test)]
fn included_copies(markdown: &str) -> Vec<(String, String)> {
    let mut copies = Vec::new();
    let mut lines = markdown.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim().strip_prefix("<!-- include: ") else {
            continue;
        };
        let name = rest.split_whitespace().next().unwrap_or("").to_string();
        let mut block = String::new();
        let mut inside = false;
        for line in lines.by_ref() {
            if line.starts_with("```") {
                if inside {
                    break;
                }
                inside = true;
            } else if inside {
                block.push_str(line);
                block.push('\n');
            }
        }
        copies.push((name, block));
    }
    copies
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guide's Bacula and Amanda pages show exactly the files the VM test runs
    /// (`tests/vm/tape-checks.sh` renders `docs/guide/examples/*.conf`).
    #[test]
    fn guide_pages_show_the_tested_files_exactly() {
        let mut checked = Vec::new();
        for page in ["guide/bacula.md", "guide/amanda.md"] {
            let text = String::from_utf8(Docs::get(page).unwrap().data.into_owned()).unwrap();
            for (name, copy) in included_copies(&text) {
                let file = Docs::get(&format!("guide/{name}"))
                    .unwrap_or_else(|| panic!("{page} includes {name}, which does not exist"));
                assert_eq!(
                    copy,
                    String::from_utf8_lossy(&file.data),
                    "{page}: the copy of {name} differs from the file (copy the file into the page)"
                );
                checked.push(name);
            }
        }
        checked.sort();
        let mut examples: Vec<String> = Docs::iter()
            .filter_map(|p| p.strip_prefix("guide/").map(str::to_string))
            .filter(|p| p.starts_with("examples/"))
            .collect();
        examples.sort();
        assert_eq!(
            checked, examples,
            "every tested file is shown by a page, once"
        );
    }

    #[test]
    fn included_copies_finds_the_block_after_the_marker() {
        let md = "text\n<!-- include: examples/a.conf (x) -->\n```\nline 1\nline 2\n```\nafter\n";
        assert_eq!(
            included_copies(md),
            vec![(
                "examples/a.conf".to_string(),
                "line 1\nline 2\n".to_string()
            )]
        );
    }

    #[test]
    fn pages_render_with_their_title_and_tables() {
        let html = render("# Bacula & co\n\n| a | b |\n|---|---|\n| 1 | 2 |\n");
        assert!(
            html.contains("<title>Bacula &amp; co — reel help</title>"),
            "{html}"
        );
        assert!(html.contains("<table>"), "{html}");
        for page in Docs::iter().filter(|p| p.ends_with(".md")) {
            let text = String::from_utf8(Docs::get(&page).unwrap().data.into_owned()).unwrap();
            assert!(render(&text).contains("<h1>"), "{page} has no title");
        }
    }
}
