//! `remote add|list|rm|trust`: configure the S3-compatible remotes of the store.
//! Store-wide: through the daemon when one serves the store, else in this
//! process. `remote add` hands the credentials of this process's environment to
//! the daemon (only on the store's own socket, never on an explicit one).

use super::prelude::*;
use treefork::remote::RemoteConfig;

type RemoteAdded = treefork::remote::serve::remote_add::RemoteAdded;
type RemotesListed = treefork::remote::serve::remote_list::RemotesListed;
type RemoteRemoved = treefork::remote::serve::remote_rm::RemoteRemoved;
type Trusted = treefork::remote::serve::remote_trust::Trusted;

/// Manage remotes (S3-compatible object storage for push, pull and lazy mounts).
#[derive(clap::Args)]
pub struct Remote {
    #[command(subcommand)]
    cmd: RemoteCmd,
}

#[derive(clap::Subcommand)]
enum RemoteCmd {
    /// Add a remote after probing the server (it must honour conditional writes
    /// unless --single-writer). Credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY
    /// (AWS_SESSION_TOKEN) of this command's environment, handed to the running
    /// daemon and kept in its memory only; else the daemon's own environment or
    /// AWS credentials file. Never stored. Adding the same remote again refreshes
    /// its credentials.
    Add {
        /// Remote name (a letter, then letters, digits, '_', '.', '-').
        name: String,
        /// Where: s3://BUCKET/PREFIX.
        url: String,
        /// The server: http(s)://HOST[:PORT].
        #[arg(long)]
        endpoint: String,
        /// Region.
        #[arg(long, default_value = "us-east-1")]
        region: String,
        /// This store is the remote's only writer: accept a server that ignores
        /// conditional writes.
        #[arg(long)]
        single_writer: bool,
    },
    /// List the configured remotes.
    List,
    /// Forget a remote (its config, tracking refs and local cache; nothing on
    /// the remote is deleted).
    Rm {
        /// Remote name.
        name: String,
    },
    /// Trust the origin (the repository promote writes to) and eviction policy
    /// that a session made with `mount --from-remote` was pulled with: until
    /// then they are shown (`session show`) but not used. Check them first.
    Trust {
        /// The local session.
        session: String,
    },
    Gc(super::remote_gc::RemoteGc),
}

/// The credentials of this process's environment, if both keys are set.
fn env_credentials() -> Option<treefork::verbs::remote_add::RemoteCredentials> {
    use treefork::remote::creds::{ENV_KEY_ID, ENV_SECRET, ENV_TOKEN};
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    Some(treefork::verbs::remote_add::RemoteCredentials {
        key_id: var(ENV_KEY_ID)?,
        secret: var(ENV_SECRET)?,
        token: var(ENV_TOKEN),
    })
}

/// One remote's line: `NAME\tURL at ENDPOINT [REGION] (flags)`.
fn line(c: &RemoteConfig) -> String {
    let mut flags = Vec::new();
    if c.single_writer {
        flags.push("single writer");
    }
    if !c.conditional_writes {
        flags.push("no conditional writes");
    }
    let flags = if flags.is_empty() {
        String::new()
    } else {
        format!(" ({})", flags.join(", "))
    };
    format!(
        "{}\t{} at {} [{}]{flags}",
        c.name, c.url, c.endpoint, c.region
    )
}

impl Human for RemoteAdded {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let verb = if self.updated {
            "updated (credentials and probe) remote"
        } else {
            "added remote"
        };
        writeln!(out, "{verb} {}", line(&self.remote))?;
        for f in &self.probe_failures {
            writeln!(out, "warning: the server does not honour {f}")?;
        }
        Ok(())
    }
}

impl Human for RemotesListed {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.remotes.is_empty() {
            return writeln!(
                out,
                "no remotes (add one: treefork remote add NAME s3://BUCKET/PREFIX --endpoint URL)"
            );
        }
        for r in &self.remotes {
            writeln!(out, "{}", line(r))?;
        }
        Ok(())
    }
}

impl Human for Trusted {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "session {}: origin {} (from remote {}) and its policy are now used",
            self.session,
            self.origin
                .as_deref()
                .map_or("none".into(), |p| p.to_string_lossy()),
            self.remote.as_deref().unwrap_or("?")
        )
    }
}

impl Human for RemoteRemoved {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "removed remote {} ({} tracking ref(s) dropped; nothing on the remote was deleted)",
            self.removed, self.tracking_refs
        )
    }
}

impl Run for Remote {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        Ok(match &self.cmd {
            RemoteCmd::Add {
                name,
                url,
                endpoint,
                region,
                single_writer,
            } => {
                let op = Request::RemoteAdd(treefork::verbs::RemoteAdd {
                    name: name.clone(),
                    url: url.clone(),
                    endpoint: endpoint.clone(),
                    region: Some(region.clone()),
                    single_writer: *single_writer,
                    credentials: cx.own_socket_only(env_credentials()),
                });
                cx.store_op_creating::<RemoteAdded>(op, false)?.into()
            }
            RemoteCmd::List => cx
                .store_op::<RemotesListed>(
                    Request::RemoteList(treefork::verbs::RemoteList {}),
                    false,
                )?
                .into(),
            RemoteCmd::Rm { name } => {
                let op = Request::RemoteRm(treefork::verbs::RemoteRm { name: name.clone() });
                cx.store_op::<RemoteRemoved>(op, false)?.into()
            }
            RemoteCmd::Trust { session } => {
                let op = Request::RemoteTrust(treefork::verbs::RemoteTrust {
                    name: session.clone(),
                });
                cx.store_op::<Trusted>(op, false)?.into()
            }
            RemoteCmd::Gc(gc) => gc.run(cx)?,
        })
    }
}
