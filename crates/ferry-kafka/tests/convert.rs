//! Golden bytes: what each converter writes, compared with what Kafka Connect's converter of the same
//! class writes for the same schema and value.
//!
//! Kafka Connect's bytes follow `JsonConverter.fromConnectData` / `asJsonSchema` / `convertToJson`
//! (envelope `schema` then `payload`; schema objects `type`, then `items` | `keys`,`values` | `fields`,
//! then `optional`, `name`, `version`, `doc`, `parameters`, `default`; each struct field's schema
//! followed by `field`), Jackson's
//! compact output, `StringConverter.fromConnectData` (`toString()` as UTF-8) and
//! `ByteArrayConverter.fromConnectData`.

use ferry_api::{Field, Schema};
use ferry_kafka::convert::{Converter, Role, header_value};
use serde_json::{Value, json};

fn convert(converter: Converter, schema: Option<&Schema>, value: Option<&Value>) -> Option<String> {
    converter
        .convert(Role::Value, schema, value)
        .unwrap_or_else(|e| panic!("conversion failed: {e}"))
        .map(|bytes| String::from_utf8(bytes).expect("UTF-8"))
}

fn json_with_schemas(schema: &Schema, value: Value) -> String {
    convert(Converter::json(true), Some(schema), Some(&value)).expect("not null")
}

fn refused(converter: Converter, schema: Option<&Schema>, value: &Value) -> String {
    match converter.convert(Role::Value, schema, Some(value)) {
        Ok(bytes) => panic!("expected a refusal, got {bytes:?}"),
        Err(e) => e.to_string(),
    }
}

fn sequence_schema() -> Schema {
    Schema::unnamed_struct([
        Field::new("partition", Schema::int32()),
        Field::new("seq", Schema::int64()),
    ])
}

// ---------------------------------------------------------------------------------------------
// JsonConverter, schemas.enable=true
// ---------------------------------------------------------------------------------------------

#[test]
fn a_file_stream_source_line_is_a_string_envelope() {
    // Kafka Connect's FileStreamSourceTask declares Schema.STRING_SCHEMA for its lines.
    assert_eq!(
        json_with_schemas(&Schema::string(), json!("hello")),
        r#"{"schema":{"type":"string","optional":false},"payload":"hello"}"#
    );
}

#[test]
fn a_struct_lists_its_fields_in_order_with_field_last() {
    assert_eq!(
        json_with_schemas(&sequence_schema(), json!({"seq": 5, "partition": 0})),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"partition"},"#,
            r#"{"type":"int64","optional":false,"field":"seq"}],"optional":false},"#,
            r#""payload":{"partition":0,"seq":5}}"#
        )
    );
}

#[test]
fn name_version_and_doc_follow_optional() {
    let schema = Schema::boolean()
        .named("bool")
        .with_version(3)
        .with_doc("the documentation");
    assert_eq!(
        json_with_schemas(&schema, json!(true)),
        r#"{"schema":{"type":"boolean","optional":false,"name":"bool","version":3,"doc":"the documentation"},"payload":true}"#
    );
    let row = Schema::struct_(
        "com.example.Row",
        [
            Field::new("id", Schema::int64()),
            Field::new("note", Schema::string().optional().with_doc("free text")),
        ],
    )
    .with_version(2);
    assert_eq!(
        json_with_schemas(&row, json!({"id": 7})),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"},"#,
            r#"{"type":"string","optional":true,"doc":"free text","field":"note"}],"optional":false,"#,
            r#""name":"com.example.Row","version":2},"payload":{"id":7,"note":null}}"#
        )
    );
}

