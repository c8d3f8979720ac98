#![no_main]
//! libFuzzer target `remote_refs`: see `treefork::fuzz`.

libfuzzer_sys::fuzz_target!(
    init: treefork::fuzz::init("remote_refs"),
    |data: &[u8]| treefork::fuzz::run("remote_refs", data)
);
