// Ferry's own compatibility shim, not Kafka's code. connect-file 4.3.1 (the newest connect-file Maven
// Central serves here; there is no 4.4.0) calls org.apache.kafka.common.utils.AppInfoParser.getVersion(),
// which Kafka 4.4 moved to ...common.utils.internals. Without this class FileStreamSource{Connector,Task}
// fail with NoClassDefFoundError in a 4.4 worker. scripts/install-test-deps compiles it into a jar next to
// connect-file in the plugin folder; it only forwards to the 4.4 class.
package org.apache.kafka.common.utils;

public final class AppInfoParser {
    private AppInfoParser() {
    }

    public static String getVersion() {
        return org.apache.kafka.common.utils.internals.AppInfoParser.getVersion();
    }

    public static String getCommitId() {
        return org.apache.kafka.common.utils.internals.AppInfoParser.getCommitId();
    }
}
