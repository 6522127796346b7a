package dev.kvflux.transfer;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A decode instance of several tensor-parallel ranks: one {@link DecodeSide} per rank, each with its own engine,
 * KV region, blocks, notify server and incarnation. A request's KV comes in the links of {@link TpRanks}, each a
 * transfer between one prefill rank and the decode rank that holds its heads; {@link #open} opens them all and
 * {@link Transfer} waits for them as one.
 *
 * <p>A request's wait ends exactly once: it completes only when every link's KV has arrived (every prefill rank it
 * depends on said {@code write_done} and its content matched), and the first link to fail fails every other link
 * of the request at once, on whichever rank, with a reason naming the link that failed, then the request with that
 * link's kind and code. A link whose notice never comes fails at the receive deadline, and with it the request.
 */
public final class DecodeRanks implements AutoCloseable {
    private final List<DecodeSide> ranks;

    private DecodeRanks(List<DecodeSide> ranks) {
        this.ranks = ranks;
    }

    /**
     * This decode's ranks, in rank order.
     *
     * @throws IllegalArgumentException if their number is not a power of two in 1..{@value TpRanks#MAX_TP}
     */
    public static DecodeRanks of(List<DecodeSide> ranks) {
        List<DecodeSide> copy = List.copyOf(ranks);
        TpRanks.check("decode", copy.size());
        return new DecodeRanks(copy);
    }

    /** The ranks, in rank order. */
    public List<DecodeSide> ranks() {
        return ranks;
    }

    /** How many ranks. */
    public int tp() {
        return ranks.size();
    }

    /**
     * Opens request {@code transferId}'s links, each on the decode rank that receives it, towards the prefill rank
     * that sends it, each granted {@code blockCount} blocks of its rank.
     *
     * @param prefillRanks the notify addresses of the prefill's ranks, in rank order
     * @throws TransferRefusedException with nothing left open, if any rank refuses its link (the first refusal)
     * @throws IllegalArgumentException if the prefill's TP size is not a power of two in 1..{@value TpRanks#MAX_TP},
     *     or the id leaves no room for link numbers
     */
    public Transfer open(String transferId, List<InetSocketAddress> prefillRanks, int blockCount,
            DecodeTransfer.Observer observer) {
        Objects.requireNonNull(transferId, "transferId");
        TpRanks tp = new TpRanks(prefillRanks.size(), ranks.size());
        List<String> ids = tp.linkIds(transferId);
        List<DecodeTransfer> links = new ArrayList<>(tp.links());
        try {
            for (int k = 0; k < tp.links(); k++) {
                links.add(ranks.get(tp.decodeRank(k)).open(ids.get(k), prefillRanks.get(tp.prefillRank(k)),
                        blockCount, observer));
            }
        } catch (RuntimeException e) {
            links.forEach(DecodeTransfer::close);
            throw e;
        }
        return new Transfer(transferId, tp, links);
    }

    /** Closes every rank ({@link DecodeSide#close()}). */
    @Override
    public void close() {
        ranks.forEach(DecodeSide::close);
    }

    /** One request's links, waited for as one. */
    public static final class Transfer implements AutoCloseable {
        private final String id;
        private final TpRanks tp;
        private final List<DecodeTransfer> links;

        Transfer(String id, TpRanks tp, List<DecodeTransfer> links) {
            this.id = id;
            this.tp = tp;
            this.links = List.copyOf(links);
        }

        /** The request's transfer id. */
        public String id() {
            return id;
        }

        /** How the KV is cut between the ranks. */
        public TpRanks tp() {
            return tp;
        }

        /** The links, by link number. */
        public List<DecodeTransfer> links() {
            return links;
        }

        /**
         * The wait for every link's KV: completes once all have arrived; errors once, after every link's wait has
         * ended, with the first link's failure ({@link ReceiveFailedException} with its kind and code, the message
         * naming the link and ranks; or its {@link TransferRefusedException}). Subscribe once.
         */
        public Mono<Void> kv() {
            if (links.size() == 1) {
                return links.getFirst().kv();
            }
            return Mono.defer(() -> {
                AtomicReference<Throwable> first = new AtomicReference<>();
                List<Mono<Void>> waits = new ArrayList<>(links.size());
                for (int k = 0; k < links.size(); k++) {
                    int link = k;
                    waits.add(links.get(k).kv().onErrorResume(e -> {
                        Throwable named = named(link, e);
                        if (first.compareAndSet(null, named)) {
                            failOthers(link, named);
                        }
                        return Mono.empty();
                    }));
                }
                return Mono.when(waits).then(Mono.defer(() -> first.get() == null ? Mono.<Void>empty()
                        : Mono.error(first.get())));
            });
        }

        /**
         * READ mode: layer L once every link's layer L has passed its drain barrier; completes with the last layer,
         * or early when a link fails (its failure comes from {@link #kv()}, which must be subscribed).
         */
        public Flux<Integer> layers() {
            if (links.size() == 1) {
                return links.getFirst().layers();
            }
            List<Flux<Integer>> each = links.stream().map(l -> l.layers().onErrorResume(e -> Flux.empty()))
                    .toList();
            return Flux.zip(each, layers -> (Integer) layers[0]);
        }

        /** Ends every link ({@link DecodeTransfer#close()}); later calls do nothing. */
        @Override
        public void close() {
            links.forEach(DecodeTransfer::close);
        }

        private String where(int link) {
            return "link " + link + " of " + links.size() + " (prefill rank " + tp.prefillRank(link) + " → decode rank "
                    + tp.decodeRank(link) + ")";
        }

        private Throwable named(int link, Throwable e) {
            return e instanceof ReceiveFailedException r
                    ? new ReceiveFailedException(id, r.kind(), r.code(), where(link) + ": " + r.getMessage()) : e;
        }

        /** Fails every other link's wait at once, so that no rank keeps waiting for a request that has failed. */
        private void failOthers(int failed, Throwable cause) {
            ReceiveFailedException.Kind kind = cause instanceof ReceiveFailedException r ? r.kind()
                    : ReceiveFailedException.Kind.UNDELIVERABLE;
            var code = cause instanceof ReceiveFailedException r ? r.code() : null;
            for (int k = 0; k < links.size(); k++) {
                if (k != failed) {
                    DecodeTransfer other = links.get(k);
                    other.fail(new ReceiveFailedException(other.id(), kind, code, "request " + id + " failed on "
                            + where(failed) + ", so " + where(k) + " ends too: " + cause.getMessage()));
                }
            }
        }

        @Override
        public String toString() {
            return "DecodeRanks.Transfer[" + id + ", " + tp + "]";
        }
    }
}
