#![no_main]
//! libFuzzer target `remote_pack`: see `treefork::fuzz`.

libfuzzer_sys::fuzz_target!(
    init: treefork::fuzz::init("remote_pack"),
    |data: &[u8]| treefork::fuzz::run("remote_pack", data)
);
