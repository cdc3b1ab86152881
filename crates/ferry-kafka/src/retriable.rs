//! Which Kafka client errors may go away by retrying: one rule for the sink, the offset store and
//! the admin calls.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// Whether an error code is worth retrying: the Kafka error codes whose Java exceptions are
/// `RetriableException`s (leadership moves, unavailable replicas or coordinators, timeouts, unknown
/// topic or partition, corrupt messages), plus librdkafka's local transport, queue and purge errors.
/// Size, authorization, invalid-record and configuration errors are not.
pub fn is_retriable_code(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::BrokerTransportFailure
            | C::Resolve
            | C::MessageTimedOut
            | C::AllBrokersDown
            | C::OperationTimedOut
            | C::TimedOutQueue
            | C::QueueFull
            | C::UnknownPartition
            | C::UnknownTopic
            | C::UnknownTopicOrPartition
            | C::LeaderNotAvailable
            | C::NotLeaderForPartition
            | C::RequestTimedOut
            | C::BrokerNotAvailable
            | C::ReplicaNotAvailable
            | C::NetworkException
            | C::InvalidMessage
            | C::NotEnoughReplicas
            | C::NotEnoughReplicasAfterAppend
            | C::KafkaStorageError
            | C::CoordinatorNotAvailable
            | C::NotCoordinator
            | C::FencedLeaderEpoch
            | C::UnknownLeaderEpoch
            | C::OffsetNotAvailable
            | C::PreferredLeaderNotAvailable
            | C::EligibleLeadersNotAvailable
            | C::ThrottlingQuotaExceeded
            | C::PurgeQueue
            | C::PurgeInflight
    )
}

/// Whether a client error is worth retrying (see [`is_retriable_code`]); a cancelled delivery is.
pub fn is_retriable(error: &KafkaError) -> bool {
    match error {
        KafkaError::Canceled => true,
        other => other.rdkafka_error_code().is_some_and(is_retriable_code),
    }
}
