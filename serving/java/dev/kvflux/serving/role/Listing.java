package dev.kvflux.serving.role;

import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.etcd.EtcdDiscovery;
import dev.kvflux.transfer.notify.NotifyAuth;
import java.time.Duration;
import java.util.Objects;
import reactor.core.Disposable;
import reactor.core.Disposables;

/**
 * How one instance stays listed where proxies look for it: pings to a proxy's discovery port
 * ({@link InstancePinger}) or a leased record in etcd ({@link EtcdRegistration}), signed with the cluster secret when
 * there is one. One at a time: starting one stops the other. Thread-safe.
 */
final class Listing implements Disposable {
    private final NotifyAuth auth;
    private Disposable current = Disposables.disposed();

    /** {@code auth}: the cluster secret registrations are signed with; {@code null} for none. */
    Listing(NotifyAuth auth) {
        this.auth = auth;
    }

    /** Registers {@code self} with the proxy at {@code proxyBaseUrl} now and every {@code interval}. */
    synchronized void pingProxy(String proxyBaseUrl, Instance self, Duration interval, long incarnation) {
        current.dispose();
        current = InstancePinger.start(proxyBaseUrl, self, interval, auth, incarnation);
    }

    /** Keeps {@code self}'s record in {@code discovery}'s cluster under a lease kept alive every third of its TTL. */
    synchronized void registerIn(EtcdDiscovery discovery, Instance self, long incarnation) {
        Objects.requireNonNull(discovery, "discovery");
        current.dispose();
        current = EtcdRegistration.start(discovery, self, incarnation, auth);
    }

    /**
     * Registers {@code registration} with a vLLM-style proxy's ZeroMQ discovery port at {@code proxy} ({@code host:port})
     * every {@code interval}, as vLLM's connector does (unsigned: nothing there can be authenticated).
     */
    synchronized void registerWithVllm(String proxy, dev.kvflux.serving.vllm.VllmRegistration registration,
            Duration interval) {
        current.dispose();
        dev.kvflux.serving.vllm.VllmPinger pinger = dev.kvflux.serving.vllm.VllmPinger.start(proxy, registration,
                interval);
        current = Disposables.composite(pinger::close);
    }

    /**
     * {@code self}'s registration as vLLM's connector sends it: its notify address in the ZeroMQ address (as both its
     * handshake and notify ports: kvflux's roles have no handshake port of their own), one data-parallel rank,
     * {@code tp} tensor-parallel ranks (listening on the notify port plus their rank, as vLLM's do) and {@code mode}.
     */
    static dev.kvflux.serving.vllm.VllmRegistration vllmRegistration(Instance self, int tp,
            dev.kvflux.transfer.KvMode mode) {
        String host = self.notifyAddress().getHostString();
        int notify = self.notifyAddress().getPort();
        return new dev.kvflux.serving.vllm.VllmRegistration(self.role(), self.httpAddress(), "host:" + host
                + ",handshake:" + notify + ",notify:" + notify, host, notify, notify, 1, tp, mode);
    }

    /** Stops pinging, or revokes the record's lease so that proxies drop the instance at once. */
    @Override
    public synchronized void dispose() {
        current.dispose();
    }

    @Override
    public synchronized boolean isDisposed() {
        return current.isDisposed();
    }
}
