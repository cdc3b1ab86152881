//! Not written yet.

use ferry_api::transform::TransformationPlugin;

pub(crate) fn plugins() -> Vec<TransformationPlugin> {
    Vec::new()
}
