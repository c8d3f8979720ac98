#![no_main]
//! libFuzzer target `checkpoint_record`: see `treefork::fuzz`.

libfuzzer_sys::fuzz_target!(
    init: treefork::fuzz::init("checkpoint_record"),
    |data: &[u8]| treefork::fuzz::run("checkpoint_record", data)
);
