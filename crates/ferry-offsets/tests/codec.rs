//! The offset byte format: golden bytes as Kafka Connect's JsonConverter (schemas disabled) writes
//! them, what decoding accepts and rejects, canonical partitions, and fuzzing.
#![cfg(test)] // clippy: unwraps in this test crate's helpers count as test code (allow-unwrap-in-tests)

use ferry_api::{ConnectMap, Value};
use ferry_offsets::{
    OffsetKey, canonical_partition, decode_key, decode_value, encode_key, encode_value,
};
use proptest::prelude::*;

fn map(fields: Vec<(&str, Value)>) -> ConnectMap {
    let mut m = ConnectMap::new();
    for (k, v) in fields {
        m.insert(k, v).unwrap();
    }
    m
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("the codec writes UTF-8")
}

fn value_text(fields: Vec<(&str, Value)>) -> String {
    text(encode_value(&map(fields)))
}

fn decoded_value(json: &str) -> ConnectMap {
    decode_value(json.as_bytes()).unwrap_or_else(|e| panic!("{json} should decode: {e}"))
}

fn decoded_key(json: &str) -> OffsetKey {
    decode_key(json.as_bytes()).unwrap_or_else(|e| panic!("{json} should decode: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Golden encodings
// ---------------------------------------------------------------------------------------------

#[test]
fn file_source_golden() {
    let partition = map(vec![("filename", "/tmp/test.txt".into())]);
    assert_eq!(
        text(encode_key("file-src", Some(&partition))),
        r#"["file-src",{"filename":"/tmp/test.txt"}]"#
    );
    assert_eq!(
        value_text(vec![("position", Value::Int64(1234))]),
        r#"{"position":1234}"#
    );
}

#[test]
fn jdbc_source_golden() {
    let partition = map(vec![
        ("protocol", "1".into()),
        ("table", "demo.accounts".into()),
    ]);
    assert_eq!(
        text(encode_key("jdbc_src", Some(&partition))),
        r#"["jdbc_src",{"protocol":"1","table":"demo.accounts"}]"#
    );
    assert_eq!(
        value_text(vec![
            ("timestamp_nanos", Value::Int32(0)),
            ("timestamp", Value::Int64(1_547_030_056_000))
        ]),
        r#"{"timestamp_nanos":0,"timestamp":1547030056000}"#
    );
}

#[test]
fn null_partition_golden() {
    assert_eq!(text(encode_key("c", None)), r#"["c",null]"#);
    assert_eq!(
        text(encode_key("c", Some(&ConnectMap::new()))),
        r#"["c",{}]"#
    );
    assert_eq!(text(encode_value(&ConnectMap::new())), "{}");
}

#[test]
fn every_integer_width_prints_as_digits() {
    assert_eq!(
        value_text(vec![
            ("i8", Value::Int8(-128)),
            ("i16", Value::Int16(32767)),
            ("i32", Value::Int32(-2_147_483_648)),
            ("i64", Value::Int64(i64::MAX)),
            ("min", Value::Int64(i64::MIN)),
            ("zero", Value::Int8(0)),
        ]),
        r#"{"i8":-128,"i16":32767,"i32":-2147483648,"i64":9223372036854775807,"min":-9223372036854775808,"zero":0}"#
    );
}

#[test]
fn doubles_print_like_java_double_to_string() {
    let cases: [(f64, &str); 12] = [
        (1.0, "1.0"),
        (1.5e-7, "1.5E-7"),
        (1.0e20, "1.0E20"),
        (0.001, "0.001"),
        (1.0e-4, "1.0E-4"),
        (0.0, "0.0"),
        (-2.5, "-2.5"),
        (1234567.0, "1234567.0"),
        (1.0e7, "1.0E7"),
        (123.456, "123.456"),
        (f64::MAX, "1.7976931348623157E308"),
        (f64::MIN_POSITIVE, "2.2250738585072014E-308"),
    ];
    for (v, want) in cases {
        assert_eq!(
            value_text(vec![("d", Value::Float64(v))]),
            format!(r#"{{"d":{want}}}"#),
            "{v:e}"
        );
    }
}

#[test]
fn float32_prints_like_java_float_to_string() {
    assert_eq!(value_text(vec![("f", Value::Float32(0.1))]), r#"{"f":0.1}"#);
    assert_eq!(value_text(vec![("f", Value::Float32(1.0))]), r#"{"f":1.0}"#);
    assert_eq!(
        value_text(vec![("f", Value::Float32(1.0e10))]),
        r#"{"f":1.0E10}"#
    );
    assert_eq!(
        value_text(vec![("f", Value::Float32(f32::MAX))]),
        r#"{"f":3.4028235E38}"#
    );
}

#[test]
fn booleans_and_nulls() {
    assert_eq!(
        value_text(vec![
            ("t", true.into()),
            ("f", false.into()),
            ("n", Value::Null)
        ]),
        r#"{"t":true,"f":false,"n":null}"#
    );
}

#[test]
fn bytes_are_standard_base64_with_padding() {
    assert_eq!(
        value_text(vec![("b", Value::Bytes(b"f".to_vec()))]),
        r#"{"b":"Zg=="}"#
    );
    assert_eq!(
        value_text(vec![("b", Value::Bytes(b"fo".to_vec()))]),
        r#"{"b":"Zm8="}"#
    );
    assert_eq!(
        value_text(vec![("b", Value::Bytes(b"foo".to_vec()))]),
        r#"{"b":"Zm9v"}"#
    );
    // Standard alphabet: + and /, not - and _.
    assert_eq!(
        value_text(vec![("b", Value::Bytes(vec![0xfb, 0xff, 0xbf]))]),
        r#"{"b":"+/+/"}"#
    );
    assert_eq!(
        value_text(vec![("b", Value::Bytes(Vec::new()))]),
        r#"{"b":""}"#
    );
}

#[test]
fn strings_escape_like_jackson() {
    let cases: [(&str, &str); 9] = [
        ("say \"hi\"", r#""say \"hi\"""#),
        (r"C:\tmp\x", r#""C:\\tmp\\x""#),
        ("a\nb", r#""a\nb""#),
        ("a\tb", r#""a\tb""#),
        ("\r\u{8}\u{c}", r#""\r\b\f""#),
        ("\u{1}", r#""\u0001""#),
        ("\u{1f}", r#""\u001F""#),
        ("\u{0}\u{1b}", r#""\u0000\u001B""#),
        ("/ é ü 日本 🚀 \u{7f}", "\"/ é ü 日本 🚀 \u{7f}\""),
    ];
    for (s, want) in cases {
        assert_eq!(
            value_text(vec![("s", s.into())]),
            format!(r#"{{"s":{want}}}"#),
            "{s:?}"
        );
    }
    // Keys and connector names are escaped the same way.
    let partition = map(vec![("k\"\u{1f}", 1i64.into())]);
    assert_eq!(
        text(encode_key("a\"b\\é", Some(&partition))),
        r#"["a\"b\\é",{"k\"\u001F":1}]"#
    );
}

#[test]
fn field_order_is_map_order() {
    assert_eq!(
        value_text(vec![
            ("z", 1i64.into()),
            ("a", 2i64.into()),
            ("m", 3i64.into())
        ]),
        r#"{"z":1,"a":2,"m":3}"#
    );
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

#[test]
fn decodes_kafka_connect_keys() {
    let key = decoded_key(r#"["jdbc_src",{"protocol":"1","table":"demo.accounts"}]"#);
    assert_eq!(key.connector, "jdbc_src");
    assert_eq!(
        key.partition,
        Some(map(vec![
            ("protocol", "1".into()),
            ("table", "demo.accounts".into())
        ]))
    );

    let key = decoded_key(r#"["c",null]"#);
    assert_eq!(
        key,
        OffsetKey {
            connector: "c".into(),
            partition: None
        }
    );
}

#[test]
fn decoding_preserves_any_field_order() {
    let decoded = decoded_value(r#"{"timestamp_nanos":0,"timestamp":1547030056000}"#);
    let keys: Vec<&str> = decoded.iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["timestamp_nanos", "timestamp"]);
    let decoded = decoded_value(r#"{"timestamp":1547030056000,"timestamp_nanos":0}"#);
    let keys: Vec<&str> = decoded.iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["timestamp", "timestamp_nanos"]);
}

#[test]
fn integers_of_any_width_decode_as_int64() {
    let decoded = decoded_value(
        r#"{"a":1,"b":-128,"c":2147483648,"d":9223372036854775807,"e":-9223372036854775808}"#,
    );
    assert_eq!(decoded.get("a"), Some(&Value::Int64(1)));
    assert_eq!(decoded.get("b"), Some(&Value::Int64(-128)));
    assert_eq!(decoded.get("c"), Some(&Value::Int64(2_147_483_648)));
    assert_eq!(decoded.get("d"), Some(&Value::Int64(i64::MAX)));
    assert_eq!(decoded.get("e"), Some(&Value::Int64(i64::MIN)));
}

#[test]
fn floats_decode_as_float64() {
    let decoded = decoded_value(r#"{"a":1.0,"b":1.5E-7,"c":0.1,"d":1e3,"e":-0.0}"#);
    assert_eq!(decoded.get("a"), Some(&Value::Float64(1.0)));
    assert_eq!(decoded.get("b"), Some(&Value::Float64(1.5e-7)));
    assert_eq!(decoded.get("c"), Some(&Value::Float64(0.1)));
    assert_eq!(decoded.get("d"), Some(&Value::Float64(1000.0)));
    assert_eq!(decoded.get("e"), Some(&Value::Float64(-0.0)));
}

#[test]
fn base64_strings_stay_strings_and_other_primitives_decode() {
    let decoded = decoded_value(r#"{"b":"Zm9v","t":true,"f":false,"n":null,"s":"a\u001Fb\u00e9"}"#);
    assert_eq!(decoded.get("b"), Some(&Value::String("Zm9v".into())));
    assert_eq!(decoded.get("t"), Some(&Value::Bool(true)));
    assert_eq!(decoded.get("f"), Some(&Value::Bool(false)));
    assert_eq!(decoded.get("n"), Some(&Value::Null));
    assert_eq!(decoded.get("s"), Some(&Value::String("a\u{1f}bé".into())));
}

#[test]
fn whitespace_is_accepted() {
    let key = decoded_key(" [ \"c\" ,\n\t{ \"a\" : 1 , \"b\" : \"x\" } ] \n");
    assert_eq!(
        key.partition,
        Some(map(vec![("a", 1i64.into()), ("b", "x".into())]))
    );
    assert_eq!(decoded_key("[\"c\" , null ]").partition, None);
    assert_eq!(
        decoded_value(" {\r\n \"p\" : 5 }\n"),
        map(vec![("p", 5i64.into())])
    );
}

fn assert_key_rejected(json: &str) {
    if let Ok(key) = decode_key(json.as_bytes()) {
        panic!("key {json} must be rejected, decoded {key:?}");
    }
}

fn assert_value_rejected(json: &str) {
    if let Ok(value) = decode_value(json.as_bytes()) {
        panic!("value {json} must be rejected, decoded {value}");
    }
}

#[test]
fn nested_objects_and_arrays_are_rejected() {
    assert_value_rejected(r#"{"a":{"b":1}}"#);
    assert_value_rejected(r#"{"a":[1,2]}"#);
    assert_value_rejected(r#"{"a":[]}"#);
    assert_value_rejected(r#"{"a":{}}"#);
    assert_key_rejected(r#"["c",{"a":{"b":1}}]"#);
    assert_key_rejected(r#"["c",{"a":[1]}]"#);
    let err = decode_value(br#"{"pos":{"line":1}}"#).expect_err("nested");
    assert!(err.reason().contains("nested"), "{err}");
    assert!(
        err.to_string().contains(r#"{"pos":{"line":1}}"#),
        "the error shows the bytes: {err}"
    );
}

#[test]
fn malformed_keys_are_rejected() {
    for json in [
        r#"{"c":{}}"#,
        r#""c""#,
        "null",
        "1",
        "[]",
        r#"["c"]"#,
        r#"["c",{},{}]"#,
        r#"["c",null,null]"#,
        r#"[1,{}]"#,
        r#"[null,{}]"#,
        r#"["c",1]"#,
        r#"["c","p"]"#,
        r#"["c",[]]"#,
        "",
        "[",
    ] {
        assert_key_rejected(json);
    }
}

#[test]
fn malformed_values_are_rejected() {
    for json in [
        "null",
        "[]",
        "1",
        r#""x""#,
        "",
        "{",
        r#"{"a"}"#,
        r#"{"a":}"#,
        r#"{1:2}"#,
        r#"{"a":1,}"#,
        "{'a':1}",
    ] {
        assert_value_rejected(json);
    }
}

#[test]
fn trailing_garbage_is_rejected() {
    assert_value_rejected(r#"{"a":1}x"#);
    assert_value_rejected(r#"{"a":1}{}"#);
    assert_value_rejected(r#"{"a":1},"#);
    assert_key_rejected(r#"["c",null]]"#);
    assert_key_rejected(r#"["c",null] 1"#);
}

#[test]
fn duplicate_fields_are_rejected() {
    assert_value_rejected(r#"{"a":1,"a":2}"#);
    assert_key_rejected(r#"["c",{"a":1,"a":1}]"#);
}

#[test]
fn integers_beyond_i64_are_rejected() {
    for json in [
        r#"{"a":9223372036854775808}"#,
        r#"{"a":18446744073709551615}"#,
        r#"{"a":18446744073709551616}"#,
        r#"{"a":-9223372036854775809}"#,
        r#"{"a":123456789012345678901234567890}"#,
        r#"{"a":-123456789012345678901234567890}"#,
    ] {
        assert_value_rejected(json);
        assert_key_rejected(&format!(r#"["c",{json}]"#));
    }
    // Exponent notation is a float, even when its value is large.
    assert_eq!(
        decoded_value(r#"{"a":1.0E20}"#).get("a"),
        Some(&Value::Float64(1.0e20))
    );
}

#[test]
fn non_finite_numbers_are_rejected() {
    assert_value_rejected(r#"{"a":1e400}"#);
    assert_value_rejected(r#"{"a":NaN}"#);
    assert_value_rejected(r#"{"a":Infinity}"#);
}

#[test]
fn invalid_utf8_is_rejected() {
    assert!(decode_value(b"{\"a\":\"\xff\"}").is_err());
    assert!(decode_key(b"[\"\xc3\",null]").is_err());
}

#[test]
fn kafka_connect_bytes_round_trip_exactly() {
    let keys = [
        r#"["file-src",{"filename":"/tmp/test.txt"}]"#,
        r#"["jdbc_src",{"protocol":"1","table":"demo.accounts"}]"#,
        r#"["jdbc_src",{"table":"demo.accounts","protocol":"1"}]"#,
        r#"["c",null]"#,
        r#"["c",{}]"#,
        r#"["a\"b\\c",{"k\u001F":"\n\t\u0001é日本","n":null,"t":true,"x":-5,"d":1.5E-7}]"#,
    ];
    for raw in keys {
        let key = decoded_key(raw);
        assert_eq!(
            text(encode_key(&key.connector, key.partition.as_ref())),
            raw
        );
    }
    let values = [
        r#"{"position":1234}"#,
        r#"{"timestamp_nanos":0,"timestamp":1547030056000}"#,
        r#"{"incrementing":42,"timestamp":1547030056000,"timestamp_nanos":999999}"#,
        r#"{"d":1.0,"e":1.0E20,"f":0.001,"g":1.0E-4,"h":-0.0,"i":0.1,"j":1.7976931348623157E308}"#,
        r#"{"b":"Zm9v","s":"\"\\/","n":null,"t":false,"big":9223372036854775807,"small":-9223372036854775808}"#,
        r#"{}"#,
    ];
    for raw in values {
        assert_eq!(text(encode_value(&decoded_value(raw))), raw);
    }
}

// ---------------------------------------------------------------------------------------------
// Canonical partitions
// ---------------------------------------------------------------------------------------------

#[test]
fn canonical_partition_ignores_field_order() {
    let ab = map(vec![("a", 1i64.into()), ("b", "x".into())]);
    let ba = map(vec![("b", "x".into()), ("a", 1i64.into())]);
    assert_ne!(
        encode_key("c", Some(&ab)),
        encode_key("c", Some(&ba)),
        "the bytes keep map order"
    );
    assert_eq!(
        canonical_partition(Some(&ab)),
        canonical_partition(Some(&ba))
    );
}

#[test]
fn canonical_partition_ignores_integer_width() {
    let widths = [
        Value::Int8(7),
        Value::Int16(7),
        Value::Int32(7),
        Value::Int64(7),
    ];
    let canon: Vec<Vec<u8>> = widths
        .into_iter()
        .map(|v| canonical_partition(Some(&map(vec![("p", v)]))))
        .collect();
    assert!(canon.windows(2).all(|w| w[0] == w[1]), "{canon:?}");
    // And a decoded stored key (Int64) matches a typed i32 partition.
    let stored = decoded_key(r#"["c",{"p":7}]"#).partition;
    assert_eq!(canonical_partition(stored.as_ref()), canon[0]);
}

#[test]
fn canonical_partition_distinguishes_number_types() {
    let int = canonical_partition(Some(&map(vec![("p", Value::Int64(1))])));
    let float = canonical_partition(Some(&map(vec![("p", Value::Float64(1.0))])));
    let string = canonical_partition(Some(&map(vec![("p", Value::String("1".into()))])));
    assert_ne!(int, float);
    assert_ne!(int, string);
    assert_ne!(float, string);
    assert_ne!(
        canonical_partition(None),
        canonical_partition(Some(&ConnectMap::new()))
    );
    assert_ne!(
        canonical_partition(Some(&map(vec![("p", Value::Null)]))),
        canonical_partition(Some(&ConnectMap::new()))
    );
    assert_ne!(
        canonical_partition(Some(&map(vec![("Filename", "a".into())]))),
        canonical_partition(Some(&map(vec![("filename", "a".into())])))
    );
}

// ---------------------------------------------------------------------------------------------
// Property tests
// ---------------------------------------------------------------------------------------------

fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i8>().prop_map(Value::Int8),
        any::<i16>().prop_map(Value::Int16),
        any::<i32>().prop_map(Value::Int32),
        any::<i64>().prop_map(Value::Int64),
        any::<f32>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::Float32),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::Float64),
        (-1.0e9f64..1.0e9).prop_map(Value::Float64),
        any::<String>().prop_map(Value::String),
        "[a-z\"\\\\\u{0}-\u{1f}é]{0,8}".prop_map(Value::String),
        proptest::collection::vec(any::<u8>(), 0..16).prop_map(Value::Bytes),
    ]
}

fn any_map() -> impl Strategy<Value = ConnectMap> {
    proptest::collection::vec((any::<String>(), any_value()), 0..8).prop_map(|fields| {
        let mut m = ConnectMap::new();
        for (k, v) in fields {
            m.insert(k, v).unwrap();
        }
        m
    })
}

/// Text that looks like JSON often enough to reach deep into the parser.
fn json_ish() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("[".to_owned()),
            Just("]".to_owned()),
            Just("{".to_owned()),
            Just("}".to_owned()),
            Just(",".to_owned()),
            Just(":".to_owned()),
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("\"c\"".to_owned()),
            Just("\"a\\u001".to_owned()),
            Just("\\".to_owned()),
            Just("\"".to_owned()),
            Just(" ".to_owned()),
            "-?[0-9]{1,25}(\\.[0-9]{0,5})?([eE][-+]?[0-9]{1,4})?",
            "\"[a-z\\\\\"]{0,5}\"",
        ],
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = decode_key(&bytes);
        let _ = decode_value(&bytes);
    }

    #[test]
    fn decoding_json_ish_text_never_panics(s in json_ish()) {
        let _ = decode_key(s.as_bytes());
        let _ = decode_value(s.as_bytes());
        let _ = decode_key(format!("[\"c\",{s}]").as_bytes());
        let _ = decode_value(format!("{{\"a\":{s}}}").as_bytes());
    }

    #[test]
    fn encode_decode_encode_is_byte_stable(m in any_map(), connector in any::<String>()) {
        let value = encode_value(&m);
        let decoded = decode_value(&value).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(decoded.len(), m.len());
        let again = encode_value(&decoded);
        prop_assert_eq!(String::from_utf8_lossy(&again), String::from_utf8_lossy(&value));

        let key = encode_key(&connector, Some(&m));
        let decoded = decode_key(&key).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&decoded.connector, &connector);
        let partition = decoded.partition.as_ref();
        prop_assert_eq!(encode_key(&decoded.connector, partition), key);
        prop_assert_eq!(canonical_partition(partition), canonical_partition(Some(&m)));
    }

    #[test]
    fn decoded_values_keep_their_meaning(m in any_map()) {
        let decoded = decode_value(&encode_value(&m)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for ((k, original), (k2, back)) in m.iter().zip(decoded.iter()) {
            prop_assert_eq!(k, k2);
            match original {
                Value::Int8(_) | Value::Int16(_) | Value::Int32(_) | Value::Int64(_) => {
                    prop_assert_eq!(back, &Value::Int64(original.as_i64().unwrap_or_default()));
                }
                Value::Float64(f) => prop_assert_eq!(back, &Value::Float64(*f)),
                Value::Float32(f) => {
                    let Value::Float64(b) = back else { return Err(TestCaseError::fail("not a float")) };
                    prop_assert_eq!(*b as f32, *f);
                }
                Value::Bytes(_) => prop_assert!(matches!(back, Value::String(_))),
                other => prop_assert_eq!(back, other),
            }
        }
    }
}
