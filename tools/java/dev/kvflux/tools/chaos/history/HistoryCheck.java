package dev.kvflux.tools.chaos.history;

import dev.kvflux.tools.chaos.history.Violation.Rule;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * The history checker of the chaos runs: reads the history of every prefill and decode side and of the client
 * ({@link History}) and holds it to the rules of issue 34 ({@link Rule}):
 * <ol type="a">
 *   <li>every request ended exactly once: the client has one outcome per request, and each side that opened a
 *       transfer ended it once (a side killed and restarted at its address is excused the ends it never reached);</li>
 *   <li>no decode block was handed to a new transfer while a write of an old one could still land in it: a write
 *       may land from prefill's {@code write_posted} until its {@code writes_ended} (or, if the prefill was killed,
 *       its last event; if it runs on and never said, forever), and a block is a transfer's from decode's
 *       {@code opened} until its {@code freed};</li>
 *   <li>no decode used the KV of a transfer that was aborted, fenced or failed: {@code uses_kv} needs the decode's
 *       wait to have ended with {@code kv_ready}, a {@code write_done} it took, no {@code abort} it sent, and the
 *       prefill incarnation that sent that {@code write_done} to have sent it to this decode incarnation, without
 *       {@code write_failed} and not after it aborted the transfer;</li>
 *   <li>no {@code write_done} was taken from a stale incarnation: one taken must be about this decode incarnation's
 *       blocks, and not come from a prefill incarnation older than one this decode had already heard from at the
 *       same address.</li>
 * </ol>
 * (e) in the issue, that both proxies' membership converged after a heal and how long it took, needs the proxies'
 * membership events, which these logs do not carry; a run that has them adds a rule here.
 *
 * <p>Pure and deterministic: the same history gives the same violations, in the same order. Only requests whose first
 * event is at or after the check's start are judged; earlier events are read as context.
 */
public final class HistoryCheck {
    /** The violations printed in full per rule. */
    public static final int SHOWN_PER_RULE = 5;
    /** The events of one request's history printed at most. */
    static final int EVENTS_SHOWN = 60;

    private final History history;
    private final long since;
    private final String clientFile;
    private final Map<String, Long> firstSeen = new LinkedHashMap<>();
    private final Map<String, Side> sides = new TreeMap<>();
    private final List<Violation> violations = new ArrayList<>();

    /** One side's events, in time order. */
    private static final class Side {
        final String role;
        final long incarnation;
        String address = "";
        long started = Long.MIN_VALUE;
        boolean stopped;
        long last = Long.MIN_VALUE;
        final List<HistoryEvent> events = new ArrayList<>();
        final Map<String, List<HistoryEvent>> byTransfer = new LinkedHashMap<>();

        Side(String role, long incarnation) {
            this.role = role;
            this.incarnation = incarnation;
        }

        List<HistoryEvent> of(String transfer) {
            return byTransfer.getOrDefault(transfer, List.of());
        }

        String name() {
            return role + "#" + incarnation;
        }
    }

    /** What the check found. */
    public record Result(List<Violation> violations, History history) {
        public Result {
            violations = List.copyOf(violations);
        }

        /** How many violations there are of {@code rule}. */
        public int count(Rule rule) {
            return (int) violations.stream().filter(v -> v.rule() == rule).count();
        }

        /** Whether nothing broke a rule. */
        public boolean clean() {
            return violations.isEmpty();
        }

