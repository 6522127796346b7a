package dev.kvflux.serving.etcd;

import dev.kvflux.transfer.notify.LogText;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * Where a cluster's membership lives in etcd: the endpoints ({@code etcd://HOST:PORT[,HOST:PORT...]}, tried in turn
 * when one is down), the cluster's name (its records are under {@code /kvflux/<cluster>/instances/}) and the TTL of
 * the lease each instance holds its record with. Immutable; each wither checks its value.
 *
 * @param endpoints etcd's client addresses, 1 to {@value #MAX_ENDPOINTS}, unresolved
 * @param cluster the cluster's name: 1 to 64 letters, digits, dots, dashes or underscores
 * @param leaseTtl how long an instance's record outlives its last keep-alive, in whole seconds
 */
public record EtcdDiscovery(List<InetSocketAddress> endpoints, String cluster, Duration leaseTtl) {
    /** The cluster's name unless one is given. */
    public static final String DEFAULT_CLUSTER = "default";
    /** The instances' lease TTL unless one is given: they keep it alive every third of it. */
    public static final Duration DEFAULT_LEASE_TTL = Duration.ofSeconds(10);
    /** The most endpoints one URL may name. */
    public static final int MAX_ENDPOINTS = 16;
    /** The longest lease TTL allowed: an instance that dies stays listed this long. */
    public static final Duration MAX_LEASE_TTL = Duration.ofHours(1);

    private static final String SCHEME = "etcd://";
    private static final Pattern HOST = Pattern.compile("[A-Za-z0-9.-]{1,253}|\\[[0-9A-Fa-f:.]{2,45}]");
    private static final Pattern CLUSTER = Pattern.compile("[A-Za-z0-9._-]{1,64}");

    /** @throws IllegalArgumentException naming what is wrong */
    public EtcdDiscovery {
        endpoints = List.copyOf(endpoints);
        if (endpoints.isEmpty() || endpoints.size() > MAX_ENDPOINTS) {
            throw new IllegalArgumentException("etcd discovery needs 1 to " + MAX_ENDPOINTS + " endpoints, got "
                    + endpoints.size());
        }
        checkCluster(cluster);
        checkLeaseTtl(leaseTtl);
    }

    /**
     * The endpoints of {@code url}, {@code etcd://HOST:PORT[,HOST:PORT...]}, with the default cluster and lease TTL.
     *
     * @throws IllegalArgumentException saying what an etcd URL looks like and what is wrong with this one
     */
    public static EtcdDiscovery parse(String url) {
        Objects.requireNonNull(url, "url");
        String shown = LogText.escape(url);
        if (!url.startsWith(SCHEME) || url.length() == SCHEME.length()) {
            throw new IllegalArgumentException("'" + shown + "' is not an etcd URL; use etcd://HOST:PORT[,HOST:PORT...],"
                    + " e.g. etcd://127.0.0.1:2379");
        }
        String[] parts = url.substring(SCHEME.length()).split(",", -1);
        if (parts.length > MAX_ENDPOINTS) {
            throw new IllegalArgumentException("'" + shown + "' names " + parts.length + " etcd endpoints; at most "
                    + MAX_ENDPOINTS + " are taken");
        }
        List<InetSocketAddress> endpoints = new ArrayList<>();
        for (String part : parts) {
            endpoints.add(endpoint(part, shown));
        }
        return new EtcdDiscovery(endpoints, DEFAULT_CLUSTER, DEFAULT_LEASE_TTL);
    }

    private static InetSocketAddress endpoint(String hostPort, String url) {
        int colon = hostPort.lastIndexOf(':');
        String why = null;
        int port = -1;
        if (colon <= 0 || colon == hostPort.length() - 1) {
            why = "'" + LogText.escape(hostPort) + "' is not HOST:PORT";
        } else if (!HOST.matcher(hostPort.substring(0, colon)).matches()) {
            why = "'" + LogText.escape(hostPort.substring(0, colon)) + "' is not a host name or IP address (nothing"
                    + " after the port: no path, user or query)";
        } else {
            try {
                port = Integer.parseInt(hostPort.substring(colon + 1));
            } catch (NumberFormatException e) {
                why = "'" + LogText.escape(hostPort) + "' has no numeric port";
            }
            if (why == null && (port < 1 || port > 65535)) {
                why = "port " + port + " is outside 1..65535";
            }
        }
        if (why != null) {
            throw new IllegalArgumentException("'" + url + "' is not etcd://HOST:PORT[,HOST:PORT...]: " + why
                    + "; e.g. etcd://127.0.0.1:2379,10.0.0.2:2379");
        }
        return InetSocketAddress.createUnresolved(hostPort.substring(0, colon), port);
    }

    /** These endpoints for cluster {@code cluster}. */
    public EtcdDiscovery withCluster(String cluster) {
        return new EtcdDiscovery(endpoints, cluster, leaseTtl);
    }

    /** These endpoints with instances' leases of {@code leaseTtl} (whole seconds, 1 s to 1 h). */
    public EtcdDiscovery withLeaseTtl(Duration leaseTtl) {
        return new EtcdDiscovery(endpoints, cluster, leaseTtl);
    }

    /** How often an instance keeps its lease alive: a third of the TTL. */
    public Duration keepAliveEvery() {
        return Duration.ofMillis(leaseTtl.toMillis() / 3);
    }

    /** The endpoints as a URL, {@code etcd://HOST:PORT,...}. */
    public String url() {
        StringBuilder url = new StringBuilder(SCHEME);
        for (InetSocketAddress endpoint : endpoints) {
            url.append(url.length() == SCHEME.length() ? "" : ",").append(LogText.hostPort(endpoint));
        }
        return url.toString();
    }

    /** @throws IllegalArgumentException if {@code cluster} is not 1 to 64 letters, digits, dots, dashes or underscores */
    public static String checkCluster(String cluster) {
        Objects.requireNonNull(cluster, "cluster");
        if (!CLUSTER.matcher(cluster).matches()) {
            throw new IllegalArgumentException("cluster name '" + LogText.escape(cluster) + "' must be 1 to 64 letters,"
                    + " digits, dots, dashes or underscores, e.g. prod-eu");
        }
        return cluster;
    }

    /** @throws IllegalArgumentException if {@code ttl} is not whole seconds from 1 s to 1 h */
    public static Duration checkLeaseTtl(Duration ttl) {
        Objects.requireNonNull(ttl, "leaseTtl");
        if (ttl.toMillis() % 1000 != 0 || ttl.compareTo(Duration.ofSeconds(1)) < 0 || ttl.compareTo(MAX_LEASE_TTL) > 0) {
            throw new IllegalArgumentException("the lease TTL must be whole seconds from 1s to 1h (etcd counts leases in"
                    + " seconds), got " + ttl.toMillis() + " ms");
        }
        return ttl;
    }
}
