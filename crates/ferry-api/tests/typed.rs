//! Typed partitions and offsets: serde structs to and from `ConnectMap`, and what is rejected.

use std::collections::{BTreeMap, HashMap};

use ferry_api::{ConnectMap, Value, ValueError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct FilePartition {
    filename: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct FileOffset {
    position: i64,
}

fn to_map<T: Serialize>(value: &T) -> ConnectMap {
    ConnectMap::from_serde(value).unwrap_or_else(|e| panic!("from_serde failed: {e}"))
}

fn rejected<T: Serialize>(value: &T) -> ValueError {
    match ConnectMap::from_serde(value) {
        Ok(map) => panic!("expected a rejection, got {map}"),
        Err(e) => e,
    }
}

fn keys(map: &ConnectMap) -> Vec<&str> {
    map.iter().map(|(k, _)| k).collect()
}

#[test]
fn file_partition_round_trips() {
    let partition = FilePartition {
        filename: "/tmp/test.txt".into(),
    };
    let map = to_map(&partition);
    assert_eq!(map.len(), 1);
    assert_eq!(
        map.get("filename"),
        Some(&Value::String("/tmp/test.txt".into()))
    );
    assert_eq!(
        map,
        ConnectMap::new()
            .with("filename", "/tmp/test.txt")
            .expect("valid")
    );
    let back: FilePartition = map.to_serde().expect("round trip");
    assert_eq!(back, partition);
}

#[test]
fn field_order_is_struct_order() {
    #[derive(Serialize)]
    struct Jdbc {
        protocol: String,
        table: String,
        zeta: i32,
        alpha: bool,
    }
    let map = to_map(&Jdbc {
        protocol: "1".into(),
        table: "demo.accounts".into(),
        zeta: 1,
        alpha: true,
    });
    assert_eq!(keys(&map), ["protocol", "table", "zeta", "alpha"]);

    #[derive(Serialize)]
    struct Reversed {
        alpha: bool,
        zeta: i32,
    }
    assert_eq!(
        keys(&to_map(&Reversed {
            alpha: true,
            zeta: 1
        })),
        ["alpha", "zeta"]
    );
}

#[test]
fn integer_widths_map_to_connect_types() {
    #[derive(Serialize)]
    struct Widths {
        a: i8,
        b: i16,
        c: i32,
        d: i64,
        e: u8,
        f: u16,
        g: u32,
        h: u64,
    }
    let map = to_map(&Widths {
        a: -1,
        b: -2,
        c: -3,
        d: -4,
        e: 255,
        f: 65535,
        g: u32::MAX,
        h: i64::MAX as u64,
    });
    assert_eq!(map.get("a"), Some(&Value::Int8(-1)));
    assert_eq!(map.get("b"), Some(&Value::Int16(-2)));
    assert_eq!(map.get("c"), Some(&Value::Int32(-3)));
    assert_eq!(map.get("d"), Some(&Value::Int64(-4)));
    assert_eq!(map.get("e"), Some(&Value::Int16(255)));
    assert_eq!(map.get("f"), Some(&Value::Int32(65535)));
    assert_eq!(map.get("g"), Some(&Value::Int64(i64::from(u32::MAX))));
    assert_eq!(map.get("h"), Some(&Value::Int64(i64::MAX)));
}

#[test]
fn i32_field_reads_back_from_stored_int64() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Narrow {
        position: i32,
        small: i8,
        unsigned: u16,
    }
    // What a store hands back: every integer is 64-bit.
    let stored = ConnectMap::new()
        .with("position", 1234i64)
        .and_then(|m| m.with("small", -5i64))
        .and_then(|m| m.with("unsigned", 65535i64))
        .expect("valid");
    let typed: Narrow = stored.to_serde().expect("in range");
    assert_eq!(
        typed,
        Narrow {
            position: 1234,
            small: -5,
            unsigned: 65535
        }
    );

    // And the full typed round trip through the 64-bit form.
    let original = Narrow {
        position: i32::MIN,
        small: i8::MAX,
        unsigned: 7,
    };
    let widened: ConnectMap = to_map(&original)
        .iter()
        .map(|(k, v)| (k.to_owned(), Value::Int64(v.as_i64().expect("integer"))))
        .fold(ConnectMap::new(), |m, (k, v)| m.with(k, v).expect("valid"));
    assert_eq!(
        widened.to_serde::<Narrow>().expect("width round trip"),
        original
    );
}

#[test]
fn out_of_range_int64_into_i32_names_the_key() {
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Narrow {
        filename: String,
        position: i32,
    }
    let stored = ConnectMap::new()
        .with("filename", "/a")
        .and_then(|m| m.with("position", i64::from(i32::MAX) + 1))
        .expect("valid");
    let err = stored
        .to_serde::<Narrow>()
        .expect_err("does not fit an i32");
    assert_eq!(err.key(), "position");
    assert!(err.to_string().contains("position"), "{err}");

    let negative = ConnectMap::new()
        .with("filename", "/a")
        .and_then(|m| m.with("position", i64::MIN))
        .expect("valid");
    assert_eq!(
        negative.to_serde::<Narrow>().expect_err("too small").key(),
        "position"
    );
}

#[test]
fn wrong_type_and_missing_field_name_the_key() {
    let stored = ConnectMap::new().with("position", "12").expect("valid");
    let err = stored
        .to_serde::<FileOffset>()
        .expect_err("a string is not an i64");
    assert_eq!(err.key(), "position");

    let err = ConnectMap::new()
        .to_serde::<FileOffset>()
        .expect_err("missing");
    assert_eq!(err.key(), "position");
}

#[test]
fn option_none_is_null_and_back() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct WithOption {
        name: Option<String>,
        count: Option<i64>,
    }
    let none = WithOption {
        name: None,
        count: None,
    };
    let map = to_map(&none);
    assert_eq!(map.get("name"), Some(&Value::Null));
    assert_eq!(map.get("count"), Some(&Value::Null));
    assert_eq!(map.to_serde::<WithOption>().expect("round trip"), none);

    let some = WithOption {
        name: Some("x".into()),
        count: Some(3),
    };
    let map = to_map(&some);
    assert_eq!(map.get("name"), Some(&Value::String("x".into())));
    assert_eq!(map.get("count"), Some(&Value::Int64(3)));
    assert_eq!(map.to_serde::<WithOption>().expect("round trip"), some);
}

