package dev.kvflux.transfer.notify;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.pipeline.WriteOutcome;
import java.util.List;
import java.util.Objects;

/**
 * One message of the notify channel between prefill (P) and decode (D), with vLLM MoRIIO's shapes:
 * D tells P where to write ({@link RemoteBlocks}), P tells D that the KV has arrived ({@link WriteDone})
 * or, new in kvflux, that it never will ({@link WriteFailed}); {@link Release} lets either side drop a
 * transfer early; {@link Abort} tells prefill that nobody wants the transfer any more. In READ mode prefill tells
 * decode where to read the KV from ({@link ReadReady}) and decode releases prefill's blocks once it has read them. On the wire each is
 * a msgpack map whose {@code type} key names it.
 *
 * <p>kvflux peers also carry incarnations, each instance's id that is new at every start (larger for a
 * later start): {@link #incarnation()} is the sender's, and a message from prefill about decode's blocks
 * names the decode incarnation those blocks belong to ({@code toIncarnation}). 0 means unknown (a peer that
 * does not send them); on the wire the keys {@code incarnation}, {@code to_incarnation} and, on
 * {@code write_done}, {@code checksum} appear only when not 0, so MoRIIO's messages are unchanged.
 *
 * <p>The outcome messages ({@code write_done}, {@code write_failed}) may carry the sender's trace context as a
 * W3C {@link Traceparent} ({@code traceparent} key, only when the sender traces), so decode's handling of the
 * notice joins the transfer's trace.
 */
public sealed interface NotifyMessage {

    /** The transfer the message is about. */
    String transferId();

    /** The sender's incarnation; 0 when unknown. */
    long incarnation();

    /** The message's kind; {@link Type#wireName()} is what the {@code type} key holds on the wire. */
    Type type();

    /** The kinds of message, each with the name its {@code type} key carries. */
    enum Type {
        /** D → P: where to write ({@link RemoteBlocks}). */
        REMOTE_BLOCKS("remote_blocks"),
        /** P → D: the KV has arrived ({@link WriteDone}). */
        WRITE_DONE("write_done"),
        /** P → D: the KV will not arrive ({@link WriteFailed}). */
        WRITE_FAILED("write_failed"),
        /** Either way: the sender is done with the transfer's blocks ({@link Release}). */
        RELEASE("release"),
        /** D → P: nobody wants the transfer any more ({@link Abort}). */
        ABORT("abort"),
        /** P → D, in READ mode: the KV is computed and may be read from prefill's blocks ({@link ReadReady}). */
        READ_READY("read_ready");

        private final String wireName;

        Type(String wireName) {
            this.wireName = wireName;
        }

        /** The name in the {@code type} key on the wire, as MoRIIO spells it. */
        public String wireName() {
            return wireName;
        }

        /** The type whose wire name is {@code wireName}, or null if there is none. */
        public static Type ofWire(String wireName) {
            for (Type type : values()) {
                if (type.wireName.equals(wireName)) {
                    return type;
                }
            }
            return null;
        }

        /** The wire name, so that log lines read as the protocol does. */
        @Override
        public String toString() {
            return wireName;
        }
    }

    /** The sender's trace context as a W3C traceparent; null when it sent none (only outcomes carry one). */
    default String traceparent() {
        return null;
    }

    /**
     * This message carrying {@code traceparent} (null for none) if it is an outcome; any other message as it
     * is.
     */
    default NotifyMessage withTraceparent(String traceparent) {
        return this;
    }

    /** The message that carries a WRITE's outcome to decode. */
    static NotifyMessage of(WriteOutcome outcome) {
        return switch (outcome) {
            case WriteOutcome.WriteDone done -> new WriteDone(done.transferId());
            case WriteOutcome.WriteFailed failed -> new WriteFailed(failed.transferId(), failed.code(), failed.reason());
        };
    }

    /** As {@link #of(WriteOutcome)}, from prefill's {@code incarnation} about blocks of decode's {@code toIncarnation}. */
    static NotifyMessage of(WriteOutcome outcome, long incarnation, long toIncarnation, long checksum) {
        return switch (outcome) {
            case WriteOutcome.WriteDone done -> new WriteDone(done.transferId(), incarnation, toIncarnation, checksum);
            case WriteOutcome.WriteFailed failed -> new WriteFailed(failed.transferId(), failed.code(), failed.reason(),
                    incarnation, toIncarnation);
        };
    }

