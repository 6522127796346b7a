package dev.kvflux.pipeline.net;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.handler.codec.CorruptedFrameException;
import io.netty.handler.codec.LengthFieldBasedFrameDecoder;
import io.netty.handler.codec.TooLongFrameException;

/**
 * The notify channel's framing: a 4-byte big-endian length, then that many bytes of msgpack. A length
 * that is negative or above the maximum fails at once, before any payload is buffered.
 */
final class Frames {
    /** Bytes of the length prefix. */
    static final int PREFIX = 4;
    /** The default maximum payload: ample for a remote_blocks list of tens of thousands of blocks. */
    static final int DEFAULT_MAX_FRAME_BYTES = 1 << 20;

    private Frames() {
    }

    /** A decoder that strips the prefix and fails fast on a bad length. */
    static LengthFieldBasedFrameDecoder decoder(int maxFrameBytes) {
        return new LengthFieldBasedFrameDecoder(maxFrameBytes, 0, PREFIX, 0, PREFIX, true);
    }

    /** One frame holding {@code payload}. */
    static ByteBuf frame(ByteBufAllocator alloc, byte[] payload) {
        ByteBuf buf = alloc.buffer(PREFIX + payload.length);
        buf.writeInt(payload.length);
        buf.writeBytes(payload);
        return buf;
    }

    /** Whether {@code error} is the decoder rejecting a length prefix. */
    static boolean isBadLength(Throwable error) {
        return error instanceof TooLongFrameException || error instanceof CorruptedFrameException;
    }

    static void checkMax(int maxFrameBytes) {
        if (maxFrameBytes < 16 || maxFrameBytes > (64 << 20)) {
            throw new IllegalArgumentException("max frame size " + maxFrameBytes
                    + " bytes is out of range; use 16 bytes to 64 MiB (the default is 1 MiB)");
        }
    }
}