#[test]
fn vec_u8_is_bytes_and_back() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct WithBytes {
        digest: Vec<u8>,
        empty: Vec<u8>,
    }
    let original = WithBytes {
        digest: vec![0, 1, 2, 254, 255],
        empty: Vec::new(),
    };
    let map = to_map(&original);
    assert_eq!(
        map.get("digest"),
        Some(&Value::Bytes(vec![0, 1, 2, 254, 255]))
    );
    assert_eq!(map.get("empty"), Some(&Value::Bytes(Vec::new())));
    assert_eq!(map.to_serde::<WithBytes>().expect("round trip"), original);
}

#[test]
fn vec_u8_reads_back_from_the_base64_string_a_store_returns() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct ResumeToken {
        token: Vec<u8>,
    }
    // Bytes are stored as base64 and read back as a string, as in Kafka Connect.
    let stored = ConnectMap::new().with("token", "AAEC/v8=").expect("valid");
    let typed: ResumeToken = stored.to_serde().expect("base64 string into Vec<u8>");
    assert_eq!(
        typed,
        ResumeToken {
            token: vec![0, 1, 2, 254, 255]
        }
    );

    let err = ConnectMap::new()
        .with("token", "not base64!")
        .expect("valid")
        .to_serde::<ResumeToken>()
        .expect_err("not base64");
    assert_eq!(err.key(), "token");
}

#[test]
fn floats_bools_chars_and_unit_enums() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum Mode {
        Bulk,
        Incrementing,
    }
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Misc {
        ratio: f64,
        small: f32,
        done: bool,
        sep: char,
        mode: Mode,
    }
    let original = Misc {
        ratio: 0.25,
        small: 0.5,
        done: true,
        sep: ',',
        mode: Mode::Incrementing,
    };
    let map = to_map(&original);
    assert_eq!(map.get("ratio"), Some(&Value::Float64(0.25)));
    assert_eq!(map.get("small"), Some(&Value::Float32(0.5)));
    assert_eq!(map.get("done"), Some(&Value::Bool(true)));
    assert_eq!(map.get("sep"), Some(&Value::String(",".into())));
    assert_eq!(map.get("mode"), Some(&Value::String("Incrementing".into())));
    assert_eq!(map.to_serde::<Misc>().expect("round trip"), original);
    let _ = Mode::Bulk;
}

#[test]
fn nested_struct_is_rejected_naming_the_field() {
    #[derive(Serialize)]
    struct Inner {
        a: i32,
    }
    #[derive(Serialize)]
    struct Outer {
        ok: i32,
        inner: Inner,
    }
    let err = rejected(&Outer {
        ok: 1,
        inner: Inner { a: 1 },
    });
    assert_eq!(err.key(), "inner");
    assert!(err.reason().contains("nested struct"), "{err}");
}

#[test]
fn list_of_strings_is_rejected_naming_the_field() {
    #[derive(Serialize)]
    struct WithList {
        files: Vec<String>,
    }
    let err = rejected(&WithList {
        files: vec!["a".into(), "b".into()],
    });
    assert_eq!(err.key(), "files");

    #[derive(Serialize)]
    struct WithInts {
        ids: Vec<i64>,
    }
    assert_eq!(rejected(&WithInts { ids: vec![1, 2] }).key(), "ids");
}

#[test]
fn map_value_is_rejected_naming_the_field() {
    #[derive(Serialize)]
    struct WithMap {
        extra: BTreeMap<String, i64>,
    }
    let err = rejected(&WithMap {
        extra: BTreeMap::from([("a".to_owned(), 1)]),
    });
    assert_eq!(err.key(), "extra");
    assert!(err.reason().contains("map"), "{err}");
}

