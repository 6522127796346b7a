package dev.kvflux.serving.role;

import dev.kvflux.bindings.BatchPlan;
import dev.kvflux.bindings.MemoryRegion;
import dev.kvflux.bindings.StatusCode;
import dev.kvflux.bindings.TransferSession;
import dev.kvflux.bindings.TransferStatus;
import dev.kvflux.operators.TransferException;
import dev.kvflux.serving.observe.Step;
import io.micrometer.observation.Observation;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

/**
 * Prefill's transfers from the request's arrival until its copies are terminal, and the fence of
 * transfer ids that are aborted or finished.
 *
 * <p>A transfer is {@linkplain #open opened} when its request arrives, may be {@linkplain Transfer#abort
 * aborted} at any time from any thread, and is {@linkplain Transfer#end ended} exactly once. An id that
 * was aborted (even before its request came) or ended is remembered (the last {@link #FENCE_CAPACITY}),
 * and {@link #open} refuses it, so a late or repeated request cannot start writing for a transfer that
 * decode has given up on.
 */
final class PrefillTransfers {
    /** How many aborted or ended transfer ids are remembered. */
    static final int FENCE_CAPACITY = 65_536;

    /**
     * How many characters of the reason are kept per fenced id: the reason may quote a peer's abort, and the
     * fence holds {@link #FENCE_CAPACITY} of them.
     */
    static final int FENCE_REASON_CHARS = 160;

    /** The transfer id is fenced: aborted or already finished. */
    static final class FencedException extends RuntimeException {
        FencedException(String id, String why) {
            super("transfer " + id + " " + why + "; every request needs its own transfer id", null, false, false);
        }
    }

