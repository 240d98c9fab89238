//! Build script: the SONAME of libjoker.so and the C header.
//!
//! The header is generated from `src/ffi` into `OUT_DIR/joker.h`; the committed
//! `include/joker.h` is compared with it by `tests/suite/header.rs` (writing into the source tree from
//! here would break `cargo publish`).

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=src/ffi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=build.rs");

    // What the tests can use, so that a test whose input is absent is reported as ignored
    // by the test runner rather than passing without testing: `joker_real_data` when the
    // benchmark data sets are there, `joker_peers` when $JOKER_PYTHON names a Python with the
    // peer libraries (scikit-learn).
    println!("cargo::rustc-check-cfg=cfg(joker_real_data)");
    println!("cargo::rustc-check-cfg=cfg(joker_peers)");
    println!("cargo:rerun-if-env-changed=JOKER_DATA_DIR");
    println!("cargo:rerun-if-env-changed=JOKER_PYTHON");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let data = env::var_os("JOKER_DATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("../shared/datasets"));
    if data.join("README.md").is_file() {
        println!("cargo:rustc-cfg=joker_real_data");
    }
    if env::var_os("JOKER_PYTHON").is_some_and(|p| !p.is_empty()) {
        println!("cargo:rustc-cfg=joker_peers");
    }

    // libjoker.so.0: programs linked against the library record the ABI major version.
    if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libjoker.so.0");
    }

    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR")).join("joker.h");
    let config = match cbindgen::Config::from_file(root.join("cbindgen.toml")) {
        Ok(c) => c,
        Err(e) => {
            println!("cargo:warning=cbindgen.toml: {e}");
            return;
        }
    };
    match cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("src/ffi/mod.rs"))
        .generate()
    {
        Ok(bindings) => {
            bindings.write_to_file(&out);
        }
        Err(e) => println!("cargo:warning=cbindgen could not generate the C header: {e}"),
    }
}
