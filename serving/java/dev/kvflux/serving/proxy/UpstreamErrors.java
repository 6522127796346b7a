package dev.kvflux.serving.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.transfer.notify.LogText;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.timeout.ReadTimeoutException;
import java.time.Duration;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;
import reactor.netty.http.server.HttpServerResponse;

/**
 * How the instances behind the proxy fail a request, and what the client is answered for each: the proxy's
 * OpenAI-style errors, so that a client can tell its own mistake (4xx it can fix), a refusal it may retry (429, 503)
 * and an instance's failure (502, 504) apart.
 */
final class UpstreamErrors {
    private UpstreamErrors() {
    }

    /** Prefill could not be reached or answered with an error, so the request's KV will never come. */
    static final class PrefillFailedException extends RuntimeException {
        /** Prefill's HTTP status, or 0 when it gave none (unreachable, reset). */
        final int status;
        /** The start of prefill's answer, as text. */
        final String answer;

        PrefillFailedException(Instance prefill, int status, String answer) {
            super("prefill instance " + prefill.baseUrl() + (status == 503 ? " is overloaded: "
                    : status == 429 ? " refused this client's request: " : " failed: ")
                    + (status == 0 ? "" : status + " ") + LogText.escape(answer), null, false, false);
            this.status = status;
            this.answer = answer;
        }

        boolean overloaded() {
            return status == HttpResponseStatus.SERVICE_UNAVAILABLE.code();
        }
    }

    /** Decode sent nothing within the first-byte bound: it holds the request without answering. */
    static final class FirstByteTimeoutException extends RuntimeException {
        FirstByteTimeoutException(Instance decode, Duration within, boolean streamed) {
            super("decode instance " + decode.baseUrl() + " sent no answer within "
                    + dev.kvflux.bindings.DurationText.of(within) + " ("
                    + (streamed ? "the proxy's first-byte timeout" : "the first-byte timeout and the per-token time of"
                            + " this request's max_tokens") + "); check that it is alive and runs with a receive"
                    + " deadline", null, false, false);
        }
    }

    /** Decode's stream stopped while others moved, and the proxy ended it. */
    static final class DecodeStalledException extends RuntimeException {
        DecodeStalledException(String why) {
            super(why, null, false, false);
        }
    }

    /**
     * Fails with a {@link DecodeEjectedException} when {@code decode} is next ejected, if {@code claim} then takes the
     * request's answer (decode's own answer has not begun); otherwise never signals.
     */
    static Mono<Void> onEjection(InstanceHealth health, Instance decode, java.util.function.BooleanSupplier claim) {
        return health.nextEjection(decode).flatMap(why -> claim.getAsBoolean()
                ? Mono.<Void>error(new DecodeEjectedException(decode, why)) : Mono.<Void>never());
    }

    /** The decode a request waited on was ejected before its answer began. */
    static final class DecodeEjectedException extends RuntimeException {
        DecodeEjectedException(Instance decode, String why) {
            super("decode instance " + decode.baseUrl() + " was ejected before it answered (" + why
                    + "); retry: the proxy no longer sends it requests");
        }
    }

    /** Too many requests already wait for a connection to an instance; the request was not sent. */
    static final class OverloadedException extends RuntimeException {
        final Role role;

        OverloadedException(Role role, Instance instance, int connections, int pending) {
            super("the proxy is overloaded: " + connections + " requests are open to " + role.wireName()
                    + " instance " + instance.baseUrl() + " and " + pending + " more wait for a connection to it;"
                    + " retry later, or lower the client's concurrency", null, false, false);
            this.role = role;
        }
    }

    /** The meter reason a failure counts as ({@code kvflux.proxy.upstream.errors}): one of a fixed few. */
    static String reason(Throwable error) {
        return switch (error) {
            case OverloadedException overloaded -> "pool_full";
            case PrefillFailedException failed -> failed.overloaded() ? "overloaded"
                    : failed.status == 429 ? "client_share" : "failed";
            case ReadTimeoutException timeout -> "timeout";
            case FirstByteTimeoutException timeout -> "timeout";
            case DecodeStalledException stalled -> "stalled";
            case DecodeEjectedException ejected -> "ejected";
            default -> "unreachable";
        };
    }

