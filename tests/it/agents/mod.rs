//! The drop-in for agent runtimes, with the real CLIs: Claude Code and Codex
//! (pinned in tests/agents/package.json, installed under target/agents by
//! scripts/test.sh) run headless in a treefork mount against the scripted model
//! server (tests/agents/model_server.py), with the hooks `treefork agent
//! install` wrote; and the install's round trip on configurations that already
//! hold other entries.

mod claude;
mod codex;
mod install;
mod readme;
mod server;
