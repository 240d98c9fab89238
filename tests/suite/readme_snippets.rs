//! The README's C, Python and R snippets are copied from tested files: every region between
//! `[readme-...]` and `[/readme-...]` markers in those files must appear in the README verbatim
//! (dedented), so the README cannot drift from what the binding tests run.

use std::path::Path;

/// The dedented lines strictly between the marker lines `[name]` and `[/name]`.
fn region(text: &str, name: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let is = |l: &str, m: &str| {
        let t = l.trim();
        t == format!("/* [{m}] */") || t == format!("# [{m}]")
    };
    let a = lines.iter().position(|l| is(l, name))?;
    let b = lines.iter().position(|l| is(l, &format!("/{name}")))?;
    let body = &lines[a + 1..b];
    let indent = body
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    Some(
        body.iter()
            .map(|l| {
                if l.len() >= indent {
                    &l[indent..]
                } else {
                    l.trim()
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

#[test]
fn readme_snippets_come_from_the_tested_examples() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    for (file, name) in [
        ("bindings/c/example.c", "readme-c-callback"),
        ("bindings/c/example.c", "readme-c"),
        ("bindings/c/example.c", "readme-c-free"),
        ("bindings/python/example.py", "readme-python"),
        ("bindings/R/joker/inst/examples/covtype.R", "readme-r"),
    ] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let snippet = region(&text, name).unwrap_or_else(|| panic!("{file}: no [{name}] region"));
        assert!(snippet.lines().count() >= 4, "{file} [{name}] is too short");
        assert!(
            readme.contains(&snippet),
            "README.md does not contain the [{name}] region of {file} verbatim; copy it again:\n{snippet}"
        );
        assert!(
            readme.contains(&format!("({file})")),
            "README.md does not name {file}"
        );
    }
}
