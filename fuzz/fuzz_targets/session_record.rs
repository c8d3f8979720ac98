#![no_main]
//! libFuzzer target `session_record`: see `treefork::fuzz`.

libfuzzer_sys::fuzz_target!(
    init: treefork::fuzz::init("session_record"),
    |data: &[u8]| treefork::fuzz::run("session_record", data)
);
