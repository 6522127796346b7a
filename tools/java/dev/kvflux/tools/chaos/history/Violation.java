package dev.kvflux.tools.chaos.history;

import java.util.List;
import java.util.Objects;

/**
 * One break of a {@link Rule}: what broke it, and the requests whose histories show it.
 *
 * @param rule the rule broken
 * @param what one line saying how
 * @param transfers the transfers involved (their histories are printed with it); may be empty for a client's request
 *     that never had one
 * @param clientIndex the client's request index, where the break is the client's, else -1
 */
public record Violation(Rule rule, String what, List<String> transfers, int clientIndex) {
    /** The rules the checker holds every history to. */
    public enum Rule {
        /** (a) Every request ended exactly once: for its client, and on each side that opened it. */
        ENDED_ONCE("a", "every request ended exactly once, for the client and on each side"),
        /** (b) No block was handed to a new transfer while a write of an old one could still land in it. */
        NO_WRITE_INTO_REUSED_BLOCK("b", "no block was handed to a new transfer while a write of an old one could"
                + " still land in it"),
        /** (c) No decode used the KV of a transfer that was aborted, fenced or failed. */
        NO_DECODE_FROM_FAILED_KV("c", "no decode used KV of a transfer that was aborted, fenced or failed"),
        /** (d) No {@code write_done} was taken from a stale incarnation. */
        NO_STALE_WRITE_DONE("d", "no write_done was accepted from a stale incarnation");

        private final String letter;
        private final String text;

        Rule(String letter, String text) {
            this.letter = letter;
            this.text = text;
        }

        /** The rule's letter in issue 34's list: {@code a}. */
        public String letter() {
            return letter;
        }

        /** What the rule says, one line. */
        public String text() {
            return text;
        }
    }

    public Violation {
        Objects.requireNonNull(rule, "rule");
        Objects.requireNonNull(what, "what");
        transfers = List.copyOf(transfers);
    }

    /** A break about {@code transfers}. */
    static Violation of(Rule rule, String what, String... transfers) {
        return new Violation(rule, what, List.of(transfers), -1);
    }
}
