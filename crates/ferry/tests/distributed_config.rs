//! `ferry distributed WORKER.properties`: its configuration: Kafka Connect's key names and
//! defaults, every problem of a file reported at once with its line, the timeout cross-checks, and the
//! command's refusal to start on a bad file.

mod support;

use std::time::Duration;

use ferry::DistributedConfig;
use ferry_plugin::{ConfigError, ConfigErrors, Properties};
use support::{Workspace, path_str, run};

const MINIMAL: &str = "bootstrap.servers=localhost:9092\n\
                       group.id=connect-cluster\n\
                       config.storage.topic=connect-configs\n\
                       offset.storage.topic=connect-offsets\n\
                       status.storage.topic=connect-status\n";

fn parse(text: &str) -> Result<DistributedConfig, ConfigErrors> {
    let props = Properties::parse("worker.properties", text.as_bytes()).expect("properties syntax");
    DistributedConfig::from_properties(&props)
}

fn errors(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(config) => panic!("expected errors, got {config:?}"),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn defaults_are_kafka_connects() {
    let config = parse(MINIMAL).expect("a minimal file is valid");
    let ms = Duration::from_millis;
    assert_eq!(config.bootstrap_servers, "localhost:9092");
    assert_eq!(config.group_id, "connect-cluster");
    let topics = [
        &config.config_topic,
        &config.offset_topic,
        &config.status_topic,
    ];
    let shape: Vec<(&str, i32, i16)> = topics
        .iter()
        .map(|t| (t.name.as_str(), t.partitions, t.replication_factor))
        .collect();
    assert_eq!(
        shape,
        [
            ("connect-configs", 1, 3),
            ("connect-offsets", 25, 3),
            ("connect-status", 5, 3)
        ]
    );
    assert_eq!(config.session_timeout, ms(10_000));
    assert_eq!(config.heartbeat_interval, ms(3_000));
    assert_eq!(config.rebalance_timeout, ms(60_000));
    assert_eq!(config.scheduled_rebalance_max_delay, ms(300_000));
    assert_eq!(config.offset_flush_interval, ms(60_000));
    assert_eq!(config.offset_flush_timeout, ms(5_000));
    assert_eq!(config.task_shutdown_graceful_timeout, ms(5_000));
    assert_eq!(config.key_converter, ferry_plugin::ConverterSpec::default());
    assert_eq!(
        config.rest.listeners[0].to_string(),
        "http://127.0.0.1:8083"
    );
    assert_eq!(config.worker_id(0), "127.0.0.1:8083");
    assert!(config.producer_overrides.is_empty() && config.client_overrides.is_empty());
}

/// The sample `config/connect-distributed.properties` shipped with Kafka (comments left out) runs as is.
#[test]
fn kafkas_sample_distributed_file_is_accepted() {
    let sample = "bootstrap.servers=localhost:9092\n\
                  group.id=connect-cluster\n\
                  key.converter=org.apache.kafka.connect.json.JsonConverter\n\
                  value.converter=org.apache.kafka.connect.json.JsonConverter\n\
                  key.converter.schemas.enable=true\n\
                  value.converter.schemas.enable=true\n\
                  offset.storage.topic=connect-offsets\n\
                  offset.storage.replication.factor=1\n\
                  config.storage.topic=connect-configs\n\
                  config.storage.replication.factor=1\n\
                  status.storage.topic=connect-status\n\
                  status.storage.replication.factor=1\n\
                  offset.flush.interval.ms=10000\n\
                  rest.advertised.listener=http\n\
                  plugin.path=/usr/share/java\n";
    let config = parse(sample).expect("Kafka's sample file is valid");
    assert_eq!(config.offset_flush_interval, Duration::from_secs(10));
    assert_eq!(config.offset_topic.replication_factor, 1);
    let got = errors(&format!("{MINIMAL}rest.advertised.listener=https\n"));
    assert_eq!(
        got,
        [
            "worker.properties:6: invalid value \"https\" for \"rest.advertised.listener\": no listener \
          is https://; add one to listeners or change rest.advertised.listener"
        ]
    );
}

#[test]
fn settings_are_read_with_the_prefixes_removed_and_secrets_hidden() {
    let text = format!(
        "{MINIMAL}offset.storage.partitions=-1\nstatus.storage.replication.factor=-1\n\
         config.storage.replication.factor=1\nsession.timeout.ms=45000\n\
         listeners=http://0.0.0.0:0\nrest.advertised.host.name=worker-1.example\n\
         rest.advertised.port=18083\nproducer.linger.ms=5\nconsumer.fetch.min.bytes=1\n\
         admin.client.id=a\nsasl.password=hunter2\nsecurity.protocol=SASL_SSL\n\
         value.converter=StringConverter\n"
    );
    let config = parse(&text).expect("valid");
    assert_eq!(config.offset_topic.partitions, -1);
    assert_eq!(config.status_topic.replication_factor, -1);
    assert_eq!(config.config_topic.replication_factor, 1);
    assert_eq!(config.session_timeout, Duration::from_secs(45));
    assert_eq!(config.worker_id(4321), "worker-1.example:18083");
    assert_eq!(config.producer_overrides.get("linger.ms"), Some("5"));
    assert_eq!(config.consumer_overrides.get("fetch.min.bytes"), Some("1"));
    assert_eq!(config.admin_overrides.get("client.id"), Some("a"));
    assert_eq!(
        config.client_overrides.get("sasl.password"),
        Some("hunter2")
    );
    assert!(!format!("{config:?}").contains("hunter2"));
    assert_eq!(config.value_converter, ferry_plugin::ConverterSpec::String);
}

#[test]
fn an_ephemeral_listener_port_is_the_worker_ids_port_once_bound() {
    let config = parse(&format!("{MINIMAL}listeners=http://127.0.0.1:0\n")).expect("valid");
    assert_eq!(config.advertised_port, None);
    assert_eq!(config.worker_id(40123), "127.0.0.1:40123");
    let v6 = parse(&format!("{MINIMAL}listeners=http://[::1]:9000\n")).expect("valid");
    assert_eq!(v6.worker_id(0), "[::1]:9000");
}

#[test]
fn every_missing_required_key_is_reported_at_once() {
    let got = errors("plugin.path=/opt/connectors\n");
    let missing: Vec<&str> = [
        "bootstrap.servers",
        "group.id",
        "config.storage.topic",
        "offset.storage.topic",
        "status.storage.topic",
    ]
    .into_iter()
    .filter(|key| {
        got.iter()
            .any(|e| e.contains(&format!("missing required key {key:?}")))
    })
    .collect();
    assert_eq!(missing.len(), 5, "{got:#?}");
    assert_eq!(got.len(), 5, "{got:#?}");
    assert!(got.iter().all(|e| e.starts_with("worker.properties: ")));
}

#[test]
fn bad_values_are_named_with_file_and_line() {
    let text = format!(
        "{MINIMAL}offset.storage.partitions=0\nstatus.storage.replication.factor=x\n\
         session.timeout.ms=-5\nrest.advertised.port=0\nproducer.=1\ngroup.idd=x\n\
         offset.storage.file.filename=/tmp/o\n"
    );
    let got = errors(&text);
    let expected = [
        "worker.properties:6: invalid value \"0\" for \"offset.storage.partitions\": must be a whole \
         number of partitions, 1 or more, or -1 for the broker's default (default 25)",
        "worker.properties:7: invalid value \"x\" for \"status.storage.replication.factor\"",
        "worker.properties:8: invalid value \"-5\" for \"session.timeout.ms\"",
        "worker.properties:9: invalid value \"0\" for \"rest.advertised.port\"",
        "worker.properties:10: invalid value \"1\" for \"producer.\": names no client setting",
        "worker.properties:11: unknown key \"group.idd\"; did you mean \"group.id\"?",
        "worker.properties:12: unknown key \"offset.storage.file.filename\"; it is a standalone \
         worker key; distributed workers keep offsets in offset.storage.topic",
    ];
    assert_eq!(got.len(), expected.len(), "{got:#?}");
    for (error, prefix) in got.iter().zip(expected) {
        assert!(
            error.starts_with(prefix),
            "{error}\nshould start with\n{prefix}"
        );
    }
}

#[test]
fn a_store_other_than_kafka_is_refused_with_the_reason_and_kafka_is_accepted() {
    let got = errors(&format!("{MINIMAL}offset.storage=postgres\n"));
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(
        got[0].starts_with(
            "worker.properties:6: invalid value \"postgres\" for \"offset.storage\": distributed \
             workers keep offsets in a Kafka topic (offset.storage.topic)"
        ) && got[0].contains("offset.storage=postgres is for `ferry standalone`"),
        "{got:#?}"
    );
    assert!(parse(&format!("{MINIMAL}offset.storage=Kafka\n")).is_ok());
}

#[test]
fn topics_must_be_valid_and_distinct() {
    let text = "bootstrap.servers=localhost:9092\ngroup.id=g\nconfig.storage.topic=connect\n\
                offset.storage.topic=connect\nstatus.storage.topic=bad topic\n";
    let got = errors(text);
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(
        got[0].starts_with("worker.properties:4: invalid value \"connect\" for \"offset.storage.topic\": is the same topic as config.storage.topic"),
        "{got:#?}"
    );
    assert!(got[1].starts_with("worker.properties:5: invalid value \"bad topic\" for \"status.storage.topic\": must be a Kafka topic name"));
}

#[test]
fn an_unreachable_advertised_host_is_refused() {
    let got = errors(&format!("{MINIMAL}listeners=http://:8083\n"));
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(
        got[0].contains("\"listeners\": binds every interface (0.0.0.0)")
            && got[0].contains("set rest.advertised.host.name"),
        "{got:#?}"
    );
    let named = format!("{MINIMAL}listeners=http://:8083\nrest.advertised.host.name=w1\n");
    assert_eq!(parse(&named).expect("valid").worker_id(0), "w1:8083");
}

#[test]
fn heartbeat_must_be_below_the_session_timeout() {
    let got = errors(&format!(
        "{MINIMAL}session.timeout.ms=6000\nheartbeat.interval.ms=6000\n"
    ));
    assert_eq!(
        got,
        [
            "worker.properties:7: invalid value \"6000\" for \"heartbeat.interval.ms\": \
          heartbeat.interval.ms (6000) must be lower than session.timeout.ms (6000), as Kafka requires \
          (usually a third of it or less)"
        ]
    );
    // Only the session timeout set: the error points at it.
    let got = errors(&format!("{MINIMAL}session.timeout.ms=3000\n"));
    assert!(
        got.len() == 1
            && got[0].starts_with(
                "worker.properties:6: invalid value \"3000\" for \"session.timeout.ms\""
            ),
        "{got:#?}"
    );
}

#[test]
fn a_revoked_task_must_stop_and_commit_within_the_rebalance_timeout() {
    let got = errors(&format!(
        "{MINIMAL}rebalance.timeout.ms=20000\ntask.shutdown.graceful.timeout.ms=15000\n"
    ));
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(
        got[0].starts_with(
            "worker.properties:7: invalid value \"15000\" for \"task.shutdown.graceful.timeout.ms\": \
             task.shutdown.graceful.timeout.ms (15000) + offset.flush.timeout.ms (5000) must be below \
             rebalance.timeout.ms (20000): a task whose assignment is revoked must stop and commit its \
             final offsets within the rebalance"
        ),
        "{got:#?}"
    );
    // Only the rebalance timeout set (below the defaults' 10 s): the error points at it.
    let got = errors(&format!("{MINIMAL}rebalance.timeout.ms=10000\n"));
    assert!(
        got.len() == 1
            && got[0].starts_with(
                "worker.properties:6: invalid value \"10000\" for \"rebalance.timeout.ms\""
            ),
        "{got:#?}"
    );
    let fits =
        format!("{MINIMAL}rebalance.timeout.ms=20000\ntask.shutdown.graceful.timeout.ms=14999\n");
    assert!(parse(&fits).is_ok());
}

#[test]
fn ferry_distributed_refuses_a_bad_file_before_starting_anything() {
    let ws = Workspace::new();
    let bad = ws.write(
        "bad.properties",
        "bootstrap.servers=localhost:9092\ngroup.id=g\nheartbeat.interval.ms=soon\n",
    );
    let out = run(ws.path(), &["distributed", &path_str(&bad)]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    for fragment in [
        "bad.properties:3: invalid value \"soon\" for \"heartbeat.interval.ms\"",
        "missing required key \"config.storage.topic\"",
        "missing required key \"offset.storage.topic\"",
        "missing required key \"status.storage.topic\"",
    ] {
        assert!(
            out.stderr.contains(fragment),
            "{fragment:?} missing from:\n{}",
            out.stderr
        );
    }
    assert!(
        !out.stderr.contains("configuration valid"),
        "{}",
        out.stderr
    );
}

/// The errors are typed: each names its key (what a program embedding Ferry would match on).
#[test]
fn errors_carry_their_key() {
    let Err(errors) = parse("group.id=g\n") else {
        panic!("bootstrap.servers is required")
    };
    assert!(
        errors
            .iter()
            .any(|e| matches!(e, ConfigError::Missing { key, .. } if key == "bootstrap.servers"))
    );
}

#[test]
fn config_providers_are_accepted_as_in_standalone() {
    let config = parse(&format!(
        "{MINIMAL}config.providers=file,env\n\
         config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n\
         config.providers.env.class=EnvVarConfigProvider\n\
         config.providers.env.param.allowlist.pattern=DB_.*\n"
    ))
    .expect("provider keys are worker keys");
    assert!(!config.config_providers.is_empty());
    let found = errors(&format!(
        "{MINIMAL}config.providers=vault\nconfig.providers.vault.class=com.acme.Vault\n"
    ));
    assert!(
        found
            .iter()
            .any(|e| e.contains("config.providers.vault.class") && e.contains("com.acme.Vault")),
        "{found:?}"
    );
}

#[test]
fn an_https_listener_is_advertised_as_kafka_connect_chooses_it_and_basic_auth_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users.properties");
    std::fs::write(&users, "alice: s3cret\n").unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["w1.example".to_owned()]).unwrap();
    let keystore = dir.path().join("keystore.pem");
    std::fs::write(
        &keystore,
        format!(
            "{}{}",
            certified.key_pair.serialize_pem(),
            certified.cert.pem()
        ),
    )
    .unwrap();
    let tls = format!(
        "listeners.https.ssl.keystore.type=PEM\nlisteners.https.ssl.keystore.location={}\n\
         rest.basic.auth.credentials.file={}\n",
        keystore.display(),
        users.display()
    );
    // Only https: it is advertised.
    let config = parse(&format!(
        "{MINIMAL}{tls}listeners=https://w1.example:8443\n"
    ))
    .expect("valid");
    assert_eq!(config.advertised_scheme(), "https");
    assert_eq!(config.worker_id(0), "w1.example:8443");
    assert!(config.rest.tls.is_some() && config.rest.basic_auth.is_some());
    // http and https: Kafka Connect advertises http unless rest.advertised.listener says https.
    let both = format!("{MINIMAL}{tls}listeners=https://w1.example:8443,http://w1.example:8083\n");
    let config = parse(&both).expect("valid");
    assert_eq!(
        (config.advertised_scheme(), config.worker_id(0)),
        ("http", "w1.example:8083".to_owned())
    );
    let config = parse(&format!("{both}rest.advertised.listener=https\n")).expect("valid");
    assert_eq!(
        (config.advertised_scheme(), config.worker_id(0)),
        ("https", "w1.example:8443".to_owned())
    );
    // An https listener without a keystore is refused, naming what to set.
    let got = errors(&format!("{MINIMAL}listeners=https://w1.example:8443\n"));
    assert!(
        got.iter()
            .any(|e| e.contains("ssl.keystore.location") && e.contains("PEM")),
        "{got:?}"
    );
}

