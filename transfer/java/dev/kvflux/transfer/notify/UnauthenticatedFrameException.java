package dev.kvflux.transfer.notify;

/**
 * A notify frame that fails authentication while a notify secret is set: no tag, a wrong tag, or signed
 * too long ago. The connection it came on is closed; the server keeps serving the others.
 */
public final class UnauthenticatedFrameException extends RuntimeException {
    public UnauthenticatedFrameException(String message) {
        super(message, null, false, false);
    }
}
