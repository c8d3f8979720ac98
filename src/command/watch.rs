//! Which runs are in flight and since when: what a client shows as a sign of
//! life while long runs go on (`treefork experiment`, `bisect run`). Shared by
//! the threads that run them (cheap to clone); no output here.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The runs in flight, by name, in start order.
#[derive(Debug, Clone, Default)]
pub struct Watch(Arc<Mutex<Vec<(String, Instant)>>>);

impl Watch {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, Instant)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Run `name` started.
    pub fn started(&self, name: &str) {
        self.lock().push((name.to_string(), Instant::now()));
    }

    /// Run `name` ended.
    pub fn finished(&self, name: &str) {
        self.lock().retain(|(n, _)| n != name);
    }

    /// The runs in flight and how long each has been going.
    pub fn running(&self) -> Vec<(String, Duration)> {
        self.lock()
            .iter()
            .map(|(n, t)| (n.clone(), t.elapsed()))
            .collect()
    }

    /// `runs still going: 2 (24s), 3 (24s)`, or `None` when nothing runs.
    pub fn line(&self) -> Option<String> {
        let r = self.running();
        if r.is_empty() {
            return None;
        }
        let each: Vec<String> = r
            .iter()
            .map(|(n, d)| format!("{n} ({}s)", d.as_secs()))
            .collect();
        Some(format!("runs still going: {}", each.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_the_runs_in_flight() {
        let w = Watch::default();
        assert_eq!(w.line(), None);
        w.started("2");
        w.clone().started("3");
        assert_eq!(w.line().unwrap(), "runs still going: 2 (0s), 3 (0s)");
        w.finished("2");
        assert_eq!(w.line().unwrap(), "runs still going: 3 (0s)");
        w.finished("3");
        assert!(w.running().is_empty());
    }
}
