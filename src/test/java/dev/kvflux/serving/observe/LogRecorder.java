package dev.kvflux.serving.observe;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.AppenderBase;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.slf4j.LoggerFactory;

/**
 * Records every event of kvflux's loggers at debug level and above, each with the MDC it had when it was
 * logged, until closed (which puts the loggers' level back).
 */
public final class LogRecorder extends AppenderBase<ILoggingEvent> implements AutoCloseable {
    private final Logger kvflux = (Logger) LoggerFactory.getLogger("dev.kvflux");
    private final Level previousLevel;
    private final List<ILoggingEvent> events = new CopyOnWriteArrayList<>();

    private LogRecorder() {
        previousLevel = kvflux.getLevel();
        kvflux.setLevel(Level.DEBUG);
        setContext(kvflux.getLoggerContext());
        start();
        kvflux.addAppender(this);
    }

    /** Starts recording. */
    public static LogRecorder record() {
        return new LogRecorder();
    }

    /** What was logged so far. */
    public List<ILoggingEvent> events() {
        return events;
    }

    /** The events whose text contains {@code text}. */
    public List<ILoggingEvent> mentioning(String text) {
        return events.stream().filter(e -> e.getFormattedMessage().contains(text)).toList();
    }

    @Override
    protected void append(ILoggingEvent event) {
        event.prepareForDeferredProcessing();
        events.add(event);
    }

    @Override
    public void close() {
        kvflux.detachAppender(this);
        stop();
        kvflux.setLevel(previousLevel);
    }
}