        /**
         * Per rule its count, then for each of the first {@value #SHOWN_PER_RULE} violations of each rule what broke
         * it and the histories of its requests.
         */
        public String report() {
            StringBuilder out = new StringBuilder();
            out.append("history check: ").append(history.events().size()).append(" events, ").append(violations.size())
                    .append(violations.size() == 1 ? " violation" : " violations").append('\n');
            Map<Rule, List<Violation>> byRule = new EnumMap<>(Rule.class);
            for (Rule rule : Rule.values()) {
                byRule.put(rule, new ArrayList<>());
            }
            violations.forEach(v -> byRule.get(v.rule()).add(v));
            byRule.forEach((rule, list) -> out.append("  (").append(rule.letter()).append(") ").append(rule.text())
                    .append(": ").append(list.size()).append('\n'));
            out.append("  (e) membership converged in both proxies after healing: not checked (these logs carry no"
                    + " membership events)\n");
            if (history.unreadable() > 0 || history.lost() > 0) {
                out.append("  the history is incomplete: ").append(history.unreadable()).append(" unreadable lines, ")
                        .append(history.lost()).append(" events the roles dropped\n");
            }
            byRule.forEach((rule, list) -> {
                for (Violation v : list.subList(0, Math.min(SHOWN_PER_RULE, list.size()))) {
                    out.append('(').append(rule.letter()).append(") ").append(v.what()).append('\n');
                    for (String t : v.transfers()) {
                        appendHistory(out, "transfer " + t, history.events().stream()
                                .filter(e -> e.transfer().equals(t)).toList());
                    }
                    if (v.transfers().isEmpty() && v.clientIndex() >= 0) {
                        appendHistory(out, "request " + v.clientIndex(), history.events().stream()
                                .filter(e -> e.index() == v.clientIndex()).toList());
                    }
                }
                if (list.size() > SHOWN_PER_RULE) {
                    out.append('(').append(rule.letter()).append(") and ").append(list.size() - SHOWN_PER_RULE)
                            .append(" more\n");
                }
            });
            return out.toString();
        }

        private static void appendHistory(StringBuilder out, String title, List<HistoryEvent> events) {
            out.append("  history of ").append(title).append(":\n");
            for (HistoryEvent e : events.subList(0, Math.min(EVENTS_SHOWN, events.size()))) {
                out.append("    ").append(e).append('\n');
            }
            if (events.size() > EVENTS_SHOWN) {
                out.append("    … ").append(events.size() - EVENTS_SHOWN).append(" more events\n");
            }
        }
    }

    private HistoryCheck(History history, long since, String clientFile) {
        this.history = history;
        this.since = since;
        this.clientFile = clientFile;
    }

    /** Checks every request of {@code history}. */
    public static Result check(History history) {
        return check(history, Long.MIN_VALUE, null);
    }

    /**
     * Checks the requests of {@code history} whose first event is at or after {@code sinceMicros}; the client's
     * outcomes only from {@code clientFile} (its name), or from every client file when null.
     */
    public static Result check(History history, long sinceMicros, String clientFile) {
        HistoryCheck check = new HistoryCheck(history, sinceMicros, clientFile);
        check.index();
        check.endedOnce();
        check.blocksNotReused();
        check.decodedFromGoodKv();
        check.noStaleWriteDone();
        return new Result(check.violations, history);
    }

    /**
     * Checks the fault {@code fault} of a chaos run whose logs are in {@code logDir}: the requests from its load's
     * start on (its client file, {@link ClientOutcomes#file}), with everything before as context.
     *
     * @throws IOException if the logs cannot be read
     */
    public static Result check(Path logDir, String fault) throws IOException {
        History history = History.read(logDir);
        String client = ClientOutcomes.file(logDir, fault).getFileName().toString();
        long since = history.events().stream()
                .filter(e -> e.kind().equals(ClientOutcomes.LOAD) && e.source().startsWith(client + ":"))
                .mapToLong(HistoryEvent::micros).min().orElse(Long.MIN_VALUE);
        return check(history, since, client);
    }

    /** The figure a fault's result carries: how many violations its check found (-1 when its logs were unreadable). */
    public static final String FIGURE = "history_violations";

    /**
     * Checks fault {@code fault} ({@link #check(Path, String)}), writes its report to
     * {@code FAULT-history-check.txt} in {@code logDir}, and gives the count as the figure {@value #FIGURE}, for the
     * fault's result.
     */
    public static Map<String, Double> figures(Path logDir, String fault) {
        Path report = logDir.resolve(fault + "-history-check.txt");
        try {
            Result result = check(logDir, fault);
            java.nio.file.Files.writeString(report, result.report());
            return Map.of(FIGURE, (double) result.violations().size());
        } catch (IOException | RuntimeException e) {
            try {
                java.nio.file.Files.writeString(report, "history check: the logs could not be read: " + e + "\n");
            } catch (IOException ignored) {
                // the figure says it
            }
            return Map.of(FIGURE, -1.0);
        }
    }

