package dev.kvflux.serving.observe;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import dev.kvflux.transfer.TransferHistory;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A role's {@link TransferHistory} written to a file, one JSON object a line, for the chaos runs' history checker:
 * <pre>{"t_us":1733400000123456,"role":"decode","kind":"received","transfer":"kvflux-…","incarnation":…,
 * "message":"write_done","from":…,"to":…,"blocks":[3,4],"detail":""}</pre>
 * {@code t_us} is the wall clock in microseconds when the event happened, so that the roles of one host (or of
 * network namespaces on one host) share it. The file is appended to: a restarted role adds its lines, told apart by
 * its new incarnations.
 *
 * <p>Its cost is bounded: {@link #record} stamps the event and offers it to a queue of {@value #QUEUE} events, and
 * never blocks; a thread of its own writes the queue out and flushes whenever it has caught up. An event that finds
 * the queue full is dropped and counted, and {@link #close()} writes a {@code lost} line with the count, so that a
 * checker knows the history is incomplete. Thread-safe.
 */
public final class HistoryLog implements TransferHistory, AutoCloseable {
    /** The most events waiting to be written. */
    static final int QUEUE = 65_536;
    private static final JsonFactory JSON = new JsonFactory();

    private record Stamped(long micros, Event event) {
    }

    /** Offered by {@link #close()} to wake a writer blocked on an empty queue; never written. */
    private static final Stamped END = new Stamped(0, null);

    private final String role;
    private final Path file;
    private final Writer out;
    private final BlockingQueue<Stamped> queue;
    private final AtomicLong dropped = new AtomicLong();
    private final Thread writer;
    private volatile boolean closing;
    private volatile IOException failed;

    private HistoryLog(String role, Path file, Writer out, int capacity) {
        this.queue = new ArrayBlockingQueue<>(capacity);
        this.role = role;
        this.file = file;
        this.out = out;
        this.writer = Thread.ofPlatform().daemon().name("kvflux-history-" + role).start(this::drain);
    }

    /**
     * Appends {@code role}'s history to {@code file}, creating it if needed.
     *
     * @throws IllegalStateException one line, if the file cannot be opened for writing
     */
    public static HistoryLog open(Path file, String role) {
        return open(file, role, QUEUE);
    }

    /** As {@link #open(Path, String)}, queueing at most {@code capacity} events. */
    static HistoryLog open(Path file, String role, int capacity) {
        Objects.requireNonNull(file, "file");
        Objects.requireNonNull(role, "role");
        try {
            Path parent = file.toAbsolutePath().getParent();
            if (parent != null) {
                Files.createDirectories(parent);
            }
            return new HistoryLog(role, file, Files.newBufferedWriter(file, StandardCharsets.UTF_8,
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND, StandardOpenOption.WRITE), capacity);
        } catch (IOException e) {
            throw new IllegalStateException("cannot write the history log " + file + ": " + e.getMessage(), e);
        }
    }

    @Override
    public void record(Event event) {
        Objects.requireNonNull(event, "event");
        if (closing || !queue.offer(new Stamped(nowMicros(), event))) {
            dropped.incrementAndGet();
        }
    }

    /** Decode took {@code transferId} into its decode steps on its rank of incarnation {@code incarnation}. */
    public void usesKv(String transferId, long incarnation) {
        record(Event.of(Kind.USES_KV, transferId, incarnation));
    }

    /** Events dropped because the queue was full (or came after {@link #close()}). */
    public long dropped() {
        return dropped.get();
    }

    /** The file written. */
    public Path file() {
        return file;
    }

    /**
     * The wall clock now, in microseconds since the epoch: the clock of every line's {@code t_us}. Whatever a checker
     * lays beside the roles' histories (a client's outcomes, say) is stamped with it too.
     */
    public static long nowMicros() {
        Instant now = Clock.systemUTC().instant();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    private void drain() {
        List<Stamped> batch = new ArrayList<>();
        try {
            // blocks while there is nothing to write; close() wakes it with END, or, when the queue is full, the
            // writer is not blocked and finds it closing once it has caught up
            while (!closing || !queue.isEmpty()) {
                batch.add(queue.take());
                queue.drainTo(batch, 4096);
                for (Stamped s : batch) {
                    if (s != END) {
                        write(s);
                    }
                }
                batch.clear();
                if (queue.isEmpty()) {
                    out.flush();
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (IOException e) {
            failed = e;
        }
    }

    private void write(Stamped s) throws IOException {
        Event e = s.event();
        JsonGenerator json = JSON.createGenerator(new NoClose(out));
        json.writeStartObject();
        json.writeNumberField("t_us", s.micros());
        json.writeStringField("role", role);
        json.writeStringField("kind", e.kind().label());
        json.writeStringField("transfer", e.transferId());
        json.writeNumberField("incarnation", e.incarnation());
        if (e.message() != null) {
            json.writeStringField("message", e.message());
            json.writeNumberField("from", e.from());
        }
        if (e.to() != 0) {
            json.writeNumberField("to", e.to());
        }
        if (!e.blocks().isEmpty()) {
            json.writeArrayFieldStart("blocks");
            for (long b : e.blocks()) {
                json.writeNumber(b);
            }
            json.writeEndArray();
        }
        if (!e.detail().isEmpty()) {
            json.writeStringField("detail", e.detail());
        }
        json.writeEndObject();
        json.close();
        out.write('\n');
    }

    /**
     * Writes what is queued, a {@code lost} line if events were dropped, and closes the file; waits up to 5 s for
     * the writer.
     *
     * @throws UncheckedIOException if the file could not be written
     */
    @Override
    public void close() {
        closing = true;
        queue.offer(END);
        try {
            writer.join(5_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try (Writer w = out) {
            long lost = dropped.get();
            if (lost > 0) {
                w.write("{\"t_us\":" + nowMicros() + ",\"role\":\"" + role + "\",\"kind\":\"lost\",\"detail\":\""
                        + lost + " events dropped: the queue was full\"}\n");
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the history log " + file + ": " + e.getMessage(), e);
        }
        if (failed != null) {
            throw new UncheckedIOException("cannot write the history log " + file + ": " + failed.getMessage(), failed);
        }
    }

    /** The file's writer, left open when a line's generator closes. */
    private static final class NoClose extends Writer {
        private final Writer out;

        NoClose(Writer out) {
            this.out = out;
        }

        @Override
        public void write(char[] buf, int off, int len) throws IOException {
            out.write(buf, off, len);
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    }
}
