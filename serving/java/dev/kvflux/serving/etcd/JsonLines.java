package dev.kvflux.serving.etcd;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import reactor.core.publisher.Flux;

/**
 * Splits a stream of bytes into its newline-ended lines, as etcd's JSON gateway streams a watch: one JSON message per
 * line. A line longer than the bound fails the stream as soon as its bytes pass the bound, before more is buffered;
 * empty lines are skipped, and bytes after the last newline are a line of their own when the stream ends.
 */
final class JsonLines {
    private JsonLines() {
    }

    static Flux<byte[]> split(Flux<byte[]> chunks, int maxLineBytes) {
        return Flux.defer(() -> {
            ByteArrayOutputStream pending = new ByteArrayOutputStream();
            return chunks.concatMapIterable(chunk -> lines(pending, chunk, maxLineBytes))
                    .concatWith(Flux.defer(() -> pending.size() == 0 ? Flux.empty() : Flux.just(pending.toByteArray())));
        });
    }

    private static List<byte[]> lines(ByteArrayOutputStream pending, byte[] chunk, int max) {
        List<byte[]> lines = new ArrayList<>(1);
        int from = 0;
        for (int i = 0; i < chunk.length; i++) {
            if (chunk[i] == '\n') {
                append(pending, chunk, from, i - from, max);
                if (pending.size() > 0) {
                    lines.add(pending.toByteArray());
                    pending.reset();
                }
                from = i + 1;
            }
        }
        append(pending, chunk, from, chunk.length - from, max);
        return lines;
    }

    private static void append(ByteArrayOutputStream pending, byte[] chunk, int from, int length, int max) {
        if ((long) pending.size() + length > max) {
            throw EtcdException.malformed("a line of etcd's stream is over the " + max + " bytes read");
        }
        pending.write(chunk, from, length);
    }
}
