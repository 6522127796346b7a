package dev.kvflux.pipeline.write;

import java.util.ArrayDeque;
import java.util.concurrent.atomic.AtomicInteger;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;

/**
 * At most {@code permits} works running at once; the others wait in arrival order. A work holds its
 * permit from its start until it terminates or is cancelled; a work cancelled while waiting leaves the
 * queue. Starting is trampolined, so works that finish at once do not deepen the stack.
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

    <T> Mono<T> run(Mono<T> work) {
        return Mono.create(sink -> {
            Ticket ticket = new Ticket();
            ticket.start = () -> {
                Disposable running = work.doFinally(signal -> release(ticket))
                        .subscribe(sink::success, sink::error, sink::success);
                ticket.running(running);
            };
            sink.onCancel(() -> cancel(ticket));
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
                next.start.run();
            }
        } while (wip.decrementAndGet() != 0);
    }

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

    private void cancel(Ticket ticket) {
        synchronized (this) {
            queue.remove(ticket);
        }
        ticket.cancel();
    }

    private static final class Ticket {
        Runnable start;
        boolean holding;
        private Disposable running;
        private boolean cancelled;

        synchronized void running(Disposable running) {
            this.running = running;
            if (cancelled) {
                running.dispose();
            }
        }

        void cancel() {
            Disposable toDispose;
            synchronized (this) {
                cancelled = true;
                toDispose = running;
            }
            if (toDispose != null) {
                toDispose.dispose();
            }
        }
    }
}
