package dev.kvflux.serving.observe;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.tools.chaos.history.History;
import dev.kvflux.tools.chaos.history.HistoryEvent;
import dev.kvflux.transfer.TransferHistory;
import dev.kvflux.transfer.notify.NotifyMessage;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A role's history log: what it writes reads back whole, a restart appends, what it drops is counted, and its writer
 * sleeps while there is nothing to write.
 */
class HistoryLogTest {
    @TempDir
    Path dir;

    @Test
    void everyFieldOfAnEventReadsBack() throws Exception {
        try (HistoryLog log = HistoryLog.open(dir.resolve("decode.history.jsonl"), "decode")) {
            log.record(TransferHistory.Event.of(TransferHistory.Kind.OPENED, "t\"0", 7).withBlocks(List.of(1L, 2L))
                    .withDetail("10.0.0.1:6000"));
            log.record(TransferHistory.Event.of(TransferHistory.Kind.RECEIVED, new NotifyMessage.WriteDone("t\"0", 5, 7,
                    0), 7, ""));
            log.usesKv("t\"0", 7);
        }

        History history = History.read(dir);

        assertThat(history.unreadable()).isZero();
        assertThat(history.events()).extracting(HistoryEvent::kind).containsExactly("opened", "received", "uses_kv");
        assertThat(history.events()).allSatisfy(e -> {
            assertThat(e.role()).isEqualTo("decode");
            assertThat(e.transfer()).isEqualTo("t\"0");
            assertThat(e.incarnation()).isEqualTo(7);
            assertThat(e.micros()).isPositive();
        });
        assertThat(history.events().get(0)).extracting(HistoryEvent::blocks, HistoryEvent::detail)
                .containsExactly(List.of(1L, 2L), "10.0.0.1:6000");
        assertThat(history.events().get(1)).extracting(HistoryEvent::message, HistoryEvent::from, HistoryEvent::to)
                .containsExactly("write_done", 5L, 7L);
    }

    @Test
    void aRestartedRoleAppendsToTheSameFile() throws Exception {
        Path file = dir.resolve("prefill.history.jsonl");
        try (HistoryLog first = HistoryLog.open(file, "prefill")) {
            first.record(TransferHistory.Event.of(TransferHistory.Kind.STARTED, "", 1));
        }
        try (HistoryLog second = HistoryLog.open(file, "prefill")) {
            second.record(TransferHistory.Event.of(TransferHistory.Kind.STARTED, "", 2));
        }

        assertThat(History.read(dir).events()).extracting(HistoryEvent::incarnation).containsExactly(1L, 2L);
    }

    @Test
    void anEventThatFindsTheQueueFullIsDroppedAndCountedInALostLine() throws Exception {
        int recorded = 20_000;
        long dropped;
        try (HistoryLog log = HistoryLog.open(dir.resolve("decode.history.jsonl"), "decode", 1)) {
            for (int i = 0; i < recorded; i++) {
                log.record(TransferHistory.Event.of(TransferHistory.Kind.ENDED, "t" + i, 7));
            }
            dropped = log.dropped();
        }

        History history = History.read(dir);

        assertThat(history.events().size() + history.lost()).isEqualTo(recorded);
        assertThat(dropped).as("the queue was full: record() drops rather than blocks").isPositive();
        assertThat(history.lost()).isEqualTo(dropped);
    }

    @Test
    void anIdleWriterWaitsForTheNextEventWithoutWakingOnATimer() throws Exception {
        try (HistoryLog log = HistoryLog.open(dir.resolve("prefill.history.jsonl"), "idle-prefill")) {
            log.record(TransferHistory.Event.of(TransferHistory.Kind.STARTED, "", 1));
            Thread writer = Thread.getAllStackTraces().keySet().stream()
                    .filter(t -> t.getName().equals("kvflux-history-idle-prefill")).findFirst().orElseThrow();
            long guard = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(30);
            // waits for a state, bounded only against a hang: a loaded host makes it wait longer, never fail
            while (writer.getState() != Thread.State.WAITING && System.nanoTime() < guard) {
                java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
            }

            assertThat(writer.getState()).as("blocked on the empty queue with no deadline, not polling it")
                    .isEqualTo(Thread.State.WAITING);
        }

        assertThat(History.read(dir).events()).extracting(HistoryEvent::kind).containsExactly("started");
    }
}
