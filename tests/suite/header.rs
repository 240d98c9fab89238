//! `include/joker.h` is the header cbindgen generates from `src/ffi` (build.rs writes it to
//! `OUT_DIR`). Run with `JOKER_UPDATE_HEADER=1` to rewrite the committed header.

use std::path::Path;

#[test]
fn committed_header_is_current() {
    let generated = std::fs::read_to_string(concat!(env!("OUT_DIR"), "/joker.h")).expect(
        "build.rs did not generate OUT_DIR/joker.h (see the cbindgen warning of the build)",
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/joker.h");
    if std::env::var_os("JOKER_UPDATE_HEADER").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
        panic!(
            "include/joker.h is stale (first difference at line {}): regenerate it with\n    JOKER_UPDATE_HEADER=1 cargo test --test suite -- header::\nand commit it",
            line + 1
        );
    }
}

#[test]
fn header_declares_every_documented_entry_point() {
    let h = std::fs::read_to_string(concat!(env!("OUT_DIR"), "/joker.h")).unwrap();
    for f in [
        "joker_version",
        "joker_last_error",
        "joker_gpu_available",
        "joker_device_count",
        "joker_device_name",
        "joker_params_new",
        "joker_params_free",
        "joker_data_from_dense_f32",
        "joker_data_from_dense_f64",
        "joker_data_from_csr_f64",
        "joker_fit",
        "joker_model_predict",
        "joker_model_decision_function",
        "joker_model_predict_proba",
        "joker_model_save",
        "joker_model_load",
        "joker_model_n_features",
        "joker_model_n_classes",
        "joker_model_n_components",
    ] {
        let declared = h
            .lines()
            .any(|l| l.contains(&format!(" {f}(")) || l.contains(&format!("*{f}(")));
        assert!(declared, "{f} missing from the header");
    }
    // every function is documented
    let undocumented: Vec<&str> = h
        .lines()
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| {
            let decl = !w[1].starts_with(' ') && w[1].contains("joker_") && w[1].ends_with(");");
            decl && !w[0].ends_with("*/")
        })
        .map(|w| w[1])
        .collect();
    assert!(undocumented.is_empty(), "undocumented: {undocumented:?}");
}