    private final Map<String, Transfer> active = new HashMap<>();
    private final Map<String, String> fenced = new LinkedHashMap<>(16, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
            return size() > FENCE_CAPACITY;
        }
    };

    /**
     * A new transfer towards {@code decode}.
     *
     * @param deadlineNanos when decode gives up on it at the latest, on the caller's nanosecond clock
     * @throws FencedException if the id is running, was aborted or has ended
     */
    synchronized Transfer open(String id, InetSocketAddress decode, long deadlineNanos) {
        Objects.requireNonNull(id, "id");
        String why = fenced.get(id);
        if (why != null) {
            throw new FencedException(id, why);
        }
        if (active.containsKey(id)) {
            throw new FencedException(id, "is already running");
        }
        Transfer t = new Transfer(id, decode, deadlineNanos);
        active.put(id, t);
        return t;
    }

    /** The running transfer with this id, or null. */
    synchronized Transfer get(String id) {
        return active.get(id);
    }

    /** Fences an id that has no running transfer (an abort that came before its request). */
    synchronized void fence(String id, String why) {
        if (!active.containsKey(id)) {
            fenced.putIfAbsent(id, cut(why));
        }
    }

    private static String cut(String why) {
        if (why.length() <= FENCE_REASON_CHARS) {
            return why;
        }
        int end = FENCE_REASON_CHARS - 3;
        if (Character.isHighSurrogate(why.charAt(end - 1))) {
            end--;
        }
        return why.substring(0, end) + "...";
    }

    /** The running transfers now. */
    synchronized List<Transfer> running() {
        return List.copyOf(active.values());
    }

    /** How many transfers are running. */
    synchronized int size() {
        return active.size();
    }

    private synchronized void closed(Transfer t, String why) {
        active.remove(t.id, t);
        fenced.put(t.id, cut(why));
    }

    /**
     * One transfer. Its state changes under its own monitor: a copy is posted through
     * {@link #recording} only while the transfer is not aborted, so once {@link #abort} has returned no
     * further layer is posted and every status posted is in {@link #statuses}.
     */
    final class Transfer {
        final String id;
        final InetSocketAddress decode;
        final long deadlineNanos;
        /** When the request came, in wall-clock milliseconds (to tell requests that predate a decode restart). */
        final long arrivalMillis = System.currentTimeMillis();
        /** The incarnation of the decode whose blocks this transfer writes; 0 until its block list came. */
        volatile long decodeIncarnation;
        /** Whether decode is to be sent release at the end (not when the decode it targets is gone). */
        volatile boolean releaseDecode = true;
        private final Sinks.One<String> abortSignal = Sinks.one();
        private final List<TransferStatus> statuses = new ArrayList<>();
        private volatile List<Long> localBlocks = List.of();
        /** Decode's blocks this transfer's layers are written into (empty until its block list came). */
        volatile List<Long> decodeBlocksWritten = List.of();
        /** The request's span (no-op when not traced); its steps are children of it. */
        volatile Observation span = Observation.NOOP;
        /** The request's trace id for its log lines; null when not traced. */
        volatile String traceId;
        /** Waiting for the prompt's last prefill step, posting the layers, waiting for the copies to complete. */
        volatile Step queueStep = Step.NONE;
        volatile Step postStep = Step.NONE;
        volatile Step waitStep = Step.NONE;
        private Disposable write;
        private String abortReason;
        private boolean writing;
        private boolean ended;

        private Transfer(String id, InetSocketAddress decode, long deadlineNanos) {
            this.id = id;
            this.decode = decode;
            this.deadlineNanos = deadlineNanos;
        }

        /** The source blocks prefill allocated for it (empty until allocated). */
        List<Long> localBlocks() {
            return localBlocks;
        }

        void localBlocks(List<Long> blocks) {
            this.localBlocks = List.copyOf(blocks);
        }

        /** Emits the abort's reason when the transfer is aborted; never completes otherwise. */
        Mono<String> aborted() {
            return abortSignal.asMono();
        }

        /** Marks the write as started; false if the transfer was aborted first (then nothing is written). */
        synchronized boolean startWriting() {
            if (abortReason != null || ended) {
                return false;
            }
            writing = true;
            return true;
        }

        /** Keeps the running write so that an abort can stop it; disposes it at once if already aborted. */
        void writing(Disposable running) {
            boolean stop;
            synchronized (this) {
                stop = abortReason != null;
                if (!stop) {
                    write = running;
                }
            }
            if (stop) {
                running.dispose();
            }
        }

        /** Whether a write was started. */
        synchronized boolean wrote() {
            return writing;
        }

        /**
         * Aborts the transfer: no further layer is posted, its running write is cancelled, and
         * {@link #aborted()} emits.
         *
         * @return false, changing nothing, if it was already aborted or has ended
         */
        boolean abort(String reason) {
            Disposable running;
            synchronized (this) {
                if (abortReason != null || ended) {
                    return false;
                }
                abortReason = reason;
                running = write;
            }
            if (running != null) {
                running.dispose();
            }
            abortSignal.tryEmitValue(reason);
            return true;
        }

        /** The reason it was aborted for, or null. */
        synchronized String abortReason() {
            return abortReason;
        }

        /**
         * Ends the transfer once: it leaves the running set and its id is fenced.
         *
         * @return the statuses it posted, or null if it had already ended
         */
        List<TransferStatus> end() {
            List<TransferStatus> posted;
            synchronized (this) {
                if (ended) {
                    return null;
                }
                ended = true;
                posted = List.copyOf(statuses);
            }
            closed(this, abortReason != null ? "was aborted (" + abortReason + ")" : "has already finished");
            return posted;
        }

        /**
         * {@code session} recording every status posted for this transfer, calling {@code afterPost} after each
         * post; refusing posts once aborted.
         */
        TransferSession recording(TransferSession session, Runnable afterPost) {
            return new TransferSession() {
                @Override
                public long allocateTransferUid() {
                    return session.allocateTransferUid();
                }

                @Override
                public TransferStatus batchWrite(BatchPlan plan, long transferUid) {
                    synchronized (Transfer.this) {
                        if (abortReason != null || ended) {
                            throw new TransferException(StatusCode.ERR_BAD_STATE, "transfer " + id
                                    + " was aborted; not posting further layers");
                        }
                        TransferStatus status = session.batchWrite(plan, transferUid);
                        statuses.add(status);
                        afterPost.run();
                        return status;
                    }
                }

                @Override
                public TransferStatus batchRead(BatchPlan plan, long transferUid) {
                    throw new UnsupportedOperationException("prefill only writes");
                }

                @Override
                public MemoryRegion local() {
                    return session.local();
                }

                @Override
                public MemoryRegion remote() {
                    return session.remote();
                }
            };
        }
    }
}
