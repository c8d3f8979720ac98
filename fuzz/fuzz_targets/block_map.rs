#![no_main]
//! libFuzzer target `block_map`: see `treefork::fuzz`.

libfuzzer_sys::fuzz_target!(
    init: treefork::fuzz::init("block_map"),
    |data: &[u8]| treefork::fuzz::run("block_map", data)
);
