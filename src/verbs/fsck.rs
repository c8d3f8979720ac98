//! `fsck`: verify the store (and with `repair`, fix what can be fixed; store offline only).

use super::prelude::*;

/// Verify the store (and with `repair`, fix what can be fixed; store offline only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fsck {
    /// Rebuild the index from packs and move unusable records aside.
    #[serde(default)]
    pub repair: bool,
}

impl Verb for Fsck {
    const NAME: &'static str = "fsck";
    const KIND: Kind = Kind::Store;
    const AGENT: Agent = Agent::No;
    const RECORDS: bool = false;
    type Response = Checked;

    fn agent_may(&self) -> bool {
        // Store-wide maintenance and anything that drops history.
        let Fsck { repair: _ } = self;
        false
    }
}

/// The answer to `fsck`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Checked {
    /// What the check found (and, with `repair`, did).
    pub fsck: crate::fsck::FsckReport,
    /// No problems were found (`fsck.problems` is empty).
    pub clean: bool,
}

impl Checked {
    /// The answer for `report`.
    pub fn new(report: crate::fsck::FsckReport) -> Checked {
        Checked {
            clean: report.clean(),
            fsck: report,
        }
    }
}

impl Handler for Fsck {
    fn handle<H: Server>(self, cx: &mut Cx<'_, H>) -> Result<Checked> {
        cx.host.fsck(self.repair, cx.events)
    }
}
