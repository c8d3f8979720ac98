#![no_main]
//! libFuzzer target `remote_idx`: see `treefork::fuzz`.

libfuzzer_sys::fuzz_target!(
    init: treefork::fuzz::init("remote_idx"),
    |data: &[u8]| treefork::fuzz::run("remote_idx", data)
);
