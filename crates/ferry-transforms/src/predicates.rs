//! Not written yet.

use ferry_api::transform::PredicatePlugin;

pub(crate) fn plugins() -> Vec<PredicatePlugin> {
    Vec::new()
}
