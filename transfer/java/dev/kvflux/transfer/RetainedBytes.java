package dev.kvflux.transfer;

import dev.kvflux.transfer.notify.NotifyMessage;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.BiConsumer;

/**
 * Things kept on behalf of peers, bounded in bytes as well as in count: an insertion-ordered map that drops
 * its oldest entries while the sum of their estimated sizes is over a budget or they are too many. Not
 * thread-safe; callers synchronise.
 *
 * @param <V> what is kept
 */
final class RetainedBytes<V> {
    /** Estimated heap bytes of one entry beyond its strings and lists: map node, key and value objects. */
    static final long ENTRY_OVERHEAD = 160;

    private final LinkedHashMap<String, Sized<V>> entries = new LinkedHashMap<>();
    private final long budgetBytes;
    private final int maxEntries;
    private final BiConsumer<String, V> dropped;
    private long bytes;

    /**
     * A map holding at most {@code maxEntries} entries and {@code budgetBytes} estimated bytes; each entry
     * dropped to stay within them is passed to {@code dropped}.
     */
    RetainedBytes(long budgetBytes, int maxEntries, BiConsumer<String, V> dropped) {
        if (budgetBytes < 1 || maxEntries < 1) {
            throw new IllegalArgumentException("a retention budget must be positive, got " + budgetBytes
                    + " bytes and " + maxEntries + " entries");
        }
        this.budgetBytes = budgetBytes;
        this.maxEntries = maxEntries;
        this.dropped = dropped;
    }

    /**
     * Keeps {@code value} under {@code key}, replacing what the key held, then drops the oldest entries until
     * the map is within its budget; an entry larger than the whole budget is dropped at once.
     */
    public void put(String key, V value, long valueBytes) {
        long size = ENTRY_OVERHEAD + 2L * key.length() + valueBytes;
        Sized<V> old = entries.remove(key);
        if (old != null) {
            bytes -= old.bytes;
        }
        entries.put(key, new Sized<>(value, size));
        bytes += size;
        var it = entries.entrySet().iterator();
        while ((bytes > budgetBytes || entries.size() > maxEntries) && it.hasNext()) {
            Map.Entry<String, Sized<V>> eldest = it.next();
            it.remove();
            bytes -= eldest.getValue().bytes;
            dropped.accept(eldest.getKey(), eldest.getValue().value);
        }
    }

    /** Removes and returns what {@code key} holds, or null. */
    public V remove(String key) {
        Sized<V> old = entries.remove(key);
        if (old == null) {
            return null;
        }
        bytes -= old.bytes;
        return old.value;
    }

    public int size() {
        return entries.size();
    }

    /** The estimated bytes held now. */
    public long bytes() {
        return bytes;
    }

    /** An estimate of the heap bytes a message holds beyond a fixed overhead. */
    public static long of(NotifyMessage message) {
        long size = 2L * message.transferId().length()
                + (message.traceparent() == null ? 0 : 2L * message.traceparent().length());
        return switch (message) {
            case NotifyMessage.WriteFailed failed -> size + 2L * failed.reason().length();
            case NotifyMessage.Abort abort -> size + 2L * abort.reason().length();
            case NotifyMessage.RemoteBlocks blocks -> size + 2L * blocks.reqId().length()
                    + 24L * blocks.blockNotifyList().size();
            default -> size;
        };
    }

    private record Sized<V>(V value, long bytes) {
    }
}
