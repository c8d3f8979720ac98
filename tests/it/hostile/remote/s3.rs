//! A small hostile S3 server for the remote-tier attacks: plain HTTP/1.1 on
//! 127.0.0.1 (std::net, a thread per connection), objects in memory, path-style
//! requests, no authentication. It serves what treefork's `object_store` client
//! uses: GET (whole or one `Range: bytes=a-b`), HEAD, ListObjectsV2 (`GET
//! /BUCKET?list-type=2&prefix=P`, one page), PUT (with `If-None-Match: *` and
//! `If-Match: ETAG`), DELETE and DeleteObjects (`POST /BUCKET?delete`). An honest push works against it; the test then
//! reads and rewrites the stored objects directly ([`HostileS3::get`],
//! [`HostileS3::put`]) to craft packs, indexes and refs, and can make chosen keys
//! lie about their bodies ([`Lie`]). The server stops when dropped.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How a key's GET answers dishonestly.
#[derive(Clone, Copy, Debug)]
pub enum Lie {
    /// A whole-object GET declares `declared` bytes (`Content-Length`), sends
    /// at most `sent` bytes of zeros, then closes the connection.
    Declare { declared: u64, sent: u64 },
    /// A range GET answers the `Content-Range` asked for but declares and sends
    /// `sent` bytes of zeros (a body far longer than the range).
    LongRange { sent: u64 },
}

#[derive(Default)]
struct State {
    /// `BUCKET/KEY` -> (bytes, ETag).
    objects: BTreeMap<String, (Vec<u8>, String)>,
    /// Key prefix (`BUCKET/KEY...`) -> lie.
    lies: Vec<(String, Lie)>,
}

/// The running server (see the module docs).
pub struct HostileS3 {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    /// Requests served so far.
    requests: Arc<AtomicU64>,
    /// Body bytes sent by lies so far.
    lied_bytes: Arc<AtomicU64>,
    accept: Option<JoinHandle<()>>,
    port: u16,
}

impl HostileS3 {
    /// Start on a free port of 127.0.0.1.
    pub fn start() -> HostileS3 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind the hostile S3 server");
        let port = l.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let lied_bytes = Arc::new(AtomicU64::new(0));
        let (st, sp, rq, lb) = (
            state.clone(),
            stop.clone(),
            requests.clone(),
            lied_bytes.clone(),
        );
        let accept = std::thread::spawn(move || {
            for c in l.incoming() {
                if sp.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(c) = c else { continue };
                let (st, sp, rq, lb) = (st.clone(), sp.clone(), rq.clone(), lb.clone());
                std::thread::spawn(move || serve(c, &st, &sp, &rq, &lb));
            }
        });
        HostileS3 {
            endpoint: format!("http://127.0.0.1:{port}"),
            state,
            stop,
            requests,
            lied_bytes,
            accept: Some(accept),
            port,
        }
    }

    /// The stored bytes of `BUCKET/KEY`.
    pub fn get(&self, path: &str) -> Option<Vec<u8>> {
        self.state
            .lock()
            .unwrap()
            .objects
            .get(path)
            .map(|(b, _)| b.clone())
    }

    /// Store `bytes` at `BUCKET/KEY` (a new ETag).
    pub fn put(&self, path: &str, bytes: Vec<u8>) {
        let e = etag(&bytes);
        self.state
            .lock()
            .unwrap()
            .objects
            .insert(path.to_string(), (bytes, e));
    }

    /// Remove `BUCKET/KEY`.
    pub fn delete(&self, path: &str) {
        self.state.lock().unwrap().objects.remove(path);
    }

    /// Every stored `BUCKET/KEY` starting with `prefix`.
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        self.state
            .lock()
            .unwrap()
            .objects
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// From now on, GETs of keys starting with `prefix` answer with `lie`.
    pub fn lie(&self, prefix: &str, lie: Lie) {
        self.state
            .lock()
            .unwrap()
            .lies
            .push((prefix.to_string(), lie));
    }

    /// Requests served so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// Body bytes the lies sent so far.
    pub fn lied_bytes(&self) -> u64 {
        self.lied_bytes.load(Ordering::SeqCst)
    }
}

