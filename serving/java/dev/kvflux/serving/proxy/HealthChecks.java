package dev.kvflux.serving.proxy;

import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.netty.http.client.HttpClient;

/**
 * The proxy's health checks: every interval, {@code GET /health} on every registered instance at once, each bounded
 * by the client's response timeout; a 200 counts as healthy, anything else (another status, a refused or reset
 * connection, no answer in time) as a failure, reported to {@link InstanceHealth}. A round still running at the next
 * tick makes that tick be skipped, so slow instances never pile checks up.
 */
final class HealthChecks {
    private HealthChecks() {
    }

    static Disposable start(InstanceRegistry registry, InstanceHealth health, Duration interval, Duration timeout,
            HttpClient client) {
        return Flux.interval(interval, interval, Schedulers.parallel())
                .onBackpressureDrop()
                .concatMap(tick -> round(registry, health, client, timeout), 1)
                .subscribe();
    }

    private static Mono<Void> round(InstanceRegistry registry, InstanceHealth health, HttpClient client,
            Duration timeout) {
        List<Instance> instances = new ArrayList<>();
        for (Role role : Role.values()) {
            instances.addAll(registry.live(role));
        }
        return Flux.fromIterable(instances)
                .flatMap(instance -> client.get().uri(instance.baseUrl() + "/health")
                        .responseSingle((response, body) -> Mono.just(response.status().code() == 200))
                        .timeout(timeout)
                        .onErrorReturn(false)
                        .defaultIfEmpty(false)
                        .doOnNext(ok -> health.probed(instance, ok)))
                .then();
    }
}
