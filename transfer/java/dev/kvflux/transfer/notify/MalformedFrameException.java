package dev.kvflux.transfer.notify;

/**
 * A notify frame that is not a message kvflux understands: not msgpack, not a map, a shape or size the
 * protocol does not have, a string that is not UTF-8, an unknown {@code type}, or a required key missing or of
 * the wrong type. The connection it came on is closed; the server keeps serving the others. Its message may
 * quote the peer's text only escaped ({@link LogText}).
 */
public final class MalformedFrameException extends RuntimeException {
    private final boolean invalidUtf8;

    public MalformedFrameException(String message) {
        this(message, null, false);
    }

    public MalformedFrameException(String message, Throwable cause) {
        this(message, cause, false);
    }

    private MalformedFrameException(String message, Throwable cause, boolean invalidUtf8) {
        super(message, cause, false, false);
        this.invalidUtf8 = invalidUtf8;
    }

    /** A frame rejected because one of its strings is not well-formed UTF-8. */
    static MalformedFrameException invalidUtf8(String message) {
        return new MalformedFrameException(message, null, true);
    }

    /** Whether the frame was rejected for a string that is not well-formed UTF-8. */
    public boolean isInvalidUtf8() {
        return invalidUtf8;
    }
}