    private void index() {
        for (HistoryEvent e : history.events()) {
            if (!e.transfer().isEmpty()) {
                firstSeen.putIfAbsent(e.transfer(), e.micros());
            }
            if (e.role().equals("client")) {
                continue;
            }
            Side side = sides.computeIfAbsent(e.instance(), k -> new Side(e.role(), e.incarnation()));
            side.events.add(e);
            side.last = Math.max(side.last, e.micros());
            switch (e.kind()) {
                case HistoryEvent.STARTED -> {
                    side.address = e.detail();
                    side.started = e.micros();
                }
                case HistoryEvent.STOPPED -> side.stopped = true;
                default -> side.byTransfer.computeIfAbsent(e.transfer(), k -> new ArrayList<>()).add(e);
            }
        }
    }

    private boolean judged(String transfer) {
        return firstSeen.getOrDefault(transfer, Long.MIN_VALUE) >= since;
    }

    /** A side that never stopped, at whose address a later side started: it was killed and restarted. */
    private boolean killed(Side side) {
        return !side.stopped && !side.address.isEmpty() && sides.values().stream().anyMatch(other -> other != side
                && other.role.equals(side.role) && other.address.equals(side.address) && other.started > side.started);
    }

    private static long count(List<HistoryEvent> events, String kind) {
        return events.stream().filter(e -> e.kind().equals(kind)).count();
    }

    // ----- (a) -----

    private void endedOnce() {
        for (Side side : sides.values()) {
            side.byTransfer.forEach((transfer, events) -> {
                if (transfer.isEmpty() || !judged(transfer)) {
                    return;
                }
                long opened = count(events, HistoryEvent.OPENED);
                long ended = count(events, HistoryEvent.ENDED);
                String where = transfer + " on " + side.name();
                if (opened > 1) {
                    violations.add(Violation.of(Rule.ENDED_ONCE, where + " was opened " + opened + " times", transfer));
                }
                if (ended > 1) {
                    violations.add(Violation.of(Rule.ENDED_ONCE, where + " ended " + ended + " times", transfer));
                } else if (ended == 0 && opened > 0 && !killed(side)) {
                    violations.add(Violation.of(Rule.ENDED_ONCE, where + " never ended", transfer));
                } else if (ended == 1 && opened == 0) {
                    violations.add(Violation.of(Rule.ENDED_ONCE, where + " ended without being opened", transfer));
                }
            });
        }
        Map<String, Map<Integer, List<HistoryEvent>>> loads = new TreeMap<>();
        for (HistoryEvent e : history.events()) {
            String file = e.source().contains(":") ? e.source().substring(0, e.source().lastIndexOf(':')) : e.source();
            if (e.role().equals("client") && e.kind().equals(HistoryEvent.OUTCOME) && e.index() >= 0
                    && (clientFile == null || file.equals(clientFile))) {
                loads.computeIfAbsent(file, k -> new TreeMap<>()).computeIfAbsent(e.index(), k -> new ArrayList<>())
                        .add(e);
            }
        }
        loads.forEach((file, requests) -> {
            int last = requests.isEmpty() ? -1 : ((TreeMap<Integer, List<HistoryEvent>>) requests).lastKey();
            for (int i = 0; i <= last; i++) {
                List<HistoryEvent> outcomes = requests.getOrDefault(i, List.of());
                if (outcomes.size() == 1) {
                    continue;
                }
                Set<String> transfers = new LinkedHashSet<>();
                outcomes.stream().map(HistoryEvent::transfer).filter(t -> !t.isEmpty()).forEach(transfers::add);
                String what = outcomes.isEmpty() ? "the client has no outcome for request " + i
                        : "the client saw " + outcomes.size() + " outcomes for request " + i;
                violations.add(new Violation(Rule.ENDED_ONCE, what + " (" + (file.isEmpty() ? "client" : file) + ")",
                        List.copyOf(transfers), i));
            }
        });
    }

    // ----- (b) -----

    /** Transfer {@code transfer} held a decode block from {@code from} until {@code until} (exclusive). */
    private record Held(String transfer, long from, long until) {
    }

