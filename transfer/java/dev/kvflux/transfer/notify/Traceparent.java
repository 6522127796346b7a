package dev.kvflux.transfer.notify;

/**
 * The W3C Trace Context {@code traceparent} text a notify message may carry so that its receiver continues the
 * sender's trace: {@code 00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>}, 55 characters, lower-case
 * hex, neither id all zeros.
 *
 * <p>Only version {@code 00} is accepted: a later version may add fields after the flags, and a receiver that
 * cannot check them must not trust the rest. A text that is not of this form is treated as absent.
 */
public final class Traceparent {
    /** The length of a version-00 traceparent. */
    public static final int LENGTH = 55;
    /**
     * The most UTF-8 bytes a notify frame's {@code traceparent} may have before the frame is rejected as
     * malformed (as an over-long id is); a shorter text of the wrong form is ignored.
     */
    public static final int MAX_BYTES = 256;

    private Traceparent() {
    }

    /** Whether {@code text} is a version-00 traceparent with non-zero trace and span ids. */
    public static boolean isValid(String text) {
        if (text == null || text.length() != LENGTH || !text.startsWith("00-") || text.charAt(35) != '-'
                || text.charAt(52) != '-') {
            return false;
        }
        return hex(text, 3, 35) && hex(text, 36, 52) && hex(text, 53, 55)
                && !zeros(text, 3, 35) && !zeros(text, 36, 52);
    }

    /** {@code text} if it is {@linkplain #isValid valid}, else null. */
    public static String orNull(String text) {
        return isValid(text) ? text : null;
    }

    private static boolean hex(String text, int from, int to) {
        for (int i = from; i < to; i++) {
            char c = text.charAt(i);
            if (!(c >= '0' && c <= '9' || c >= 'a' && c <= 'f')) {
                return false;
            }
        }
        return true;
    }

    private static boolean zeros(String text, int from, int to) {
        for (int i = from; i < to; i++) {
            if (text.charAt(i) != '0') {
                return false;
            }
        }
        return true;
    }
}
