//! `--open`: hand the desktop's browser the URL without putting it in any argv.
//!
//! A process's arguments are readable by every uid (`/proc/PID/cmdline`), so the
//! token URL never goes to `xdg-open` directly. Instead it is written into a small
//! HTML page that redirects to it (a meta refresh), in a fresh directory of mode
//! 0700 (under `$XDG_RUNTIME_DIR` when that is a private directory of ours, else
//! the temporary directory) as a file of mode 0600, and `xdg-open` is given that
//! file's `file://` URL. Nothing with the token goes into a child's environment
//! either. The directory is removed when the server stops ([`OpenFile`]'s drop).
//! A sandboxed browser (a snap) may not read such a file: the URL is printed too.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The redirecting page and its directory; both removed on drop.
pub(crate) struct OpenFile {
    dir: PathBuf,
    file: PathBuf,
}

impl OpenFile {
    /// Write the page redirecting to `url`.
    pub fn write(url: &str) -> Result<OpenFile> {
        let dir = base_dir().join(format!("treefork-ui-{}", super::auth::random_hex()?));
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let me = OpenFile {
            file: dir.join("open.html"),
            dir,
        };
        // The umask can only have removed bits; say it exactly.
        fs::set_permissions(&me.dir, fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot chmod {}", me.dir.display()))?;
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&me.file)
            .with_context(|| format!("cannot create {}", me.file.display()))?;
        f.write_all(page(url).as_bytes())
            .and_then(|()| f.sync_all())
            .with_context(|| format!("cannot write {}", me.file.display()))?;
        Ok(me)
    }

    /// The page's path.
    pub fn path(&self) -> &Path {
        &self.file
    }

    /// Start the desktop's browser on the page, without waiting for it; a
    /// failure is a warning (the URL is printed anyway).
    pub fn launch(&self) {
        let spawned = std::process::Command::new("xdg-open")
            .arg(file_url(&self.file))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if let Err(e) = spawned {
            eprintln!("treefork: warning: cannot run xdg-open ({e}): open the URL yourself");
        }
    }
}

impl Drop for OpenFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.file);
        let _ = fs::remove_dir(&self.dir);
    }
}

/// `$XDG_RUNTIME_DIR` when it is an absolute directory of ours that no one else
/// can enter, else the temporary directory (the fresh 0700 directory made inside
/// keeps the page private either way).
fn base_dir() -> PathBuf {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .filter(|d| {
            fs::symlink_metadata(d)
                .is_ok_and(|m| m.is_dir() && m.uid() == me && m.mode() & 0o077 == 0)
        })
        .unwrap_or_else(std::env::temp_dir)
}

/// The page: a meta refresh to `url`, and a link for a browser that does not
/// follow it.
fn page(url: &str) -> String {
    let u = escape(url);
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"0;url={u}\"><link rel=\"icon\" href=\"data:,\">\
         <title>treefork ui</title></head>\n\
         <body><p>Opening <a href=\"{u}\">treefork ui</a>…</p></body></html>\n"
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `file://` and the path, bytes outside the unreserved set and `/` escaped.
fn file_url(p: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut s = String::from("file://");
    for &b in p.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_redirects_to_the_url_escaped() {
        let p = page("http://127.0.0.1:7878/?token=ab&x=\"<");
        assert!(
            p.contains("content=\"0;url=http://127.0.0.1:7878/?token=ab&amp;x=&quot;&lt;\""),
            "{p}"
        );
    }

    #[test]
    fn file_urls_escape_odd_bytes() {
        assert_eq!(
            file_url(Path::new("/run/user/1000/t f%/open.html")),
            "file:///run/user/1000/t%20f%25/open.html"
        );
    }

    #[test]
    fn the_page_is_private_and_goes_with_its_directory() {
        let f = OpenFile::write("http://127.0.0.1:1/?token=00").unwrap();
        let dir = f.path().parent().unwrap().to_path_buf();
        let mode = |p: &Path| fs::symlink_metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(f.path()), 0o600);
        assert!(
            fs::read_to_string(f.path())
                .unwrap()
                .contains("url=http://127.0.0.1:1/?token=00")
        );
        drop(f);
        assert!(!dir.exists());
    }
}
