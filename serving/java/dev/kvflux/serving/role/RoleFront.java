package dev.kvflux.serving.role;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.RequestGate;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.BodyBudget;
import dev.kvflux.serving.http.ConnectionGuard;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.http.HttpLimits;
import dev.kvflux.serving.metrics.RoleMetrics;
import dev.kvflux.transfer.notify.NotifyAuth;
import io.netty.handler.codec.http.HttpResponseStatus;
import java.net.InetSocketAddress;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiFunction;
import java.util.function.Function;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;
import reactor.netty.DisposableServer;
import reactor.netty.http.server.HttpServerRequest;
import reactor.netty.http.server.HttpServerResponse;

/**
 * A role's HTTP front door: its server, bounded as every kvflux server is ({@link HttpLimits}), whose connections are
 * shared between client addresses with those that carried a request the proxy signed trusted
 * ({@link ConnectionGuard}); the gate of its completions ({@link RequestGate}), which checks a request's signature,
 * destination (this instance's own address) and replay from its headers before its body is read; and its
 * {@code GET /health}, which says which instance answers at this address (role, incarnation, notify address), so a
 * proxy can tell the instance that holds an address from one that only claims it.
 *
 * <p>Meters, tagged with the role: {@code kvflux.http.requests.unauthenticated} (tag {@code reason}: the refusal's
 * code), {@code kvflux.http.connections.open}, {@code kvflux.http.connections.untrusted} and
 * {@code kvflux.http.connections.closed} (tag {@code reason}: refused, evicted, header_timeout, write_stall), and
 * the process's {@code kvflux.http.body.budget.bytes} / {@code .held.bytes} / {@code .refusals}.
 */
final class RoleFront {
    private static final String[] REFUSALS = {"unsigned_request", "malformed_signature", "stale_request",
        "wrong_destination", "bad_signature", "replayed_request", "replay_window_full", "instance_starting"};

    private final ConnectionGuard guard;
    private final RequestGate gate;
    /** This instance's HTTP address as it registers ({@code host:port}), once its port is bound. */
    private final AtomicReference<String> self;
    private volatile ObjectNode identity = HttpJson.MAPPER.createObjectNode().put("status", "ok");

    private RoleFront(ConnectionGuard guard, RequestGate gate, AtomicReference<String> self) {
        this.guard = guard;
        this.gate = gate;
        this.self = self;
    }

    /** The front of a role whose requests are signed with {@code auth} (null: unsigned), its meters in {@code meters}. */
    static RoleFront of(NotifyAuth auth, RoleMetrics meters) {
        return of(auth, meters, address -> false);
    }

    /**
     * The front of a role whose requests are signed with {@code auth} (null: unsigned), its meters in {@code meters},
     * taking unsigned requests from the addresses {@code unsignedFrom} allows (vLLM's proxy).
     */
    static RoleFront of(NotifyAuth auth, RoleMetrics meters, java.util.function.Predicate<java.net.InetAddress>
            unsignedFrom) {
        for (String reason : REFUSALS) {
            refusals(meters, reason);
        }
        AtomicReference<String> self = new AtomicReference<>();
        RequestGate gate = RequestGate.of(auth, self::get, reason -> refusals(meters, reason).increment(),
                unsignedFrom);
        ConnectionGuard guard = HttpLimits.DEFAULT.guard(auth != null);
        meters.gauge("kvflux.http.connections.open", "Connections open to the role's HTTP port", guard,
                ConnectionGuard::open);
        meters.gauge("kvflux.http.connections.untrusted", "Connections to the role's HTTP port that have not carried a"
                + " request the proxy signed", guard, ConnectionGuard::untrusted);
        String closed = "Connections the role's HTTP port closed, by reason";
        meters.functionCounter("kvflux.http.connections.closed", closed, guard, ConnectionGuard::refused, "reason",
                "refused");
        meters.functionCounter("kvflux.http.connections.closed", closed, guard, ConnectionGuard::evicted, "reason",
                "evicted");
        meters.functionCounter("kvflux.http.connections.closed", closed, guard, ConnectionGuard::headerTimeouts,
                "reason", "header_timeout");
        meters.functionCounter("kvflux.http.connections.closed", closed, guard, ConnectionGuard::writeStalls,
                "reason", "write_stall");
        BodyBudget budget = BodyBudget.process();
        meters.gauge("kvflux.http.body.budget.bytes", "Request-body bytes the process may hold at once", budget,
                BodyBudget::capacity);
        meters.gauge("kvflux.http.body.held.bytes", "Request-body bytes the process holds now", budget,
                BodyBudget::reserved);
        meters.functionCounter("kvflux.http.body.refusals", "Requests refused with 503 because the body budget was"
                + " spent", budget, BodyBudget::refusals);
        return new RoleFront(guard, gate, self);
    }

    /**
     * Binds the role's HTTP server on {@code host:port}: {@code POST /v1/completions} to {@code completions},
     * {@code GET /health} and {@code GET /metrics} (Prometheus text of {@code meters}). From then on the gate knows
     * this instance's address.
     */
    DisposableServer bind(String host, int port,
            BiFunction<HttpServerRequest, HttpServerResponse, Publisher<Void>> completions, RoleMetrics meters) {
        DisposableServer server = HttpLimits.DEFAULT.serverOn(host, port, guard)
                .route(routes -> routes.post("/v1/completions", completions)
                        .post("/v1/chat/completions", completions)
                        .get("/health", (req, res) -> HttpJson.reply(res, HttpResponseStatus.OK, identity))
                        .get("/metrics", (req, res) -> meters.serve(res)))
                .bindNow();
        self.set(Instance.hostPort(InetSocketAddress.createUnresolved(host,
                ((InetSocketAddress) server.address()).getPort())));
        return server;
    }

    /** What {@code GET /health} says of this instance from now on: its role, incarnation and notify address. */
    void identify(Role role, long incarnation, InetSocketAddress notify) {
        identity = HttpJson.MAPPER.createObjectNode().put("status", "ok").put("role", role.wireName())
                .put("incarnation", incarnation).put("notify", Instance.hostPort(notify));
    }

    /**
     * The request's body through the gate ({@link RequestGate#withBody}): a request whose signature passes makes its
     * connection trusted.
     */
    Mono<Void> withBody(HttpServerRequest request, HttpServerResponse response,
            Function<RequestGate.Passed, Publisher<Void>> handler) {
        return gate.withBody(request, response, () -> request.withConnection(ConnectionGuard::trust), handler);
    }

    /** The gate, for its refusals. */
    RequestGate gate() {
        return gate;
    }

    private static io.micrometer.core.instrument.Counter refusals(RoleMetrics meters, String reason) {
        return meters.counter("kvflux.http.requests.unauthenticated",
                "Completion requests refused before their body was parsed: unsigned, forged, misdirected, replayed or"
                        + " stale", "reason", reason);
    }
}