    /** The instance a failure counts against in the meters. */
    static Role upstream(Throwable error) {
        return switch (error) {
            case OverloadedException overloaded -> overloaded.role;
            case PrefillFailedException failed -> Role.PREFILL;
            default -> Role.DECODE;
        };
    }

    /**
     * The client's answer for {@code error}, before any of decode's answer was sent; {@code signs} whether the proxy
     * signs its requests (an instance's 401 then is not the proxy's own misconfiguration).
     */
    static Publisher<Void> answer(HttpServerResponse response, Throwable error, Instance decode, boolean signs) {
        if (error instanceof OverloadedException) {
            return HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "overloaded", "proxy_overloaded",
                    error.getMessage());
        }
        if (error instanceof PrefillFailedException failed) {
            if (failed.status == 401 && !signs) {
                return unsignedProxy(response, "prefill");
            }
            if (failed.status == HttpResponseStatus.TOO_MANY_REQUESTS.code()) {
                return HttpJson.error(response, HttpResponseStatus.TOO_MANY_REQUESTS, "rate_limit_error",
                        code(failed.answer, "client_over_share"), message(failed.answer, failed.getMessage()));
            }
            if (failed.overloaded()) {
                return HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "overloaded",
                        "prefill_overloaded", error.getMessage() + "; retry later, or lower the client's concurrency");
            }
            return HttpJson.error(response, HttpResponseStatus.BAD_GATEWAY, "upstream_error", "prefill_failed",
                    error.getMessage());
        }
        if (error instanceof FirstByteTimeoutException) {
            return HttpJson.error(response, HttpResponseStatus.GATEWAY_TIMEOUT, "upstream_error", "upstream_timeout",
                    error.getMessage());
        }
        if (error instanceof DecodeStalledException) {
            return HttpJson.error(response, HttpResponseStatus.BAD_GATEWAY, "upstream_error", "decode_stalled",
                    error.getMessage());
        }
        if (error instanceof ReadTimeoutException) {
            return HttpJson.error(response, HttpResponseStatus.GATEWAY_TIMEOUT, "upstream_error", "upstream_timeout",
                    "decode instance " + decode.baseUrl() + " sent nothing within the proxy's upstream timeout; check"
                            + " that it is alive and runs with a receive deadline");
        }
        if (error instanceof DecodeEjectedException) {
            return HttpJson.error(response, HttpResponseStatus.BAD_GATEWAY, "upstream_error", "decode_unreachable",
                    error.getMessage());
        }
        return HttpJson.error(response, HttpResponseStatus.BAD_GATEWAY, "upstream_error", "decode_unreachable",
                "decode instance " + decode.baseUrl() + " did not answer: " + (error.getMessage() != null
                        ? error.getMessage() : error.getClass().getSimpleName()));
    }

    /**
     * 401 from an instance to a proxy that has no notify secret: the client is told that the proxy is at fault, not
     * its credentials.
     */
    static Publisher<Void> unsignedProxy(HttpServerResponse response, String role) {
        return HttpJson.error(response, HttpResponseStatus.UNAUTHORIZED, "server_error", "proxy_has_no_secret",
                "the " + role + " instance behind this proxy serves only requests signed with the cluster's notify"
                        + " secret, and this proxy has none: this is the proxy's configuration, not your credentials."
                        + " Start the proxy with the cluster's secret (KVFLUX_NOTIFY_SECRET or notify.secret)");
    }

    /** The error code in an instance's OpenAI-style answer, or {@code otherwise}. */
    private static String code(String answer, String otherwise) {
        JsonNode code = parsed(answer).path("error").path("code");
        return code.isTextual() ? code.asText() : otherwise;
    }

    /** The error message in an instance's OpenAI-style answer, or {@code otherwise}. */
    private static String message(String answer, String otherwise) {
        JsonNode message = parsed(answer).path("error").path("message");
        return message.isTextual() ? message.asText() : otherwise;
    }

    private static JsonNode parsed(String answer) {
        try {
            return HttpJson.MAPPER.readTree(answer);
        } catch (java.io.IOException | RuntimeException e) {
            return HttpJson.MAPPER.missingNode();
        }
    }
}