#[test]
fn every_primitive_type_has_kafka_connects_type_name() {
    let cases = [
        (
            Schema::int8(),
            json!(12),
            r#"{"type":"int8","optional":false}"#,
            "12",
        ),
        (
            Schema::int16(),
            json!(-12),
            r#"{"type":"int16","optional":false}"#,
            "-12",
        ),
        (
            Schema::int32(),
            json!(12),
            r#"{"type":"int32","optional":false}"#,
            "12",
        ),
        (
            Schema::int64(),
            json!(4398046511104_i64),
            r#"{"type":"int64","optional":false}"#,
            "4398046511104",
        ),
        (
            Schema::float32(),
            json!(12.34),
            r#"{"type":"float","optional":false}"#,
            "12.34",
        ),
        (
            Schema::float64(),
            json!(12.34),
            r#"{"type":"double","optional":false}"#,
            "12.34",
        ),
        (
            Schema::boolean(),
            json!(false),
            r#"{"type":"boolean","optional":false}"#,
            "false",
        ),
        (
            Schema::string(),
            json!("a\u{1}é"),
            r#"{"type":"string","optional":false}"#,
            "\"a\\u0001é\"",
        ),
        // Kafka Connect's bytesToJson: "test-string" as base64.
        (
            Schema::bytes(),
            json!("dGVzdC1zdHJpbmc="),
            r#"{"type":"bytes","optional":false}"#,
            r#""dGVzdC1zdHJpbmc=""#,
        ),
    ];
    for (schema, value, schema_json, payload) in cases {
        assert_eq!(
            json_with_schemas(&schema, value),
            format!(r#"{{"schema":{schema_json},"payload":{payload}}}"#),
            "{schema}"
        );
    }
}

#[test]
fn floats_print_like_java() {
    // A double field given an integer is a Java Double: 1.0; large and small ones in E notation.
    assert_eq!(
        json_with_schemas(&Schema::float64(), json!(1)),
        r#"{"schema":{"type":"double","optional":false},"payload":1.0}"#
    );
    assert_eq!(
        json_with_schemas(&Schema::float64(), json!(1e10)),
        r#"{"schema":{"type":"double","optional":false},"payload":1.0E10}"#
    );
    assert_eq!(
        json_with_schemas(&Schema::float32(), json!(0.1)),
        r#"{"schema":{"type":"float","optional":false},"payload":0.1}"#
    );
    // Schemaless doubles too.
    assert_eq!(
        convert(Converter::json(false), None, Some(&json!([0.0001, 2.5, 3]))).as_deref(),
        Some("[1.0E-4,2.5,3]")
    );
}

#[test]
fn arrays_and_maps() {
    let array = Schema::array(Schema::int32());
    assert_eq!(
        json_with_schemas(&array, json!([1, 2, 3])),
        r#"{"schema":{"type":"array","items":{"type":"int32","optional":false},"optional":false},"payload":[1,2,3]}"#
    );
    let string_keys = Schema::map(Schema::string(), Schema::int32());
    assert_eq!(
        json_with_schemas(&string_keys, json!({"key1": 12, "key2": 15})),
        concat!(
            r#"{"schema":{"type":"map","keys":{"type":"string","optional":false},"#,
            r#""values":{"type":"int32","optional":false},"optional":false},"payload":{"key1":12,"key2":15}}"#
        )
    );
    // Non-string keys: an array of [key, value] pairs, from an object or from pairs.
    let int_keys = Schema::map(Schema::int32(), Schema::int32());
    let expected = concat!(
        r#"{"schema":{"type":"map","keys":{"type":"int32","optional":false},"#,
        r#""values":{"type":"int32","optional":false},"optional":false},"payload":[[1,12],[2,15]]}"#
    );
    assert_eq!(
        json_with_schemas(&int_keys, json!({"1": 12, "2": 15})),
        expected
    );
    assert_eq!(
        json_with_schemas(&int_keys, json!([[1, 12], [2, 15]])),
        expected
    );
}

#[test]
fn nulls_tombstones_and_optional_schemas() {
    let json = Converter::json(true);
    // No schema and no value: null bytes, a tombstone.
    assert_eq!(convert(json, None, None), None);
    assert_eq!(convert(json, None, Some(&Value::Null)), None);
    // An optional schema with a null value: an envelope with a null payload.
    assert_eq!(
        convert(json, Some(&Schema::string().optional()), None).as_deref(),
        Some(r#"{"schema":{"type":"string","optional":true},"payload":null}"#)
    );
    // A required schema refuses null (Kafka Connect: "null value for field that is required").
    let message = match json.convert(Role::Value, Some(&Schema::string()), None) {
        Err(e) => e.to_string(),
        Ok(bytes) => panic!("null for a required schema accepted: {bytes:?}"),
    };
    assert!(message.contains("null for a required string"), "{message}");
    assert!(
        message.starts_with("org.apache.kafka.connect.json.JsonConverter cannot convert the value"),
        "{message}"
    );
    // Without schemas: a tombstone, or `null` for an optional schema (Jackson's NullNode).
    let plain = Converter::json(false);
    assert_eq!(convert(plain, None, None), None);
    assert_eq!(
        convert(plain, Some(&Schema::int32().optional()), None).as_deref(),
        Some("null")
    );
}

#[test]
fn schemaless_values_have_a_null_schema() {
    assert_eq!(
        convert(Converter::json(true), None, Some(&json!("hello"))).as_deref(),
        Some(r#"{"schema":null,"payload":"hello"}"#)
    );
    assert_eq!(
        convert(
            Converter::json(true),
            None,
            Some(&json!({"b": [1, "x", true], "a": null}))
        )
        .as_deref(),
        Some(r#"{"schema":null,"payload":{"a":null,"b":[1,"x",true]}}"#)
    );
}

#[test]
fn values_that_do_not_fit_their_schema_are_refused_saying_where() {
    let json = Converter::json(true);
    let message = refused(
        json,
        Some(&sequence_schema()),
        &json!({"partition": 0, "seq": "five"}),
    );
    assert!(
        message.contains(r#"field "seq": expected an integer (int64), got a string "five""#),
        "{message}"
    );
    let message = refused(
        json,
        Some(&sequence_schema()),
        &json!({"partition": 0, "seq": 1, "extra": 2}),
    );
    assert!(
        message
            .contains(r#"field "extra" is not in the struct schema (its fields: partition, seq)"#),
        "{message}"
    );
    let message = refused(json, Some(&sequence_schema()), &json!({"partition": 0}));
    assert!(
        message.contains(r#"field "seq": null for a required int64"#),
        "{message}"
    );
    let message = refused(json, Some(&Schema::int8()), &json!(300));
    assert!(
        message.contains("300 is outside the range of an int8 (-128 to 127)"),
        "{message}"
    );
    let message = refused(json, Some(&Schema::float64()), &json!(true));
    assert!(
        message.contains("expected a number (float64), got a boolean true"),
        "{message}"
    );
    let message = refused(
        json,
        Some(&Schema::array(Schema::int32())),
        &json!([1, 2.5]),
    );
    assert!(
        message.contains("[1]: expected an integer (int32)"),
        "{message}"
    );
    let message = refused(json, Some(&Schema::bytes()), &json!("not base64!"));
    assert!(
        message.contains("bytes must be a base64 string"),
        "{message}"
    );
}

// ---------------------------------------------------------------------------------------------
// JsonConverter, schemas.enable=false
// ---------------------------------------------------------------------------------------------

#[test]
fn without_schemas_the_bare_json_is_written() {
    let plain = Converter::json(false);
    assert_eq!(
        convert(plain, Some(&Schema::string()), Some(&json!("hello"))).as_deref(),
        Some(r#""hello""#)
    );
    assert_eq!(
        convert(
            plain,
            Some(&sequence_schema()),
            Some(&json!({"seq": 5, "partition": 0}))
        )
        .as_deref(),
        Some(r#"{"partition":0,"seq":5}"#)
    );
    assert_eq!(
        convert(plain, None, Some(&json!(42))).as_deref(),
        Some("42")
    );
}

// ---------------------------------------------------------------------------------------------
// StringConverter
// ---------------------------------------------------------------------------------------------

#[test]
fn string_converter_writes_raw_text() {
    let string = Converter::string();
    // The schema is ignored, as Kafka Connect's StringConverter ignores it.
    assert_eq!(
        convert(
            string,
            Some(&Schema::string()),
            Some(&json!("hello \"x\"\n"))
        )
        .as_deref(),
        Some("hello \"x\"\n")
    );
    assert_eq!(convert(string, None, Some(&json!(5))).as_deref(), Some("5"));
    assert_eq!(
        convert(string, None, Some(&json!(1.0))).as_deref(),
        Some("1.0")
    );
    assert_eq!(
        convert(string, None, Some(&json!(true))).as_deref(),
        Some("true")
    );
    // Ferry writes structured values as JSON text (Kafka Connect: Java toString()).
    assert_eq!(
        convert(
            string,
            Some(&sequence_schema()),
            Some(&json!({"partition": 0, "seq": 5}))
        )
        .as_deref(),
        Some(r#"{"partition":0,"seq":5}"#)
    );
    assert_eq!(convert(string, Some(&Schema::string()), None), None);
    assert_eq!(
        string.class_name(),
        "org.apache.kafka.connect.storage.StringConverter"
    );
}

// ---------------------------------------------------------------------------------------------
// ByteArrayConverter
// ---------------------------------------------------------------------------------------------

#[test]
fn byte_array_converter_passes_bytes_through() {
    let bytes = Converter::byte_array();
    assert_eq!(
        bytes
            .convert(
                Role::Value,
                Some(&Schema::bytes()),
                Some(&json!("AAEC/w=="))
            )
            .expect("bytes"),
        Some(vec![0, 1, 2, 255])
    );
    assert_eq!(
        bytes
            .convert(Role::Key, Some(&Schema::string()), Some(&json!("héllo")))
            .expect("string"),
        Some("héllo".as_bytes().to_vec())
    );
    assert_eq!(
        bytes
            .convert(Role::Value, None, Some(&json!("x")))
            .expect("string"),
        Some(b"x".to_vec())
    );
    assert_eq!(
        bytes
            .convert(Role::Value, Some(&Schema::bytes().optional()), None)
            .expect("null"),
        None
    );
    let message = refused(bytes, None, &json!({"a": 1}));
    assert!(
        message.contains("writes bytes and strings only, not an object"),
        "{message}"
    );
    let message = refused(
        bytes,
        Some(&sequence_schema()),
        &json!({"partition": 0, "seq": 5}),
    );
    assert!(
        message.contains("a struct schema cannot be written as raw bytes"),
        "{message}"
    );
    assert_eq!(
        bytes.class_name(),
        "org.apache.kafka.connect.converters.ByteArrayConverter"
    );
}

#[test]
fn keys_are_named_in_errors() {
    let Err(e) = Converter::byte_array().convert(Role::Key, None, Some(&json!(1))) else {
        panic!("a number key accepted by ByteArrayConverter");
    };
    assert!(e.to_string().contains("cannot convert the key"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Headers (SimpleHeaderConverter)
// ---------------------------------------------------------------------------------------------

#[test]
fn headers_are_text() {
    assert_eq!(header_value(&json!("abc")), Some(b"abc".to_vec()));
    assert_eq!(header_value(&json!(1)), Some(b"1".to_vec()));
    assert_eq!(header_value(&json!(true)), Some(b"true".to_vec()));
    assert_eq!(header_value(&Value::Null), None);
    assert_eq!(
        header_value(&json!({"a": [1]})),
        Some(br#"{"a":[1]}"#.to_vec())
    );
}

// ---------------------------------------------------------------------------------------------
// Logical types and schema parameters
// ---------------------------------------------------------------------------------------------

#[test]
fn logical_types_are_named_versioned_schemas_with_parameters_after_doc() {
    // Kafka's JsonConverterTest.decimalToJson: Decimal.schema(2) and 1.56 (unscaled 156 = 0x009C).
    assert_eq!(
        json_with_schemas(&Schema::decimal(2), json!("AJw=")),
        concat!(
            r#"{"schema":{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","#,
            r#""version":1,"parameters":{"scale":"2"}},"payload":"AJw="}"#
        )
    );
    // JsonConverterTest.dateToJson / timeToJson / timestampToJson.
    assert_eq!(
        json_with_schemas(&Schema::date(), json!(10000)),
        concat!(
            r#"{"schema":{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Date","#,
            r#""version":1},"payload":10000}"#
        )
    );
    assert_eq!(
        json_with_schemas(&Schema::time(), json!(14_400_000)),
        concat!(
            r#"{"schema":{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Time","#,
            r#""version":1},"payload":14400000}"#
        )
    );
    assert_eq!(
        json_with_schemas(&Schema::timestamp().optional(), json!(2_000_000_000)),
        concat!(
            r#"{"schema":{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","#,
            r#""version":1},"payload":2000000000}"#
        )
    );
    // Parameters keep their order and come after doc, before a struct field's name.
    let schema = Schema::unnamed_struct([Field::new(
        "amount",
        Schema::decimal(2)
            .with_parameter("connect.decimal.precision", "10")
            .with_doc("d")
            .optional(),
    )]);
    assert_eq!(
        json_with_schemas(&schema, json!({"amount": null})),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"bytes","optional":true,"#,
            r#""name":"org.apache.kafka.connect.data.Decimal","version":1,"doc":"d","#,
            r#""parameters":{"scale":"2","connect.decimal.precision":"10"},"field":"amount"}],"#,
            r#""optional":false},"payload":{"amount":null}}"#
        )
    );
}

#[test]
fn a_default_follows_the_parameters_and_replaces_a_null() {
    // Debezium's `source.snapshot`: an optional Enum string with default "false".
    let snapshot = Schema::string()
        .optional()
        .named("io.debezium.data.Enum")
        .with_version(1)
        .with_parameter("allowed", "true,false")
        .with_default("false");
    let schema = Schema::unnamed_struct([
        Field::new("snapshot", snapshot),
        Field::new("n", Schema::float32().with_default(1.5f32)),
        Field::new("b", Schema::bytes().with_default(vec![1u8, 2])),
    ]);
    assert_eq!(
        json_with_schemas(&schema, json!({"snapshot": "true", "n": null, "b": null})),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"#,
            r#""name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,false"},"#,
            r#""default":"false","field":"snapshot"},"#,
            r#"{"type":"float","optional":false,"default":1.5,"field":"n"},"#,
            r#"{"type":"bytes","optional":false,"default":"AQI=","field":"b"}],"optional":false},"#,
            // Kafka Connect's replace.null.with.default=true (its default): a null is the default,
            // even in an optional field.
            r#""payload":{"snapshot":"true","n":1.5,"b":"AQI="}}"#
        )
    );
    assert_eq!(
        json_with_schemas(&schema, json!({"snapshot": null, "n": 2.0, "b": "AA=="})),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":true,"#,
            r#""name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,false"},"#,
            r#""default":"false","field":"snapshot"},"#,
            r#"{"type":"float","optional":false,"default":1.5,"field":"n"},"#,
            r#"{"type":"bytes","optional":false,"default":"AQI=","field":"b"}],"optional":false},"#,
            r#""payload":{"snapshot":"false","n":2.0,"b":"AA=="}}"#
        )
    );
    // A default of another type than its schema is refused, saying where.
    let bad = Schema::unnamed_struct([Field::new("x", Schema::int32().with_default("one"))]);
    let message = refused(Converter::json(true), Some(&bad), &json!({"x": 1}));
    assert!(
        message.contains(r#"field "x""#) && message.contains("default"),
        "{message}"
    );
}

#[test]
fn non_finite_floats_are_written_quoted_as_jackson_does() {
    // Kafka Connect's JsonConverter writes a Double NaN/±Infinity through Jackson, whose default
    // QUOTE_NON_NUMERIC_NUMBERS writes them as the strings "NaN", "Infinity", "-Infinity". A record
    // carries them as those strings.
    let schema = Schema::unnamed_struct([
        Field::new("d", Schema::float64()),
        Field::new("f", Schema::float32()),
        Field::new("n", Schema::float64()),
    ]);
    assert_eq!(
        json_with_schemas(
            &schema,
            json!({"d": "NaN", "f": "-Infinity", "n": "Infinity"})
        ),
        concat!(
            r#"{"schema":{"type":"struct","fields":[{"type":"double","optional":false,"field":"d"},"#,
            r#"{"type":"float","optional":false,"field":"f"},{"type":"double","optional":false,"field":"n"}],"#,
            r#""optional":false},"payload":{"d":"NaN","f":"-Infinity","n":"Infinity"}}"#
        )
    );
    assert!(
        refused(
            Converter::json(true),
            Some(&Schema::float64()),
            &json!("nan")
        )
        .contains("float64")
    );
}