#[test]
fn tuple_is_rejected_naming_the_field() {
    #[derive(Serialize)]
    struct WithTuple {
        range: (i64, i64),
    }
    assert_eq!(rejected(&WithTuple { range: (1, 2) }).key(), "range");
}

#[test]
fn enum_with_data_is_rejected_naming_the_field() {
    #[derive(Serialize)]
    #[allow(dead_code)]
    enum Position {
        Line(i64),
        Range(i64, i64),
        Span { from: i64, to: i64 },
    }
    #[derive(Serialize)]
    struct WithEnum {
        at: Position,
    }
    for at in [
        Position::Line(1),
        Position::Range(1, 2),
        Position::Span { from: 1, to: 2 },
    ] {
        let err = rejected(&WithEnum { at });
        assert_eq!(err.key(), "at");
        assert!(err.reason().contains("enum"), "{err}");
    }
}

#[test]
fn u64_above_i64_max_is_rejected_naming_the_field() {
    #[derive(Serialize)]
    struct Big {
        id: u64,
    }
    let err = rejected(&Big {
        id: i64::MAX as u64 + 1,
    });
    assert_eq!(err.key(), "id");
    assert!(err.to_string().contains("9223372036854775808"), "{err}");
}

#[test]
fn non_finite_floats_are_rejected_naming_the_field() {
    #[derive(Serialize)]
    struct F64 {
        ratio: f64,
    }
    #[derive(Serialize)]
    struct F32 {
        ratio32: f32,
    }
    assert_eq!(rejected(&F64 { ratio: f64::NAN }).key(), "ratio");
    assert_eq!(
        rejected(&F64 {
            ratio: f64::INFINITY
        })
        .key(),
        "ratio"
    );
    assert_eq!(
        rejected(&F64 {
            ratio: f64::NEG_INFINITY
        })
        .key(),
        "ratio"
    );
    assert_eq!(rejected(&F32 { ratio32: f32::NAN }).key(), "ratio32");
}

#[test]
fn top_level_non_struct_is_rejected() {
    for err in [
        rejected(&5i64),
        rejected(&"a string"),
        rejected(&vec![1, 2, 3]),
        rejected(&(1, 2)),
        rejected(&Option::<FilePartition>::None),
        rejected(&true),
    ] {
        assert_eq!(err.key(), "", "{err}");
        assert!(err.to_string().contains("struct or a map"), "{err}");
    }
}

#[test]
fn top_level_string_keyed_map_is_accepted_and_other_keys_rejected() {
    let map = to_map(&BTreeMap::from([
        ("b".to_owned(), 2i64),
        ("a".to_owned(), 1),
    ]));
    assert_eq!(keys(&map), ["a", "b"]);
    assert_eq!(map.get("a"), Some(&Value::Int64(1)));

    let err = rejected(&HashMap::from([(7i32, 1i64)]));
    assert!(err.reason().contains("keys must be strings"), "{err}");
}

#[test]
fn insert_rejects_non_finite_floats_naming_the_key() {
    let mut map = ConnectMap::new();
    let err = map.insert("ratio", f64::NAN).expect_err("NaN");
    assert_eq!(err.key(), "ratio");
    assert!(map.is_empty(), "a rejected value is not inserted");
    assert_eq!(map.insert("x", f32::INFINITY).expect_err("inf").key(), "x");
    assert!(ConnectMap::new().with("y", f64::NEG_INFINITY).is_err());

    map.insert("ratio", 0.5).expect("finite");
    assert_eq!(
        map.insert("ratio", f64::NAN).expect_err("NaN").key(),
        "ratio"
    );
    assert_eq!(
        map.get("ratio"),
        Some(&Value::Float64(0.5)),
        "a rejected replacement keeps the old value"
    );
}

#[test]
fn insert_replaces_in_place() {
    let mut map = ConnectMap::new()
        .with("a", 1i64)
        .and_then(|m| m.with("b", 2i64))
        .expect("valid");
    map.insert("a", 3i64).expect("valid");
    assert_eq!(keys(&map), ["a", "b"]);
    assert_eq!(map.get("a"), Some(&Value::Int64(3)));
}

#[test]
fn display_of_a_map() {
    let map = ConnectMap::new()
        .with("filename", "/tmp/a.txt")
        .and_then(|m| m.with("position", 5i64))
        .and_then(|m| m.with("ratio", 1.0f64))
        .and_then(|m| m.with("done", false))
        .and_then(|m| m.with("none", Value::Null))
        .expect("valid");
    assert_eq!(
        map.to_string(),
        r#"{"filename":"/tmp/a.txt","position":5,"ratio":1.0,"done":false,"none":null}"#
    );
    assert_eq!(ConnectMap::new().to_string(), "{}");
    let quoted = ConnectMap::new().with("k", "a\"b").expect("valid");
    assert_eq!(quoted.to_string(), r#"{"k":"a\"b"}"#);
}
