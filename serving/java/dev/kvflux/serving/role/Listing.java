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
