package dev.kvflux.tools.chaos.history;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * A load's client side of the history: one {@code load} line (when it started), then one {@code outcome} line per
 * request, with the transfer id the proxy named ({@code x-kvflux-transfer-id}) where it named one, written to
 * {@code FAULT-client.history.jsonl} beside the roles' logs.
 */
public final class ClientOutcomes {
    /** The {@code load} line's kind. */
    static final String LOAD = "load";
    private static final ObjectMapper JSON = new ObjectMapper();

    private ClientOutcomes() {
    }

    /**
     * One request's outcome.
     *
     * @param index the request's index in its load
     * @param transferId the transfer id the proxy answered with, or null
     * @param outcome how it ended ({@code COMPLETED}) and why, one line
     * @param endMicros when it ended, on the wall clock in microseconds
     */
    public record Outcome(int index, String transferId, String outcome, long endMicros) {
    }

    /** The client file of fault {@code fault} in {@code dir}. */
    public static Path file(Path dir, String fault) {
        return dir.resolve(fault + "-client" + History.SUFFIX);
    }

    /**
     * Writes the load of {@code fault}, started at {@code startMicros}, with its {@code outcomes}, over what the file
     * held.
     *
     * @throws IOException if the file cannot be written
     */
    public static void write(Path dir, String fault, long startMicros, List<Outcome> outcomes) throws IOException {
        try (Writer out = Files.newBufferedWriter(file(dir, fault), StandardCharsets.UTF_8)) {
            ObjectNode load = JSON.createObjectNode().put("t_us", startMicros).put("role", "client").put("kind", LOAD)
                    .put("detail", fault);
            out.write(JSON.writeValueAsString(load) + "\n");
            for (Outcome o : outcomes) {
                ObjectNode line = JSON.createObjectNode().put("t_us", o.endMicros()).put("role", "client")
                        .put("kind", HistoryEvent.OUTCOME).put("index", o.index()).put("detail", o.outcome());
                if (o.transferId() != null) {
                    line.put("transfer", o.transferId());
                }
                out.write(JSON.writeValueAsString(line) + "\n");
            }
        }
    }
}
