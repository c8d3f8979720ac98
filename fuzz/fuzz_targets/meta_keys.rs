#![no_main]
//! libFuzzer target `meta_keys`: see `treefork::fuzz`.

libfuzzer_sys::fuzz_target!(
    init: treefork::fuzz::init("meta_keys"),
    |data: &[u8]| treefork::fuzz::run("meta_keys", data)
);
