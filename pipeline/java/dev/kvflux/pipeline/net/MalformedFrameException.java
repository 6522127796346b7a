package dev.kvflux.pipeline.net;

/**
 * A notify frame that is not a message kvflux understands: not msgpack, not a map, an unknown
 * {@code type}, or a required key missing or of the wrong type. The connection it came on is closed;
 * the server keeps serving the others.
 */
public final class MalformedFrameException extends RuntimeException {
    public MalformedFrameException(String message) {
        super(message, null, false, false);
    }

    public MalformedFrameException(String message, Throwable cause) {
        super(message, cause, false, false);
    }
}
