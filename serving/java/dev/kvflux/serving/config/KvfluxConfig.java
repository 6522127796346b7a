package dev.kvflux.serving.config;

import dev.kvflux.bindings.sim.CopyPath;
import dev.kvflux.bindings.sim.CopyTiming;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.FailMode;
import dev.kvflux.operators.PushWait;
import dev.kvflux.serving.etcd.EtcdDiscovery;
import dev.kvflux.transfer.KvMode;
import dev.kvflux.transfer.notify.NotifyLimits;
import io.vavr.collection.List;
import io.vavr.collection.Seq;
import io.vavr.control.Validation;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.DuplicateKeyException;
import org.yaml.snakeyaml.constructor.SafeConstructor;
import org.yaml.snakeyaml.error.MarkedYAMLException;
import org.yaml.snakeyaml.error.YAMLException;

/**
 * kvflux's configuration: {@code kvflux.yaml} from the classpath ({@code config/} in the source tree),
 * with the keys of an optional file of the user's laid over it one by one.
 *
 * <p>{@link #load} and {@link #parse} return a Vavr {@code Validation} that, when invalid, holds one
 * message per bad key (unknown keys included), all at once, each naming the key, what it holds and what
 * it should hold.
 */
public record KvfluxConfig(Transfer transfer, Engine engine, Ports ports, NotifyChannel notifyChannel,
                           TraceExport tracing, Limits limits, Discovery discovery) {

    /** A configuration with the built-in registry for membership. */
    public KvfluxConfig(Transfer transfer, Engine engine, Ports ports, NotifyChannel notifyChannel, TraceExport tracing,
                        Limits limits) {
        this(transfer, engine, ports, notifyChannel, tracing, limits, Discovery.BUILT_IN);
    }

    /** A configuration with the default request limits. */
    public KvfluxConfig(Transfer transfer, Engine engine, Ports ports, NotifyChannel notifyChannel, TraceExport tracing) {
        this(transfer, engine, ports, notifyChannel, tracing, Limits.DEFAULTS);
    }

    /** A configuration whose notify channel has no secret. */
    public KvfluxConfig(Transfer transfer, Engine engine, Ports ports) {
        this(transfer, engine, ports, new NotifyChannel(""));
    }

    /** A configuration that exports no traces. */
    public KvfluxConfig(Transfer transfer, Engine engine, Ports ports, NotifyChannel notifyChannel) {
        this(transfer, engine, ports, notifyChannel, TraceExport.OFF);
    }

    /**
     * Where the serving roles send their spans: {@code otlpEndpoint}, an OTLP/HTTP traces URL, or empty for
     * nowhere (the default: nothing is traced); a trace that starts in a role is kept with probability
     * {@code sampleProbability} (0 to 1).
     */
    public record TraceExport(Optional<URI> otlpEndpoint, double sampleProbability) {
        /** No export. */
        public static final TraceExport OFF = new TraceExport(Optional.empty(), 1.0);

        /** These settings exporting to {@code endpoint} (checked as {@code tracing.otlp-endpoint} is). */
        public TraceExport withEndpoint(String endpoint) {
            return new TraceExport(ConfigValues.otlpEndpoint(endpoint), sampleProbability);
        }
    }

    /**
     * The completion wait and the WRITE pipeline. {@code stallAfter} is empty when stall detection is off
     * ({@code transfer.stall-after: off}); {@code signalOnPush}: whether the push wait signals its end on the thread of
     * the push that ended it ({@code transfer.push-signal: push-thread}) rather than on the scheduler.
     */
    public record Transfer(Duration timeout, Duration slice, FailMode failMode, int maxInFlight,
                           Duration eventPoll, Duration eventTimeout, Optional<Duration> stallAfter,
                           boolean signalOnPush) {

        /** Settings without stall detection. */
        public Transfer(Duration timeout, Duration slice, FailMode failMode, int maxInFlight,
                        Duration eventPoll, Duration eventTimeout) {
            this(timeout, slice, failMode, maxInFlight, eventPoll, eventTimeout, Optional.empty());
        }

        /** Settings whose push wait signals on the scheduler. */
        public Transfer(Duration timeout, Duration slice, FailMode failMode, int maxInFlight,
                        Duration eventPoll, Duration eventTimeout, Optional<Duration> stallAfter) {
            this(timeout, slice, failMode, maxInFlight, eventPoll, eventTimeout, stallAfter, false);
        }

        /** These settings with another transfer timeout. */
        public Transfer withTimeout(Duration otherTimeout) {
            return new Transfer(otherTimeout, slice, failMode, maxInFlight, eventPoll, eventTimeout, stallAfter,
                    signalOnPush);
        }

        /** The configured completion wait: fail-fast or drain, its slice, and its stall time if set. */
        public CompletionWait completionWait() {
            CompletionWait wait = CompletionWait.of(failMode, timeout).slice(slice);
            return stallAfter.map(wait::stallAfter).orElse(wait);
        }

        /**
         * The configured wait for engines that push completion: fail-fast or drain, and its stall time if
         * set. It polls statuses that do not push every 10 ms, whatever {@code transfer.slice} says.
         */
        public PushWait pushWait() {
            PushWait wait = failMode == FailMode.DRAIN ? PushWait.drain(timeout) : PushWait.failFast(timeout);
            PushWait signalled = signalOnPush ? wait.signalOnPush() : wait;
            return stallAfter.map(signalled::stallAfter).orElse(signalled);
        }
    }

    /**
     * Which engine backend, the simulated engine's timing, and who moves the KV ({@code kv.mode}: WRITE, prefill
     * writes into decode, or READ, decode reads from prefill).
     */
    public record Engine(String backend, Sim sim, KvMode kvMode) {
        public Engine(String backend, Sim sim) {
            this(backend, sim, KvMode.WRITE);
        }
    }

    /** The simulated xGMI engine's copy timing and path. */
    public record Sim(Duration postCostPerBlock, Duration perBlockOverhead, Duration kernelLaunch,
                      double bandwidthGbps, CopyPath copyPath) {

        public CopyTiming timing() {
            return new CopyTiming(postCostPerBlock, perBlockOverhead, kernelLaunch, bandwidthGbps * 1e9);
        }
    }

    /** The ports of the proxy, prefill and decode for serving. */
    public record Ports(int proxy, int proxyDiscovery, int prefillHttp, int decodeHttp, int prefillNotify,
                        int decodeNotify) {
    }

    /**
     * The notify channel: {@code secret} signs notifications when not empty; {@code limits} bound what each
     * role's notify server grants its peers.
     */
    public record NotifyChannel(String secret, NotifyLimits limits) {
        /** A channel with the default limits. */
        public NotifyChannel(String secret) {
            this(secret, NotifyLimits.DEFAULTS);
        }

        @Override
        public String toString() {
            return "NotifyChannel[secret=" + (secret.isEmpty() ? "none" : "(set)") + ", limits=" + limits + "]";
        }
    }

    /**
     * What one request may cost at most: {@code maxModelLen} tokens of prompt and {@code max_tokens} together
     * ({@code limits.max-model-len}, checked by the proxy and by both roles), and {@code maxRequestShare} of a role's
     * KV blocks ({@code limits.max-request-share}, 0 to 1); and what one client may hold at once: {@code clientShare}
     * of a role's KV blocks and prefill queue ({@code limits.client-share}, 0 to 1).
     */
    public record Limits(int maxModelLen, double maxRequestShare, double clientShare) {
        /** 32,768 tokens (the simulated model's context), a quarter of a role's blocks, half of them per client. */
        public static final Limits DEFAULTS = new Limits(32_768, 0.25, 0.5);

        /** These limits with half of a role's blocks per client. */
        public Limits(int maxModelLen, double maxRequestShare) {
            this(maxModelLen, maxRequestShare, 0.5);
        }
    }

    /**
     * Where the cluster's membership lives: {@code etcd} empty for the built-in registry (instances ping the proxy's
     * discovery port), or etcd's endpoints ({@code discovery.etcd: etcd://HOST:PORT[,HOST:PORT...]}); the cluster's
     * name ({@code discovery.cluster}) and the instances' lease TTL ({@code discovery.lease-ttl}) apply to etcd.
     */
    public record Discovery(Optional<EtcdDiscovery> etcd, String cluster, Duration leaseTtl) {
        /** The built-in registry. */
        public static final Discovery BUILT_IN = new Discovery(Optional.empty(), EtcdDiscovery.DEFAULT_CLUSTER,
                EtcdDiscovery.DEFAULT_LEASE_TTL);

        /** The configured etcd discovery, with the configured cluster and lease TTL. */
        public Discovery {
            etcd = etcd.map(e -> e.withCluster(cluster).withLeaseTtl(leaseTtl));
        }
    }

    /** The classpath resource holding the defaults. */
    public static final String DEFAULT_RESOURCE = "kvflux.yaml";

    private static final Set<String> KEYS = Set.of(
            "transfer.timeout", "transfer.slice", "transfer.fail-mode", "transfer.max-in-flight",
            "transfer.event-poll", "transfer.event-timeout", "transfer.stall-after", "transfer.push-signal",
            "engine.backend", "engine.sim.post-cost-per-block",
            "engine.sim.per-block-overhead", "engine.sim.kernel-launch", "engine.sim.bandwidth-gbps",
            "engine.sim.copy-path", "kv.mode", "ports.proxy", "ports.proxy-discovery", "ports.prefill-http",
            "ports.decode-http", "ports.prefill-notify", "ports.decode-notify", "notify.secret",
            "notify.max-connections", "notify.frame-read-timeout", "notify.idle-timeout", "notify.peer-budget-mib",
            "notify.bulk-mib-per-second",
            "tracing.otlp-endpoint", "tracing.sample-probability", "limits.max-model-len", "limits.max-request-share",
            "limits.client-share",
            "discovery.etcd", "discovery.cluster", "discovery.lease-ttl");

    /** The defaults alone. */
    public static KvfluxConfig defaults() {
        return load(Optional.empty()).fold(errors -> {
            throw new IllegalStateException("the built-in " + DEFAULT_RESOURCE + " is invalid: " + errors.mkString("; "));
        }, Function.identity());
    }

    /** The largest configuration file read: far above any real one, far below what would take long to parse. */
    public static final int MAX_FILE_BYTES = 1 << 20;

    /**
     * The defaults with {@code override}'s keys laid over them.
     *
     * @return valid, or invalid with every problem; a file that is missing, unreadable, over
     *     {@link #MAX_FILE_BYTES}, not YAML, not a map at its top level or holding a key twice is one problem
     *     naming the file
     */
    public static Validation<Seq<String>, KvfluxConfig> load(Optional<Path> override) {
        Map<String, Object> keys = new LinkedHashMap<>();
        try (InputStream in = KvfluxConfig.class.getClassLoader().getResourceAsStream(DEFAULT_RESOURCE)) {
            if (in == null) {
                return Validation.invalid(List.of(DEFAULT_RESOURCE + " is not on the classpath; run kvflux from"
                        + " its jar or add the config/ folder to the classpath"));
            }
            flatten("", yaml().load(in), keys);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        if (override.isPresent()) {
            Optional<String> problem = read(override.get(), keys);
            if (problem.isPresent()) {
                return Validation.invalid(List.of("configuration file " + override.get() + " " + problem.get()));
            }
        }
        return parse(keys);
    }

    /** Lays the keys of the YAML file {@code path} over {@code keys}; the problem, if it cannot. */
    private static Optional<String> read(Path path, Map<String, Object> keys) {
        if (Files.isDirectory(path) || !Files.isReadable(path)) {
            return Optional.of("does not exist or cannot be read");
        }
        byte[] bytes;
        try (InputStream in = Files.newInputStream(path)) {
            bytes = in.readNBytes(MAX_FILE_BYTES + 1);
        } catch (IOException e) {
            return Optional.of("cannot be read: " + e.getMessage());
        }
        if (bytes.length > MAX_FILE_BYTES) {
            return Optional.of("is over the " + (MAX_FILE_BYTES >> 20) + " MiB limit of a configuration file; give"
                    + " only the keys you change");
        }
        Object root;
        try {
            root = yaml().load(new String(bytes, StandardCharsets.UTF_8));
        } catch (DuplicateKeyException e) {
            return Optional.of("holds " + e.getProblem().replaceFirst("^found ", "a ") + where(e)
                    + "; give each key once");
        } catch (MarkedYAMLException e) {
            return Optional.of("is not valid YAML: " + e.getProblem() + where(e));
        } catch (YAMLException e) {
            return Optional.of("is not valid YAML: " + e.getMessage().lines().findFirst().orElse(""));
        }
        if (root != null && !(root instanceof Map)) {
            return Optional.of("holds a " + (root instanceof java.util.List ? "list" : "single value") + " at its top"
                    + " level; it must be a map of keys, such as transfer: with timeout: 30s under it");
        }
        flatten("", root, keys);
        return Optional.empty();
    }

    private static String where(MarkedYAMLException e) {
        return e.getProblemMark() == null ? "" : " (line " + (e.getProblemMark().getLine() + 1) + ", column "
                + (e.getProblemMark().getColumn() + 1) + ")";
    }

    /** Parses flat dotted keys ({@code transfer.timeout: 30s}). */
    public static Validation<Seq<String>, KvfluxConfig> parse(Map<String, ?> keys) {
        Validation<Seq<String>, Transfer> transfer = Validation.combine(
                        durationKey(keys, "transfer.timeout", ConfigValues::transferTimeout),
                        durationKey(keys, "transfer.slice", ConfigValues::positive),
                        key(keys, "transfer.fail-mode", ConfigValues::failMode),
                        key(keys, "transfer.max-in-flight", v -> ConfigValues.intIn(v, 1, 1 << 20)),
                        durationKey(keys, "transfer.event-poll", ConfigValues::positive),
                        durationKey(keys, "transfer.event-timeout", ConfigValues::transferTimeout),
                        key(keys, "transfer.stall-after", ConfigValues::stallAfter),
                        key(keys, "transfer.push-signal", ConfigValues::signalOnPush))
                .ap(Transfer::new)
                .flatMap(t -> t.slice().compareTo(t.timeout()) < 0 ? Validation.valid(t)
                        : Validation.invalid(List.of("transfer.slice (" + Durations.format(t.slice())
                                + ") must be shorter than transfer.timeout (" + Durations.format(t.timeout()) + ")")))
                .flatMap(t -> t.stallAfter().filter(stall -> stall.compareTo(t.slice()) < 0
                                || stall.compareTo(t.timeout()) > 0).isEmpty() ? Validation.valid(t)
                        : Validation.invalid(List.of("transfer.stall-after (" + Durations.format(t.stallAfter().get())
                                + ") must lie between transfer.slice (" + Durations.format(t.slice())
                                + ") and transfer.timeout (" + Durations.format(t.timeout()) + "), or be off")));
        Validation<Seq<String>, Sim> sim = Validation.combine(
                        durationKey(keys, "engine.sim.post-cost-per-block", Function.identity()),
                        durationKey(keys, "engine.sim.per-block-overhead", Function.identity()),
                        durationKey(keys, "engine.sim.kernel-launch", Function.identity()),
                        key(keys, "engine.sim.bandwidth-gbps", ConfigValues::bandwidth),
                        key(keys, "engine.sim.copy-path", ConfigValues::copyPath))
                .ap(Sim::new);
        Validation<Seq<String>, Engine> engine = Validation.combine(
                        key(keys, "engine.backend", ConfigValues::backend).mapError(List::of), sim,
                        key(keys, "kv.mode", ConfigValues::kvMode).mapError(List::of))
                .ap(Engine::new)
                .mapError(KvfluxConfig::flattenErrors);
        Validation<Seq<String>, Ports> ports = Validation.combine(
                        key(keys, "ports.proxy", ConfigValues::port),
                        key(keys, "ports.proxy-discovery", ConfigValues::port),
                        key(keys, "ports.prefill-http", ConfigValues::port),
                        key(keys, "ports.decode-http", ConfigValues::port),
                        key(keys, "ports.prefill-notify", ConfigValues::port),
                        key(keys, "ports.decode-notify", ConfigValues::port))
                .ap(Ports::new);
        Validation<Seq<String>, NotifyLimits> limits = Validation.combine(
                        key(keys, "notify.max-connections", v -> ConfigValues.intIn(v, 1, 1 << 20)),
                        durationKey(keys, "notify.frame-read-timeout", ConfigValues::positive),
                        durationKey(keys, "notify.idle-timeout", ConfigValues::positive),
                        key(keys, "notify.peer-budget-mib", v -> (long) ConfigValues.intIn(v, 1, 65_536) << 20),
                        key(keys, "notify.bulk-mib-per-second", v -> (long) ConfigValues.intIn(v, 1, 65_536) << 20))
                .ap(NotifyLimits::new);
        Validation<Seq<String>, NotifyChannel> notifyChannel = Validation.combine(
                        key(keys, "notify.secret", ConfigValues::secret).mapError(List::of), limits)
                .ap(NotifyChannel::new)
                .mapError(KvfluxConfig::flattenErrors);
        Validation<Seq<String>, TraceExport> tracing = Validation.combine(
                        key(keys, "tracing.otlp-endpoint", v -> ConfigValues.otlpEndpoint(String.valueOf(v))),
                        key(keys, "tracing.sample-probability", ConfigValues::probability))
                .ap(TraceExport::new);
        Validation<Seq<String>, Limits> requestLimits = Validation.combine(
                        key(keys, "limits.max-model-len", v -> ConfigValues.intIn(v, 1, 1 << 24)),
                        key(keys, "limits.max-request-share", ConfigValues::share),
                        key(keys, "limits.client-share", ConfigValues::share))
                .ap(Limits::new);
        Validation<Seq<String>, Discovery> discovery = Validation.combine(
                        key(keys, "discovery.etcd", ConfigValues::etcd),
                        key(keys, "discovery.cluster", v -> EtcdDiscovery.checkCluster(String.valueOf(v).trim())),
                        durationKey(keys, "discovery.lease-ttl", EtcdDiscovery::checkLeaseTtl))
                .ap(Discovery::new);
        Seq<String> unknown = List.ofAll(keys.keySet()).filter(k -> !KEYS.contains(k)).sorted()
                .map(k -> "unknown key " + k + "; known keys are " + List.ofAll(KEYS).sorted().mkString(", "));
        Validation<Seq<String>, KvfluxConfig> config = Validation.combine(transfer, engine, ports, notifyChannel, tracing,
                        requestLimits, discovery)
                .ap(KvfluxConfig::new).mapError(KvfluxConfig::flattenErrors);
        if (unknown.isEmpty()) {
            return config;
        }
        return Validation.invalid(config.isInvalid() ? config.getError().appendAll(unknown) : unknown);
    }

    private static Seq<String> flattenErrors(Seq<Seq<String>> nested) {
        return nested.flatMap(Function.identity());
    }

    /**
     * A YAML parser that refuses duplicate keys, documents over {@link #MAX_FILE_BYTES} characters, more than
     * 10 aliases and nesting deeper than 16: configuration needs none of them.
     */
    private static Yaml yaml() {
        LoaderOptions options = new LoaderOptions();
        options.setAllowDuplicateKeys(false);
        options.setCodePointLimit(MAX_FILE_BYTES);
        options.setMaxAliasesForCollections(10);
        options.setNestingDepthLimit(16);
        return new Yaml(new SafeConstructor(options));
    }

    private static void flatten(String prefix, Object node, Map<String, Object> out) {
        if (node instanceof Map<?, ?> map) {
            for (Map.Entry<?, ?> e : map.entrySet()) {
                flatten(prefix.isEmpty() ? String.valueOf(e.getKey()) : prefix + "." + e.getKey(), e.getValue(), out);
            }
        } else if (!prefix.isEmpty()) {
            out.put(prefix, node);
        }
    }

    private static <T> Validation<String, T> key(Map<String, ?> keys, String key, Function<Object, T> parse) {
        if (!keys.containsKey(key) || keys.get(key) == null) {
            return Validation.invalid(key + " is missing");
        }
        Object value = keys.get(key);
        try {
            return Validation.valid(parse.apply(value));
        } catch (IllegalArgumentException e) {
            return Validation.invalid(key + ": " + e.getMessage());
        }
    }

    private static Validation<String, Duration> durationKey(Map<String, ?> keys, String key,
                                                           Function<Duration, Duration> check) {
        return key(keys, key, v -> check.apply(Durations.parse(String.valueOf(v))));
    }
}
