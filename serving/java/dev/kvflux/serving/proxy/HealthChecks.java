package dev.kvflux.serving.proxy;

import com.fasterxml.jackson.databind.JsonNode;
import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.Role;
import dev.kvflux.serving.http.HttpJson;
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
 * connection, no answer in time) as a failure, reported to {@link InstanceHealth}. A decode ejected on its work path is
 * sent a canary request instead ({@link Canaries}), once its cooldown has passed: its {@code /health} says nothing of
 * its work. A round still running at the next tick makes that tick be skipped, so slow instances never pile checks up.
 *
 * <p>An instance's {@code /health} says which instance answers at its address (kvflux's roles give their
 * {@code incarnation} and {@code notify} address): a registration whose instance is not the one answering at its HTTP
 * address (another incarnation, or another notify address) only claims that address, and is dropped
 * ({@link InstanceRegistry#impostor}), so the instance that holds the address can register it again.
 */
final class HealthChecks {
    private HealthChecks() {
    }

    static Disposable start(InstanceRegistry registry, InstanceHealth health, Canaries canaries, Duration interval,
            Duration timeout, HttpClient client) {
        return Flux.interval(interval, interval, Schedulers.parallel())
                .onBackpressureDrop()
                .concatMap(tick -> round(registry, health, canaries, client, timeout), 1)
                .subscribe();
    }

    private static Mono<Void> round(InstanceRegistry registry, InstanceHealth health, Canaries canaries,
            HttpClient client, Duration timeout) {
        List<Instance> instances = new ArrayList<>();
        for (Role role : Role.values()) {
            instances.addAll(registry.live(role));
        }
        return Flux.fromIterable(instances)
                .doOnNext(instance -> {
                    if (instance.role() == Role.DECODE && health.needsCanary(instance)) {
                        canaries.suspect(instance);
                    }
                })
                .flatMap(instance -> client.get().uri(instance.baseUrl() + "/health")
                        .responseSingle((response, body) -> response.status().code() != 200 ? Mono.just(false)
                                : body.asString().defaultIfEmpty("").map(text -> {
                                    String other = otherInstance(registry, instance, text);
                                    if (other != null) {
                                        registry.impostor(instance, other);
                                    }
                                    return true;
                                }))
                        .timeout(timeout)
                        .onErrorReturn(false)
                        .defaultIfEmpty(false)
                        .doOnNext(ok -> health.probed(instance, ok)))
                .then();
    }

    /**
     * Which other instance answers at {@code instance}'s HTTP address, from its {@code /health} body, or null when it
     * is the one registered (or the answer does not say).
     */
    static String otherInstance(InstanceRegistry registry, Instance instance, String healthBody) {
        JsonNode answer;
        try {
            answer = HttpJson.MAPPER.readTree(healthBody);
        } catch (java.io.IOException | RuntimeException e) {
            return null;
        }
        if (answer == null) {
            return null;
        }
        JsonNode incarnation = answer.path("incarnation");
        JsonNode notify = answer.path("notify");
        long registered = registry.incarnation(instance);
        if (incarnation.isIntegralNumber() && registered != 0 && incarnation.asLong() != registered) {
            return "incarnation " + incarnation.asLong() + " answers there, not " + registered;
        }
        if (notify.isTextual() && !notify.asText().equals(Instance.hostPort(instance.notifyAddress()))) {
            return "the instance answering there has notify address " + notify.asText() + ", not "
                    + Instance.hostPort(instance.notifyAddress());
        }
        return null;
    }
}
