package dev.kvflux.transfer.notify;

/**
 * What a notify endpoint reports to its {@link NotifyRecorder}: one value per thing that happened. The server
 * reports what it received and every frame or connection it refused; the client what it sent and gave up; the
 * two sides of a transfer what became of the notices and block lists they keep for their peers.
 */
public enum NotifyEvent {
    /** A frame decoded into a message and was handed to the server's handler. */
    RECEIVED,
    /** A frame that is not a message kvflux understands (not msgpack, not a flat map, a type this server does not take); its connection was closed. */
    REJECTED_MALFORMED,
    /** A frame whose length prefix was negative or over the maximum; its connection was closed before the payload was buffered. */
    REJECTED_OVERSIZED,
    /** A frame without a valid tag under the notify secret, or signed too long ago; its connection was closed. */
    REJECTED_UNAUTHENTICATED,
    /** A frame with a string that is not well-formed UTF-8; its connection was closed. */
    REJECTED_INVALID_UTF8,
    /** A frame whose handling failed inside kvflux (out of memory, a bug); its connection was closed. */
    REJECTED_INTERNAL_ERROR,
    /** A message whose handler threw: acknowledged but not acted on; its connection stayed open. */
    HANDLER_FAILED,
    /** An inbound connection was accepted. */
    CONNECTION_ACCEPTED,
    /** An inbound connection was closed at once: the server already held its maximum. */
    CLOSED_MAX_CONNECTIONS,
    /** An inbound connection was closed: a started frame did not arrive whole within the frame read timeout. */
    CLOSED_FRAME_READ_TIMEOUT,
    /** An inbound connection was closed: its partly received frame would have taken the server past its byte budget. */
    CLOSED_BUFFER_BUDGET,
    /** An inbound connection was closed: nothing arrived on it within the idle timeout. */
    CLOSED_IDLE_TIMEOUT,
    /** An inbound connection's reads were held back: its large frames had spent the server's bulk rate. */
    READS_THROTTLED,
    /** A {@code write_done} completed a transfer decode expected. */
    NOTICE_WRITE_DONE,
    /** A {@code write_failed} failed a transfer decode expected. */
    NOTICE_WRITE_FAILED,
    /** A notice for a transfer that had already ended (late or repeated); ignored. */
    NOTICE_LATE_OR_DUPLICATE,
    /** A notice for a transfer nobody expects yet; kept, within its budget, until it is expected. */
    NOTICE_UNMATCHED,
    /** An early notice or an unclaimed block list was forgotten to stay within the peers' byte budget or count. */
    EARLY_DROPPED,
    /** An expected transfer reached its receive deadline without a notice. */
    DEADLINE_EXPIRED,
    /** A message was acknowledged by its peer. */
    SENT,
    /** A send attempt failed and is tried again. */
    SEND_RETRIED,
    /** An outbound connection was opened (the first to a peer, or a new one after a failure). */
    CLIENT_CONNECTION_OPENED,
    /** An outbound connection was closed after the client's idle limit with nothing awaiting acknowledgement. */
    CLIENT_CONNECTION_CLOSED_IDLE,
    /** A message was given up at its deadline after every attempt failed. */
    UNDELIVERABLE
}
