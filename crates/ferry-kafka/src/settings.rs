//! What Ferry's Kafka clients set beyond librdkafka's defaults, each for a measured reason; a
//! user's client setting of the same key always wins.

/// What the reading consumer of every internal topic (offsets, configs, status) sets beyond
/// librdkafka's defaults; a client override of the same key wins ([`reader_settings`]).
///
/// `fetch.queue.backoff.ms`: librdkafka postpones a partition's next fetch by this much (default
/// 1 s) whenever the consumer's local queue is past `queued.min.messages` or
/// `queued.max.messages.kbytes`. Reading a large topic to its end drains that queue much faster than
/// a second, so with the default the read stalls about a second at a time: a 1M-record,
/// 25-partition offsets topic took 4.6–6.0 s to open, 1.0–2.2 s with this setting (docs/benchmarks.md). The
/// backoff only applies while the queue is past those thresholds, which an idle reader between
/// reads is not, so a short one costs nothing when there is little to read.
pub const READER_SETTINGS: &[(&str, &str)] = &[("fetch.queue.backoff.ms", "10")];

/// What every producer of the internal topics (offsets, configs, status, and the transactional
/// writers of a connector's configurations and a task's offsets) sets beyond librdkafka's defaults;
/// a client override of the same key wins ([`producer_settings`]). The Kafka sink has the same
/// setting among its defaults.
///
/// `enable.sparse.connections=false`: connect to every broker the metadata names at once, not when
/// a request first needs it. A transactional producer's `initTransactions` asks for its
/// coordinator right after the producer is made; by then the bootstrap connection has given way to
/// the brokers it named, and with sparse connections none of those is connected yet, so librdkafka
/// finds "no brokers available", and tries again on a 500 ms timer. Measured on a local Apache Kafka
/// 4.4 broker (librdkafka 2.12, 15 producers each): `initTransactions` took 60 ms, or 510 ms in 6 of
/// 15, with the default; 7.5–13 ms in 15 of 15 with this setting. Distributed workers make such a
/// producer for every connector they create (its configurations' writer) and every task they start
/// (its offsets' writer), so it is start-up time. The cost: a producer holds a connection to every
/// broker of the cluster, as a producer writing to many partitions does anyway.
pub const PRODUCER_SETTINGS: &[(&str, &str)] = &[("enable.sparse.connections", "false")];

/// Sets [`READER_SETTINGS`] on `client`, except those `overrides` (the user's client settings,
/// already set on it) name.
pub(crate) fn reader_settings(client: &mut rdkafka::ClientConfig, overrides: &[(String, String)]) {
    set_unless_overridden(client, READER_SETTINGS, overrides);
}

/// Sets [`PRODUCER_SETTINGS`] on `client`, except those `overrides` (the user's client settings,
/// already set on it) name.
pub(crate) fn producer_settings(
    client: &mut rdkafka::ClientConfig,
    overrides: &[(String, String)],
) {
    set_unless_overridden(client, PRODUCER_SETTINGS, overrides);
}

fn set_unless_overridden(
    client: &mut rdkafka::ClientConfig,
    settings: &[(&str, &str)],
    overrides: &[(String, String)],
) {
    for (key, value) in settings {
        if !overrides.iter().any(|(k, _)| k.trim() == *key) {
            client.set(*key, *value);
        }
    }
}
