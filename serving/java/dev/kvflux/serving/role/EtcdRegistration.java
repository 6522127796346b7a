package dev.kvflux.serving.role;

import dev.kvflux.serving.api.Instance;
import dev.kvflux.serving.api.MemberRecord;
import dev.kvflux.serving.api.RegistrationAuth;
import dev.kvflux.serving.etcd.EtcdClient;
import dev.kvflux.serving.etcd.EtcdDiscovery;
import dev.kvflux.serving.etcd.EtcdException;
import dev.kvflux.transfer.notify.LogText;
import dev.kvflux.transfer.notify.NotifyAuth;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * Keeps an instance's membership record in etcd ({@link MemberRecord}): grants a lease of the discovery's TTL, puts
 * the record with it (signed with the notify secret when there is one), and keeps the lease alive every third of the
 * TTL, as {@link InstancePinger}'s schedule runs pings. When etcd says the lease is gone (it expired while etcd or
 * this process could not keep it, e.g. a paused process), a new lease is granted and the record put again. While etcd
 * cannot be reached each step is logged once and tried again at the next tick; the lease may still be alive when etcd
 * is back. Disposing it revokes the lease, so the proxies drop the instance at once; it waits up to a second for
 * that, and a slower revoke goes on after it returns.
 */
final class EtcdRegistration implements Disposable {
    private static final Logger LOG = LoggerFactory.getLogger(EtcdRegistration.class);
    /** How long closing waits for etcd to revoke the lease. */
    private static final Duration REVOKE_WAIT = Duration.ofSeconds(1);

    private final EtcdClient etcd;
    private final EtcdDiscovery discovery;
    private final MemberRecord record;
    private final RegistrationAuth signer;
    /** The lease the record is held with, 0 while there is none. */
    private final AtomicLong lease = new AtomicLong();
    private final AtomicBoolean failing = new AtomicBoolean();
    private final AtomicLong registrations = new AtomicLong();
    private Disposable ticks;
    /** Set by the first {@link #dispose}: a second must not close the client under the first one's revoke. */
    private final AtomicBoolean disposed = new AtomicBoolean();

    private EtcdRegistration(EtcdDiscovery discovery, Instance self, long incarnation, NotifyAuth auth) {
        this.discovery = discovery;
        // each endpoint gets half a tick, so that a down one leaves time for the next within the tick
        Duration half = discovery.keepAliveEvery().dividedBy(2);
        this.etcd = EtcdClient.of(discovery.endpoints(), half.compareTo(EtcdClient.DEFAULT_REQUEST_TIMEOUT) < 0 ? half
                : EtcdClient.DEFAULT_REQUEST_TIMEOUT);
        this.record = new MemberRecord(discovery.cluster(), self, incarnation, 0);
        this.signer = auth == null ? null : RegistrationAuth.of(auth);
    }

    /** Registers {@code self}, of incarnation {@code incarnation}, in etcd now and keeps it registered. */
    static EtcdRegistration start(EtcdDiscovery discovery, Instance self, long incarnation, NotifyAuth auth) {
        EtcdRegistration registration = new EtcdRegistration(discovery, self, incarnation, auth);
        Duration every = discovery.keepAliveEvery();
        registration.ticks = InstancePinger.schedule(every, Schedulers.parallel(),
                        () -> registration.step().onErrorResume(e -> Mono.just(describe(e))))
                .subscribe(registration::report);
        return registration;
    }

    /** The record's key. */
    String key() {
        return record.key();
    }

    /** The lease the record is held with now; 0 while there is none. */
    long lease() {
        return lease.get();
    }

    /** How many times the record has been put: 1 after the first registration, one more per lost lease. */
    long registrations() {
        return registrations.get();
    }

    /** One tick: register when there is no lease, else keep it alive, registering again if it is gone. */
    private Mono<String> step() {
        long held = lease.get();
        if (held == 0) {
            return register();
        }
        return etcd.keepAlive(held).flatMap(ttl -> {
            if (ttl > 0) {
                return Mono.just("");
            }
            LOG.warn("etcd no longer holds lease {} of {} (it expired: etcd or this process could not keep it alive"
                    + " for {} s); registering again", Long.toHexString(held), record.key(),
                    discovery.leaseTtl().toSeconds());
            lease.compareAndSet(held, 0);
            return register();
        });
    }

    private Mono<String> register() {
        return etcd.grant(discovery.leaseTtl()).flatMap(id -> {
            MemberRecord leased = record.withLease(id);
            return etcd.put(leased.key(), leased.encode(signer), id).map(revision -> {
                lease.set(id);
                long n = registrations.incrementAndGet();
                LOG.info("{} in etcd ({}) as {}, lease {} of {} s kept alive every {} ms{}",
                        n == 1 ? "registered" : "registered again", etcd.endpointsText(), leased.key(),
                        Long.toHexString(id), discovery.leaseTtl().toSeconds(), discovery.keepAliveEvery().toMillis(),
                        signer == null ? " (unsigned)" : " (signed)");
                return "";
            }).onErrorResume(e -> etcd.revoke(id).onErrorResume(x -> Mono.empty()).then(Mono.error(e)));
        });
    }

    /** Logs a step's problem once while it lasts, and the recovery. */
    private void report(String problem) {
        if (problem.isEmpty()) {
            if (failing.compareAndSet(true, false)) {
                LOG.info("etcd ({}) answers again; {} is registered", etcd.endpointsText(), record.key());
            }
            return;
        }
        if (failing.compareAndSet(false, true)) {
            LOG.warn("cannot keep {} registered in etcd: {}; retrying every {} ms", record.key(),
                    LogText.escape(problem), discovery.keepAliveEvery().toMillis());
        }
    }

    @Override
    public void dispose() {
        if (!disposed.compareAndSet(false, true)) {
            return;
        }
        ticks.dispose();
        long held = lease.getAndSet(0);
        if (held == 0) {
            etcd.close();
            return;
        }
        // closing waits a while for the revoke but never cancels it: a revoke cut off by a slow etcd would leave the
        // instance listed for the whole lease. The client closes once the revoke has ended, whenever that is.
        CompletableFuture<Void> revoked = etcd.revoke(held).doFinally(signal -> etcd.close()).toFuture();
        try {
            revoked.get(REVOKE_WAIT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            LOG.info("revoking lease {} of {} takes over {} ms; it goes on after close", Long.toHexString(held),
                    record.key(), REVOKE_WAIT.toMillis());
        } catch (ExecutionException e) {
            LOG.warn("could not revoke lease {} of {} on close ({}); etcd drops it within {} s",
                    Long.toHexString(held), record.key(), LogText.escape(String.valueOf(e.getCause().getMessage())),
                    discovery.leaseTtl().toSeconds());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public boolean isDisposed() {
        return ticks.isDisposed();
    }

    /** Why a step failed, for its log line. */
    static String describe(Throwable e) {
        return e instanceof EtcdException ? e.getMessage() : e.toString();
    }
}
