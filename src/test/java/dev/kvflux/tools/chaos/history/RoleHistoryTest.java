package dev.kvflux.tools.chaos.history;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.sim.SimulatedXgmiEngine;
import dev.kvflux.serving.proxy.InstanceRegistry;
import dev.kvflux.serving.proxy.ProxyServer;
import dev.kvflux.serving.role.DecodeServer;
import dev.kvflux.serving.role.PrefillServer;
import dev.kvflux.serving.role.ServingModel;
import dev.kvflux.tools.bench.LoadGenerator;
import dev.kvflux.tools.bench.LoadResult;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Real roles with {@code historyLog} set write histories that check clean. */
class RoleHistoryTest {
    private static final ServingModel SMALL = new ServingModel("small", 1_000_000, 4096, 4, Duration.ofMillis(5), 16, 64);

    @TempDir
    Path dir;

    @Test
    void aPrefillAndADecodeWriteHistoriesOfTheirRequestsThatCheckClean() throws Exception {
        InstanceRegistry registry = new InstanceRegistry(Duration.ofSeconds(30));
        long decodeIncarnation;
        long prefillIncarnation;
        LoadResult result;
        try (SimulatedXgmiEngine engine = SimulatedXgmiEngine.create();
             DecodeServer decode = DecodeServer.builder().model(SMALL).receiveDeadline(Duration.ofSeconds(5))
                     .historyLog(dir.resolve("decode.history.jsonl")).bindNow();
             PrefillServer prefill = PrefillServer.builder().model(SMALL).engine(engine)
                     .transferTimeout(Duration.ofSeconds(2)).historyLog(dir.resolve("prefill.history.jsonl")).bindNow();
             ProxyServer proxy = ProxyServer.builder().registry(registry).bindNow()) {
            registry.ping(decode.instance());
            registry.ping(prefill.instance());
            decodeIncarnation = decode.incarnation();
            prefillIncarnation = prefill.incarnation();
            result = new LoadGenerator("http://127.0.0.1:" + proxy.address().getPort(), 3, 1, 64, 3,
                    Duration.ofSeconds(10)).run(progress -> { });
        }

        History history = History.read(dir);
        HistoryCheck.Result check = HistoryCheck.check(history);

        assertThat(result.completed()).isEqualTo(3);
        assertThat(check.violations()).as(check.report()).isEmpty();
        assertThat(history.unreadable()).isZero();
        List<HistoryEvent> events = history.events();
        Set<String> transfers = events.stream().filter(e -> e.is(HistoryEvent.USES_KV, ""))
                .map(HistoryEvent::transfer).collect(Collectors.toSet());
        assertThat(transfers).hasSize(3);
        for (String t : transfers) {
            List<String> decodeSaw = kinds(events, t, "decode");
            List<String> prefillSaw = kinds(events, t, "prefill");
            assertThat(decodeSaw).as("decode's history of " + t).containsSubsequence("opened", "sent remote_blocks",
                    "received write_done", "kv_ready", "uses_kv", "ended");
            assertThat(decodeSaw).contains("freed");
            // decode's block list may come before prefill's own request opens the transfer
            assertThat(prefillSaw).as("prefill's history of " + t).containsSubsequence("opened", "write_posted",
                    "sent write_done", "ended", "writes_ended", "sent release").contains("received remote_blocks");
        }
        HistoryEvent posted = events.stream().filter(e -> e.kind().equals(HistoryEvent.WRITE_POSTED)).findFirst()
                .orElseThrow();
        HistoryEvent granted = events.stream().filter(e -> e.kind().equals(HistoryEvent.OPENED)
                && e.role().equals("decode") && e.transfer().equals(posted.transfer())).findFirst().orElseThrow();
        assertThat(posted.to()).isEqualTo(decodeIncarnation);
        assertThat(posted.incarnation()).isEqualTo(prefillIncarnation);
        assertThat(posted.blocks()).isEqualTo(granted.blocks()).isNotEmpty();
        assertThat(events).filteredOn(e -> e.is(HistoryEvent.RECEIVED, HistoryEvent.WRITE_DONE))
                .allSatisfy(e -> assertThat(e).extracting(HistoryEvent::from, HistoryEvent::to)
                        .containsExactly(prefillIncarnation, decodeIncarnation));
        assertThat(events).filteredOn(e -> e.kind().equals(HistoryEvent.STOPPED)).extracting(HistoryEvent::role)
                .containsExactlyInAnyOrder("decode", "prefill");

        // the same history with one transfer ended twice on decode: the checker names it
        String twice = transfers.iterator().next();
        java.nio.file.Files.writeString(dir.resolve("decode.history.jsonl"), "{\"t_us\":" + (events.getLast().micros()
                + 1) + ",\"role\":\"decode\",\"kind\":\"ended\",\"transfer\":\"" + twice + "\",\"incarnation\":"
                + decodeIncarnation + "}\n", java.nio.file.StandardOpenOption.APPEND);
        HistoryCheck.Result broken = HistoryCheck.check(History.read(dir));
        assertThat(broken.violations()).singleElement().satisfies(v -> {
            assertThat(v.rule()).isEqualTo(Violation.Rule.ENDED_ONCE);
            assertThat(v.what()).isEqualTo(twice + " on decode#" + decodeIncarnation + " ended 2 times");
        });
        assertThat(broken.report()).contains("history of transfer " + twice + ":");
    }

    /** What side {@code role} recorded of {@code transfer}, in order: {@code sent write_done}, {@code ended}. */
    private static List<String> kinds(List<HistoryEvent> events, String transfer, String role) {
        return events.stream().filter(e -> e.transfer().equals(transfer) && e.role().equals(role))
                .map(e -> e.message().isEmpty() ? e.kind() : e.kind() + " " + e.message()).toList();
    }
}