    /**
     * D → P: the blocks D allocated for the request ({@code type: remote_blocks}), and, from a kvflux decode that
     * has registered its KV with an engine, where that KV lives ({@code region}, null when not sent).
     */
    record RemoteBlocks(String reqId, String transferId, List<Long> blockNotifyList, int decodeRank, long incarnation,
            KvRegion region) implements NotifyMessage {
        public RemoteBlocks {
            Objects.requireNonNull(reqId, "reqId");
            Objects.requireNonNull(transferId, "transferId");
            blockNotifyList = List.copyOf(blockNotifyList);
        }

        public RemoteBlocks(String reqId, String transferId, List<Long> blockNotifyList, int decodeRank,
                long incarnation) {
            this(reqId, transferId, blockNotifyList, decodeRank, incarnation, null);
        }

        public RemoteBlocks(String reqId, String transferId, List<Long> blockNotifyList, int decodeRank) {
            this(reqId, transferId, blockNotifyList, decodeRank, 0);
        }

        @Override
        public Type type() {
            return Type.REMOTE_BLOCKS;
        }
    }

    /**
     * P → D: every copy of the transfer succeeded ({@code type: write_done}); {@code checksum} is the
     * content check of the KV written (0 when not computed).
     */
    record WriteDone(String transferId, long incarnation, long toIncarnation, long checksum, String traceparent)
            implements NotifyMessage {
        public WriteDone {
            Objects.requireNonNull(transferId, "transferId");
        }

        public WriteDone(String transferId, long incarnation, long toIncarnation, long checksum) {
            this(transferId, incarnation, toIncarnation, checksum, null);
        }

        public WriteDone(String transferId) {
            this(transferId, 0, 0, 0);
        }

        @Override
        public WriteDone withTraceparent(String traceparent) {
            return new WriteDone(transferId, incarnation, toIncarnation, checksum, traceparent);
        }

        @Override
        public Type type() {
            return Type.WRITE_DONE;
        }
    }

    /** P → D: the transfer's KV will not arrive, with the status code and reason P saw ({@code type: write_failed}). */
    record WriteFailed(String transferId, StatusCode code, String reason, long incarnation, long toIncarnation,
            String traceparent) implements NotifyMessage {
        public WriteFailed {
            Objects.requireNonNull(transferId, "transferId");
            Objects.requireNonNull(code, "code");
            Objects.requireNonNull(reason, "reason");
        }

        public WriteFailed(String transferId, StatusCode code, String reason, long incarnation, long toIncarnation) {
            this(transferId, code, reason, incarnation, toIncarnation, null);
        }

        public WriteFailed(String transferId, StatusCode code, String reason) {
            this(transferId, code, reason, 0, 0);
        }

        @Override
        public WriteFailed withTraceparent(String traceparent) {
            return new WriteFailed(transferId, code, reason, incarnation, toIncarnation, traceparent);
        }

        @Override
        public Type type() {
            return Type.WRITE_FAILED;
        }
    }

    /**
     * Either way: the sender is done with the transfer and its blocks may be freed ({@code type: release}). In READ
     * mode decode sends it to prefill once its reads have drained, with its tensor-parallel size
     * ({@code consumer_tp_size}, 0 when not said), as vLLM's typed acknowledgements carry it.
     */
    record Release(String transferId, long incarnation, long toIncarnation, int consumerTpSize)
            implements NotifyMessage {
        public Release {
            Objects.requireNonNull(transferId, "transferId");
            if (consumerTpSize < 0) {
                throw new IllegalArgumentException("consumer_tp_size must not be negative, got " + consumerTpSize);
            }
        }

        public Release(String transferId, long incarnation, long toIncarnation) {
            this(transferId, incarnation, toIncarnation, 0);
        }

        public Release(String transferId) {
            this(transferId, 0, 0);
        }

        @Override
        public Type type() {
            return Type.RELEASE;
        }
    }

    /**
     * D (or anyone routing the request) → P: nobody wants the transfer any more (the client went away,
     * decode's deadline passed, decode is shutting down); P stops working on it ({@code type: abort}).
     */
    record Abort(String transferId, String reason, long incarnation) implements NotifyMessage {
        public Abort {
            Objects.requireNonNull(transferId, "transferId");
            Objects.requireNonNull(reason, "reason");
        }

        public Abort(String transferId, String reason) {
            this(transferId, reason, 0);
        }

        @Override
        public Type type() {
            return Type.ABORT;
        }
    }

    /**
     * P → D, in READ mode: prefill computed the transfer's KV and keeps it in {@code blockNotifyList}, its own blocks,
     * until decode's {@code release} ({@code type: read_ready}); decode reads each layer from there. {@code region}
     * says where prefill's KV lives (null when not sent), {@code checksum} is the content check decode verifies over
     * the blocks it read into (0 when not computed), {@code toIncarnation} the decode incarnation whose request it
     * answers.
     */
    record ReadReady(String transferId, List<Long> blockNotifyList, long incarnation, long toIncarnation,
            long checksum, KvRegion region) implements NotifyMessage {
        public ReadReady {
            Objects.requireNonNull(transferId, "transferId");
            blockNotifyList = List.copyOf(blockNotifyList);
        }

        @Override
        public Type type() {
            return Type.READ_READY;
        }
    }
}
