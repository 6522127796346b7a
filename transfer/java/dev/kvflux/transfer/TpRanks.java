package dev.kvflux.transfer;

import dev.kvflux.transfer.notify.NotifyCodec;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * How a request's KV moves between a prefill of {@code prefillTp} tensor-parallel ranks and a decode of
 * {@code decodeTp} ranks, both powers of two (so their ratio is one: 1/2, 2/4, 8/4, 4/2 …).
 *
 * <h2>The mapping</h2>
 * Each rank of a role holds an equal, contiguous share of the model's KV heads: rank {@code r} of {@code n} holds
 * heads {@code [r·H/n, (r+1)·H/n)}. The KV of a request is cut into {@link #links()} = max(prefillTp, decodeTp)
 * <em>shards</em> of {@code H / links} heads each, the finer of the two cuts; shard {@code k} is one <em>link</em>,
 * moved from the prefill rank that holds it ({@link #prefillRank}: {@code k / (links / prefillTp)}) to the decode
 * rank that holds it ({@link #decodeRank}: {@code k / (links / decodeTp)}), as a transfer of its own: its own block
 * list, notices, content check, fencing and release between those two ranks' sides. So with prefill TP 2 and decode
 * TP 4 each prefill rank sends two links, one to each of the two decode ranks that split its heads; with TP 4 → 2
 * each decode rank receives two links, one from each prefill rank whose heads it joins. Every link carries the same
 * number of blocks (one per {@code block tokens} of the prompt) and {@code 1 / links} of a block's bytes
 * ({@link #shardBytes}); a rank's KV region holds {@code links / tp} shard rows per block, as much memory as its
 * share of the heads.
 *
 * <h2>On the wire</h2>
 * A link's transfer id is the request's with {@code #k} appended ({@link #linkId}), unless there is one link, when
 * it is the request's own; so the notices of one request's links never meet on one rank's side under one id.
 */
public record TpRanks(int prefillTp, int decodeTp) {
    /** The most ranks a role may run. */
    public static final int MAX_TP = 64;

    /** The longest transfer id a request may have when its KV moves in several links: room for {@code #k}. */
    public static final int MAX_REQUEST_ID_BYTES = NotifyCodec.MAX_ID_BYTES - 3;

    /**
     * @throws IllegalArgumentException if either size is not a power of two in 1..{@value #MAX_TP}
     */
    public TpRanks {
        check("prefill", prefillTp);
        check("decode", decodeTp);
    }

    /** One rank each: a request's KV moves as one transfer. */
    public static final TpRanks SINGLE = new TpRanks(1, 1);

    /**
     * Checks a role's TP size.
     *
     * @throws IllegalArgumentException saying what is allowed
     */
    public static int check(String role, int tp) {
        if (tp < 1 || tp > MAX_TP || Integer.bitCount(tp) != 1) {
            throw new IllegalArgumentException(role + "'s TP size must be a power of two in 1.." + MAX_TP + " (1, 2, 4,"
                    + " 8 …), got " + tp);
        }
        return tp;
    }

    /** How many links (shards of the KV heads) a request's KV moves in: the larger TP size. */
    public int links() {
        return Math.max(prefillTp, decodeTp);
    }

    /** The prefill rank that holds link {@code link}'s heads and sends it. */
    public int prefillRank(int link) {
        return checkLink(link) / (links() / prefillTp);
    }

    /** The decode rank that holds link {@code link}'s heads and receives it. */
    public int decodeRank(int link) {
        return checkLink(link) / (links() / decodeTp);
    }

    /** The links prefill rank {@code rank} sends, in order. */
    public List<Integer> linksOfPrefillRank(int rank) {
        return linksOf(rank, prefillTp);
    }

    /** The links decode rank {@code rank} receives, in order. */
    public List<Integer> linksOfDecodeRank(int rank) {
        return linksOf(rank, decodeTp);
    }

    /** How many links each rank of a role of {@code tp} ranks carries per request. */
    public int linksPerRank(int tp) {
        return links() / tp;
    }

    /**
     * The transfer id of link {@code link} of request {@code transferId}: the request's own with one link, else
     * {@code transferId#link}.
     *
     * @throws IllegalArgumentException if the id would not fit in a notification
     */
    public String linkId(String transferId, int link) {
        checkLink(link);
        if (links() == 1) {
            return transferId;
        }
        String id = transferId + "#" + link;
        if (id.getBytes(StandardCharsets.UTF_8).length > NotifyCodec.MAX_ID_BYTES) {
            throw new IllegalArgumentException("transfer id " + transferId.length() + " characters long leaves no room"
                    + " for its link number over " + links() + " ranks; keep it to " + MAX_REQUEST_ID_BYTES + " bytes");
        }
        return id;
    }

    /**
     * Every link's transfer id ({@link #linkId}), by link number, checked before any link is opened.
     *
     * @throws IllegalArgumentException if the id would not fit in a notification
     */
    public List<String> linkIds(String transferId) {
        List<String> ids = new ArrayList<>(links());
        for (int k = 0; k < links(); k++) {
            ids.add(linkId(transferId, k));
        }
        return List.copyOf(ids);
    }

    /**
     * One link's share of {@code blockBytes}, the bytes of a block of all the heads.
     *
     * @throws IllegalArgumentException if they do not split evenly
     */
    public long shardBytes(long blockBytes) {
        if (blockBytes % links() != 0) {
            throw new IllegalArgumentException("a KV block of " + blockBytes + " bytes does not split evenly into "
                    + links() + " shards of heads (prefill TP " + prefillTp + ", decode TP " + decodeTp + ")");
        }
        return blockBytes / links();
    }

    private List<Integer> linksOf(int rank, int tp) {
        if (rank < 0 || rank >= tp) {
            throw new IllegalArgumentException("rank " + rank + " is outside 0.." + (tp - 1));
        }
        int per = links() / tp;
        List<Integer> links = new ArrayList<>(per);
        for (int k = rank * per; k < (rank + 1) * per; k++) {
            links.add(k);
        }
        return List.copyOf(links);
    }

    private int checkLink(int link) {
        if (link < 0 || link >= links()) {
            throw new IllegalArgumentException("link " + link + " is outside 0.." + (links() - 1));
        }
        return link;
    }

    @Override
    public String toString() {
        return "TP " + prefillTp + " → " + decodeTp + " (" + links() + " link" + (links() == 1 ? "" : "s") + ")";
    }
}
