package dev.kvflux.serving.role;

import dev.kvflux.transfer.notify.NotifyAuth;
import dev.kvflux.serving.http.HttpJson;
import dev.kvflux.serving.http.HttpLimits;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.RegistrationAuth;
import io.netty.buffer.Unpooled;
import io.netty.handler.codec.http.HttpHeaderNames;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.netty.http.client.HttpClient;
import reactor.netty.resources.ConnectionProvider;

/**
 * Registers an instance with the proxy and keeps it registered: posts {@code {"role", "http", "notify"}}
 * (and {@code "incarnation"}, the instance's incarnation, when given) to the proxy's {@code /register} at once and then every {@code interval}, each signed afresh
 * ({@link RegistrationAuth}) when the instance has a notify secret. A failed or slow ping is logged and the
 * next one tried, for as long as the instance runs; the proxy drops the instance if pings stop arriving.
 * Its one pooled connection is closed when idle ({@link HttpLimits#pool}) and when the pinger is disposed.
 */
final class InstancePinger implements Disposable {
    private static final Logger LOG = LoggerFactory.getLogger(InstancePinger.class);

    private final Disposable pings;
    private final ConnectionProvider pool;

    private InstancePinger(Disposable pings, ConnectionProvider pool) {
        this.pings = pings;
        this.pool = pool;
    }

    /** Pings {@code proxyBaseUrl} as {@code self} every {@code interval}, signed with {@code auth} unless {@code null}. */
    static InstancePinger start(String proxyBaseUrl, Instance self, Duration interval, NotifyAuth auth) {
        return start(proxyBaseUrl, self, interval, auth, 0);
    }

    /** As {@link #start(String, Instance, Duration, NotifyAuth)}, naming the instance's incarnation (0: none). */
    static InstancePinger start(String proxyBaseUrl, Instance self, Duration interval, NotifyAuth auth,
            long incarnation) {
        com.fasterxml.jackson.databind.node.ObjectNode json = HttpJson.MAPPER.createObjectNode()
                .put("role", self.role().wireName())
                .put("http", Instance.hostPort(self.httpAddress()))
                .put("notify", Instance.hostPort(self.notifyAddress()));
        self.putRanks(json);
        if (incarnation != 0) {
            json.put("incarnation", incarnation);
        }
        byte[] body = HttpJson.write(json).getBytes(StandardCharsets.UTF_8);
        RegistrationAuth signer = auth == null ? null : RegistrationAuth.of(auth);
        ConnectionProvider pool = HttpLimits.pool("kvflux-pinger").maxConnections(1).pendingAcquireMaxCount(1).build();
        HttpClient client = HttpClient.create(pool)
                .headers(h -> h.set(HttpHeaderNames.CONTENT_TYPE, "application/json"))
                .responseTimeout(interval);
        boolean[] warned = {false};
        Disposable pings = schedule(interval, Schedulers.parallel(), () -> client
                        .headers(h -> {
                            if (signer != null) {
                                signer.sign(h, body);
                            }
                        })
                        .post().uri(proxyBaseUrl + "/register")
                        .send(Mono.fromSupplier(() -> Unpooled.wrappedBuffer(body)))
                        .responseSingle((response, content) -> content.asString().defaultIfEmpty("")
                                .map(text -> response.status().code() == 200 ? "" : response.status() + " " + text)))
                .subscribe(problem -> {
                    if (!problem.isEmpty() && !warned[0]) {
                        LOG.warn("cannot register with the proxy at {}: {}; retrying every {} ms", proxyBaseUrl,
                                problem, interval.toMillis());
                    }
                    warned[0] = !problem.isEmpty();
                });
        return new InstancePinger(pings, pool);
    }

    /**
     * One {@code ping} now and one every {@code interval} on {@code on}'s clock, each emitting its problem
     * ({@code ""} when none). A ping still running at the next tick is given up (its timeout is the
     * interval, which also bounds a connection attempt the network never answers) and ticks that come while
     * one runs are dropped, so slow pings can never end the schedule.
     */
    static Flux<String> schedule(Duration interval, Scheduler on, Supplier<Mono<String>> ping) {
        return Flux.interval(Duration.ZERO, interval, on)
                .onBackpressureDrop()
                .concatMap(tick -> Mono.defer(ping).timeout(interval, on)
                        .onErrorResume(error -> Mono.just(error.toString())), 1);
    }

    @Override
    public void dispose() {
        pings.dispose();
        pool.dispose();
    }

    @Override
    public boolean isDisposed() {
        return pings.isDisposed();
    }
}
