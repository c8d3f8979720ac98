// Nothing to build: this package only exists to be vendored (see Cargo.toml).
