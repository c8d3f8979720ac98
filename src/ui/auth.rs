//! Who may use the web server: the peer's uid, the one-time token, the session
//! cookie, Host, Origin and CSRF.
//!
//! Every connection is first checked by its peer: the uid owning the client's
//! socket ([`super::peer`], from `/proc/net/tcp`) must be this process's effective
//! uid, or every request on it is refused (403). Another user holding the URL or
//! the cookie gets nothing; a process of the same user is the user.
//!
//! The URL `treefork ui` prints carries a random token (128 bits). It works once:
//! the first request carrying it is answered with a separate random session
//! cookie (128 bits from the kernel, not derived from the token; `HttpOnly`,
//! `SameSite=Strict`, `Path=/`, named after the port) and a page that moves on to
//! `/` (a meta refresh: a same-site navigation, so the strict cookie is sent even
//! when the link was opened from a file or another site), so the token leaves the
//! address bar and the history. From then on the token is refused with a page
//! saying the link was used; every request needs the cookie. A browser sends its
//! cookies for 127.0.0.1 to every port of it: another server there receives the
//! session cookie, which is why the peer check, not the cookie, stops other users.
//!
//! A page cannot be framed or loaded from another name for this address (`Host`
//! must be `127.0.0.1:PORT` or `localhost:PORT`: a DNS-rebinding page sends its own
//! name). `/api` requests but the event stream must also carry `X-Treefork-Csrf`,
//! a second secret that only the served page holds (a cross-site form cannot set a
//! header, and a cross-site script cannot read the page), and any `Origin` they
//! carry must be this server's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The secrets of one server run.
pub(crate) struct Secrets {
    /// In the printed URL; good for one exchange.
    token: String,
    /// Set once the token was exchanged.
    used: AtomicBool,
    /// The session cookie's value, handed out at the exchange.
    session: String,
    csrf: String,
}

impl Secrets {
    /// Fresh random secrets (128 bits each, from the kernel, drawn separately).
    pub fn new() -> anyhow::Result<Secrets> {
        Ok(Secrets {
            token: random_hex()?,
            used: AtomicBool::new(false),
            session: random_hex()?,
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

pub(crate) fn random_hex() -> anyhow::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| anyhow::anyhow!("cannot read /dev/urandom for the UI's secrets: {e}"))?;
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
    let peer = req
        .extensions()
        .get::<ConnectInfo<super::peer::Peer>>()
        .map(|ConnectInfo(p)| p.clone());
    if let Some(r) = peer_refusal(peer).await {
        return r;
    }
    let headers = req.headers();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if !host.is_some_and(|h| names_us(h, st.port)) {
        return refuse(
            StatusCode::FORBIDDEN,
            "this server answers only as 127.0.0.1 or localhost: open the URL `treefork ui` printed",
        );
    }
    if req.uri().path() == "/"
        && let Some(t) = query_token(req.uri().query())
    {
        return exchange(&st, t);
    }
    let name = cookie_name(st.port);
    let session = st
        .secrets
        .used
        .load(Ordering::SeqCst)
        .then_some(&st.secrets.session);
    if !cookie(headers, &name).is_some_and(|c| session.is_some_and(|s| same(c, s))) {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "no valid session: open the URL with ?token=… that `treefork ui` printed",
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

/// The refusal of a request whose connection does not come from this process's
/// own uid; `None` when it does.
async fn peer_refusal(peer: Option<super::peer::Peer>) -> Option<Response> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let uid = match peer {
        Some(p) => p.uid().await,
        None => None,
    };
    match uid {
        Some(u) if u == me => None,
        Some(u) => Some(refuse(
            StatusCode::FORBIDDEN,
            &format!(
                "refused: this connection comes from uid {u}; this server answers only uid {me}"
            ),
        )),
        None => Some(refuse(
            StatusCode::FORBIDDEN,
            "refused: cannot tell which user this connection comes from",
        )),
    }
}

/// The token of the URL, once: a session cookie and a page moving on to `/`.
fn exchange(st: &super::State, t: &str) -> Response {
    if !same(t, st.secrets.token_hex()) {
        return refuse(StatusCode::UNAUTHORIZED, "wrong token in the URL");
    }
    if st.secrets.used.swap(true, Ordering::SeqCst) {
        return refuse(
            StatusCode::FORBIDDEN,
            "this link was used already (it works once). Use the tab it opened, \
             or run `treefork ui` again for a new link.",
        );
    }
    let set = format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict",
        cookie_name(st.port),
        st.secrets.session
    );
    let mut r = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        MOVE_ON,
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&set) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    secured(r)
}

/// The page answering the exchange: on to `/`, initiated by this origin (no
/// favicon request: there is none).
const MOVE_ON: &str = "<!DOCTYPE html><html><head><meta charset=\"utf-8\">\
<meta http-equiv=\"refresh\" content=\"0;url=/\"><link rel=\"icon\" href=\"data:,\">\
<title>treefork ui</title></head>\
<body><p><a href=\"/\">Continue to treefork ui</a></p></body></html>\n";

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
