package dev.kvflux.serving.etcd;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.net.InetSocketAddress;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** {@code etcd://HOST:PORT[,HOST:PORT...]}, the cluster's name and the lease TTL, each checked with a message. */
class EtcdDiscoveryTest {
    @Test
    void aUrlNamesItsEndpointsInOrderWithTheDefaultClusterAndLease() {
        EtcdDiscovery discovery = EtcdDiscovery.parse("etcd://127.0.0.1:2379,etcd-2.internal:22379,[::1]:2379");

        assertThat(discovery.endpoints()).containsExactly(InetSocketAddress.createUnresolved("127.0.0.1", 2379),
                InetSocketAddress.createUnresolved("etcd-2.internal", 22379),
                InetSocketAddress.createUnresolved("[::1]", 2379));
        assertThat(discovery.cluster()).isEqualTo("default");
        assertThat(discovery.leaseTtl()).isEqualTo(Duration.ofSeconds(10));
        assertThat(discovery.keepAliveEvery()).isEqualTo(Duration.ofMillis(3333));
        assertThat(discovery.url()).isEqualTo("etcd://127.0.0.1:2379,etcd-2.internal:22379,[::1]:2379");
    }

    @ParameterizedTest
    @ValueSource(strings = {"http://127.0.0.1:2379", "etcd://", "etcd://127.0.0.1", "etcd://127.0.0.1:", "etcd://:2379",
            "etcd://127.0.0.1:2379/v3", "etcd://127.0.0.1:99999", "etcd://127.0.0.1:2379,", "etcd://user@host:2379",
            "etcd://127.0.0.1:port"})
    void aBadUrlIsRefusedSayingWhatAnEtcdUrlLooksLike(String url) {
        assertThatThrownBy(() -> EtcdDiscovery.parse(url)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("etcd://").hasMessageContaining("127.0.0.1:2379");
    }

    @Test
    void moreThanSixteenEndpointsAreRefused() {
        String url = "etcd://" + "h:1,".repeat(16) + "h:1";

        assertThatThrownBy(() -> EtcdDiscovery.parse(url)).hasMessageContaining("at most 16");
    }

    @Test
    void aClusterNameIsLettersDigitsDotsDashesOrUnderscores() {
        EtcdDiscovery discovery = EtcdDiscovery.parse("etcd://127.0.0.1:2379");

        assertThat(discovery.withCluster("prod-eu_1.a").cluster()).isEqualTo("prod-eu_1.a");
        assertThatThrownBy(() -> discovery.withCluster("a/b")).hasMessageContaining("cluster name 'a/b'");
        assertThatThrownBy(() -> discovery.withCluster("")).hasMessageContaining("1 to 64");
        assertThatThrownBy(() -> discovery.withCluster("x".repeat(65))).hasMessageContaining("1 to 64");
    }

    @Test
    void aLeaseTtlIsWholeSecondsFromOneSecondToAnHour() {
        EtcdDiscovery discovery = EtcdDiscovery.parse("etcd://127.0.0.1:2379");

        assertThat(discovery.withLeaseTtl(Duration.ofSeconds(2)).keepAliveEvery()).isEqualTo(Duration.ofMillis(666));
        assertThatThrownBy(() -> discovery.withLeaseTtl(Duration.ofMillis(1500))).hasMessageContaining("whole seconds");
        assertThatThrownBy(() -> discovery.withLeaseTtl(Duration.ZERO)).hasMessageContaining("from 1s to 1h");
        assertThatThrownBy(() -> discovery.withLeaseTtl(Duration.ofHours(2))).hasMessageContaining("from 1s to 1h");
    }
}
