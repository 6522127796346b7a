package dev.kvflux.transfer.notify;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.micrometer.MicrometerNotifyRecorder;
import dev.kvflux.transfer.ExpectedTransfers;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.Socket;
import java.net.SocketException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Seeded generated frames, valid ones mutated every way a hostile or broken peer might: against the codec,
 * only {@link MalformedFrameException} may come out and each frame allocates a bounded amount; against a live
 * server, a frame is acknowledged exactly when the codec accepts it, otherwise it closes its connection and is
 * counted; nothing fails inside the server, and it keeps serving.
 */
class NotifyFuzzTest {
    private static final long SEED = 0x6b76_666c_7578L;
    private static final int CODEC_FRAMES = 120_000;
    private static final int LIVE_FRAMES = 3_000;
    /** Per frame: the decoder's fixed bookkeeping plus a small multiple of the frame (boxed block numbers). */
    private static final long FIXED_ALLOCATION = 64 * 1024;
    private static final long ALLOCATION_PER_BYTE = 16;

    private static final int[] HOSTILE_BYTES = {0xdb, 0xdd, 0xdf, 0xc6, 0xc5, 0xda, 0xdc, 0xde, 0xc1, 0x91, 0x81,
            0xd4, 0xc7, 0xff, 0xc0, 0xcf, 0xed, 0xf4};

    @Test
    void codecThrowsOnlyMalformedFrameAndAllocatesBoundedPerFrame() {
        // a first pass links every code path (class loading and string concatenation sites allocate once)
        Random warmUp = new Random(SEED);
        for (int i = 0; i < CODEC_FRAMES; i++) {
            try {
                NotifyCodec.decode(frame(warmUp));
            } catch (RuntimeException checkedBelow) {
                // the measured pass checks what is thrown
            }
        }
        Random random = new Random(SEED);
        long decoded = 0;
        long rejected = 0;
        for (int i = 0; i < CODEC_FRAMES; i++) {
            byte[] frame = frame(random);
            long before = Allocation.now();
            try {
                NotifyCodec.decode(frame);
                decoded++;
            } catch (MalformedFrameException expected) {
                rejected++;
            } catch (Throwable e) {
                throw new AssertionError("frame " + i + " (" + HexFormat.of().formatHex(frame, 0,
                        Math.min(frame.length, 64)) + ") threw " + e, e);
            }
            long allocated = Allocation.now() - before;
            assertThat(allocated).as("bytes allocated decoding frame %d of %d bytes (%s)", i, frame.length,
                            HexFormat.of().formatHex(frame, 0, Math.min(frame.length, 64)))
                    .isLessThanOrEqualTo(FIXED_ALLOCATION + ALLOCATION_PER_BYTE * frame.length);
        }
        assertThat(decoded + rejected).isEqualTo(CODEC_FRAMES);
        assertThat(decoded).as("mutation keeps some frames valid").isPositive();
        assertThat(rejected).as("and breaks most").isGreaterThan(CODEC_FRAMES / 2);
    }

    @Test
    void liveServerAnswersOrClosesEveryFrameAndCountsEveryRejection() throws IOException {
        MicrometerNotifyRecorder m = MicrometerNotifyRecorder.of(new SimpleMeterRegistry());
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(Duration.ofSeconds(5)).recorder(m);
        try (NotifyServer server = NotifyServer.builder().port(0).maxFrameBytes(64 * 1024)
                .recorder(m).handler(registry).bindNow()) {
            Random random = new Random(SEED + 1);
            long acknowledged = 0;
            long closed = 0;
            Socket socket = null;
            try {
                for (int i = 0; i < LIVE_FRAMES; i++) {
                    if (socket == null) {
                        socket = new Socket("127.0.0.1", server.address().getPort());
                        socket.setSoTimeout(5000);
                        socket.setTcpNoDelay(true);
                    }
                    byte[] frame = frame(random);
                    boolean valid = decodes(frame);
                    boolean answered = exchange(socket, frame);
                    assertThat(answered).as("frame %d (%s) acknowledged exactly when it decodes", i,
                            HexFormat.of().formatHex(frame, 0, Math.min(frame.length, 64))).isEqualTo(valid);
                    if (answered) {
                        acknowledged++;
                    } else {
                        closed++;
                        socket.close();
                        socket = null;
                    }
                }
            } finally {
                if (socket != null) {
                    socket.close();
                }
            }
            assertThat(m.count(NotifyEvent.RECEIVED)).isEqualTo(acknowledged);
            assertThat(m.count(NotifyEvent.REJECTED_MALFORMED) + m.count(NotifyEvent.REJECTED_INVALID_UTF8)
                    + m.count(NotifyEvent.REJECTED_OVERSIZED)).isEqualTo(closed);
            assertThat(m.count(NotifyEvent.REJECTED_INTERNAL_ERROR)).isZero();
            assertThat(closed).isPositive();

            NotifyClient client = NotifyClient.create();
            try (client) {
                assertThat(client.send(server.address(), new NotifyMessage.WriteDone("after-fuzz"),
                        Duration.ofSeconds(5)).block(Duration.ofSeconds(10))).isTrue();
            }
        }
    }