impl Drop for HostileS3 {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn etag(b: &[u8]) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    format!("\"{}-{n}\"", &blake3::hash(b).to_hex()[..16])
}

fn pct_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let h = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(h, 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

const DATE: &str = "Thu, 01 Jan 2026 00:00:00 GMT";

struct Request {
    method: String,
    path: String,
    query: BTreeMap<String, String>,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

fn read_request(r: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let mut body = Vec::new();
    if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.contains("chunked"))
    {
        loop {
            let mut sz = String::new();
            r.read_line(&mut sz).ok()?;
            let n = usize::from_str_radix(sz.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0u8; n + 2];
            r.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = headers.get("content-length") {
        body = vec![0u8; n.parse().ok()?];
        r.read_exact(&mut body).ok()?;
    }
    let (path, q) = target.split_once('?').unwrap_or((&target, ""));
    let query = q
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (pct_decode(k), pct_decode(v))
        })
        .collect();
    Some(Request {
        method,
        path: pct_decode(path.trim_start_matches('/')),
        query,
        headers,
        body,
    })
}

fn respond(w: &mut TcpStream, status: &str, headers: &[(&str, String)], body: &[u8]) -> bool {
    let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    w.write_all(head.as_bytes()).is_ok() && w.write_all(body).is_ok()
}

/// Send `n` zero bytes (stops at the first write error: the client hung up).
fn zeros(w: &mut TcpStream, n: u64, lied: &AtomicU64) {
    let buf = vec![0u8; 64 << 10];
    let mut left = n;
    while left > 0 {
        let k = left.min(buf.len() as u64) as usize;
        if w.write_all(&buf[..k]).is_err() {
            return;
        }
        lied.fetch_add(k as u64, Ordering::SeqCst);
        left -= k as u64;
    }
}

fn not_found(w: &mut TcpStream, head_only: bool) -> bool {
    let body: &[u8] = if head_only {
        b""
    } else {
        b"<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>"
    };
    respond(w, "404 Not Found", &[], body)
}

fn serve(c: TcpStream, st: &Mutex<State>, stop: &AtomicBool, rq: &AtomicU64, lied: &AtomicU64) {
    let _ = c.set_read_timeout(Some(Duration::from_secs(30)));
    let mut w = match c.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    let mut r = BufReader::new(c);
    while !stop.load(Ordering::SeqCst) {
        let Some(req) = read_request(&mut r) else {
            return;
        };
        rq.fetch_add(1, Ordering::SeqCst);
        if !answer(&mut w, req, st, lied) {
            return;
        }
    }
}

/// Answer one request; `false` closes the connection.
fn answer(w: &mut TcpStream, req: Request, st: &Mutex<State>, lied: &AtomicU64) -> bool {
    let path = req.path.clone();
    match req.method.as_str() {
        "GET" if req.query.get("list-type").is_some_and(|v| v == "2") => {
            let bucket = path.trim_end_matches('/');
            let prefix = req.query.get("prefix").cloned().unwrap_or_default();
            let full = format!("{bucket}/{prefix}");
            let s = st.lock().unwrap();
            let mut xml = String::from(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult><IsTruncated>false</IsTruncated>",
            );
            for (k, (b, e)) in s.objects.range(full.clone()..) {
                if !k.starts_with(&full) {
                    break;
                }
                let key = &k[bucket.len() + 1..];
                xml.push_str(&format!(
                    "<Contents><Key>{}</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified><ETag>{}</ETag><Size>{}</Size><StorageClass>STANDARD</StorageClass></Contents>",
                    xml_escape(key),
                    xml_escape(e),
                    b.len()
                ));
            }
            xml.push_str("</ListBucketResult>");
            drop(s);
            respond(
                w,
                "200 OK",
                &[("Content-Type", "application/xml".into())],
                xml.as_bytes(),
            )
        }
        m @ ("GET" | "HEAD") => {
            let head_only = m == "HEAD";
            let (obj, lie) = {
                let s = st.lock().unwrap();
                let lie = s
                    .lies
                    .iter()
                    .rev()
                    .find(|(p, _)| path.starts_with(p.as_str()))
                    .map(|(_, l)| *l);
                (s.objects.get(&path).cloned(), lie)
            };
            let Some((bytes, e)) = obj else {
                return not_found(w, head_only);
            };
            let range = req.headers.get("range").and_then(|r| {
                let (a, b) = r.strip_prefix("bytes=")?.split_once('-')?;
                let a: u64 = a.parse().ok()?;
                let b: u64 = b.parse().ok().unwrap_or(bytes.len() as u64 - 1);
                Some((a, b.min(bytes.len() as u64 - 1)))
            });
            let meta = |len: u64| {
                vec![
                    ("ETag", e.clone()),
                    ("Last-Modified", DATE.to_string()),
                    ("Accept-Ranges", "bytes".to_string()),
                    ("Content-Length", len.to_string()),
                ]
            };
            let write_head = |w: &mut TcpStream, status: &str, hs: Vec<(&str, String)>| {
                let mut head = format!("HTTP/1.1 {status}\r\n");
                for (k, v) in hs {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
                head.push_str("\r\n");
                w.write_all(head.as_bytes()).is_ok()
            };
            match (range, lie, head_only) {
                (None, Some(Lie::Declare { declared, sent }), false) => {
                    if write_head(w, "200 OK", meta(declared)) {
                        zeros(w, sent.min(declared), lied);
                    }
                    false
                }
                (Some((a, b)), Some(Lie::LongRange { sent }), false) => {
                    let mut hs = meta(sent);
                    hs.push(("Content-Range", format!("bytes {a}-{b}/{}", bytes.len())));
                    if write_head(w, "206 Partial Content", hs) {
                        zeros(w, sent, lied);
                    }
                    false
                }
                (Some((a, b)), _, _) if a <= b && (b as usize) < bytes.len() => {
                    let body = &bytes[a as usize..=b as usize];
                    let mut hs = meta(body.len() as u64);
                    hs.push(("Content-Range", format!("bytes {a}-{b}/{}", bytes.len())));
                    write_head(w, "206 Partial Content", hs)
                        && (head_only || w.write_all(body).is_ok())
                }
                (Some(_), _, _) => respond(w, "416 Range Not Satisfiable", &[], b""),
                (None, _, _) => {
                    write_head(w, "200 OK", meta(bytes.len() as u64))
                        && (head_only || w.write_all(&bytes).is_ok())
                }
            }
        }
        "PUT" => {
            let mut s = st.lock().unwrap();
            let cur = s.objects.get(&path).map(|(_, e)| e.clone());
            let refused = match (
                req.headers.get("if-none-match"),
                req.headers.get("if-match"),
            ) {
                (Some(v), _) if v == "*" => cur.is_some(),
                (_, Some(m)) => cur.as_deref() != Some(m.as_str()),
                _ => false,
            };
            if refused {
                drop(s);
                return respond(
                    w,
                    "412 Precondition Failed",
                    &[],
                    b"<?xml version=\"1.0\"?><Error><Code>PreconditionFailed</Code><Message>precondition</Message></Error>",
                );
            }
            let e = etag(&req.body);
            s.objects.insert(path, (req.body, e.clone()));
            drop(s);
            respond(w, "200 OK", &[("ETag", e)], b"")
        }
        "POST" if req.query.contains_key("delete") => {
            // DeleteObjects: `<Delete><Object><Key>K</Key></Object>...</Delete>`.
            let bucket = path.trim_end_matches('/');
            let text = String::from_utf8_lossy(&req.body).into_owned();
            let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?><DeleteResult>");
            let mut s = st.lock().unwrap();
            for part in text.split("<Key>").skip(1) {
                let Some((key, _)) = part.split_once("</Key>") else {
                    continue;
                };
                let key = key
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&amp;", "&");
                s.objects.remove(&format!("{bucket}/{key}"));
                xml.push_str(&format!(
                    "<Deleted><Key>{}</Key></Deleted>",
                    xml_escape(&key)
                ));
            }
            drop(s);
            xml.push_str("</DeleteResult>");
            respond(
                w,
                "200 OK",
                &[("Content-Type", "application/xml".into())],
                xml.as_bytes(),
            )
        }
        "DELETE" => {
            st.lock().unwrap().objects.remove(&path);
            respond(w, "204 No Content", &[], b"")
        }
        _ => respond(w, "405 Method Not Allowed", &[], b""),
    }
}
