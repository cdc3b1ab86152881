//! The book's generated reference (`docs/src/reference/generated/`) is what `ferry docs reference`
//! writes now: a key added, removed or re-documented in the code without regenerating fails here.

use std::path::Path;

#[test]
fn the_generated_reference_is_fresh() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/reference/generated");
    let pages = ferry::docs::reference_pages(&ferry::Ferry::standard())
        .unwrap_or_else(|e| panic!("the reference cannot be generated: {e}"));
    let stale = ferry::docs::stale_pages(&dir, &pages);
    assert!(
        stale.is_empty(),
        "the generated reference in {} is stale: {}.\nRun `{}` and commit the pages.",
        dir.display(),
        stale.join("; "),
        ferry::docs::REGENERATE
    );
}
