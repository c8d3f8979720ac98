#![no_main]
//! libFuzzer target `pack_records`: see `treefork::fuzz`.

libfuzzer_sys::fuzz_target!(
    init: treefork::fuzz::init("pack_records"),
    |data: &[u8]| treefork::fuzz::run("pack_records", data)
);
