package dev.kvflux.transfer.notify;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.StatusCode;
import dev.kvflux.serving.observe.LogRecorder;
import dev.kvflux.transfer.ExpectedTransfers;
import dev.kvflux.transfer.LogContext;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * Log lines written while a notice is handled name the right transfer in MDC: the notice's own, or, for a
 * line about another transfer that the notice pushed out, that other one.
 */
class NotifyLogContextTest {

    @Test
    void anEarlyNoticeDroppedForANewerOneIsLoggedUnderItsOwnTransferId() {
        ExpectedTransfers registry = ExpectedTransfers.withDeadline(Duration.ofSeconds(5)).earlyBudget(4L << 20);
        String reason = "x".repeat(3 << 20);
        try (LogRecorder log = LogRecorder.record()) {
            registry.accept(new NotifyMessage.WriteFailed("older", StatusCode.ERR_RDMA_OP, reason));
            try (LogContext.Scope scope = LogContext.open("newer", "4bf92f3577b34da6a3ce929d0e0e4736")) {
                registry.accept(new NotifyMessage.WriteFailed("newer", StatusCode.ERR_RDMA_OP, reason));
            }

            assertThat(log.mentioning("dropping an early write_failed for transfer older")).singleElement()
                    .satisfies(e -> assertThat(e.getMDCPropertyMap()).containsEntry(LogContext.TRANSFER_ID, "older")
                            .doesNotContainKey(LogContext.TRACE_ID));
        }
    }

    @Test
    void aFailingHandlersLineCarriesTheTransferIdOfTheNoticeItFailedOn() throws Exception {
        try (LogRecorder log = LogRecorder.record();
             NotifyServer server = NotifyServer.builder().handler(message -> {
                 throw new IllegalStateException("broken handler");
             }).bindNow();
             NotifyClient client = NotifyClient.create()) {
            client.send(server.address(), new NotifyMessage.WriteDone("handled-badly"), Duration.ofSeconds(5)).block();

            assertThat(log.mentioning("notify handler failed on WriteDone[transferId=handled-badly")).isNotEmpty()
                    .allSatisfy(e -> assertThat(e.getMDCPropertyMap())
                            .containsEntry(LogContext.TRANSFER_ID, "handled-badly"));
        }
    }
}
