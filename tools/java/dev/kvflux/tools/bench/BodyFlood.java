package dev.kvflux.tools.bench;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * Large request bodies from many senders at once: each sender POSTs one body to {@code /v1/completions} on a
 * connection of its own (plain blocking sockets on virtual threads, so that the time the last byte left is known),
 * reads the answer, and sends the next as soon as it has one. A request is given {@value #ANSWER_LIMIT_SECONDS} s
 * from its first byte: then its socket is closed, writing or reading, and it counts as unanswered. The time to an
 * answer is taken from the last byte handed to the kernel (an approximation: up to a socket buffer of the body may
 * still be on its way) and, for every answer, from the first byte. A sender whose connection is refused (the target
 * died) waits {@value #REFUSED_PAUSE_MS} ms before it tries again.
 */
final class BodyFlood {
    /** How long a request may go without an answer, from its first byte. */
    static final int ANSWER_LIMIT_SECONDS = 120;
    /** How long a sender waits after its connection was refused. */
    static final long REFUSED_PAUSE_MS = 250;

    /**
     * One request's fate.
     *
     * @param outcome the answer's status and {@code error.code} ({@link AttackFigures#outcome}), or
     *     {@code no_answer_120s}, {@code refused}, {@code reset} (closed without an answer)
     * @param wholeBodySent whether every byte of the body was handed to the kernel
     * @param fromFirstByteMs from the first byte sent to the answer's status line, or to the failure
     * @param fromLastByteMs from the last byte sent to the answer's status line; -1 when the body was not sent whole
     *     or no answer came
     */
    record Sent(String outcome, boolean wholeBodySent, double fromFirstByteMs, double fromLastByteMs) {
    }

    private final InetSocketAddress target;
    private final InetSocketAddress source;
    private final byte[] body;
    private final Supplier<String> extraHeaders;
    private final List<Sent> sent = new CopyOnWriteArrayList<>();
    private final List<Thread> senders = new ArrayList<>();
    private final AtomicLong bytesSent = new AtomicLong();
    private final ScheduledExecutorService closer = Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().daemon().name("kvflux-body-deadline").factory());
    private volatile boolean running = true;

    private BodyFlood(InetSocketAddress target, String sourceAddress, byte[] body, Supplier<String> extraHeaders) {
        this.target = target;
        this.source = new InetSocketAddress(sourceAddress, 0);
        this.body = body;
        this.extraHeaders = extraHeaders;
    }

    /**
     * Starts {@code senders} senders of {@code body} to {@code target} from {@code sourceAddress}, each request with
     * the header lines {@code extraHeaders} gives at its start (each ending in CRLF; empty for none).
     */
    static BodyFlood start(InetSocketAddress target, String sourceAddress, int senders, byte[] body,
            Supplier<String> extraHeaders) {
        BodyFlood flood = new BodyFlood(target, sourceAddress, body, extraHeaders);
        for (int i = 0; i < senders; i++) {
            flood.senders.add(Thread.ofVirtual().name("kvflux-body-" + i).start(flood::loop));
        }
        return flood;
    }

    /** A JSON completion of {@code bytes} bytes exactly: a prompt of as many words {@code w} as fit. */
    static byte[] jsonBody(int bytes) {
        String head = "{\"prompt\":\"";
        String tail = "\",\"max_tokens\":8}";
        int room = bytes - head.length() - tail.length();
        if (room < 1) {
            throw new IllegalArgumentException("a body of " + bytes + " bytes holds no prompt");
        }
        StringBuilder json = new StringBuilder(bytes).append(head);
        for (int i = 0; i < room; i++) {
            json.append(i % 2 == 0 ? 'w' : ' ');
        }
        if (room % 2 == 0) {
            json.setCharAt(json.length() - 1, 'w');
        }
        return json.append(tail).toString().getBytes(StandardCharsets.US_ASCII);
    }

    private void loop() {
        while (running) {
            Sent one = sendOne();
            sent.add(one);
            if (one.outcome().equals("refused")) {
                // nothing listens (the target died): trying again at once would only spin, and take the cores
                try {
                    Thread.sleep(REFUSED_PAUSE_MS);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }
    }

    private Sent sendOne() {
        long start = System.nanoTime();
        Socket socket = new Socket();
        ScheduledFuture<?> deadline = closer.schedule(() -> quietlyClose(socket), ANSWER_LIMIT_SECONDS,
                TimeUnit.SECONDS);
        try {
            try {
                socket.bind(source);
                socket.connect(target, 5_000);
            } catch (IOException e) {
                return new Sent("refused", false, AttackClient.millisSince(start), -1);
            }
            byte[] head = ("POST /v1/completions HTTP/1.1\r\nHost: " + target.getHostString() + ":" + target.getPort()
                    + "\r\nContent-Type: application/json\r\nContent-Length: " + body.length
                    + "\r\nConnection: close\r\n" + extraHeaders.get() + "\r\n").getBytes(StandardCharsets.US_ASCII);
            long first = System.nanoTime();
            long last = -1;
            try {
                OutputStream out = socket.getOutputStream();
                out.write(head);
                for (int at = 0; at < body.length; at += 1 << 16) {
                    int n = Math.min(1 << 16, body.length - at);
                    out.write(body, at, n);
                    bytesSent.addAndGet(n);
                }
                out.flush();
                last = System.nanoTime();
            } catch (IOException closedWhileWriting) {
                // the server may have answered before it read the whole body; its answer is read below
            }
            long[] answeredAt = {-1};
            String answer = readAnswer(socket, answeredAt);
            long ended = System.nanoTime();
            if (answer == null) {
                boolean timedOut = (ended - first) / 1e9 >= ANSWER_LIMIT_SECONDS - 1;
                return new Sent(timedOut ? "no_answer_" + ANSWER_LIMIT_SECONDS + "s" : "reset", last >= 0,
                        (ended - first) / 1e6, -1);
            }
            long answered = answeredAt[0];
            return new Sent(answer, last >= 0, (answered - first) / 1e6,
                    last >= 0 ? Math.max(0, answered - last) / 1e6 : -1);
        } finally {
            deadline.cancel(false);
            quietlyClose(socket);
        }
    }

    /**
     * The answer's outcome, from its status line, headers and (small) body, read up to its {@code Content-Length} or
     * the connection's end; null when the connection ended without one. {@code answeredAt[0]} is set to when its
     * first byte came.
     */
    private static String readAnswer(Socket socket, long[] answeredAt) {
        try {
            InputStream in = socket.getInputStream();
            ByteArrayOutputStream answer = new ByteArrayOutputStream();
            byte[] buffer = new byte[8192];
            socket.setSoTimeout(ANSWER_LIMIT_SECONDS * 1000);
            for (int n = in.read(buffer); n > 0; n = in.read(buffer)) {
                if (answeredAt[0] < 0) {
                    answeredAt[0] = System.nanoTime();
                }
                answer.write(buffer, 0, n);
                if (whole(answer.toString(StandardCharsets.ISO_8859_1)) || answer.size() >= 1 << 16) {
                    break;
                }
            }
            return answeredAt[0] < 0 ? null : outcome(answer.toString(StandardCharsets.ISO_8859_1));
        } catch (IOException e) {
            return null;
        }
    }

    /** Whether {@code raw} holds an answer's head and the whole body its {@code Content-Length} announces. */
    static boolean whole(String raw) {
        int bodyAt = raw.indexOf("\r\n\r\n");
        if (bodyAt < 0) {
            return false;
        }
        for (String line : raw.substring(0, bodyAt).split("\r\n")) {
            if (line.regionMatches(true, 0, "content-length:", 0, 15)) {
                try {
                    return raw.length() - bodyAt - 4 >= Integer.parseInt(line.substring(15).strip());
                } catch (NumberFormatException e) {
                    return true;
                }
            }
        }
        return false;
    }

    /** The outcome of a raw HTTP/1.1 answer ({@code HTTP/1.1 503 ...}, headers, body); null when it has no status. */
    static String outcome(String raw) {
        if (!raw.startsWith("HTTP/1.") || raw.length() < 12) {
            return null;
        }
        int status;
        try {
            status = Integer.parseInt(raw.substring(9, 12));
        } catch (NumberFormatException e) {
            return null;
        }
        int bodyAt = raw.indexOf("\r\n\r\n");
        return AttackFigures.outcome(status, bodyAt < 0 ? "" : raw.substring(bodyAt + 4), false);
    }

    private static void quietlyClose(Socket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // closing a broken connection
        }
    }

    /**
     * Stops sending, waits for the requests in flight to end (each within {@value #ANSWER_LIMIT_SECONDS} s of its
     * first byte), and returns the figures: requests and MiB sent, answers by outcome, answer times, unanswered
     * requests.
     */
    Map<String, Object> stop() throws InterruptedException {
        running = false;
        for (Thread sender : senders) {
            sender.join(Duration.ofSeconds(ANSWER_LIMIT_SECONDS + 15).toMillis());
        }
        closer.shutdownNow();
        List<Sent> all = List.copyOf(sent);
        List<Double> fromLast = all.stream().filter(s -> s.fromLastByteMs() >= 0).map(Sent::fromLastByteMs).toList();
        List<Double> fromFirst = all.stream().filter(s -> !s.outcome().startsWith("no_answer"))
                .map(Sent::fromFirstByteMs).toList();
        Map<String, Object> figures = new LinkedHashMap<>();
        figures.put("attack_requests", all.size());
        figures.put("attack_body_bytes", body.length);
        figures.put("attack_mib_sent", AttackFigures.round(bytesSent.get() / 1048576.0));
        figures.put("attack_bodies_sent_whole", all.stream().filter(Sent::wholeBodySent).count());
        figures.put("attack_answers", AttackFigures.counts(all.stream().map(Sent::outcome).toList()));
        figures.put("attack_answer_p50_ms_from_last_byte", AttackFigures.percentile(fromLast, 0.5));
        figures.put("attack_answer_p99_ms_from_last_byte", AttackFigures.percentile(fromLast, 0.99));
        figures.put("attack_answer_max_ms_from_last_byte", AttackFigures.percentile(fromLast, 1.0));
        figures.put("attack_answer_p50_ms_from_first_byte", AttackFigures.percentile(fromFirst, 0.5));
        figures.put("attack_answer_p99_ms_from_first_byte", AttackFigures.percentile(fromFirst, 0.99));
        figures.put("unanswered_after_120s", all.stream().filter(s -> s.outcome().startsWith("no_answer")).count());
        figures.put("answers_over_1s_from_last_byte", fromLast.stream().filter(ms -> ms > 1000).count());
        figures.put("answers_over_1s_by_outcome", AttackFigures.counts(all.stream()
                .filter(s -> s.fromLastByteMs() > 1000).map(Sent::outcome).toList()));
        return figures;
    }
}
