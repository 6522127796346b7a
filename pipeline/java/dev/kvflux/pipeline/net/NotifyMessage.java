package dev.kvflux.pipeline.net;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.pipeline.WriteOutcome;
import java.util.List;
import java.util.Objects;

/**
 * One message of the notify channel between prefill (P) and decode (D), with vLLM MoRIIO's shapes:
 * D tells P where to write ({@link RemoteBlocks}), P tells D that the KV has arrived ({@link WriteDone})
 * or, new in kvflux, that it never will ({@link WriteFailed}); {@link Release} lets either side drop a
 * transfer early; {@link Abort} tells prefill that nobody wants the transfer any more. On the wire each is a msgpack map whose {@code type} key names it.
 */
public sealed interface NotifyMessage {

    /** The transfer the message is about. */
    String transferId();

    /** The wire name in the {@code type} key. */
    String type();

    /** The message that carries a WRITE's outcome to decode. */
    static NotifyMessage of(WriteOutcome outcome) {
        return switch (outcome) {
            case WriteOutcome.WriteDone done -> new WriteDone(done.transferId());
            case WriteOutcome.WriteFailed failed -> new WriteFailed(failed.transferId(), failed.code(), failed.reason());
        };
    }

    /** D → P: the blocks D allocated for the request ({@code type: remote_blocks}). */
    record RemoteBlocks(String reqId, String transferId, List<Long> blockNotifyList, int decodeRank)
            implements NotifyMessage {
        public RemoteBlocks {
            Objects.requireNonNull(reqId, "reqId");
            Objects.requireNonNull(transferId, "transferId");
            blockNotifyList = List.copyOf(blockNotifyList);
        }

        @Override
        public String type() {
            return "remote_blocks";
        }
    }

    /** P → D: every copy of the transfer succeeded ({@code type: write_done}). */
    record WriteDone(String transferId) implements NotifyMessage {
        public WriteDone {
            Objects.requireNonNull(transferId, "transferId");
        }

        @Override
        public String type() {
            return "write_done";
        }
    }

    /** P → D: the transfer's KV will not arrive, with the status code and reason P saw ({@code type: write_failed}). */
    record WriteFailed(String transferId, StatusCode code, String reason) implements NotifyMessage {
        public WriteFailed {
            Objects.requireNonNull(transferId, "transferId");
            Objects.requireNonNull(code, "code");
            Objects.requireNonNull(reason, "reason");
        }

        @Override
        public String type() {
            return "write_failed";
        }
    }

    /** Either way: the sender is done with the transfer and its blocks may be freed ({@code type: release}). */
    record Release(String transferId) implements NotifyMessage {
        public Release {
            Objects.requireNonNull(transferId, "transferId");
        }

        @Override
        public String type() {
            return "release";
        }
    }

    /**
     * D (or anyone routing the request) → P: nobody wants the transfer any more (the client went away,
     * decode's deadline passed, decode is shutting down); P stops working on it ({@code type: abort}).
     */
    record Abort(String transferId, String reason) implements NotifyMessage {
        public Abort {
            Objects.requireNonNull(transferId, "transferId");
            Objects.requireNonNull(reason, "reason");
        }

        @Override
        public String type() {
            return "abort";
        }
    }
}
