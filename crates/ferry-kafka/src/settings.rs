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

/// What every Kafka client of the internal topics (offsets, configs, status: their admin clients,
/// readers and producers, and so the transactional writers of a connector's configurations and a
/// task's offsets) and of the worker group's task slots sets beyond librdkafka's defaults; a client
/// override of the same key wins ([`client_settings`]). The Kafka sink has the same setting among its
/// defaults.
///
/// `enable.sparse.connections=false`: connect to every broker the metadata names at once. With
/// sparse connections a new client, once its bootstrap connection has given way to the brokers it
/// named, connects one of those only when a request needs it and at most every
/// `reconnect.backoff.ms / 2` (50 ms): every client Ferry made started about 50 ms late, and a
/// transactional producer's `initTransactions`, which asks for its coordinator right away, found "no
/// brokers available" and asked again on a 500 ms timer. Measured on a local Apache Kafka 4.4 broker
/// (librdkafka 2.12): `initTransactions` took 60 ms, or 510 ms in 6 of 15 starts, with the default,
/// 7.5–13 ms in 15 of 15 with this setting; a consumer's first group assignment 59–67 ms against
/// 10–21 ms (9 of 10 joins each). A distributed worker starts many clients one after the other
/// (its stores, its group, a producer for each connector's configurations and each task's offsets),
/// so it is start-up time. The cost: a client holds a connection to every broker of the cluster.
pub const CLIENT_SETTINGS: &[(&str, &str)] = &[("enable.sparse.connections", "false")];

/// Sets [`READER_SETTINGS`] on `client`, except those `overrides` (the user's client settings,
/// already set on it) name.
pub(crate) fn reader_settings(client: &mut rdkafka::ClientConfig, overrides: &[(String, String)]) {
    set_unless_overridden(client, READER_SETTINGS, overrides);
}

/// Sets [`CLIENT_SETTINGS`] on `client`, except those `overrides` (the user's client settings,
/// already set on it) name.
pub(crate) fn client_settings(client: &mut rdkafka::ClientConfig, overrides: &[(String, String)]) {
    set_unless_overridden(client, CLIENT_SETTINGS, overrides);
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
