package dev.kvflux.serving.proxy;

import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.metrics.RoleMetrics;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.util.ArrayDeque;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.core.scheduler.Schedulers;
import reactor.netty.http.server.HttpServerResponse;

/**
 * How many completions the proxy lets past it at once ({@code --max-in-flight}); the others wait here, first come
 * first served, before anything is sent to prefill or decode, and past {@code --max-queued} waiting the proxy
 * refuses. With 64 clients on 2 cores and no limit, every request's hand-offs queue on the roles' event loops; with
 * a few in flight, the queue is here instead, where it costs nothing. Thread-safe.
 */
final class ProxyAdmission {
    /** No limit: every request goes on at once. */
    static final ProxyAdmission NONE = new ProxyAdmission(0, 0);

    private final int maxInFlight;
    private final int maxQueued;
    private final ArrayDeque<Waiter> waiting = new ArrayDeque<>();
    private int inFlight;

    /**
     * @param maxInFlight requests past the proxy at once; 0 = no limit
     * @param maxQueued requests that may wait for a place; one more is refused
     */
    ProxyAdmission(int maxInFlight, int maxQueued) {
        if (maxInFlight < 0 || maxQueued < 0) {
            throw new IllegalArgumentException("--max-in-flight and --max-queued must be 0 or more, got "
                    + maxInFlight + " and " + maxQueued);
        }
        this.maxInFlight = maxInFlight;
        this.maxQueued = maxQueued;
    }

    /** Whether it limits anything. */
    boolean limits() {
        return maxInFlight > 0;
    }

    /** A place past the proxy, given back once: a second {@link #close()} does nothing. */
    final class Place implements AutoCloseable {
        private final AtomicBoolean held = new AtomicBoolean(true);

        @Override
        public void close() {
            if (held.compareAndSet(true, false)) {
                release();
            }
        }
    }

    /** Refused: {@code maxQueued} requests already wait. */
    static final class QueueFullException extends RuntimeException {
        QueueFullException(int inFlight, int queued) {
            super("the proxy has " + inFlight + " requests in flight (its --max-in-flight) and " + queued
                    + " waiting (its --max-queued); retry in a moment");
        }
    }

    private static final class Waiter {
        final MonoSink<Place> sink;
        /** Set under the lock: the place it was given, or that it was cancelled first. */
        Place place;
        boolean cancelled;

        Waiter(MonoSink<Place> sink) {
            this.sink = sink;
        }
    }

    /**
     * A place: at once while fewer than {@code maxInFlight} hold one, else when one is given back, in arrival order.
     * Fails with {@link QueueFullException} when {@code maxQueued} already wait. Cancelled while it waits, it leaves
     * the queue; cancelled as its place is granted, the place is given back.
     */
    Mono<Place> admit() {
        return Mono.create(sink -> {
            Waiter waiter = new Waiter(sink);
            sink.onCancel(() -> cancel(waiter));
            Place now = null;
            int full = -1;
            synchronized (waiting) {
                if (waiter.cancelled) {
                    return;
                }
                if (maxInFlight == 0 || inFlight < maxInFlight) {
                    inFlight++;
                    now = new Place();
                    waiter.place = now;
                } else if (waiting.size() >= maxQueued) {
                    full = waiting.size();
                } else {
                    waiting.add(waiter);
                }
            }
            if (now != null) {
                sink.success(now);
            } else if (full >= 0) {
                sink.error(new QueueFullException(maxInFlight, full));
            }
        });
    }

    /**
     * {@code answer}, once a place is held, giving it back when the answer ends however it ends; when the queue is
     * full, 503 {@code proxy_queue_full} with {@code Retry-After: 1}, counted in {@code kvflux.proxy.queue.refusals}.
     * Without a limit, {@code answer} at once.
     */
    Mono<Void> around(Supplier<Mono<Void>> answer, HttpServerResponse response, RoleMetrics meters) {
        if (!limits()) {
            return answer.get();
        }
        return admit()
                .flatMap(place -> answer.get().doFinally(signal -> place.close()))
                .onErrorResume(QueueFullException.class, e -> {
                    meters.counter("kvflux.proxy.queue.refusals",
                            "Requests the proxy refused because its queue for --max-in-flight was full").increment();
                    return Mono.from(HttpJson.error(response.header(HttpHeaderNames.RETRY_AFTER, "1"),
                            HttpResponseStatus.SERVICE_UNAVAILABLE, "server_error", "proxy_queue_full",
                            e.getMessage()));
                });
    }

    /** Requests waiting for a place now. */
    int queued() {
        synchronized (waiting) {
            return waiting.size();
        }
    }

    /** Requests holding a place now. */
    int inFlight() {
        synchronized (waiting) {
            return inFlight;
        }
    }

    /** Its subscriber went away: out of the queue, or, if a place was already given, the place back. */
    private void cancel(Waiter waiter) {
        Place given;
        synchronized (waiting) {
            waiter.cancelled = true;
            given = waiter.place;
            if (given == null) {
                waiting.remove(waiter);
            }
        }
        if (given != null) {
            given.close();
        }
    }

    private void release() {
        Waiter next;
        Place place;
        synchronized (waiting) {
            next = waiting.poll();
            if (next == null) {
                inFlight--;
                return;
            }
            place = new Place(); // the place passes to the next: inFlight stays
            next.place = place;
        }
        // on another thread: a request that ends at once would otherwise start the next one inside this call, and a
        // queue of such requests would nest as deep as it is long
        Schedulers.parallel().schedule(() -> next.sink.success(place));
    }
}
