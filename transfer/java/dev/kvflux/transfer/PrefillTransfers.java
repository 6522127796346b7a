package dev.kvflux.transfer;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * Prefill's transfers from the request's arrival until its copies are terminal, and the fence of
 * transfer ids that are aborted or finished.
 *
 * <p>A transfer is {@linkplain #open opened} when its request arrives, may be aborted at any time from any
 * thread, and is {@linkplain #closed ended} exactly once. An id that
 * was aborted (even before its request came) or ended is remembered (the last {@link #FENCE_CAPACITY}),
 * and {@link #open} refuses it, so a late or repeated request cannot start writing for a transfer that
 * decode has given up on.
 */
final class PrefillTransfers {
    /** How many aborted or ended transfer ids are remembered. */
    static final int FENCE_CAPACITY = 65_536;

    /**
     * How many characters of the reason are kept per fenced id: the reason may quote a peer's abort, and the
     * fence holds {@link #FENCE_CAPACITY} of them.
     */
    static final int FENCE_REASON_CHARS = 160;

    private final Map<String, PrefillTransfer> active = new HashMap<>();
    /** READ mode: ended transfers whose offered blocks decode may still read; each for at most the read lease. */
    private final Map<String, PrefillTransfer> awaitingRelease = new HashMap<>();
    private final Map<String, String> fenced = new LinkedHashMap<>(16, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
            return size() > FENCE_CAPACITY;
        }
    };

    /**
     * Registers the transfer {@code create} makes for {@code id}.
     *
     * @throws TransferRefusedException ({@link TransferRefusedException.Reason#DUPLICATE}) if the id is running,
     *     was aborted or has ended
     */
    synchronized PrefillTransfer open(String id, Supplier<PrefillTransfer> create) {
        Objects.requireNonNull(id, "id");
        String why = fenced.get(id);
        if (why == null && active.containsKey(id)) {
            why = "is already running";
        }
        if (why != null) {
            throw new TransferRefusedException(TransferRefusedException.Reason.DUPLICATE, "transfer " + id + " " + why
                    + "; every request needs its own transfer id");
        }
        PrefillTransfer t = create.get();
        active.put(id, t);
        return t;
    }

    /** The running transfer with this id, or null. */
    synchronized PrefillTransfer get(String id) {
        return active.get(id);
    }

    /** Fences an id that has no running transfer (an abort that came before its request). */
    synchronized void fence(String id, String why) {
        if (!active.containsKey(id)) {
            fenced.putIfAbsent(id, cut(why));
        }
    }

    private static String cut(String why) {
        if (why.length() <= FENCE_REASON_CHARS) {
            return why;
        }
        int end = FENCE_REASON_CHARS - 3;
        if (Character.isHighSurrogate(why.charAt(end - 1))) {
            end--;
        }
        return why.substring(0, end) + "...";
    }

    /** The running transfers now. */
    synchronized List<PrefillTransfer> running() {
        return List.copyOf(active.values());
    }

    /** How many transfers are running. */
    synchronized int size() {
        return active.size();
    }

    /** The transfer has ended: it leaves the running set and its id is fenced with {@code why}. */
    synchronized void closed(PrefillTransfer t, String why) {
        active.remove(t.id(), t);
        fenced.put(t.id(), cut(why));
    }

    /**
     * READ mode: {@code t} has ended with its blocks offered to decode, which may still be reading them; its
     * {@code release} is taken until {@link #releasedOrLapsed}.
     */
    synchronized void awaitRelease(PrefillTransfer t) {
        awaitingRelease.put(t.id(), t);
    }

    /** The ended transfer with this id whose blocks decode may still read, or null. */
    synchronized PrefillTransfer awaitingRelease(String id) {
        return awaitingRelease.get(id);
    }

    /** {@code t}'s blocks are no longer read: decode released them, or the read lease ran out. */
    synchronized void releasedOrLapsed(PrefillTransfer t) {
        awaitingRelease.remove(t.id(), t);
    }
}
