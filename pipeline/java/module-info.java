/**
 * The WRITE pipeline (one {@code write_done} or {@code write_failed} per request) and the READ barrier,
 * composed from the operators. Logs through slf4j-api only.
 */
module dev.kvflux.pipeline {
    requires transitive dev.kvflux.operators;
    requires org.slf4j;

    exports dev.kvflux.pipeline;
}
