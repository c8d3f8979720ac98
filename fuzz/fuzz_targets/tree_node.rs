#![no_main]
//! libFuzzer target `tree_node`: see `treefork::fuzz`.

libfuzzer_sys::fuzz_target!(
    init: treefork::fuzz::init("tree_node"),
    |data: &[u8]| treefork::fuzz::run("tree_node", data)
);
