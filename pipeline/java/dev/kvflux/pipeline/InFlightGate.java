package dev.kvflux.pipeline;

import java.util.ArrayDeque;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;

/**
 * At most {@code permits} works running at once; the others wait in arrival order. A work holds its
 * permit from its start until it terminates or is cancelled; a work cancelled while waiting leaves the
 * queue. The permit is acquired and released around the work as {@code Mono.usingWhen} does, so the work
 * is subscribed by the caller's subscriber chain and sees its {@code Context}. Starting is trampolined, so
 * works that finish at once do not deepen the stack.
 */
final class InFlightGate {
    private final int permits;
    private final ArrayDeque<Ticket> queue = new ArrayDeque<>();
    private final AtomicInteger wip = new AtomicInteger();
    private int active;

    InFlightGate(int permits) {
        this.permits = permits;
    }

    synchronized int active() {
        return active;
    }

    synchronized int waiting() {
        return queue.size();
    }

    /**
     * {@code work} once a permit is free, with the permit released when it completes, fails or is
     * cancelled (and, as a safety net, whenever the returned {@code Mono} ends for any reason).
     */
    <T> Mono<T> run(Mono<T> work) {
        return Mono.defer(() -> {
            Ticket ticket = new Ticket();
            return Mono.usingWhen(acquire(ticket), held -> work,
                            held -> Mono.fromRunnable(() -> release(held)),
                            (held, error) -> Mono.fromRunnable(() -> release(held)),
                            held -> Mono.fromRunnable(() -> release(held)))
                    .doFinally(signal -> release(ticket));
        });
    }

    /** Emits {@code ticket} once it holds a permit; cancelled while waiting, it leaves the queue. */
    private Mono<Ticket> acquire(Ticket ticket) {
        return Mono.create(sink -> {
            ticket.sink = sink;
            sink.onCancel(() -> {
                synchronized (this) {
                    queue.remove(ticket);
                }
            });
            synchronized (this) {
                queue.add(ticket);
            }
            drain();
        });
    }

    private void drain() {
        if (wip.getAndIncrement() != 0) {
            return;
        }
        do {
            while (true) {
                Ticket next;
                synchronized (this) {
                    if (active >= permits || queue.isEmpty()) {
                        break;
                    }
                    next = queue.poll();
                    active++;
                    next.holding = true;
                }
                next.sink.success(next);
            }
        } while (wip.decrementAndGet() != 0);
    }

    /** Gives the ticket's permit back, once; a ticket that holds none is left as it is. */
    private void release(Ticket ticket) {
        synchronized (this) {
            if (!ticket.holding) {
                return;
            }
            ticket.holding = false;
            active--;
        }
        drain();
    }

    private static final class Ticket {
        MonoSink<Ticket> sink;
        /** Guarded by the gate. */
        boolean holding;
    }
}