    private void blocksNotReused() {
        // decode incarnation -> block -> who held it when
        Map<Long, Map<Long, List<Held>>> held = new TreeMap<>();
        for (Side side : sides.values()) {
            if (!side.role.equals("decode")) {
                continue;
            }
            Map<Long, List<Held>> blocks = held.computeIfAbsent(side.incarnation, k -> new TreeMap<>());
            side.byTransfer.forEach((transfer, events) -> {
                for (HistoryEvent opened : events) {
                    if (!opened.kind().equals(HistoryEvent.OPENED)) {
                        continue;
                    }
                    long until = events.stream().filter(e -> e.kind().equals(HistoryEvent.FREED)
                            && e.micros() >= opened.micros()).mapToLong(HistoryEvent::micros).min()
                            .orElse(Long.MAX_VALUE);
                    for (long b : opened.blocks()) {
                        blocks.computeIfAbsent(b, k -> new ArrayList<>()).add(new Held(transfer, opened.micros(), until));
                    }
                }
            });
            blocks.values().forEach(list -> list.sort(java.util.Comparator.comparingLong(Held::from)));
        }
        for (Side prefill : sides.values()) {
            if (!prefill.role.equals("prefill")) {
                continue;
            }
            prefill.byTransfer.forEach((transfer, events) -> {
                for (HistoryEvent posted : events) {
                    if (posted.kind().equals(HistoryEvent.WRITE_POSTED)) {
                        writeLands(prefill, transfer, posted, held.getOrDefault(posted.to(), Map.of()));
                    }
                }
            });
        }
    }

    /** Whether {@code posted}'s write could land in a block another transfer held meanwhile. */
    private void writeLands(Side prefill, String transfer, HistoryEvent posted, Map<Long, List<Held>> blocks) {
        long end = prefill.of(transfer).stream().filter(e -> e.kind().equals(HistoryEvent.WRITES_ENDED)
                && e.micros() >= posted.micros()).mapToLong(HistoryEvent::micros).min()
                .orElse(killed(prefill) ? prefill.last : Long.MAX_VALUE);
        Map<String, List<Long>> overlaps = new LinkedHashMap<>();
        Map<String, Held> heldBy = new LinkedHashMap<>();
        for (long b : posted.blocks()) {
            List<Held> holders = blocks.getOrDefault(b, List.of());
            // the holders taken before the write could have ended, latest first, back to one let go before it began
            for (int i = heldBefore(holders, end) - 1; i >= 0; i--) {
                Held h = holders.get(i);
                if (!h.transfer().equals(transfer) && h.until() > posted.micros()
                        && (judged(transfer) || judged(h.transfer()))) {
                    overlaps.computeIfAbsent(h.transfer(), k -> new ArrayList<>()).add(b);
                    heldBy.putIfAbsent(h.transfer(), h);
                }
                if (h.until() <= posted.micros() && !h.transfer().equals(transfer)) {
                    break;
                }
            }
        }
        overlaps.forEach((other, list) -> {
            Held h = heldBy.get(other);
            violations.add(Violation.of(Rule.NO_WRITE_INTO_REUSED_BLOCK, prefill.name() + "'s write of " + transfer
                    + " into decode#" + posted.to() + "'s blocks " + list + " could land from " + posted.micros()
                    + " until " + (end == Long.MAX_VALUE ? "never said" : Long.toString(end)) + ", while " + other
                    + " held them from " + h.from() + (h.until() == Long.MAX_VALUE ? " on" : " until " + h.until()),
                    transfer, other));
        });
    }

