#![no_main]
//! libFuzzer target `log_segment`: see `treefork::fuzz`.

libfuzzer_sys::fuzz_target!(
    init: treefork::fuzz::init("log_segment"),
    |data: &[u8]| treefork::fuzz::run("log_segment", data)
);
