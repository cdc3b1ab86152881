//! `ConnectMap`: clones share their fields until one of them changes.

use ferry_api::{ConnectMap, Value};

#[test]
fn a_changed_clone_leaves_the_original_alone() {
    let original = ConnectMap::new().with("position", 1i64).unwrap();
    let mut copy = original.clone();
    assert_eq!(copy, original);
    copy.insert("position", 2i64).unwrap();
    copy.insert("extra", "x").unwrap();
    assert_eq!(original.get("position"), Some(&Value::Int64(1)));
    assert_eq!(original.len(), 1);
    assert_eq!(copy.get("position"), Some(&Value::Int64(2)));
    assert_ne!(copy, original);
}

#[test]
fn maps_with_the_same_fields_in_another_order_are_equal() {
    let a = ConnectMap::new()
        .with("a", 1i64)
        .unwrap()
        .with("b", "x")
        .unwrap();
    let b = ConnectMap::new()
        .with("b", "x")
        .unwrap()
        .with("a", 1i64)
        .unwrap();
    assert_eq!(a, b);
    let c = ConnectMap::new().with("a", 1i64).unwrap();
    assert_ne!(a, c);
}
