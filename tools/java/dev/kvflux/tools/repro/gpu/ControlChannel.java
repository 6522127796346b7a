package dev.kvflux.tools.repro.gpu;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.Socket;

/**
 * The reproducer's control link between the prefill process and its decode child, over loopback TCP:
 * decode sends its memory descriptor; prefill asks decode to verify a request's bytes; decode answers
 * with what it found; prefill says when it is done. Each message is a type byte and fixed fields; a
 * descriptor is length-prefixed and at most {@value #MAX_DESCRIPTOR} bytes.
 */
final class ControlChannel implements AutoCloseable {
    static final int MAX_DESCRIPTOR = 64 * 1024;
    private static final byte DESCRIPTOR = 'D';
    private static final byte VERIFY = 'V';
    private static final byte RESULT = 'R';
    private static final byte DONE = 'Q';

    /** Decode's verdict on one request's bytes. */
    record Verdict(long request, long checkedBytes, long mismatchedBytes, int badLayers, double copyBackMs) {
    }

    /** A message prefill sends to decode: verify a request, or stop (request -1). */
    record Command(long request) {
        boolean done() {
            return request < 0;
        }
    }

    private final Socket socket;
    private final DataInputStream in;
    private final DataOutputStream out;

    ControlChannel(Socket socket) throws IOException {
        this.socket = socket;
        this.in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
        this.out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
    }

    void sendDescriptor(byte[] descriptor) throws IOException {
        if (descriptor.length > MAX_DESCRIPTOR) {
            throw new IllegalArgumentException("descriptor of " + descriptor.length + " bytes is over the "
                    + MAX_DESCRIPTOR + "-byte limit");
        }
        out.writeByte(DESCRIPTOR);
        out.writeInt(descriptor.length);
        out.write(descriptor);
        out.flush();
    }

    byte[] receiveDescriptor() throws IOException {
        expect(DESCRIPTOR, "a memory descriptor");
        int length = in.readInt();
        if (length <= 0 || length > MAX_DESCRIPTOR) {
            throw new IOException("peer announced a descriptor of " + length + " bytes; expected 1.."
                    + MAX_DESCRIPTOR + ": the peer is not a kvflux decode process of this version");
        }
        byte[] descriptor = new byte[length];
        try {
            in.readFully(descriptor);
        } catch (EOFException e) {
            throw new EOFException("the peer closed the control connection in the middle of a " + length
                    + "-byte memory descriptor; did the decode process fail? (its output is above)");
        }
        return descriptor;
    }

    void sendVerify(long request) throws IOException {
        out.writeByte(VERIFY);
        out.writeLong(request);
        out.flush();
    }

    void sendDone() throws IOException {
        out.writeByte(DONE);
        out.flush();
    }

    Command receiveCommand() throws IOException {
        int type = in.read();
        if (type == DONE) {
            return new Command(-1);
        }
        if (type == VERIFY) {
            return new Command(in.readLong());
        }
        if (type < 0) {
            throw new EOFException("prefill closed the control connection without saying it was done");
        }
        throw new IOException("unexpected control message type " + type + "; expected V (verify) or Q (done)");
    }

    void sendVerdict(Verdict v) throws IOException {
        out.writeByte(RESULT);
        out.writeLong(v.request());
        out.writeLong(v.checkedBytes());
        out.writeLong(v.mismatchedBytes());
        out.writeInt(v.badLayers());
        out.writeDouble(v.copyBackMs());
        out.flush();
    }

    Verdict receiveVerdict() throws IOException {
        expect(RESULT, "a verification result");
        return new Verdict(in.readLong(), in.readLong(), in.readLong(), in.readInt(), in.readDouble());
    }

    /**
     * Prefill's side of one check: asks decode to verify {@code request} and returns its verdict.
     *
     * @throws UncheckedIOException if decode does not answer, or answers for another request
     */
    Verdict verify(long request) {
        try {
            sendVerify(request);
            Verdict verdict = receiveVerdict();
            if (verdict.request() != request) {
                throw new IOException("decode verified request " + verdict.request() + ", expected " + request);
            }
            return verdict;
        } catch (IOException e) {
            throw new java.io.UncheckedIOException("the decode process did not answer: " + e.getMessage(), e);
        }
    }

    private void expect(byte type, String what) throws IOException {
        int got = in.read();
        if (got < 0) {
            throw new EOFException("the peer closed the control connection while " + what + " was expected");
        }
        if (got != type) {
            throw new IOException("expected " + what + " (message type " + (char) type + "), got type " + got);
        }
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
