package dev.kvflux.serving.etcd;

/**
 * A call to etcd that did not succeed: etcd answered with an error ({@link Kind#ANSWERED}, with its gRPC code), its
 * answer broke the client's bounds or was not what the JSON gateway sends ({@link Kind#MALFORMED}), or no endpoint
 * could be reached in time ({@link Kind#UNREACHABLE}). The message says which, for a log line.
 */
public final class EtcdException extends RuntimeException {
    /** gRPC's NOT_FOUND: etcd's code for a lease it does not hold. */
    public static final int NOT_FOUND = 5;
    /** gRPC's UNAVAILABLE: no leader, or the member is stopping; another endpoint may answer. */
    public static final int UNAVAILABLE = 14;

    /** How the call failed. */
    public enum Kind {
        /** etcd answered with an error. */
        ANSWERED,
        /** etcd's answer was too large or not the gateway's JSON. */
        MALFORMED,
        /** No endpoint answered. */
        UNREACHABLE
    }

    private final Kind kind;
    private final int code;

    EtcdException(Kind kind, int code, String message, Throwable cause) {
        super(message, cause, false, false);
        this.kind = kind;
        this.code = code;
    }

    static EtcdException answered(int code, String message) {
        return new EtcdException(Kind.ANSWERED, code, message, null);
    }

    static EtcdException malformed(String message) {
        return new EtcdException(Kind.MALFORMED, -1, message, null);
    }

    static EtcdException unreachable(String message, Throwable cause) {
        return new EtcdException(Kind.UNREACHABLE, -1, message, cause);
    }

    public Kind kind() {
        return kind;
    }

    /** etcd's gRPC code when it {@link Kind#ANSWERED}; -1 otherwise. */
    public int code() {
        return code;
    }

    /** Whether etcd said it holds no such lease: the lease expired or was revoked. */
    public boolean leaseNotFound() {
        return kind == Kind.ANSWERED && code == NOT_FOUND;
    }
}
