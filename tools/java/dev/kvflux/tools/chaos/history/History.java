package dev.kvflux.tools.chaos.history;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * The events of every history log of a run, in time order: the roles' ({@code *.history.jsonl}) and the clients'.
 * Each line is read as hostile: a line over {@value #MAX_LINE} characters, one that is not a JSON object, or one
 * whose fields have the wrong types is skipped and counted ({@link #unreadable()}), so that the half line a killed
 * role leaves at its file's end costs nothing else.
 *
 * @param events every event read, by time (a file's own order where times tie)
 * @param unreadable lines skipped
 * @param lost events the roles dropped when their queue was full (their {@code lost} lines)
 */
public record History(List<HistoryEvent> events, int unreadable, long lost) {
    /** The longest line read, in characters. */
    public static final int MAX_LINE = 64 * 1024;
    /** The suffix of every history log's name. */
    public static final String SUFFIX = ".history.jsonl";
    /** The most history files read from one folder. */
    static final int MAX_FILES = 10_000;
    private static final ObjectMapper JSON = new ObjectMapper();

    public History {
        events = events.stream().sorted(Comparator.comparingLong(HistoryEvent::micros)).toList();
    }

    /** A history of {@code events} alone. */
    public static History of(List<HistoryEvent> events) {
        return new History(events, 0, 0);
    }

    /**
     * Every {@code *.history.jsonl} in {@code dir}.
     *
     * @throws IOException if the folder or a file cannot be read
     */
    public static History read(Path dir) throws IOException {
        List<Path> files;
        try (Stream<Path> list = Files.list(dir)) {
            files = list.filter(p -> p.getFileName().toString().endsWith(SUFFIX)).sorted().limit(MAX_FILES).toList();
        }
        List<HistoryEvent> events = new ArrayList<>();
        int[] unreadable = {0};
        long[] lost = {0};
        for (Path file : files) {
            try (BufferedReader in = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
                read(in, file.getFileName().toString(), events, unreadable, lost);
            }
        }
        return new History(events, unreadable[0], lost[0]);
    }

    private static void read(Reader in, String name, List<HistoryEvent> events, int[] unreadable, long[] lost)
            throws IOException {
        StringBuilder line = new StringBuilder();
        boolean tooLong = false;
        int number = 0;
        for (int c = in.read(); ; c = in.read()) {
            if (c == '\n' || c == -1) {
                if (c == -1 && line.isEmpty() && !tooLong) {
                    return;
                }
                number++;
                HistoryEvent e = tooLong ? null : parse(line.toString(), name + ":" + number);
                if (e == null) {
                    unreadable[0]++;
                } else if (e.kind().equals(HistoryEvent.LOST)) {
                    lost[0] += leadingNumber(e.detail());
                } else {
                    events.add(e);
                }
                line.setLength(0);
                tooLong = false;
                if (c == -1) {
                    return;
                }
            } else if (line.length() < MAX_LINE) {
                line.append((char) c);
            } else {
                tooLong = true;
            }
        }
    }

    /** The event of one line, or null if it is not one. */
    static HistoryEvent parse(String line, String source) {
        if (line.isBlank()) {
            return null;
        }
        try {
            JsonNode o = JSON.readTree(line);
            if (o == null || !o.isObject() || !o.path("t_us").canConvertToLong() || !o.path("role").isTextual()
                    || !o.path("kind").isTextual()) {
                return null;
            }
            List<Long> blocks = new ArrayList<>();
            for (JsonNode b : o.path("blocks")) {
                if (!b.canConvertToLong()) {
                    return null;
                }
                blocks.add(b.asLong());
            }
            return new HistoryEvent(o.get("t_us").asLong(), o.get("role").asText(), o.get("kind").asText(),
                    text(o, "transfer"), o.path("incarnation").asLong(0), text(o, "message"), o.path("from").asLong(0),
                    o.path("to").asLong(0), blocks, text(o, "detail"), o.path("index").asInt(-1), source);
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    private static String text(JsonNode o, String field) {
        JsonNode v = o.path(field);
        return v.isTextual() ? v.asText() : "";
    }

    private static long leadingNumber(String text) {
        int end = 0;
        while (end < text.length() && end < 18 && Character.isDigit(text.charAt(end))) {
            end++;
        }
        return end == 0 ? 1 : Long.parseLong(text.substring(0, end));
    }
}
