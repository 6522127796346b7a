package dev.kvflux.serving.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.RegistrationAuth;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicBoolean;
import org.reactivestreams.Publisher;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.publisher.Mono;
import reactor.netty.http.client.HttpClient;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;

/**
 * The proxy's discovery routes: {@code POST /register} (an instance's signed ping) and {@code GET /health} (the live
 * instances and where they come from); see {@link ProxyServer} for what each answers.
 */
record DiscoveryRoutes(InstanceRegistry registry, RegistrationAuth registrationAuth,
                       AtomicBoolean warnedRefusedRegistration, AtomicBoolean warnedSignedToUnsigned,
                       InstanceHealth health, EtcdMembers members, HttpClient prober) {
    /** The proxy's own logger: its lines read as the proxy's, whichever file holds the code. */
    private static final Logger LOG = LoggerFactory.getLogger(ProxyServer.class);

    /** The largest registration body read: a registration is three short strings. */
    static final int MAX_REGISTRATION_BYTES = 4096;

    Publisher<Void> register(HttpServerRequest request, HttpServerResponse response) {
        return HttpJson.withBody(request, response, MAX_REGISTRATION_BYTES, "a registration is {\"role\", \"http\","
                + " \"notify\"}, with \"notify_ranks\" for an instance of several ranks, and nothing more", body -> {
            long signedAt = Long.MIN_VALUE;
            if (registrationAuth != null) {
                try {
                    signedAt = registrationAuth.verify(request.requestHeaders(), body.getBytes(StandardCharsets.UTF_8));
                } catch (RegistrationAuth.RefusedException e) {
                    return Mono.from(refuseRegistration(response, HttpResponseStatus.UNAUTHORIZED,
                            "unauthenticated_registration", e.getMessage(), request));
                }
            } else if (request.requestHeaders().contains(RegistrationAuth.SIGNATURE_HEADER)
                    && warnedSignedToUnsigned.compareAndSet(false, true)) {
                LOG.warn("an instance at {} registers signed: it has a notify secret and this proxy has none, so it"
                        + " refuses every request this proxy sends it (its clients get 401 proxy_has_no_secret); start"
                        + " the proxy with the same secret (KVFLUX_NOTIFY_SECRET or notify.secret)",
                        request.remoteAddress());
            }
            Instance instance;
            long incarnation;
            try {
                ObjectNode json = HttpJson.object(body);
                java.net.InetSocketAddress notify = Instance.address(text(json, "notify"));
                instance = new Instance(Role.of(text(json, "role")), Instance.address(text(json, "http")), notify,
                        Instance.ranks(json, "notify_ranks", notify));
                incarnation = incarnation(json);
            } catch (IllegalArgumentException e) {
                return Mono.from(HttpJson.error(response, HttpResponseStatus.BAD_REQUEST,
                        "invalid_request_error", "bad_registration", e.getMessage()));
            }
            InstanceRegistry.Outcome outcome = registry.ping(instance, signedAt, incarnation);
            if (outcome == InstanceRegistry.Outcome.CLAIMED) {
                // the address's holder may be a squatter: the instance answering at the address decides
                long registering = incarnation;
                long signed = signedAt;
                return vouched(instance, registering).map(vouched -> vouched ? registry.ping(instance, signed,
                        registering) : InstanceRegistry.Outcome.CLAIMED)
                        .flatMap(after -> Mono.from(answer(after, instance, request, response)));
            }
            return Mono.from(answer(outcome, instance, request, response));
        });
    }

    private Publisher<Void> answer(InstanceRegistry.Outcome outcome, Instance instance, HttpServerRequest request,
            HttpServerResponse response) {
        return switch (outcome) {
            case REGISTERED, REFRESHED -> HttpJson.reply(response, HttpResponseStatus.OK,
                    HttpJson.MAPPER.createObjectNode().put("status", "registered"));
            case FULL -> HttpJson.error(response, HttpResponseStatus.SERVICE_UNAVAILABLE, "overloaded",
                    "instance_cap", registry.maxPerRole() + " " + instance.role().wireName() + " instances are"
                            + " registered, the most this proxy holds; a place frees when one stops pinging");
            case REPLAYED -> refuseRegistration(response, HttpResponseStatus.UNAUTHORIZED,
                    "replayed_registration", "the registration is no newer than the last one accepted for this"
                            + " instance: a replay", request);
            case CLAIMED -> refuseRegistration(response, HttpResponseStatus.CONFLICT, "address_claimed",
                    "another live instance holds this registration's HTTP or notify address, and the instance"
                            + " answering at its HTTP address is not this one; an instance registers the addresses it"
                            + " listens on, both of them", request);
        };
    }

    /**
     * Whether the instance answering at {@code instance}'s HTTP address is {@code instance} itself, by what its
     * {@code /health} says (its incarnation and notify address): then every other registration holding one of its
     * addresses only claims it, and is dropped. False when it says otherwise, says nothing of itself, or does not
     * answer within {@value #VOUCH_MILLIS} ms.
     */
    private Mono<Boolean> vouched(Instance instance, long incarnation) {
        if (incarnation == 0) {
            return Mono.just(false);
        }
        return prober.get().uri(instance.baseUrl() + "/health")
                .responseSingle((status, body) -> status.status().code() != 200 ? Mono.just(false)
                        : body.asString().defaultIfEmpty("").map(text -> vouches(text, instance, incarnation)))
                .timeout(java.time.Duration.ofMillis(VOUCH_MILLIS))
                .onErrorReturn(false)
                .defaultIfEmpty(false)
                .map(vouched -> {
                    if (vouched) {
                        for (Instance holder : registry.holders(instance)) {
                            registry.impostor(holder, "instance incarnation " + incarnation + " answers at "
                                    + Instance.hostPort(instance.httpAddress()) + " and registered it");
                        }
                    }
                    return vouched;
                });
    }

    /** How long the proxy waits for an address's own answer when two registrations claim it. */
    static final long VOUCH_MILLIS = 1_000;

    private static boolean vouches(String healthBody, Instance instance, long incarnation) {
        try {
            JsonNode answer = HttpJson.MAPPER.readTree(healthBody);
            return answer != null && answer.path("incarnation").asLong(0) == incarnation
                    && Instance.hostPort(instance.notifyAddress()).equals(answer.path("notify").asText(""));
        } catch (java.io.IOException | RuntimeException e) {
            return false;
        }
    }

    /** Refuses a registration; the first refusal is logged as a warning, later ones at debug level. */
    private Publisher<Void> refuseRegistration(HttpServerResponse response, HttpResponseStatus status, String code,
            String message, HttpServerRequest request) {
        if (warnedRefusedRegistration.compareAndSet(false, true)) {
            LOG.warn("refused a registration from {}: {}. Later refusals are logged at debug level",
                    request.remoteAddress(), message);
        } else {
            LOG.debug("refused a registration from {}: {}", request.remoteAddress(), message);
        }
        return HttpJson.error(response, status, "authentication_error", code, message);
    }

    Publisher<Void> health(HttpServerRequest request, HttpServerResponse response) {
        ObjectNode body = HttpJson.MAPPER.createObjectNode().put("status", "ok");
        body.set("membership", members != null ? members.describe()
                : HttpJson.MAPPER.createObjectNode().put("source", "registrations"));
        for (Role role : Role.values()) {
            ArrayNode list = body.putArray(role.wireName());
            for (Instance instance : registry.live(role)) {
                list.addObject().put("http", Instance.hostPort(instance.httpAddress()))
                        .put("notify", Instance.hostPort(instance.notifyAddress()))
                        .put("ejected", !health.usable(instance));
                instance.putRanks((ObjectNode) list.get(list.size() - 1));
            }
        }
        return HttpJson.reply(response, HttpResponseStatus.OK, body);
    }

    /** The registration's {@code incarnation}: a positive integer, or 0 when it names none. */
    private static long incarnation(JsonNode json) {
        JsonNode value = json.get("incarnation");
        if (value == null) {
            return 0;
        }
        if (!value.canConvertToLong() || !value.isIntegralNumber() || value.asLong() <= 0) {
            throw new IllegalArgumentException("registration's \"incarnation\" must be a positive integer");
        }
        return value.asLong();
    }

    private static String text(JsonNode json, String key) {
        JsonNode value = json.get(key);
        if (value == null || !value.isTextual()) {
            throw new IllegalArgumentException("registration needs \"" + key + "\" as a string, e.g. "
                    + "{\"role\": \"decode\", \"http\": \"127.0.0.1:8200\", \"notify\": \"127.0.0.1:8201\"}");
        }
        return value.asText();
    }
}
