package dev.kvflux.tools.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The relay's reordering against a loopback receiver that records each frame and acknowledges it by
 * echoing it: the receiver sees a chosen frame after the next one, the sender gets the acknowledgements
 * back in the order it sent the frames.
 */
class NotifyRelayTest {
    @Test
    void reorderSwapsAPairForTheReceiverAndKeepsTheSendersAcknowledgementsInOrder() throws Exception {
        List<String> received = Collections.synchronizedList(new ArrayList<>());
        try (ServerSocket receiver = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
             NotifyRelay relay = new NotifyRelay(receiver.getLocalPort(), NotifyRelay.Mode.REORDER, 2)) {
            Thread.ofPlatform().daemon().start(() -> echo(receiver, received));
            try (Socket sender = new Socket(InetAddress.getLoopbackAddress(), relay.port())) {
                DataOutputStream out = new DataOutputStream(sender.getOutputStream());
                // all four in one write, so the third reaches the relay well within the hold of the second
                java.io.ByteArrayOutputStream frames = new java.io.ByteArrayOutputStream();
                DataOutputStream framing = new DataOutputStream(frames);
                for (String frame : List.of("a", "b", "c", "d")) {
                    framing.writeInt(1);
                    framing.write(frame.getBytes(StandardCharsets.US_ASCII));
                }
                out.write(frames.toByteArray());
                out.flush();
                DataInputStream in = new DataInputStream(sender.getInputStream());
                List<String> acks = new ArrayList<>();
                for (int i = 0; i < 4; i++) {
                    acks.add(new String(in.readNBytes(in.readInt()), StandardCharsets.US_ASCII));
                }

                assertThat(received).containsExactly("a", "c", "b", "d");
                assertThat(acks).containsExactly("a", "b", "c", "d");
                assertThat(relay.mistreated()).isEqualTo(2);
            }
        }
    }

    /** Records each frame and sends it back as its acknowledgement. */
    private static void echo(ServerSocket receiver, List<String> received) {
        try (Socket relayed = receiver.accept()) {
            DataInputStream in = new DataInputStream(relayed.getInputStream());
            DataOutputStream out = new DataOutputStream(relayed.getOutputStream());
            while (true) {
                byte[] frame = in.readNBytes(in.readInt());
                received.add(new String(frame, StandardCharsets.US_ASCII));
                out.writeInt(frame.length);
                out.write(frame);
                out.flush();
            }
        } catch (IOException e) {
            // the test is over
        }
    }
}
