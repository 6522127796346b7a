package dev.kvflux.serving.vllm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.serving.api.Role;
import dev.kvflux.tools.vllm.ToyProxy;
import dev.kvflux.tools.vllm.VllmDouble;
import dev.kvflux.transfer.KvMode;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The vLLM discovery port reads both registration shapes that exist, takes them only from the allowed networks, and
 * keeps serving through a flood of malformed frames.
 */
class VllmDiscoveryTest {
    private static final Duration WAIT = Duration.ofSeconds(10);

    private static byte[] map(Object... keysAndValues) throws Exception {
        try (MessageBufferPacker out = MessagePack.newDefaultBufferPacker()) {
            out.packMapHeader(keysAndValues.length / 2);
            for (int i = 0; i < keysAndValues.length; i += 2) {
                out.packString((String) keysAndValues[i]);
                Object v = keysAndValues[i + 1];
                if (v instanceof String s) {
                    out.packString(s);
                } else {
                    out.packLong(((Number) v).longValue());
                }
            }
            return out.toByteArray();
        }
    }

    @Test
    void theConnectorsAndTheRoutersShapesAreBothRegistrations() throws Exception {
        VllmRegistration connector = VllmRegistration.from(MsgpackMaps.read(map("type", "D", "http_address",
                "10.0.0.5:8200", "zmq_address", "host:10.0.0.5,handshake:6301,notify:61005", "dp_size", 2, "tp_size",
                4, "transfer_mode", "READ")));
        VllmRegistration router = VllmRegistration.from(MsgpackMaps.read(map("type", "register", "role", "P",
                "request_address", "http://10.0.0.6:8100/v1/completions", "handshake_port", 6302, "notify_port",
                61006, "dp_size", 1, "tp_size", 1, "transfer_mode", "WRITE")));

        assertThat(connector.role()).isEqualTo(Role.DECODE);
        assertThat(connector.httpHostPort()).isEqualTo("10.0.0.5:8200");
        assertThat(List.of(connector.zmqHost(), connector.handshakePort(), connector.notifyPort(), connector.dpSize(),
                connector.tpSize(), connector.mode())).containsExactly("10.0.0.5", 6301, 61005, 2, 4, KvMode.READ);
        assertThat(router.role()).isEqualTo(Role.PREFILL);
        assertThat(router.httpHostPort()).isEqualTo("10.0.0.6:8100");
        assertThat(router.zmqAddress()).isEqualTo("host:10.0.0.6,handshake:6302,notify:61006");
    }

    @Test
    void aRegistrationMissingAFieldOrOverItsBoundsIsRefusedSayingWhat() throws Exception {
        assertThatThrownBy(() -> VllmRegistration.from(MsgpackMaps.read(map("type", "P", "http_address",
                "10.0.0.5:8200", "dp_size", 1, "tp_size", 1, "transfer_mode", "WRITE"))))
                .hasMessageContaining("zmq_address");
        assertThatThrownBy(() -> VllmRegistration.from(MsgpackMaps.read(map("type", "P", "http_address",
                "10.0.0.5:8200", "zmq_address", "host:10.0.0.5,handshake:1,notify:2", "dp_size", 5000, "tp_size", 1,
                "transfer_mode", "WRITE")))).hasMessageContaining("dp_size");
        // a str32 header claiming 2 GiB in a frame of a few bytes
        assertThatThrownBy(() -> MsgpackMaps.read(new byte[] {(byte) 0x81, (byte) 0xdb, 0x7f, -1, -1, -1, 'a'}))
                .hasMessageContaining("within the frame");
    }

    @Test
    void registrationsFromOutsideTheAllowedNetworksAreDropped() throws Exception {
        List<VllmRegistration> taken = new CopyOnWriteArrayList<>();
        try (VllmDiscovery discovery = VllmDiscovery.bind("127.0.0.1", 0, Networks.parse("10.0.0.0/8"), r -> {
                    taken.add(r);
                    return "registered";
                });
             ZContext context = new ZContext(1)) {
            ZMQ.Socket sender = context.createSocket(SocketType.DEALER);
            sender.setLinger(0);
            sender.setSendTimeOut(1_000);
            sender.connect("tcp://127.0.0.1:" + discovery.port());
            byte[] registration = map("type", "D", "http_address", "10.0.0.5:8200", "zmq_address",
                    "host:10.0.0.5,handshake:6301,notify:61005", "dp_size", 1, "tp_size", 1, "transfer_mode", "WRITE");
            // sent again until one has arrived: on a loaded CI host a new ZeroMQ connection once took seconds, and
            // sends that found it not ready gave up. No deadline of its own: a registration that never arrives fails
            // the test at the suite's per-test timeout (junit-platform.properties)
            while (discovery.outcome("not_allowed") < 1) {
                sender.send(registration, 0);
                Thread.sleep(50);
            }

            assertThat(taken).isEmpty();
            assertThat(discovery.outcomes().keySet()).containsOnly("not_allowed");
        }
    }

    @Test
    @org.junit.jupiter.api.Timeout(value = 3, unit = java.util.concurrent.TimeUnit.MINUTES)
    void aFloodOfMalformedFramesLeavesTheDiscoveryTakingRegistrations() throws Exception {
        List<VllmRegistration> taken = new CopyOnWriteArrayList<>();
        try (VllmDiscovery discovery = VllmDiscovery.bind("127.0.0.1", 0, Networks.LOOPBACK, r -> {
                    taken.add(r);
                    return "registered";
                });
             ZContext context = new ZContext(1)) {
            ZMQ.Socket flood = context.createSocket(SocketType.DEALER);
            flood.setSendTimeOut(5_000);
            flood.connect("tcp://127.0.0.1:" + discovery.port());
            byte[][] bad = {{(byte) 0xc1}, {(byte) 0x90}, map("type", "X"), map("type", "HELLO"), new byte[4000]};
            for (int i = 0; i < 10_000; i++) {
                // a send that finds the queue full for 5 s returns false and drops its frame (CI lost 5 of 10,000 so):
                // sent again, so that every frame reaches the discovery, however slowly it reads on a loaded host
                while (!flood.send(bad[i % bad.length], 0)) {
                    Thread.onSpinWait();
                }
            }
            // 8,000 malformed frames take seconds to be read and refused on a loaded host: waited for, not timed
            awaitOutcome(discovery, "malformed", 8_000, Duration.ofSeconds(90));
            try (VllmDouble d = VllmDouble.start(Role.PREFILL, KvMode.WRITE, 1, 6301, 61005)) {
                d.registerWith("127.0.0.1:" + discovery.port(), Duration.ofMillis(50));
                // a new ZeroMQ connection once took seconds on a loaded CI host: no deadline of its own, the test's
                // timeout bounds a registration that never comes
                while (taken.isEmpty()) {
                    Thread.sleep(10);
                }
            }

            Map<String, Long> outcomes = discovery.outcomes();
            assertThat(outcomes.get("malformed") + outcomes.getOrDefault("greeting", 0L)).isEqualTo(10_000);
            assertThat(taken).isNotEmpty();
        }
    }

    private static void awaitOutcome(VllmDiscovery discovery, String outcome, long n) throws InterruptedException {
        awaitOutcome(discovery, outcome, n, WAIT);
    }

    private static void awaitOutcome(VllmDiscovery discovery, String outcome, long n, Duration wait)
            throws InterruptedException {
        long until = System.nanoTime() + wait.toNanos();
        while (discovery.outcome(outcome) < n && System.nanoTime() < until) {
            Thread.sleep(10);
        }
        assertThat(discovery.outcome(outcome)).as(outcome).isGreaterThanOrEqualTo(n);
    }
}
