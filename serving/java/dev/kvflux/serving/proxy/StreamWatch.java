package dev.kvflux.serving.proxy;

import dev.kvflux.serving.api.Instance;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;

/**
 * The progress of decode's streamed answers, so that a decode whose streams stop moving is found in seconds, not at
 * the upstream timeout. Every {@code stallAfter / 4} (at least 100 ms) it looks at each decode with streams open: when
 * every one of them has sent nothing for {@code stallAfter}, the decode is stalled if another decode's stream moved
 * meanwhile (one still open, or one that has ended since). A decode whose streams have all been silent for half of
 * {@code stallAfter} is suspect. A stalled decode is ejected on its work path
 * ({@link InstanceHealth#stalled}) and each of its silent streams is ended with the reason ({@link Stream#aborted});
 * a suspect one is handed to {@code suspect} (which sends a canary through it, and reports back with
 * {@link #failed}). A decode some of whose streams move is alive: only its silent streams are left as they are.
 * Time is the scheduler's. Thread-safe.
 */
final class StreamWatch implements Disposable {
    private final InstanceHealth health;
    private final long stallAfterNanos;
    private final Scheduler clock;
    private final Consumer<Instance> suspect;
    private final Map<Instance, LinkedHashSet<Stream>> open = new HashMap<>();
    /** When each decode's last ended stream last moved, for {@code stallAfter}: one entry a decode at most. */
    private final Map<Instance, Long> recent = new HashMap<>();
    private final Disposable ticks;

    StreamWatch(InstanceHealth health, Duration stallAfter, Scheduler clock, Consumer<Instance> suspect) {
        this.health = Objects.requireNonNull(health, "health");
        this.stallAfterNanos = stallAfter.toNanos();
        this.clock = clock;
        this.suspect = suspect;
        Duration every = stallAfter.dividedBy(4).compareTo(Duration.ofMillis(100)) > 0 ? stallAfter.dividedBy(4)
                : Duration.ofMillis(100);
        this.ticks = Flux.interval(every, every, clock).onBackpressureDrop().subscribe(tick -> check());
    }

    /** One streamed answer from a decode: its last progress, and the reason it was ended early, if it was. */
    final class Stream {
        private final Instance decode;
        private volatile long lastNanos = now();
        private volatile String abortReason;
        private final Sinks.One<String> aborted = Sinks.one();

        private Stream(Instance decode) {
            this.decode = decode;
        }

        /** Bytes of the answer arrived. */
        void progressed() {
            lastNanos = now();
        }

        /** The answer ended, however it ended. */
        void ended() {
            synchronized (StreamWatch.this) {
                LinkedHashSet<Stream> streams = open.get(decode);
                if (streams != null && streams.remove(this) && streams.isEmpty()) {
                    open.remove(decode);
                }
                // a decode whose streams end quickly has none open when the watch looks: what it sent still counts
                recent.merge(decode, lastNanos, Math::max);
            }
        }

        /** Emits why the answer is to end at once (its decode stalled); never completes otherwise. */
        Mono<String> aborted() {
            return aborted.asMono();
        }

        /** Why the answer was ended early, or null. */
        String abortReason() {
            return abortReason;
        }

        private void abort(String why) {
            abortReason = why;
            aborted.tryEmitValue(why);
        }
    }

    /** Watches a streamed answer from {@code decode}, from when its headers arrived. */
    Stream start(Instance decode) {
        Stream stream = new Stream(decode);
        synchronized (this) {
            open.computeIfAbsent(decode, d -> new LinkedHashSet<>()).add(stream);
        }
        return stream;
    }

    /** A canary through {@code decode} failed: it is ejected, and its silent streams end with the reason. */
    void failed(Instance decode, String why) {
        health.stalled(decode, why);
        abortSilent(decode, "decode instance " + decode.baseUrl() + " stopped answering: " + why);
    }

    /** Decides which decodes stalled; on the clock's thread. */
    void check() {
        long now = now();
        List<Instance> stalled = new ArrayList<>();
        List<Instance> suspects = new ArrayList<>();
        synchronized (this) {
            boolean[] moving = new boolean[open.size()];
            boolean[] quiet = new boolean[open.size()];
            List<Instance> decodes = new ArrayList<>(open.keySet());
            for (int i = 0; i < decodes.size(); i++) {
                long silence = now - lastProgress(open.get(decodes.get(i)));
                moving[i] = silence < stallAfterNanos;
                quiet[i] = silence >= stallAfterNanos / 2;
            }
            recent.values().removeIf(last -> now - last >= stallAfterNanos);
            for (int i = 0; i < decodes.size(); i++) {
                if (moving[i]) {
                    if (quiet[i]) {
                        // half the stall timeout without a byte: a canary finds out whether it is alive, so that a
                        // decode with nothing to compare it with is ejected soon after the stall timeout, not later
                        suspects.add(decodes.get(i));
                    }
                    continue;
                }
                boolean others = false;
                for (int j = 0; j < decodes.size(); j++) {
                    others |= j != i && moving[j];
                }
                for (Instance other : recent.keySet()) {
                    others |= !other.equals(decodes.get(i));
                }
                (others ? stalled : suspects).add(decodes.get(i));
            }
        }
        for (Instance decode : stalled) {
            health.stalled(decode, "its streams sent nothing for " + stallAfterNanos / 1_000_000 + " ms while other"
                    + " decodes' streams moved");
            abortSilent(decode, "decode instance " + decode.baseUrl() + " stalled: this stream sent nothing for "
                    + stallAfterNanos / 1_000_000 + " ms while other decodes' streams moved; it was ejected");
        }
        for (Instance decode : suspects) {
            suspect.accept(decode);
        }
    }

    private static long lastProgress(LinkedHashSet<Stream> streams) {
        long last = Long.MIN_VALUE;
        for (Stream stream : streams) {
            last = Math.max(last, stream.lastNanos);
        }
        return last;
    }

    private void abortSilent(Instance decode, String why) {
        long now = now();
        List<Stream> silent = new ArrayList<>();
        synchronized (this) {
            LinkedHashSet<Stream> streams = open.get(decode);
            if (streams == null) {
                return;
            }
            for (Stream stream : streams) {
                if (now - stream.lastNanos >= stallAfterNanos) {
                    silent.add(stream);
                }
            }
        }
        silent.forEach(stream -> stream.abort(why));
    }

    /** Streams being watched now. */
    synchronized int watching() {
        return open.values().stream().mapToInt(LinkedHashSet::size).sum();
    }

    private long now() {
        return clock.now(TimeUnit.NANOSECONDS);
    }

    @Override
    public void dispose() {
        ticks.dispose();
    }
}
