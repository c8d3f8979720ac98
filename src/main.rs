//! The `treefork` command line: parse, dispatch to `cli`, exit status.

mod cli;
mod mcp;

use clap::Parser;

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format_timestamp_millis()
        .init();
    let args = cli::args::Cli::parse();
    if let Err(e) = cli::run(args) {
        eprintln!("treefork: error: {e:#}");
        std::process::exit(cli::exit_status(&e));
    }
}
