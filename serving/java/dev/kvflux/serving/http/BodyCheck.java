package dev.kvflux.serving.http;

import io.netty.handler.codec.http.HttpResponseStatus;
import java.nio.ByteBuffer;

/**
 * A look at a request body while it arrives, chunk by chunk, before it is whole: a body that can already be refused
 * (a prompt far over the model length, say) is answered at once, and the rest of it is neither read nor held. One
 * check serves one body; its chunks come in order, on the event loop that reads them, so a check must cost little per
 * byte. {@link BodyReader} closes it when the body's answer ends.
 */
public interface BodyCheck extends AutoCloseable {
    /**
     * Takes the body's next bytes (the buffer's remaining ones, not to be kept past the call).
     *
     * @throws Refused when the body is refused on what has arrived so far
     */
    void next(ByteBuffer chunk);

    /** Frees what the check holds; called once, when the body's answer has ended. */
    @Override
    default void close() {
    }

    /** A body refused before its end, with the OpenAI-style error it is answered. */
    final class Refused extends RuntimeException {
        private final HttpResponseStatus status;
        private final String type;
        private final String code;

        /** The answer {@code status}, with an error of {@code type}, {@code code} and {@code message}. */
        public Refused(HttpResponseStatus status, String type, String code, String message) {
            super(message, null, false, false);
            this.status = status;
            this.type = type;
            this.code = code;
        }

        public HttpResponseStatus status() {
            return status;
        }

        public String type() {
            return type;
        }

        public String code() {
            return code;
        }
    }
}
