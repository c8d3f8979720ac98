#![no_main]
//! libFuzzer target `protocol`: see `treefork::fuzz`.

libfuzzer_sys::fuzz_target!(
    init: treefork::fuzz::init("protocol"),
    |data: &[u8]| treefork::fuzz::run("protocol", data)
);
