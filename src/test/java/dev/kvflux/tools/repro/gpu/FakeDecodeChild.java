package dev.kvflux.tools.repro.gpu;

import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

/**
 * A stand-in decode process for {@link DecodeChildTest}: connects to {@code --port}, sends the text after
 * {@code --say} as one descriptor, then waits until prefill closes the channel.
 */
public final class FakeDecodeChild {
    private FakeDecodeChild() {
    }

    public static void main(String[] args) throws IOException {
        int port = Integer.parseInt(args[1]);
        byte[] said = args[3].getBytes(StandardCharsets.UTF_8);
        try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), port)) {
            ControlChannel channel = new ControlChannel(socket);
            channel.sendDescriptor(said);
            socket.getInputStream().read();
        }
    }
}
