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
