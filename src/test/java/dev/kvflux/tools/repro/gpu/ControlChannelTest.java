package dev.kvflux.tools.repro.gpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.bindings.gpu.GpuMemoryDescriptor;
import dev.kvflux.bindings.gpu.IpcMemHandle;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/** The descriptor exchange and the verify round trip between prefill and decode, over loopback TCP. */
class ControlChannelTest {

    private static GpuMemoryDescriptor fakeDescriptor() {
        byte[] handle = new byte[IpcMemHandle.SIZE];
        handle[0] = 42;
        return new GpuMemoryDescriptor("decode", 0, 1, 0x7000_0000L, 990_904_320L, new IpcMemHandle(handle));
    }

    @Test
    void decodesDescriptorReachesPrefillIntact() throws Exception {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            CompletableFuture<Void> decode = CompletableFuture.runAsync(() -> {
                try (ControlChannel c = new ControlChannel(new Socket(InetAddress.getLoopbackAddress(),
                        server.getLocalPort()))) {
                    c.sendDescriptor(fakeDescriptor().pack());
                    ControlChannel.Command command = c.receiveCommand();
                    c.sendVerdict(new ControlChannel.Verdict(command.request(), 100, 0, 0, 1.5));
                    assertThat(c.receiveCommand().done()).isTrue();
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
            });
            try (ControlChannel prefill = new ControlChannel(server.accept())) {
                assertThat(GpuMemoryDescriptor.unpack(prefill.receiveDescriptor())).isEqualTo(fakeDescriptor());
                prefill.sendVerify(17);
                assertThat(prefill.receiveVerdict()).isEqualTo(new ControlChannel.Verdict(17, 100, 0, 0, 1.5));
                prefill.sendDone();
            }
            decode.get();
        }
    }

    @Test
    void anAbsurdDescriptorLengthIsRefusedWithoutReadingIt() throws Exception {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
                Socket peer = new Socket(InetAddress.getLoopbackAddress(), server.getLocalPort());
                ControlChannel prefill = new ControlChannel(server.accept())) {
            DataOutputStream raw = new DataOutputStream(peer.getOutputStream());
            raw.writeByte('D');
            raw.writeInt(Integer.MAX_VALUE);
            raw.flush();
            assertThatThrownBy(prefill::receiveDescriptor)
                    .isInstanceOf(IOException.class)
                    .hasMessageContaining("not a kvflux decode process");
        }
    }

    @Test
    void aPeerThatHangsUpIsReportedAsSuch() throws Exception {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            new Socket(InetAddress.getLoopbackAddress(), server.getLocalPort()).close();
            try (ControlChannel prefill = new ControlChannel(server.accept())) {
                assertThatThrownBy(prefill::receiveDescriptor)
                        .hasMessageContaining("closed the control connection while a memory descriptor was expected");
            }
        }
    }

    @Test
    void aDescriptorCutShortIsReportedAsAHangUpNotAsABadDescriptor() throws Exception {
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            try (Socket peer = new Socket(InetAddress.getLoopbackAddress(), server.getLocalPort())) {
                DataOutputStream raw = new DataOutputStream(peer.getOutputStream());
                raw.writeByte('D');
                raw.writeInt(100);
                raw.write(new byte[10]);
                raw.flush();
            }
            try (ControlChannel prefill = new ControlChannel(server.accept())) {
                assertThatThrownBy(prefill::receiveDescriptor)
                        .isInstanceOf(EOFException.class)
                        .hasMessageContaining("in the middle of a 100-byte memory descriptor");
            }
        }
    }
}
