package dev.kvflux.examples.webflux;

import io.micrometer.context.ThreadLocalAccessor;
import org.slf4j.MDC;

/**
 * Carries the transfer id from the Reactor Context into the logging MDC, under {@value #MDC_KEY}. Found
 * by Micrometer's context-propagation through {@code META-INF/services}; with
 * {@code spring.reactor.context-propagation=auto} Reactor sets it around every signal of a transfer, on
 * whatever thread the signal comes, so a log line written anywhere in the transfer's chain (the library's
 * included) carries the id: {@code logging.pattern.correlation} prints it.
 */
public final class TransferIdMdc implements ThreadLocalAccessor<String> {
    /** The MDC key. */
    public static final String MDC_KEY = "transfer_id";

    @Override
    public Object key() {
        return TransferContext.TRANSFER_ID;
    }

    @Override
    public String getValue() {
        return MDC.get(MDC_KEY);
    }

    @Override
    public void setValue(String transferId) {
        MDC.put(MDC_KEY, transferId);
    }

    @Override
    public void setValue() {
        MDC.remove(MDC_KEY);
    }
}
