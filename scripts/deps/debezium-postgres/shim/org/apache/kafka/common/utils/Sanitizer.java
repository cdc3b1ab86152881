// Ferry's own compatibility shim, not Kafka's or Debezium's code. Debezium 3.6.1 (built against Kafka
// 4.3) calls org.apache.kafka.common.utils.Sanitizer.jmxSanitize(String) when it registers its metrics;
// Kafka 4.4 moved Sanitizer to ...common.utils.internals, so Debezium's task fails in a 4.4 worker with
// NoClassDefFoundError. scripts/install-test-deps compiles this class into a jar in Debezium's plugin
// folder; it only forwards to the 4.4 class.
package org.apache.kafka.common.utils;

public final class Sanitizer {
    private Sanitizer() {
    }

    public static String sanitize(String name) {
        return org.apache.kafka.common.utils.internals.Sanitizer.sanitize(name);
    }

    public static String desanitize(String name) {
        return org.apache.kafka.common.utils.internals.Sanitizer.desanitize(name);
    }

    public static String jmxSanitize(String name) {
        return org.apache.kafka.common.utils.internals.Sanitizer.jmxSanitize(name);
    }
}
