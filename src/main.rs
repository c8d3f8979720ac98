//! The `treefork` command line: logging, then `cli::main` (parse, run, report,
//! exit status).

mod cli;
mod mcp;
mod ui;

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn,sled=off"))
        .format_timestamp_millis()
        .init();
    std::process::exit(cli::main());
}
