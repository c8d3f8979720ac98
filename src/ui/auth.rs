//! Who may use the web server: the token, the cookie, Host, Origin and CSRF.
//!
//! The URL `treefork ui` prints carries a random token (as Jupyter's does).
//! Opening it sets a cookie holding the token (`HttpOnly`, `SameSite=Strict`,
//! named after the port) and redirects to `/`, so the token leaves the address
//! bar and the history. Every later request needs that cookie. A page cannot be
//! framed or loaded from another name for this address (`Host` must be
//! `127.0.0.1:PORT` or `localhost:PORT`: a DNS-rebinding page sends its own name).
//! `/api` requests but the event stream must also carry `X-Treefork-Csrf`, a second secret that only
//! the served page holds (a cross-site form cannot set a header, and a
//! cross-site script cannot read the page), and any `Origin` they carry must be
//! this server's.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The two secrets of one server run.
pub(crate) struct Secrets {
    token: String,
    csrf: String,
}

impl Secrets {
    /// Fresh random secrets (128 bits each, from the kernel).
    pub fn new() -> anyhow::Result<Secrets> {
        Ok(Secrets {
            token: random_hex()?,
            csrf: random_hex()?,
        })
    }

    /// The token, as the URL carries it.
    pub fn token_hex(&self) -> &str {
        &self.token
    }

    /// The CSRF secret the page is served with.
    pub fn csrf(&self) -> &str {
        &self.csrf
    }
}

fn random_hex() -> anyhow::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| anyhow::anyhow!("cannot read /dev/urandom for the UI's token: {e}"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Equal, in time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn cookie_name(port: u16) -> String {
    format!("treefork_ui_{port}")
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The `token` parameter of a query string.
fn query_token(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "token")
        .map(|(_, v)| v)
}

fn refuse(status: StatusCode, why: &str) -> Response {
    let mut r = (status, format!("treefork ui: {why}\n")).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Whether `value` (a Host header, or an Origin without its scheme) names this
/// server.
fn names_us(value: &str, port: u16) -> bool {
    value == format!("127.0.0.1:{port}") || value == format!("localhost:{port}")
}

/// The checks above, in front of every route; adds the security headers to
/// every answer.
pub(crate) async fn guard(
    State(st): State<Arc<super::State>>,
    req: Request,
    next: Next,
) -> Response {
    let headers = req.headers();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if !host.is_some_and(|h| names_us(h, st.port)) {
        return refuse(
            StatusCode::FORBIDDEN,
            "this server answers only as 127.0.0.1 or localhost: open the URL `treefork ui` printed",
        );
    }
    let name = cookie_name(st.port);
    if req.uri().path() == "/"
        && let Some(t) = query_token(req.uri().query())
    {
        if !same(t, st.secrets.token_hex()) {
            return refuse(StatusCode::UNAUTHORIZED, "wrong token in the URL");
        }
        let set = format!("{name}={t}; Path=/; HttpOnly; SameSite=Strict");
        let mut r = (StatusCode::SEE_OTHER, "").into_response();
        r.headers_mut()
            .insert(header::LOCATION, HeaderValue::from_static("/"));
        if let Ok(v) = HeaderValue::from_str(&set) {
            r.headers_mut().insert(header::SET_COOKIE, v);
        }
        return secured(r);
    }
    if !cookie(headers, &name).is_some_and(|c| same(c, st.secrets.token_hex())) {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "no valid token: open the URL with ?token=… that `treefork ui` printed",
        );
    }
    // EventSource cannot send a header: the event stream (read-only, and
    // unreadable from another origin) needs only the cookie.
    if req.uri().path().starts_with("/api/") && req.uri().path() != "/api/events" {
        let csrf = headers.get("x-treefork-csrf").and_then(|v| v.to_str().ok());
        if !csrf.is_some_and(|c| same(c, st.secrets.csrf())) {
            return refuse(
                StatusCode::FORBIDDEN,
                "missing or wrong X-Treefork-Csrf header",
            );
        }
        let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
        if let Some(o) = origin
            && !o
                .strip_prefix("http://")
                .is_some_and(|o| names_us(o, st.port))
        {
            return refuse(StatusCode::FORBIDDEN, "cross-origin request refused");
        }
    }
    secured(next.run(req).await)
}

/// The headers every answer carries: only our own script, style and data: images
/// run; no framing; no sniffing; no referrer; nothing cached.
fn secured(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_compares_whole_strings() {
        assert!(same("abcd", "abcd"));
        assert!(!same("abcd", "abce"));
        assert!(!same("abcd", "abc"));
        assert!(!same("", "a"));
    }

    #[test]
    fn the_token_comes_from_the_query_and_the_cookie_by_name() {
        assert_eq!(query_token(Some("a=1&token=ff&b=2")), Some("ff"));
        assert_eq!(query_token(Some("tokens=ff")), None);
        assert_eq!(query_token(None), None);
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("x=1; treefork_ui_80=aa"),
        );
        assert_eq!(cookie(&h, "treefork_ui_80"), Some("aa"));
        assert_eq!(cookie(&h, "treefork_ui_8"), None);
    }

    #[test]
    fn only_our_names_are_us() {
        assert!(names_us("127.0.0.1:80", 80));
        assert!(names_us("localhost:80", 80));
        assert!(!names_us("evil.example:80", 80));
        assert!(!names_us("127.0.0.1:81", 80));
        assert!(!names_us("127.0.0.1", 80));
    }
}
