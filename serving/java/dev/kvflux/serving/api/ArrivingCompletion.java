package dev.kvflux.serving.api;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.async.ByteBufferFeeder;
import com.fasterxml.jackson.core.exc.StreamConstraintsException;
import dev.kvflux.serving.http.BodyCheck;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.io.IOException;
import java.nio.ByteBuffer;

/**
 * A completion request's body read as it arrives, by a non-blocking JSON parser under the same bounds as
 * {@link CompletionSchema#parse(io.netty.buffer.ByteBuf, int)}: a body that goes past them (a string of more than 64
 * characters per token of the model length, or more than 4 JSON values per token) is refused with 400
 * {@code context_length_exceeded} as soon as the bytes that cross the bound arrive, not after the whole body, up to
 * the 16 MiB limit, has been read and held. A 16 MiB prompt of words is refused after about 2 MiB of it, one of token
 * ids after about 300 KiB, for a model length of 32K.
 *
 * <p>Only the bounds are judged here: a body that is not JSON stops being looked at, and the whole body's parse names
 * what is wrong with it, as for a body that arrived in one piece. Each chunk is parsed once, as it comes, on the event
 * loop that read it.
 */
final class ArrivingCompletion implements BodyCheck {
    private final JsonParser parser;
    private final ByteBufferFeeder feeder;
    private final int maxModelLen;
    private boolean done;

    ArrivingCompletion(com.fasterxml.jackson.core.JsonFactory bounded, int maxModelLen) {
        try {
            this.parser = bounded.createNonBlockingByteBufferParser();
        } catch (IOException e) {
            throw new IllegalStateException("no non-blocking JSON parser: " + e.getMessage(), e);
        }
        this.feeder = (ByteBufferFeeder) parser.getNonBlockingInputFeeder();
        this.maxModelLen = maxModelLen;
    }

    @Override
    public void next(ByteBuffer chunk) {
        if (done || !chunk.hasRemaining()) {
            return;
        }
        try {
            feeder.feedInput(chunk);
            JsonToken token;
            do {
                token = parser.nextToken();
            } while (token != null && token != JsonToken.NOT_AVAILABLE);
            if (token == null) {
                done = true; // the document ended: what follows, if anything, is the whole parse's to name
            }
        } catch (StreamConstraintsException e) {
            done = true;
            throw new Refused(HttpResponseStatus.BAD_REQUEST, "invalid_request_error", "context_length_exceeded",
                    CompletionSchema.farOver(maxModelLen, e.getOriginalMessage()));
        } catch (IOException | RuntimeException e) {
            done = true; // not JSON (or a parser that cannot go on): the whole body's parse says where and how
        }
    }

    @Override
    public void close() {
        try {
            parser.close();
        } catch (IOException ignored) {
            // a parser over fed buffers holds no stream to fail on
        }
    }
}
