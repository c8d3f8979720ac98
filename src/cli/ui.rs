//! `ui`: serve the store's sessions as a local web page.

use super::prelude::*;

/// Serve a local web page showing the store's sessions: timelines, diffs,
/// experiments, promote previews (127.0.0.1 only, your own uid only; the printed
/// URL carries a one-time access token)
#[derive(clap::Args)]
pub struct Ui {
    /// The port to listen on (0: any free port) [default: 7878, or the next free
    /// one of the 20 after it]
    #[arg(long, value_name = "N")]
    port: Option<u16>,
    /// Open the page in the desktop's browser (xdg-open on a private file that
    /// redirects to the URL: the token is in no command line)
    #[arg(long)]
    open: bool,
}

impl Run for Ui {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let store = cx.op_store_dir()?;
        let socket = treefork::control::daemon_socket(&store)?;
        crate::ui::serve(crate::ui::Config {
            socket,
            store,
            port: self.port,
            open: self.open,
        })?;
        Ok(Outcome::Silent)
    }
}
