#![no_main]
//! libFuzzer target `log_records`: see `treefork::fuzz`.

libfuzzer_sys::fuzz_target!(
    init: treefork::fuzz::init("log_records"),
    |data: &[u8]| treefork::fuzz::run("log_records", data)
);