    private static boolean decodes(byte[] frame) {
        try {
            NotifyCodec.decode(frame);
            return true;
        } catch (MalformedFrameException rejected) {
            return false;
        }
    }

    /** Sends one frame; true when it was acknowledged, false when the server closed the connection. */
    private static boolean exchange(Socket socket, byte[] payload) throws IOException {
        try {
            socket.getOutputStream().write(ByteBuffer.allocate(4 + payload.length).putInt(payload.length)
                    .put(payload).array());
            DataInputStream in = new DataInputStream(socket.getInputStream());
            int length = in.readInt();
            in.readNBytes(length);
            return true;
        } catch (EOFException | SocketException closedByServer) {
            return false;
        }
    }

    /** A valid message's bytes, usually mutated, sometimes random bytes. */
    static byte[] frame(Random random) {
        if (random.nextInt(20) == 0) {
            byte[] noise = new byte[random.nextInt(48)];
            random.nextBytes(noise);
            return noise;
        }
        byte[] frame = NotifyCodec.encode(message(random));
        int mutations = random.nextInt(4);
        for (int i = 0; i < mutations; i++) {
            frame = mutate(frame, random);
        }
        return frame;
    }

    private static NotifyMessage message(Random random) {
        String id = text(random, 1 + random.nextInt(40));
        return switch (random.nextInt(5)) {
            case 0 -> new NotifyMessage.WriteDone(id).withTraceparent(random.nextBoolean() ? null
                    : "00-" + hex(random, 32) + "-" + hex(random, 16) + "-0" + random.nextInt(2));
            case 4 -> new NotifyMessage.Abort(id, text(random, random.nextInt(100)));
            case 1 -> new NotifyMessage.Release(id);
            case 2 -> new NotifyMessage.WriteFailed(id, random.nextBoolean() ? StatusCode.IN_PROGRESS
                    : StatusCode.ERR_RDMA_OP, text(random, random.nextInt(300)));
            default -> {
                List<Long> blocks = new ArrayList<>();
                int count = random.nextInt(64);
                for (int i = 0; i < count; i++) {
                    blocks.add(random.nextBoolean() ? (long) random.nextInt(128) : random.nextLong());
                }
                yield new NotifyMessage.RemoteBlocks(text(random, 1 + random.nextInt(20)), id, blocks,
                        random.nextInt(8));
            }
        };
    }

    private static String hex(Random random, int digits) {
        StringBuilder out = new StringBuilder(digits);
        for (int i = 0; i < digits; i++) {
            out.append(Character.forDigit(random.nextInt(16), 16));
        }
        return out.toString();
    }

    private static String text(Random random, int length) {
        StringBuilder out = new StringBuilder(length);
        for (int i = 0; i < length; i++) {
            int pick = random.nextInt(40);
            out.append(pick == 0 ? '\n' : pick == 1 ? 'é' : pick == 2 ? '✓' : (char) ('a' + random.nextInt(26)));
        }
        return out.toString();
    }

    private static byte[] mutate(byte[] frame, Random random) {
        if (frame.length == 0) {
            return new byte[] {(byte) HOSTILE_BYTES[random.nextInt(HOSTILE_BYTES.length)]};
        }
        int at = random.nextInt(frame.length);
        switch (random.nextInt(7)) {
            case 0 -> frame[at] ^= (byte) (1 << random.nextInt(8));
            case 1 -> frame[at] = (byte) HOSTILE_BYTES[random.nextInt(HOSTILE_BYTES.length)];
            case 2 -> {
                // a 32-bit length or count header claiming up to 2^31 bytes or entries
                byte[] header = ByteBuffer.allocate(5).put((byte) HOSTILE_BYTES[random.nextInt(6)])
                        .putInt(random.nextInt(Integer.MAX_VALUE)).array();
                return splice(frame, at, header, 0);
            }
            case 3 -> {
                return java.util.Arrays.copyOf(frame, at);
            }
            case 4 -> {
                byte[] inserted = new byte[1 + random.nextInt(8)];
                random.nextBytes(inserted);
                return splice(frame, at, inserted, 0);
            }
            case 5 -> {
                return splice(frame, at, new byte[0], Math.min(frame.length - at, 1 + random.nextInt(8)));
            }
            default -> {
                byte[] nesting = new byte[1 + random.nextInt(2000)];
                java.util.Arrays.fill(nesting, (byte) (random.nextBoolean() ? 0x91 : 0x81));
                return splice(frame, at, nesting, 0);
            }
        }
        return frame;
    }

    /** {@code frame} with {@code removed} bytes at {@code at} replaced by {@code inserted}. */
    private static byte[] splice(byte[] frame, int at, byte[] inserted, int removed) {
        byte[] out = new byte[frame.length - removed + inserted.length];
        System.arraycopy(frame, 0, out, 0, at);
        System.arraycopy(inserted, 0, out, at, inserted.length);
        System.arraycopy(frame, at + removed, out, at + inserted.length, frame.length - at - removed);
        return out;
    }
}
