package dev.kvflux.tools.chaos;

import dev.kvflux.bindings.StatusCode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

/**
 * One fault of the matrix, and everything {@link ChaosRun} does differently for it: the options prefill
 * runs with, whether notifications pass a relay that mistreats them, what is done to the roles while the
 * load runs, how each request is sent, and what the results must show beyond what every fault must (no
 * request unfinished or failed without a reason, nothing held, no corrupt output, some completed).
 */
sealed interface ChaosFault permits ChaosFault.Fixed, ChaosFault.StatusFailure, ChaosFault.Membership,
        ChaosFault.Partition, EtcdHostFault {

    /** How a killed or stopped role's restart is awaited. */
    Duration HEALTHY_WITHIN = Duration.ofSeconds(60);

    /** The name {@code --faults} takes and the reports print: {@code decode-restart}. */
    String label();

    /**
     * Options for prefill beyond the common ones; the faults with the same options share one prefill and
     * decode. None by default.
     */
    default List<String> prefillArgs(ChaosRun.Settings settings) {
        return List.of();
    }

    /** How the relay in front of both roles' notify ports mistreats frames, if the fault goes through one. */
    default Optional<Relay> relay() {
        return Optional.empty();
    }

    /**
     * Done to the roles on a thread of its own once a third of the requests have started; the last third
     * is sent once it returns. Nothing by default.
     *
     * @param downtime how long a killed role stays down
     */
    default void act(RoleProcess prefill, RoleProcess decode, Duration downtime) throws Exception {
    }

    /**
     * Done to the hosts and roles, as {@link #act}: on loopback {@code hosts} is null. By default {@link #act}.
     */
    default void strike(Netns hosts, RoleProcess prefill, RoleProcess decode, Duration downtime) throws Exception {
        act(prefill, decode, downtime);
    }

    /** Whether {@link #act} restarts a role, so that recovery counts from the restart. */
    default boolean restarts() {
        return false;
    }

    /** Whether the middle third of the requests goes out at once, with prompts 16 times as long. */
    default boolean bursts() {
        return false;
    }

    /** How request {@code i} is sent. */
    default Request request(int i) {
        return Request.NORMAL;
    }

    /** What the results must show beyond what every fault must. */
    Expectation expectation();

    /** A relay's mode and how often it applies (every {@code every}-th frame, or up to {@code every} ms). */
    record Relay(NotifyRelay.Mode mode, int every) {
    }

    /** How one request is sent. */
    enum Request {
        NORMAL,
        /** A body that validation rejects. */
        INVALID,
        /** The client hangs up 1 to 30 ms after sending. */
        DISCONNECT
    }

    /** What a fault's results must show beyond what every fault must. */
    enum Expectation {
        /** Nothing more. */
        NONE,
        /** Some requests failed cleanly: the fault reached them. */
        SOME_FAIL_CLEANLY,
        /** Every request completed: late copies and swapped notifications are still delivered. */
        ALL_COMPLETE,
        /** Exactly the {@link Request#INVALID} requests failed cleanly. */
        INVALID_FAIL_CLEANLY,
        /** Every request completed or was given up by its client, and every other request completed. */
        OTHERS_COMPLETE,
        /**
         * The requests in flight on the killed proxy are cut with its connections (failed without a reason, at most
         * the concurrency); every request through the other proxy completed.
         */
        CUT_WITH_THE_PROXY
    }

    /**
     * Every fault, in the order they run: the role and client faults, one per status failure code, the rest, then the
     * membership faults on etcd.
     */
    static List<ChaosFault> all() {
        List<ChaosFault> all = new ArrayList<>();
        List<Fixed> fixed = Arrays.asList(Fixed.values());
        all.addAll(fixed.subList(0, Fixed.BURST.ordinal() + 1));
        Arrays.stream(StatusCode.values()).filter(StatusCode::isFailure).map(StatusFailure::new).forEach(all::add);
        all.addAll(fixed.subList(Fixed.BURST.ordinal() + 1, fixed.size()));
        all.addAll(Arrays.asList(Membership.values()));
        return List.copyOf(all);
    }

    /**
     * The fault called {@code label}.
     *
     * @throws IllegalArgumentException naming every fault if there is none by that name
     */
    static ChaosFault named(String label) {
        return java.util.stream.Stream.of(all().stream(), Arrays.stream(Partition.values()),
                Arrays.stream(EtcdHostFault.values())).flatMap(f -> f).filter(f -> f.label().equals(label)).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("unknown fault '" + label + "'; expected one of "
                        + all().stream().map(ChaosFault::label).toList() + ", or with --hosts netns one of "
                        + ChaosRun.PARTITION_FAULTS));
    }

    /** The faults that are not one per failure code. */
    enum Fixed implements ChaosFault {
        /** Decode killed (SIGKILL), down for the downtime, started again. */
        DECODE_RESTART("decode-restart", (prefill, decode, downtime) -> restart(decode, downtime)),
        /** Prefill killed (SIGKILL), down for the downtime, started again. */
        PREFILL_KILL("prefill-kill", (prefill, decode, downtime) -> restart(prefill, downtime)),
        /** Prefill stopped gracefully (SIGTERM, 30 s at most), started again. */
        PREFILL_SIGTERM("prefill-sigterm", (prefill, decode, downtime) -> {
            prefill.terminate(Duration.ofSeconds(30));
            prefill.start();
            prefill.awaitHealthy(HEALTHY_WITHIN);
        }),
        CLIENT_DISCONNECT("client-disconnect", Expectation.OTHERS_COMPLETE) {
            @Override
            public Request request(int i) {
                return i % 3 == 1 ? Request.DISCONNECT : Request.NORMAL;
            }
        },
        VALIDATION_REJECTS("validation-rejects", Expectation.INVALID_FAIL_CLEANLY) {
            @Override
            public Request request(int i) {
                return i % 3 == 1 ? Request.INVALID : Request.NORMAL;
            }
        },
        BURST("burst", Expectation.SOME_FAIL_CLEANLY) {
            /**
             * About a quarter of the burst fits in prefill's blocks; one request may take them all (in a small run a
             * single request's worth is all there is), so what is measured is running out of blocks, not the share.
             */
            @Override
            public List<String> prefillArgs(ChaosRun.Settings s) {
                int burstBlocks = (s.promptWords() * 16 + 63) / 64;
                return List.of("--kv-blocks", Integer.toString(Math.max(burstBlocks, burstBlocks * (s.requests() / 3) / 4)),
                        "--max-request-share", "1");
            }

            @Override
            public boolean bursts() {
                return true;
            }
        },
        STATUS_STALL("status-stall", Expectation.SOME_FAIL_CLEANLY) {
            @Override
            public List<String> prefillArgs(ChaosRun.Settings s) {
                return List.of("--inject-fault", "stall:" + Math.max(3, Math.min(101, s.batches() / 2)));
            }
        },
        STATUS_SLOW("status-slow", Expectation.ALL_COMPLETE) {
            /** Every third batch completes a quarter of the transfer timeout late: within it, so nothing fails. */
            @Override
            public List<String> prefillArgs(ChaosRun.Settings s) {
                return List.of("--inject-fault", "slow:3:" + s.transferTimeout().dividedBy(4).toMillis());
            }
        },
        SG_UNDER_LOAD("sg-under-load", Expectation.ALL_COMPLETE) {
            /** Copies are kernels on prefill's compute queue, seen only once the steps queued before them end. */
            @Override
            public List<String> prefillArgs(ChaosRun.Settings s) {
                return List.of("--sg-under-load");
            }
        },
        /** Every 20th frame lost with its connection. */
        NOTIFY_LOSS("notify-loss", Expectation.NONE, new Relay(NotifyRelay.Mode.LOSE, 20)),
        /** Every 5th frame delivered twice. */
        NOTIFY_DUPLICATE("notify-duplicate", Expectation.NONE, new Relay(NotifyRelay.Mode.DUPLICATE, 5)),
        /** Every frame held up to 50 ms. */
        NOTIFY_DELAY("notify-delay", Expectation.NONE, new Relay(NotifyRelay.Mode.DELAY, 50)),
        /** Every 4th frame swapped with the next, both ways. */
        NOTIFY_REORDER("notify-reorder", Expectation.ALL_COMPLETE, new Relay(NotifyRelay.Mode.REORDER, 4));

        private final String label;
        private final Expectation expectation;
        private final Relay relay;
        private final Restart restart;

        Fixed(String label, Expectation expectation) {
            this(label, expectation, null, null);
        }

        Fixed(String label, Expectation expectation, Relay relay) {
            this(label, expectation, relay, null);
        }

        /** A fault that restarts a role, with nothing more to expect than every fault's guarantees. */
        Fixed(String label, Restart restart) {
            this(label, Expectation.NONE, null, restart);
        }

        Fixed(String label, Expectation expectation, Relay relay, Restart restart) {
            this.label = label;
            this.expectation = expectation;
            this.relay = relay;
            this.restart = restart;
        }

        /** How a fault restarts a role. */
        @FunctionalInterface
        interface Restart {
            void run(RoleProcess prefill, RoleProcess decode, Duration downtime) throws Exception;
        }

        @Override
        public void act(RoleProcess prefill, RoleProcess decode, Duration downtime) throws Exception {
            if (restart != null) {
                restart.run(prefill, decode, downtime);
            }
        }

        @Override
        public boolean restarts() {
            return restart != null;
        }

        @Override
        public String label() {
            return label;
        }

        @Override
        public Expectation expectation() {
            return expectation;
        }

        @Override
        public Optional<Relay> relay() {
            return Optional.ofNullable(relay);
        }

        private static void restart(RoleProcess role, Duration downtime) throws Exception {
            role.kill();
            Thread.sleep(downtime.toMillis());
            role.start();
            role.awaitHealthy(HEALTHY_WITHIN);
        }
    }

    /**
     * The faults of membership in etcd, run on an {@link EtcdCluster} (etcd, a prefill, two decodes and two proxies,
     * each its own process, with one notify secret) while the load goes to both proxies in turn, a client moving to the
     * other proxy when one refuses its connection. Each one measures its own recovery ({@link #strike}).
     */
    enum Membership implements ChaosFault {
        /** One proxy killed ({@code kill -9}), down for the downtime, started again: it routes as soon as it is up. */
        PROXY_KILL("proxy-kill", Expectation.CUT_WITH_THE_PROXY) {
            @Override
            EtcdCluster.Figures strike(EtcdCluster cluster, Duration downtime) throws Exception {
                return cluster.proxyKill(downtime);
            }
        },
        /** etcd killed ({@code kill -9}) and started again: the proxies route to their last members meanwhile. */
        ETCD_RESTART("etcd-restart", Expectation.ALL_COMPLETE) {
            @Override
            EtcdCluster.Figures strike(EtcdCluster cluster, Duration downtime) throws Exception {
                return cluster.etcdRestart(downtime);
            }
        },
        /** A decode paused ({@code kill -STOP}) past its lease, dropped by both proxies, resumed ({@code kill -CONT}). */
        INSTANCE_PAUSE("instance-pause", Expectation.NONE) {
            @Override
            EtcdCluster.Figures strike(EtcdCluster cluster, Duration downtime) throws Exception {
                return cluster.instancePause();
            }
        },
        /** A decode that accepts connections and never answers, registered in etcd: the health checks eject it. */
        BLACKHOLE_INSTANCE("blackhole-instance", Expectation.NONE) {
            @Override
            EtcdCluster.Figures strike(EtcdCluster cluster, Duration downtime) throws Exception {
                return cluster.blackholeInstance();
            }
        };

        private final String label;
        private final Expectation expectation;

        Membership(String label, Expectation expectation) {
            this.label = label;
            this.expectation = expectation;
        }

        /** Does the fault to {@code cluster} once a third of the requests have started, and measures its recovery. */
        abstract EtcdCluster.Figures strike(EtcdCluster cluster, Duration downtime) throws Exception;

        @Override
        public String label() {
            return label;
        }

        @Override
        public Expectation expectation() {
            return expectation;
        }
    }

    /**
     * Prefill's statuses fail with {@code code} every so many batches (a third of the run's batches, from 3
     * to 37): {@code status-fail-invalid-args} for ERR_INVALID_ARGS, and so on.
     */
    record StatusFailure(StatusCode code) implements ChaosFault {
        public StatusFailure {
            if (!code.isFailure()) {
                throw new IllegalArgumentException(code + " is not a failure code");
            }
        }

        @Override
        public String label() {
            return "status-fail-" + code.name().substring("ERR_".length()).toLowerCase(Locale.ROOT).replace('_', '-');
        }

        @Override
        public List<String> prefillArgs(ChaosRun.Settings s) {
            return List.of("--inject-fault", "fail:" + Math.max(3, Math.min(37, s.batches() / 3)) + ":" + code.name());
        }

        @Override
        public Expectation expectation() {
            return Expectation.SOME_FAIL_CLEANLY;
        }
    }

    /**
     * A partition between hosts of {@link Netns} (the proxy and the load on {@code client}, prefill and decode on
     * hosts of their own), struck once a third of the requests have started and healed after {@link #HEAL_AFTER}
     * (or its own time); recovery counts from the heal. Copies on the simulated engines go through shared memory,
     * as xGMI's go over the GPUs' own fabric: what a partition cuts is the TCP between the hosts (requests,
     * handshakes, notifications).
     */
    enum Partition implements ChaosFault {
        /** Prefill and decode cannot reach each other, either way, for 5 s. */
        PREFILL_DECODE("partition-prefill-decode", Duration.ofSeconds(5)),
        /** The same for 60 s: past decode's receive deadline and prefill's transfer timeout. */
        PREFILL_DECODE_LONG("partition-prefill-decode-60s", Duration.ofSeconds(60)),
        /** Prefill's packets to decode are dropped; decode's reach prefill (whose answers are dropped in turn). */
        PREFILL_TO_DECODE("partition-prefill-to-decode", Duration.ofSeconds(5)),
        /** The proxy cannot reach decode, nor decode the proxy; prefill reaches both. */
        PROXY_DECODE("partition-proxy-decode", Duration.ofSeconds(5)),
        /** Decode's host off the network for 5 s: its switch port down. */
        DECODE_ISOLATED("isolate-decode", Duration.ofSeconds(5)),
        /** Decode frozen (SIGSTOP) for 20 s with its work in flight, then resumed (SIGCONT). */
        DECODE_FROZEN("freeze-decode", Duration.ofSeconds(20));

        /** How long a partition lasts unless the fault says otherwise. */
        static final Duration HEAL_AFTER = Duration.ofSeconds(5);
        /** Every partition fault's label, in order. */
        static final List<String> LABELS = Arrays.stream(values()).map(ChaosFault::label).toList();

        private final String label;
        private final Duration lasts;

        Partition(String label, Duration lasts) {
            this.label = label;
            this.lasts = lasts;
        }

        @Override
        public String label() {
            return label;
        }

        /** How long the partition lasts before it heals. */
        public Duration lasts() {
            return lasts;
        }

        @Override
        public Expectation expectation() {
            return Expectation.NONE;
        }

        @Override
        public boolean restarts() {
            return true;
        }

        /** A step of a partition. */
        private interface Step {
            void run() throws Exception;
        }

        /** {@code strike}, then {@link #lasts}, then {@code heal}, also when interrupted. */
        private void hold(Step strike, Step heal) throws Exception {
            strike.run();
            try {
                Thread.sleep(lasts.toMillis());
            } finally {
                heal.run();
            }
        }

        @Override
        public void strike(Netns hosts, RoleProcess prefill, RoleProcess decode, Duration downtime) throws Exception {
            if (hosts == null) {
                throw new IllegalStateException(label + " needs hosts of their own (--hosts netns)");
            }
            switch (this) {
                case PREFILL_DECODE, PREFILL_DECODE_LONG ->
                        hold(() -> hosts.cut("prefill", "decode"), () -> hosts.heal("prefill", "decode"));
                case PREFILL_TO_DECODE ->
                        hold(() -> hosts.cutOneWay("prefill", "decode"), () -> hosts.healOneWay("prefill", "decode"));
                case PROXY_DECODE -> hold(() -> hosts.cut("client", "decode"), () -> hosts.heal("client", "decode"));
                case DECODE_ISOLATED -> hold(() -> hosts.isolate("decode"), () -> hosts.rejoin("decode"));
                case DECODE_FROZEN -> hold(decode::pause, decode::resume);
            }
        }
    }
}