#[test]
fn an_inline_private_key_that_does_not_match_its_chain_is_refused_without_showing_the_key() {
    let one = rcgen::generate_simple_self_signed(vec!["w1.example".to_owned()]).unwrap();
    let other = rcgen::generate_simple_self_signed(vec!["w1.example".to_owned()]).unwrap();
    let key = one.key_pair.serialize_pem();
    let mut pairs: Vec<(String, String)> = MINIMAL
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    pairs.extend([
        ("listeners".to_owned(), "https://w1.example:8443".to_owned()),
        ("ssl.keystore.type".to_owned(), "PEM".to_owned()),
        ("ssl.keystore.key".to_owned(), key.clone()),
        (
            "ssl.keystore.certificate.chain".to_owned(),
            other.cert.pem(),
        ),
    ]);
    let props = Properties::from_pairs("worker.properties", pairs);
    let got: Vec<String> = match DistributedConfig::from_properties(&props) {
        Ok(config) => panic!("a key and a chain that do not match were accepted: {config:?}"),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    };
    assert!(
        got.iter().any(|e| e.contains("ssl.keystore.key")),
        "the error names the key: {got:?}"
    );
    // The private key's body (any line of it) must not be shown.
    let body = key.lines().nth(1).unwrap_or_default();
    assert!(
        !body.is_empty()
            && got
                .iter()
                .all(|e| !e.contains(body) && !e.contains("PRIVATE KEY")),
        "the private key is shown: {got:?}"
    );
}

#[test]
fn exactly_once_source_support_takes_kafka_connects_values() {
    use ferry_runtime::config::exactly_once::ExactlyOnceSource;
    assert_eq!(
        parse(MINIMAL).expect("valid").exactly_once_source,
        ExactlyOnceSource::Disabled
    );
    for (value, expected) in [
        ("enabled", ExactlyOnceSource::Enabled),
        ("PREPARING", ExactlyOnceSource::Preparing),
        ("disabled", ExactlyOnceSource::Disabled),
    ] {
        let config = parse(&format!("{MINIMAL}exactly.once.source.support={value}\n"))
            .unwrap_or_else(|e| panic!("{value}: {e}"));
        assert_eq!(config.exactly_once_source, expected, "{value}");
    }
    let refused = errors(&format!("{MINIMAL}exactly.once.source.support=on\n"));
    assert!(
        refused
            .iter()
            .any(|e| e.contains("exactly.once.source.support")
                && e.contains("disabled (default), preparing, enabled")),
        "{refused:?}"
    );
}