    /** How many of {@code holders} (sorted by when they took the block) took it before {@code micros}. */
    private static int heldBefore(List<Held> holders, long micros) {
        int lo = 0;
        int hi = holders.size();
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (holders.get(mid).from() < micros) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    // ----- (c) -----

    private void decodedFromGoodKv() {
        for (Side decode : sides.values()) {
            if (!decode.role.equals("decode")) {
                continue;
            }
            decode.byTransfer.forEach((transfer, events) -> {
                for (HistoryEvent uses : events) {
                    if (uses.kind().equals(HistoryEvent.USES_KV) && judged(transfer)) {
                        String broken = usedKvBroken(decode, transfer, events, uses.micros());
                        if (broken != null) {
                            violations.add(Violation.of(Rule.NO_DECODE_FROM_FAILED_KV, decode.name() + " decoded "
                                    + transfer + " from its KV, but " + broken, transfer));
                        }
                    }
                }
            });
        }
    }

    /** Why decoding {@code transfer} at {@code at} used KV it must not have; null when the KV was good. */
    private String usedKvBroken(Side decode, String transfer, List<HistoryEvent> events, long at) {
        HistoryEvent failed = events.stream().filter(e -> e.kind().equals(HistoryEvent.KV_FAILED)).findFirst()
                .orElse(null);
        if (failed != null) {
            return "its wait for the KV failed (" + failed.detail() + ")";
        }
        if (events.stream().noneMatch(e -> e.kind().equals(HistoryEvent.KV_READY) && e.micros() <= at)) {
            return "its wait for the KV had not ended with it";
        }
        if (events.stream().anyMatch(e -> e.is(HistoryEvent.SENT, "abort") && e.micros() <= at)) {
            return "it had told prefill abort";
        }
        HistoryEvent done = events.stream().filter(e -> e.kind().equals(HistoryEvent.RECEIVED) && kvHere(e)
                && e.micros() <= at).reduce((a, b) -> b).orElse(null);
        if (done == null) {
            return "it took no write_done for it";
        }
        Side prefill = sides.get("prefill#" + done.from());
        if (prefill == null) {
            return null; // that prefill's history was not read: nothing more to hold it to
        }
        List<HistoryEvent> theirs = prefill.of(transfer);
        HistoryEvent sent = theirs.stream().filter(e -> e.kind().equals(HistoryEvent.SENT) && kvHere(e)
                && (e.to() == 0 || e.to() == decode.incarnation)).findFirst().orElse(null);
        if (sent == null) {
            return prefill.name() + " never sent it " + done.message() + " (fenced or not written)";
        }
        if (theirs.stream().anyMatch(e -> e.is(HistoryEvent.SENT, HistoryEvent.WRITE_FAILED))) {
            return prefill.name() + " said write_failed for it";
        }
        HistoryEvent aborted = theirs.stream().filter(e -> e.kind().equals(HistoryEvent.ABORTED)
                && e.micros() <= sent.micros()).findFirst().orElse(null);
        return aborted == null ? null : prefill.name() + " had aborted it (" + aborted.detail() + ")";
    }

    /** A message saying the KV is in place: {@code write_done}, or READ mode's {@code read_ready}. */
    private static boolean kvHere(HistoryEvent e) {
        return e.message().equals(HistoryEvent.WRITE_DONE) || e.message().equals("read_ready");
    }

    // ----- (d) -----

    private void noStaleWriteDone() {
        for (Side decode : sides.values()) {
            if (!decode.role.equals("decode")) {
                continue;
            }
            Map<String, String> prefillOf = new LinkedHashMap<>();
            decode.byTransfer.forEach((transfer, events) -> events.stream()
                    .filter(e -> e.kind().equals(HistoryEvent.OPENED)).findFirst()
                    .ifPresent(e -> prefillOf.put(transfer, e.detail())));
            Map<String, Long> newest = new LinkedHashMap<>();
            for (HistoryEvent e : decode.events) {
                String address = prefillOf.getOrDefault(e.transfer(), "");
                long before = newest.getOrDefault(address, 0L);
                boolean aboutThese = e.to() == 0 || e.to() == decode.incarnation;
                if (e.is(HistoryEvent.RECEIVED, HistoryEvent.WRITE_DONE) && judged(e.transfer())
                        && taken(decode, e)) {
                    if (!aboutThese) {
                        violations.add(Violation.of(Rule.NO_STALE_WRITE_DONE, decode.name() + " took write_done for "
                                + e.transfer() + " about the blocks of decode incarnation " + e.to(), e.transfer()));
                    } else if (!address.isEmpty() && e.from() < before) {
                        violations.add(Violation.of(Rule.NO_STALE_WRITE_DONE, decode.name() + " took write_done for "
                                + e.transfer() + " from prefill incarnation " + e.from() + " at " + address
                                + " after it had heard from the newer " + before, e.transfer()));
                    }
                }
                // decode learns a prefill incarnation from a message about its own blocks, taken or dropped
                boolean heard = e.kind().equals(HistoryEvent.RECEIVED) || e.kind().equals(HistoryEvent.DROPPED);
                if (heard && aboutThese && !address.isEmpty() && e.from() > before) {
                    newest.put(address, e.from());
                }
            }
        }
    }

    /** Whether {@code done} was taken: its transfer's wait ended with its KV after it came. */
    private static boolean taken(Side decode, HistoryEvent done) {
        return decode.of(done.transfer()).stream().anyMatch(e -> e.kind().equals(HistoryEvent.KV_READY)
                && e.micros() >= done.micros());
    }
}
