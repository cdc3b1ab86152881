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

/// Small maps are scanned and large ones indexed, and a map grows with spare room: past those
/// limits a map keeps its order, finds every field, replaces in place, and equals the same fields
/// inserted in another order.
#[test]
fn a_map_with_many_fields_keeps_its_order_and_finds_every_field() {
    for fields in [1usize, 7, 8, 9, 16, 1000] {
        let mut map = ConnectMap::new();
        for i in 0..fields {
            map.insert(format!("k{i}"), i as i64).unwrap();
        }
        let mut reversed = ConnectMap::new();
        for i in (0..fields).rev() {
            reversed.insert(format!("k{i}"), i as i64).unwrap();
        }
        assert_eq!(map.len(), fields);
        assert_eq!(map, reversed, "{fields} fields");
        let keys: Vec<String> = map.iter().map(|(k, _)| k.to_owned()).collect();
        let expected: Vec<String> = (0..fields).map(|i| format!("k{i}")).collect();
        assert_eq!(keys, expected, "insertion order, {fields} fields");
        for i in 0..fields {
            assert_eq!(map.get(&format!("k{i}")), Some(&Value::Int64(i as i64)));
        }
        assert_eq!(map.get("missing"), None);
        // A replaced field keeps its place; the map is then no longer equal to the other.
        let mut changed = map.clone();
        changed.insert("k0", -1i64).unwrap();
        assert_eq!(changed.iter().next(), Some(("k0", &Value::Int64(-1))));
        assert_eq!(changed.len(), fields);
        assert_ne!(changed, reversed);
        assert_eq!(
            map.get("k0"),
            Some(&Value::Int64(0)),
            "the original is unchanged"
        );
        // Iterated from the back as well.
        let last = format!("k{}", fields - 1);
        assert_eq!(map.iter().next_back().map(|(k, _)| k), Some(last.as_str()));
    }
}

/// A field added to a clone (which shares the names and values of its original) is in the clone
/// only, below and above the size at which names are indexed.
#[test]
fn a_field_added_to_a_clone_is_in_the_clone_only() {
    for fields in [0usize, 3, 8, 12] {
        let mut map = ConnectMap::new();
        for i in 0..fields {
            map.insert(format!("k{i}"), i as i64).unwrap();
        }
        let mut clone = map.clone();
        clone.insert("added", "x").unwrap();
        assert_eq!(clone.len(), fields + 1);
        assert_eq!(clone.get("added"), Some(&Value::String("x".into())));
        assert_eq!(clone.iter().next_back().map(|(k, _)| k), Some("added"));
        assert_eq!(map.len(), fields);
        assert_eq!(map.get("added"), None, "{fields} fields");
        for i in 0..fields {
            let key = format!("k{i}");
            assert_eq!(clone.get(&key), Some(&Value::Int64(i as i64)));
            assert_eq!(map.get(&key), Some(&Value::Int64(i as i64)));
        }
    }
}
