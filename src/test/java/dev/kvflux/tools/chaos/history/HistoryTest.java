package dev.kvflux.tools.chaos.history;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Reading history logs: every line is hostile, and what cannot be read is skipped and counted. */
class HistoryTest {
    @TempDir
    Path dir;

    @Test
    void readsEveryHistoryLogOfAFolderInTimeOrder() throws Exception {
        Files.writeString(dir.resolve("a-decode.history.jsonl"), """
                {"t_us":30,"role":"decode","kind":"opened","transfer":"t0","incarnation":7,"blocks":[1,2],"detail":"h:1"}
                {"t_us":10,"role":"decode","kind":"started","transfer":"","incarnation":7,"detail":"h:2"}
                """);
        Files.writeString(dir.resolve("a-prefill.history.jsonl"), """
                {"t_us":20,"role":"prefill","kind":"sent","transfer":"t0","incarnation":5,"message":"write_done","from":5,"to":7}
                """);
        Files.writeString(dir.resolve("a-decode.log"), "not a history\n");

        History history = History.read(dir);

        assertThat(history.events()).extracting(HistoryEvent::micros).containsExactly(10L, 20L, 30L);
        HistoryEvent sent = history.events().get(1);
        assertThat(sent).extracting(HistoryEvent::role, HistoryEvent::message, HistoryEvent::from, HistoryEvent::to,
                HistoryEvent::source).containsExactly("prefill", "write_done", 5L, 7L, "a-prefill.history.jsonl:1");
        assertThat(history.events().get(2).blocks()).containsExactly(1L, 2L);
        assertThat(history.unreadable()).isZero();
    }

    @Test
    void skipsAndCountsLinesThatAreNotEvents() throws Exception {
        String tooLong = "{\"t_us\":1,\"role\":\"decode\",\"kind\":\"opened\",\"detail\":\"" + "x".repeat(History.MAX_LINE)
                + "\"}";
        Files.writeString(dir.resolve("b.history.jsonl"), String.join("\n", List.of(
                "{\"t_us\":1,\"role\":\"decode\",\"kind\":\"ended\",\"transfer\":\"t0\",\"incarnation\":7}",
                "not json",
                "[1, 2]",
                "{\"t_us\":\"soon\",\"role\":\"decode\",\"kind\":\"ended\"}",
                "{\"t_us\":2,\"role\":\"decode\",\"kind\":\"freed\",\"blocks\":[1,\"two\"]}",
                tooLong,
                "",
                "{\"t_us\":3,\"role\":\"decode\",\"kind\":\"lost\",\"detail\":\"12 events dropped: the queue was full\"}",
                "{\"t_us\":4,\"role\":\"decode\",\"kind\":\"ended\",\"tra")));

        History history = History.read(dir);

        assertThat(history.events()).singleElement().extracting(HistoryEvent::kind).isEqualTo("ended");
        assertThat(history.unreadable()).isEqualTo(7);
        assertThat(history.lost()).isEqualTo(12);
        assertThat(HistoryCheck.check(history).report()).contains("the history is incomplete: 7 unreadable lines,"
                + " 12 events the roles dropped");
    }

    @Test
    void theClientsOutcomesAreReadBackAndScopeTheCheckOfTheirFault() throws Exception {
        Files.writeString(dir.resolve("earlier-decode.history.jsonl"), """
                {"t_us":5,"role":"decode","kind":"opened","transfer":"old","incarnation":7}
                {"t_us":6,"role":"decode","kind":"ended","transfer":"old","incarnation":7}
                {"t_us":7,"role":"decode","kind":"ended","transfer":"old","incarnation":7}
                """);
        ClientOutcomes.write(dir, "burst", 100, List.of(new ClientOutcomes.Outcome(0, "t0", "COMPLETED 200", 120),
                new ClientOutcomes.Outcome(1, null, "FAILED_CLEANLY 400 invalid_request", 130),
                new ClientOutcomes.Outcome(1, null, "CANCELLED client went away", 140)));

        HistoryCheck.Result result = HistoryCheck.check(dir, "burst");

        assertThat(result.violations()).singleElement().satisfies(v -> {
            assertThat(v.what()).isEqualTo("the client saw 2 outcomes for request 1 (burst-client.history.jsonl)");
            assertThat(v.clientIndex()).isEqualTo(1);
        });
        assertThat(result.report()).contains("history of request 1:").contains("140 client outcome request 1"
                + " (CANCELLED client went away)");
        assertThat(HistoryCheck.figures(dir, "burst")).containsEntry(HistoryCheck.FIGURE, 1.0);
        assertThat(dir.resolve("burst-history-check.txt")).content().startsWith("history check: ");
    }
}
