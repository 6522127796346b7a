package dev.kvflux.transfer;

import dev.kvflux.bindings.LayerEvent;
import dev.kvflux.pipeline.WriteOutcome;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.function.IntFunction;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * A prefill instance of several tensor-parallel ranks: one {@link PrefillSide} per rank, each with its own engine,
 * KV region, blocks, WRITE pipeline, notify server and incarnation. A request's KV goes out in the links of
 * {@link TpRanks}, each a transfer from the prefill rank that holds its heads to the decode rank that holds them;
 * {@link #open} opens them all.
 *
 * <p>Each link ends as a single-rank transfer does (its own {@code write_done} or {@code write_failed}, drain,
 * release). A link that fails tells its decode rank, which fails the request on every decode rank and aborts the
 * request's other links here; an abort of any link ({@link Transfer#aborted()}) ends the request's prefill.
 */
public final class PrefillRanks {
    private final List<PrefillSide> ranks;

    private PrefillRanks(List<PrefillSide> ranks) {
        this.ranks = ranks;
    }

    /**
     * This prefill's ranks, in rank order.
     *
     * @throws IllegalArgumentException if their number is not a power of two in 1..{@value TpRanks#MAX_TP}
     */
    public static PrefillRanks of(List<PrefillSide> ranks) {
        List<PrefillSide> copy = List.copyOf(ranks);
        TpRanks.check("prefill", copy.size());
        return new PrefillRanks(copy);
    }

    /** The ranks, in rank order. */
    public List<PrefillSide> ranks() {
        return ranks;
    }

    /** How many ranks. */
    public int tp() {
        return ranks.size();
    }

    /**
     * Opens request {@code transferId}'s links, each on the prefill rank that sends it, towards the decode rank that
     * receives it, each with {@code blockCount} source blocks of its rank.
     *
     * @param decodeRanks the notify addresses of the decode's ranks, in rank order
     * @param observers the observer of each link, by link number
     * @throws TransferRefusedException with nothing left open, if any rank refuses its link (the first refusal)
     * @throws IllegalArgumentException if the decode's TP size is not a power of two in 1..{@value TpRanks#MAX_TP},
     *     or the id leaves no room for link numbers
     */
    public Transfer open(String transferId, List<InetSocketAddress> decodeRanks, int blockCount,
            IntFunction<PrefillTransfer.Observer> observers) {
        Objects.requireNonNull(transferId, "transferId");
        TpRanks tp = new TpRanks(ranks.size(), decodeRanks.size());
        List<String> ids = tp.linkIds(transferId);
        List<PrefillTransfer> links = new ArrayList<>(tp.links());
        try {
            for (int k = 0; k < tp.links(); k++) {
                links.add(ranks.get(tp.prefillRank(k)).open(ids.get(k), decodeRanks.get(tp.decodeRank(k)), blockCount,
                        observers.apply(k)));
            }
        } catch (RuntimeException e) {
            links.forEach(PrefillTransfer::close);
            throw e;
        }
        return new Transfer(transferId, tp, links);
    }

    /**
     * Stops every rank gracefully ({@link PrefillSide#close(Duration)}), all at once, so that stopping takes one
     * {@code grace}, not one per rank.
     */
    public void close(Duration grace) {
        List<Thread> closing = ranks.stream()
                .map(side -> Thread.ofVirtual().name("kvflux-prefill-rank-close").start(() -> side.close(grace)))
                .toList();
        for (Thread t : closing) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** One request's links. */
    public static final class Transfer {
        private final String id;
        private final TpRanks tp;
        private final List<PrefillTransfer> links;

        Transfer(String id, TpRanks tp, List<PrefillTransfer> links) {
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
        public List<PrefillTransfer> links() {
            return links;
        }

        /** Emits the first abort's reason, naming its link, if any link is aborted; never completes otherwise. */
        public Mono<String> aborted() {
            if (links.size() == 1) {
                return links.getFirst().aborted();
            }
            List<Mono<String>> each = new ArrayList<>(links.size());
            for (int k = 0; k < links.size(); k++) {
                int link = k;
                each.add(links.get(k).aborted().map(reason -> "link " + link + " of " + links.size() + " (prefill rank "
                        + tp.prefillRank(link) + " → decode rank " + tp.decodeRank(link) + "): " + reason));
            }
            return Mono.firstWithValue(each);
        }

        /**
         * Writes every link ({@link PrefillTransfer#write}) with the events of its rank's forward pass.
         *
         * @param events one GPU event per layer for link {@code k}, by link number
         * @return the outcomes, by link number, once every link's is known (an aborted link has none)
         */
        public Mono<List<WriteOutcome>> write(IntFunction<List<? extends LayerEvent>> events) {
            List<Mono<WriteOutcome>> outcomes = new ArrayList<>(links.size());
            for (int k = 0; k < links.size(); k++) {
                outcomes.add(links.get(k).write(events.apply(k)));
            }
            return Flux.mergeSequential(outcomes).collectList();
        }

        /** Aborts every link still running ({@link PrefillTransfer#abort}); true if any was. */
        public boolean abort(String reason) {
            boolean any = false;
            for (PrefillTransfer link : links) {
                any |= link.abort(reason);
            }
            return any;
        }

        /** Ends every link that will not be written ({@link PrefillTransfer#close()}). */
        public void close() {
            links.forEach(PrefillTransfer::close);
        }

        @Override
        public String toString() {
            return "PrefillRanks.Transfer[" + id + ", " + tp + "]";
        }
    }
}
