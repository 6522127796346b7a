package dev.kvflux.tools.bench;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.transfer.notify.NotifyCodec;
import dev.kvflux.transfer.notify.NotifyMessage;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/** The payloads {@link HostileProbe} sends: the same seeded set for every run, each within a largest size. */
final class HostileFrames {
    /** Bytes one block id of a huge value takes in msgpack. */
    private static final int STRIDE = 9;

    private HostileFrames() {
    }

    /** The hostile frames, each at most {@code max} bytes: lying headers, nesting, bad text, big valid ones. */
    static List<byte[]> of(int max) {
        List<byte[]> frames = new ArrayList<>();
        Random random = new Random(0x686f7374L);
        for (int size : new int[] {max, max / 4, max / 16, Math.max(64, max / 256)}) {
            frames.add(new byte[] {(byte) 0xdf, 0x40, 0, 0, 0, (byte) 0xa1, 'a', (byte) 0xa1, 'b'});
            frames.add(new byte[] {(byte) 0x81, (byte) 0xdb, 0x40, 0, 0, 0, 'a', 'b', 'c'});
            byte[] nesting = new byte[size];
            Arrays.fill(nesting, (byte) 0x91);
            frames.add(nesting);
            frames.add(fit(NotifyCodec.encode(new NotifyMessage.WriteFailed("hostile-" + size, StatusCode.ERR_RDMA_OP,
                    "x".repeat(Math.max(0, size - 96)))), max));
            frames.add(blockList(size, max));
            byte[] badText = NotifyCodec.encode(new NotifyMessage.WriteFailed("hostile-utf8-" + size,
                    StatusCode.ERR_RDMA_OP, "y".repeat(Math.max(1, size - 96))));
            badText[badText.length - 1] = (byte) 0xff;
            frames.add(fit(badText, max));
            byte[] noise = new byte[size];
            random.nextBytes(noise);
            frames.add(noise);
            frames.add(fit(NotifyCodec.encode(new NotifyMessage.WriteDone("hostile\n12:00:00.000 ERROR forged " + size)),
                    max));
        }
        return frames;
    }

    /** The longest block list of huge block ids that fits in {@code size} bytes (and so in {@code max}). */
    private static byte[] blockList(int size, int max) {
        int blocks = Math.min(65_536, Math.max(1, (size - 80) / STRIDE));
        while (true) {
            byte[] frame = NotifyCodec.encode(new NotifyMessage.RemoteBlocks("r", "hostile-blocks-" + size,
                    java.util.stream.LongStream.range(Long.MAX_VALUE - blocks, Long.MAX_VALUE).boxed().toList(), 0));
            if (frame.length <= Math.min(size, max) || blocks == 1) {
                return fit(frame, max);
            }
            // each block id takes STRIDE bytes; drop enough of them to make the frame fit, at least one
            blocks = Math.max(1, blocks - Math.max(1, (frame.length - Math.min(size, max) + STRIDE - 1) / STRIDE));
        }
    }

    private static byte[] fit(byte[] frame, int max) {
        if (frame.length > max) {
            throw new IllegalStateException("a probe frame of " + frame.length + " bytes exceeds " + max);
        }
        return frame;
    }

}
