#![no_main]
//! libFuzzer target `pack_index`: see `treefork::fuzz`.

libfuzzer_sys::fuzz_target!(
    init: treefork::fuzz::init("pack_index"),
    |data: &[u8]| treefork::fuzz::run("pack_index", data)
);
