package dev.kvflux.transfer;

import io.micrometer.context.ContextRegistry;
import io.micrometer.context.ThreadLocalAccessor;
import java.util.function.Function;
import org.slf4j.MDC;
import reactor.core.publisher.Hooks;
import reactor.util.context.Context;

/**
 * Which request a log line belongs to: the transfer id (MDC key {@value #TRANSFER_ID}) and, when the request is
 * traced, its trace id (MDC key {@value #TRACE_ID}).
 *
 * <p>A role puts both in the Reactor {@link Context} where a request enters it ({@link #context}), and
 * Reactor's automatic context propagation copies them into SLF4J's MDC on whichever thread runs the request's
 * operators, through one context-propagation {@link ThreadLocalAccessor} per key. {@link #enable()} turns this
 * on for the whole JVM (it calls {@link Hooks#enableAutomaticContextPropagation()}); the serving roles call it
 * when they start. An application that embeds the roles, or uses the same keys in its own chains, calls it
 * once at startup instead, or leaves it off: the roles then still set MDC around their own callbacks
 * ({@link #open}) but not inside Reactor chains.
 *
 * <p>Code that runs outside a Reactor chain (a notify handler, the prefill loop's callbacks) opens a
 * {@link Scope} around what it logs, which sets the keys and puts back what the thread had before.
 */
public final class LogContext {
    /** The MDC and Reactor Context key of the request's transfer id. */
    public static final String TRANSFER_ID = "transfer_id";
    /** The MDC and Reactor Context key of the request's trace id, present when the request is traced. */
    public static final String TRACE_ID = "trace_id";

    private static volatile boolean enabled;

    private LogContext() {
    }

    /**
     * Registers the MDC accessors of {@value #TRANSFER_ID} and {@value #TRACE_ID} with
     * {@link ContextRegistry#getInstance()} and enables Reactor's automatic context propagation, once per
     * JVM; later calls do nothing. Global: it changes how every Reactor chain of the JVM runs (each signal
     * restores the context's registered values in thread locals), so a library never calls it on its users'
     * behalf.
     */
    public static void enable() {
        if (enabled) {
            return;
        }
        synchronized (LogContext.class) {
            if (!enabled) {
                ContextRegistry.getInstance().registerThreadLocalAccessor(new MdcKey(TRANSFER_ID));
                ContextRegistry.getInstance().registerThreadLocalAccessor(new MdcKey(TRACE_ID));
                Hooks.enableAutomaticContextPropagation();
                enabled = true;
            }
        }
    }

    /**
     * What a request's chain is written with ({@code .contextWrite(LogContext.context(id, traceId))}):
     * the transfer id, and the trace id unless it is null.
     */
    public static Function<Context, Context> context(String transferId, String traceId) {
        return context -> traceId == null ? context.put(TRANSFER_ID, transferId)
                : context.put(TRANSFER_ID, transferId).put(TRACE_ID, traceId);
    }

    /**
     * Sets the keys in this thread's MDC until {@link Scope#close()}, which puts back the values the thread
     * had (or removes the keys). For log lines outside a Reactor chain; a null trace id leaves that key out.
     */
    public static Scope open(String transferId, String traceId) {
        return new Scope(transferId, traceId);
    }

    /** The keys set by {@link #open}; closing it restores this thread's previous values. */
    public static final class Scope implements AutoCloseable {
        private final String previousTransfer;
        private final String previousTrace;

        private Scope(String transferId, String traceId) {
            previousTransfer = MDC.get(TRANSFER_ID);
            previousTrace = MDC.get(TRACE_ID);
            set(TRANSFER_ID, transferId);
            set(TRACE_ID, traceId);
        }

        @Override
        public void close() {
            set(TRANSFER_ID, previousTransfer);
            set(TRACE_ID, previousTrace);
        }

        private static void set(String key, String value) {
            if (value == null) {
                MDC.remove(key);
            } else {
                MDC.put(key, value);
            }
        }
    }

    /** One MDC key as a thread local that context-propagation can capture and restore. */
    private record MdcKey(String key) implements ThreadLocalAccessor<String> {
        @Override
        public String getValue() {
            return MDC.get(key);
        }

        @Override
        public void setValue(String value) {
            MDC.put(key, value);
        }

        @Override
        public void setValue() {
            MDC.remove(key);
        }
    }
}
