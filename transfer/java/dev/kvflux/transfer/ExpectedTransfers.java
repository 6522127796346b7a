package dev.kvflux.transfer;

import dev.kvflux.bindings.DurationText;
import dev.kvflux.transfer.notify.LogText;
import dev.kvflux.transfer.notify.NotifyEvent;
import dev.kvflux.transfer.notify.NotifyLimits;
import dev.kvflux.transfer.notify.NotifyMessage;
import dev.kvflux.transfer.notify.NotifyRecorder;
import dev.kvflux.transfer.notify.NotifyServer;
import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * Decode's registry of the transfers it waits for. Feed it the notify channel's messages (it is the
 * {@link NotifyServer}'s handler, or part of it); ask it for each transfer with {@link #expect}.
 *
 * <p>A notification for a transfer that already finished (done, failed, timed out or cancelled) is late
 * or a duplicate: it is ignored and counted. One for a transfer nobody expects yet is kept and settles the
 * transfer as soon as it is expected; such early notifications are bounded in bytes (default
 * 16 MiB, see {@link #earlyBudget}) and in count ({@value #EARLY_CAPACITY}), the
 * oldest dropped first and counted ({@link NotifyEvent#EARLY_DROPPED}), so unsolicited notifications cannot
 * grow decode's heap.
 */
public final class ExpectedTransfers implements Consumer<NotifyMessage> {
    private static final Logger LOG = LoggerFactory.getLogger(ExpectedTransfers.class);

    /** How many early notifications are kept. */
    static final int EARLY_CAPACITY = 4096;
    /** Default byte budget of the early notifications. */
    public static final long DEFAULT_EARLY_BUDGET_BYTES = NotifyLimits.DEFAULTS.peerBudgetBytes();
    /** How many finished transfer ids are remembered to recognise late and duplicate notifications. */
    static final int FINISHED_CAPACITY = 65536;

    private final Duration receiveDeadline;
    private final Scheduler scheduler;
    private final NotifyRecorder recorder;
    private final long earlyBudgetBytes;
    private final Map<String, Sinks.One<NotifyMessage>> waiting = new HashMap<>();
    private final RetainedBytes<NotifyMessage> early;
    private final Map<String, Boolean> finished = bounded(FINISHED_CAPACITY);

    private ExpectedTransfers(Duration receiveDeadline, Scheduler scheduler, NotifyRecorder recorder,
            long earlyBudgetBytes) {
        this.receiveDeadline = receiveDeadline;
        this.scheduler = scheduler;
        this.recorder = recorder;
        this.earlyBudgetBytes = earlyBudgetBytes;
        this.early = new RetainedBytes<>(earlyBudgetBytes, EARLY_CAPACITY, (id, message) -> {
            recorder.record(NotifyEvent.EARLY_DROPPED);
            // dropped while another transfer's notice is handled: the line is about the dropped one
            try (LogContext.Scope _ = LogContext.open(id, null)) {
                LOG.debug("dropping an early {} for transfer {}: early notifications are over their budget",
                        message.type(), LogText.escape(id));
            }
        });
    }

    /**
     * A registry whose transfers error at {@code receiveDeadline} after they are expected. Choose it
     * longer than prefill's transfer timeout, so prefill's own {@code write_failed} arrives first.
     */
    public static ExpectedTransfers withDeadline(Duration receiveDeadline) {
        Objects.requireNonNull(receiveDeadline, "receiveDeadline");
        if (receiveDeadline.isZero() || receiveDeadline.isNegative()) {
            throw new IllegalArgumentException("receive deadline must be positive, got " + receiveDeadline
                    + "; the default is the transfer timeout plus a margin");
        }
        return new ExpectedTransfers(receiveDeadline, null, NotifyRecorder.NOOP, DEFAULT_EARLY_BUDGET_BYTES);
    }

    /**
     * A registry without a deadline: a transfer whose notification never comes waits for ever. This is
     * how vLLM's WRITE mode behaves; kvflux keeps it only to measure against.
     */
    public static ExpectedTransfers withoutDeadline() {
        return new ExpectedTransfers(null, null, NotifyRecorder.NOOP, DEFAULT_EARLY_BUDGET_BYTES);
    }


    /** This registry's deadlines on {@code scheduler}. Call before the first {@link #expect}. */
    public ExpectedTransfers scheduler(Scheduler scheduler) {
        return new ExpectedTransfers(receiveDeadline, Objects.requireNonNull(scheduler, "scheduler"), recorder,
                earlyBudgetBytes);
    }

    /** This registry reporting to {@code recorder}. Call before the first {@link #expect}. */
    public ExpectedTransfers recorder(NotifyRecorder recorder) {
        return new ExpectedTransfers(receiveDeadline, scheduler, Objects.requireNonNull(recorder, "recorder"),
                earlyBudgetBytes);
    }

    /**
     * This registry keeping early notifications up to {@code bytes} (estimated heap bytes). Call before the
     * first message.
     */
    public ExpectedTransfers earlyBudget(long bytes) {
        if (bytes < 1024) {
            throw new IllegalArgumentException("the early notification budget is " + bytes
                    + " bytes; use at least 1024 (the default is " + DEFAULT_EARLY_BUDGET_BYTES + ")");
        }
        return new ExpectedTransfers(receiveDeadline, scheduler, recorder, bytes);
    }

    /**
     * Waits for the transfer's notification. The transfer is registered at subscription and its deadline
     * starts then.
     *
     * @return a {@code Mono} that completes on {@code write_done}; errors with a {@link ReceiveFailedException}
     *     of kind {@code WRITE_FAILED} carrying prefill's code and reason on {@code write_failed}, of kind
     *     {@code DEADLINE} at the receive deadline, and with a {@link TransferRefusedException}
     *     ({@code DUPLICATE}) if the id is already expected or already finished. Signals arrive on
     *     the notify connection's event loop, or on the registry's scheduler for the deadline
     *     ({@link Schedulers#parallel()} unless set). Cancelling it forgets the transfer.
     */
    public Mono<Void> expect(String transferId) {
        Objects.requireNonNull(transferId, "transferId");
        return Mono.defer(() -> {
            Sinks.One<NotifyMessage> sink = Sinks.one();
            NotifyMessage already;
            synchronized (this) {
                if (waiting.containsKey(transferId) || finished.containsKey(transferId)) {
                    return Mono.error(new TransferRefusedException(TransferRefusedException.Reason.DUPLICATE,
                            "transfer " + transferId + " is already expected or finished; every request needs its own"
                                    + " transfer id"));
                }
                already = early.remove(transferId);
                if (already != null) {
                    finished.put(transferId, Boolean.TRUE);
                } else {
                    waiting.put(transferId, sink);
                }
            }
            if (already != null) {
                return settle(already);
            }
            Mono<Void> outcome = sink.asMono().flatMap(this::settle);
            if (receiveDeadline != null) {
                Scheduler on = scheduler != null ? scheduler : Schedulers.parallel();
                outcome = outcome.timeout(receiveDeadline, Mono.<Void>defer(() -> {
                    recorder.record(NotifyEvent.DEADLINE_EXPIRED);
                    LOG.warn("transfer {}: no notification within the receive deadline of {}", LogText.escape(transferId),
                            DurationText.of(receiveDeadline));
                    return Mono.error(new ReceiveFailedException(transferId, ReceiveFailedException.Kind.DEADLINE, null,
                            "no write_done or write_failed for transfer " + transferId + " within "
                                    + DurationText.of(receiveDeadline) + "; prefill may have stopped or its notice was"
                                    + " lost. Raise the receive deadline if prefill's transfer timeout is longer"));
                }), on);
            }
            return outcome.doFinally(signal -> forget(transferId, sink));
        });
    }

    /** Takes {@code write_done} and {@code write_failed}; other messages are not decode's and are ignored. */
    @Override
    public void accept(NotifyMessage message) {
        if (!(message instanceof NotifyMessage.WriteDone) && !(message instanceof NotifyMessage.WriteFailed)) {
            LOG.debug("decode ignores {}", LogText.escape(message.toString()));
            return;
        }
        String id = message.transferId();
        Sinks.One<NotifyMessage> sink;
        synchronized (this) {
            sink = waiting.remove(id);
            if (sink != null) {
                finished.put(id, Boolean.TRUE);
            } else if (finished.containsKey(id)) {
                recorder.record(NotifyEvent.NOTICE_LATE_OR_DUPLICATE);
                LOG.debug("ignoring a late or duplicate {} for finished transfer {}", message.type(), LogText.escape(id));
                return;
            } else {
                recorder.record(NotifyEvent.NOTICE_UNMATCHED);
                early.put(id, message, RetainedBytes.of(message));
                return;
            }
        }
        sink.tryEmitValue(message);
    }

    /** How many early notifications are kept ([0]) and their estimated bytes ([1]). */
    synchronized long[] early() {
        return new long[] {early.size(), early.bytes()};
    }

    /** How many finished transfer ids are remembered for fencing. */
    synchronized int remembered() {
        return finished.size();
    }

    /** How many transfers are expected and not yet settled. */
    public synchronized int pending() {
        return waiting.size();
    }

    private Mono<Void> settle(NotifyMessage message) {
        if (message instanceof NotifyMessage.WriteFailed failed) {
            recorder.record(NotifyEvent.NOTICE_WRITE_FAILED);
            return Mono.error(new ReceiveFailedException(failed.transferId(), ReceiveFailedException.Kind.WRITE_FAILED,
                    failed.code(), "prefill reported write_failed for transfer " + failed.transferId() + " ("
                            + failed.code().qualifiedName() + "): " + failed.reason()));
        }
        recorder.record(NotifyEvent.NOTICE_WRITE_DONE);
        return Mono.empty();
    }

    private synchronized void forget(String transferId, Sinks.One<NotifyMessage> sink) {
        waiting.remove(transferId, sink);
        finished.put(transferId, Boolean.TRUE);
    }

    private static <V> Map<String, V> bounded(int capacity) {
        return new LinkedHashMap<>(16, 0.75f, false) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, V> eldest) {
                return size() > capacity;
            }
        };
    }
}
