package dev.kvflux.tools.cli;

import dev.kvflux.serving.config.KvfluxConfig;
import dev.kvflux.serving.etcd.EtcdDiscovery;
import java.time.Duration;
import java.util.Optional;
import picocli.CommandLine;
import picocli.CommandLine.Option;

/**
 * {@code --discovery etcd://HOST:PORT[,HOST:PORT...]} and {@code --cluster NAME} for the proxy and the roles
 * ({@code @Mixin DiscoveryOptions}): where the cluster's membership lives, over the configuration's
 * {@code discovery.*}. Without either, membership is the built-in registry: instances ping the proxy's discovery port.
 */
public final class DiscoveryOptions {
    @Option(names = "--discovery", paramLabel = "URL",
            description = "Keep the cluster's membership in etcd, etcd://HOST:PORT[,HOST:PORT...] (tried in turn), instead"
                    + " of the proxy's discovery port (default: discovery.etcd, empty = the proxy's port).")
    String discovery;

    @Option(names = "--cluster", paramLabel = "NAME",
            description = "The cluster's name in etcd; its records are under /kvflux/NAME/instances/ (default:"
                    + " discovery.cluster, default).")
    String cluster;

    /**
     * The etcd discovery {@code --discovery} and {@code --cluster} (else the configuration) name, with instances' leases
     * of {@code leaseTtl} (null: the configuration's); empty for the built-in registry.
     *
     * @throws CommandLine.ParameterException one line naming the option, if a value is bad or {@code --cluster} is given
     *     without etcd
     */
    Optional<EtcdDiscovery> resolve(CommandLine cmd, KvfluxConfig config, Duration leaseTtl) {
        KvfluxConfig.Discovery configured = config.discovery();
        Optional<EtcdDiscovery> etcd;
        try {
            etcd = discovery != null ? Optional.of(EtcdDiscovery.parse(discovery)) : configured.etcd();
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(cmd, "--discovery " + e.getMessage());
        }
        if (etcd.isEmpty()) {
            if (cluster != null) {
                throw new CommandLine.ParameterException(cmd, "--cluster names a cluster in etcd; give --discovery"
                        + " etcd://HOST:PORT too (or discovery.etcd)");
            }
            return etcd;
        }
        try {
            return Optional.of(etcd.get().withCluster(cluster != null ? cluster : configured.cluster())
                    .withLeaseTtl(leaseTtl != null ? leaseTtl : configured.leaseTtl()));
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(cmd, (cluster != null && e.getMessage().startsWith("cluster")
                    ? "--cluster: " : "--lease-ttl: ") + e.getMessage());
        }
    }
}
