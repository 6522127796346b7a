package dev.kvflux.transfer.notify;

/**
 * Where a notify endpoint reports what happened on it ({@link NotifyEvent}); {@link #NOOP} by default.
 * kvflux-micrometer's {@code MicrometerNotifyRecorder} turns the reports into meters. Called on the thread the
 * event happened on (a Netty event loop, a timer's thread), so an implementation must be thread-safe, quick and
 * must not block; what it throws is not caught.
 */
@FunctionalInterface
public interface NotifyRecorder {
    /** Records nothing. */
    NotifyRecorder NOOP = event -> { };

    /** One {@code event} happened. */
    void record(NotifyEvent event);
}
