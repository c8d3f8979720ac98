//! The page, its script and its style, embedded in the binary.
//!
//! `GET /` is `index.html` with the CSRF secret and the store's path filled in
//! (escaped as HTML text); `GET /assets/NAME` serves the fixed files below and
//! nothing else (no file system access).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("assets/index.html");

/// The files under `/assets/`: name, content type, content.
const FILES: &[(&str, &str, &str)] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/app.js"),
    ),
    (
        "graph.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/graph.js"),
    ),
    (
        "diff.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/diff.js"),
    ),
    (
        "util.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/util.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("assets/app.css"),
    ),
];

/// `s` as HTML text (also safe in a double-quoted attribute).
fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

fn typed(kind: &'static str, body: String) -> Response {
    let mut r = body.into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    r
}

/// `GET /`.
pub(crate) async fn index(State(st): State<Arc<super::State>>) -> Response {
    let page = INDEX
        .replace("{{csrf}}", &escape(st.secrets.csrf()))
        .replace("{{store}}", &escape(&st.store));
    typed("text/html; charset=utf-8", page)
}

/// `GET /assets/NAME`.
pub(crate) async fn asset(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, kind, body)) => typed(kind, (*body).to_string()),
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_leaves_no_markup() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn the_page_has_its_placeholders() {
        assert!(INDEX.contains("{{csrf}}") && INDEX.contains("{{store}}"));
    }
}
