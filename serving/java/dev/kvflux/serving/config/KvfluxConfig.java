package dev.kvflux.serving.config;

import dev.kvflux.bindings.sim.CopyPath;
import dev.kvflux.bindings.sim.CopyTiming;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.operators.FailMode;
import dev.kvflux.operators.PushWait;
import dev.kvflux.operators.WaitSpec;
import dev.kvflux.serving.etcd.EtcdDiscovery;
import dev.kvflux.transfer.notify.NotifyLimits;
import io.vavr.collection.List;
import io.vavr.collection.Seq;
import io.vavr.control.Validation;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Locale;
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
            return new TraceExport(KvfluxConfig.otlpEndpoint(endpoint), sampleProbability);
        }
    }

    /**
     * The completion wait and the WRITE pipeline. {@code stallAfter} is empty when stall detection is off
     * ({@code transfer.stall-after: off}).
     */
    public record Transfer(Duration timeout, Duration slice, FailMode failMode, int maxInFlight,
                           Duration eventPoll, Duration eventTimeout, Optional<Duration> stallAfter) {

        /** Settings without stall detection. */
        public Transfer(Duration timeout, Duration slice, FailMode failMode, int maxInFlight,
                        Duration eventPoll, Duration eventTimeout) {
            this(timeout, slice, failMode, maxInFlight, eventPoll, eventTimeout, Optional.empty());
        }

        /** These settings with another transfer timeout. */
        public Transfer withTimeout(Duration otherTimeout) {
            return new Transfer(otherTimeout, slice, failMode, maxInFlight, eventPoll, eventTimeout, stallAfter);
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
            return stallAfter.map(wait::stallAfter).orElse(wait);
        }
    }

    /** Which engine backend, and the simulated engine's timing. */
    public record Engine(String backend, Sim sim) {
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
     * KV blocks ({@code limits.max-request-share}, 0 to 1).
     */
    public record Limits(int maxModelLen, double maxRequestShare) {
        /** 32,768 tokens (the simulated model's context), a quarter of a role's blocks. */
        public static final Limits DEFAULTS = new Limits(32_768, 0.25);
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
            "transfer.event-poll", "transfer.event-timeout", "transfer.stall-after", "engine.backend", "engine.sim.post-cost-per-block",
            "engine.sim.per-block-overhead", "engine.sim.kernel-launch", "engine.sim.bandwidth-gbps",
            "engine.sim.copy-path", "ports.proxy", "ports.proxy-discovery", "ports.prefill-http",
            "ports.decode-http", "ports.prefill-notify", "ports.decode-notify", "notify.secret",
            "notify.max-connections", "notify.frame-read-timeout", "notify.idle-timeout", "notify.peer-budget-mib",
            "tracing.otlp-endpoint", "tracing.sample-probability", "limits.max-model-len", "limits.max-request-share",
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
                        durationKey(keys, "transfer.timeout", KvfluxConfig::transferTimeout),
                        durationKey(keys, "transfer.slice", KvfluxConfig::positive),
                        key(keys, "transfer.fail-mode", KvfluxConfig::failMode),
                        key(keys, "transfer.max-in-flight", v -> intIn(v, 1, 1 << 20)),
                        durationKey(keys, "transfer.event-poll", KvfluxConfig::positive),
                        durationKey(keys, "transfer.event-timeout", KvfluxConfig::transferTimeout),
                        key(keys, "transfer.stall-after", KvfluxConfig::stallAfter))
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
                        key(keys, "engine.sim.bandwidth-gbps", KvfluxConfig::bandwidth),
                        key(keys, "engine.sim.copy-path", KvfluxConfig::copyPath))
                .ap(Sim::new);
        Validation<Seq<String>, Engine> engine = Validation.combine(
                        key(keys, "engine.backend", KvfluxConfig::backend).mapError(List::of), sim)
                .ap(Engine::new)
                .mapError(KvfluxConfig::flattenErrors);
        Validation<Seq<String>, Ports> ports = Validation.combine(
                        key(keys, "ports.proxy", KvfluxConfig::port),
                        key(keys, "ports.proxy-discovery", KvfluxConfig::port),
                        key(keys, "ports.prefill-http", KvfluxConfig::port),
                        key(keys, "ports.decode-http", KvfluxConfig::port),
                        key(keys, "ports.prefill-notify", KvfluxConfig::port),
                        key(keys, "ports.decode-notify", KvfluxConfig::port))
                .ap(Ports::new);
        Validation<Seq<String>, NotifyLimits> limits = Validation.combine(
                        key(keys, "notify.max-connections", v -> intIn(v, 1, 1 << 20)),
                        durationKey(keys, "notify.frame-read-timeout", KvfluxConfig::positive),
                        durationKey(keys, "notify.idle-timeout", KvfluxConfig::positive),
                        key(keys, "notify.peer-budget-mib", v -> (long) intIn(v, 1, 65_536) << 20))
                .ap(NotifyLimits::new);
        Validation<Seq<String>, NotifyChannel> notifyChannel = Validation.combine(
                        key(keys, "notify.secret", KvfluxConfig::secret).mapError(List::of), limits)
                .ap(NotifyChannel::new)
                .mapError(KvfluxConfig::flattenErrors);
        Validation<Seq<String>, TraceExport> tracing = Validation.combine(
                        key(keys, "tracing.otlp-endpoint", v -> otlpEndpoint(String.valueOf(v))),
                        key(keys, "tracing.sample-probability", KvfluxConfig::probability))
                .ap(TraceExport::new);
        Validation<Seq<String>, Limits> requestLimits = Validation.combine(
                        key(keys, "limits.max-model-len", v -> intIn(v, 1, 1 << 24)),
                        key(keys, "limits.max-request-share", KvfluxConfig::share))
                .ap(Limits::new);
        Validation<Seq<String>, Discovery> discovery = Validation.combine(
                        key(keys, "discovery.etcd", KvfluxConfig::etcd),
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

    /** {@code off} (which YAML also reads as {@code false}) or a positive duration. */
    private static Optional<Duration> stallAfter(Object v) {
        String text = String.valueOf(v).trim().toLowerCase(Locale.ROOT);
        if (text.equals("off") || text.equals("false")) {
            return Optional.empty();
        }
        return Optional.of(positive(Durations.parse(text)));
    }

    private static Duration positive(Duration d) {
        if (d.isZero() || d.isNegative()) {
            throw new IllegalArgumentException("must be greater than zero, got " + Durations.format(d));
        }
        return d;
    }

    private static Duration transferTimeout(Duration d) {
        positive(d);
        if (d.compareTo(WaitSpec.MAX_TRANSFER_TIMEOUT) > 0) {
            throw new IllegalArgumentException("must be at most 24h, got " + Durations.format(d)
                    + "; a stalled transfer would hold its request that long");
        }
        return d;
    }

    private static FailMode failMode(Object v) {
        return switch (String.valueOf(v).toLowerCase(Locale.ROOT)) {
            case "fail-fast" -> FailMode.FAIL_FAST;
            case "drain" -> FailMode.DRAIN;
            default -> throw new IllegalArgumentException("'" + v + "' is not a fail mode; use fail-fast or drain");
        };
    }

    private static CopyPath copyPath(Object v) {
        return switch (String.valueOf(v).toLowerCase(Locale.ROOT)) {
            case "default" -> CopyPath.DEFAULT;
            case "scatter-gather" -> CopyPath.SCATTER_GATHER;
            default -> throw new IllegalArgumentException("'" + v + "' is not a copy path; use default or scatter-gather");
        };
    }

    private static String backend(Object v) {
        String name = String.valueOf(v).trim();
        if (name.isEmpty()) {
            throw new IllegalArgumentException("is empty; name a backend, such as sim-xgmi");
        }
        return name;
    }

    private static double bandwidth(Object v) {
        double gbps;
        try {
            gbps = Double.parseDouble(String.valueOf(v));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + v + "' is not a number of GB/s");
        }
        if (!(gbps > 0) || Double.isInfinite(gbps)) {
            throw new IllegalArgumentException("must be a positive number of GB/s, got " + v);
        }
        return gbps;
    }

    private static int intIn(Object v, int min, int max) {
        int n;
        try {
            n = Integer.parseInt(String.valueOf(v).trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + v + "' is not a whole number");
        }
        if (n < min || n > max) {
            throw new IllegalArgumentException("must be between " + min + " and " + max + ", got " + n);
        }
        return n;
    }

    private static String secret(Object v) {
        String secret = String.valueOf(v);
        if (!secret.isEmpty() && secret.length() < 16) {
            throw new IllegalArgumentException("is " + secret.length() + " characters; use at least 16 (for example"
                    + " the output of `openssl rand -hex 32`), or \"\" for no secret");
        }
        return secret;
    }

    /** Empty for "" (the built-in registry), else etcd's endpoints. */
    private static Optional<EtcdDiscovery> etcd(Object v) {
        String text = String.valueOf(v).trim();
        return text.isEmpty() ? Optional.empty() : Optional.of(EtcdDiscovery.parse(text));
    }

    /** Empty for "" (no export), else an http or https URL with a host. */
    private static Optional<URI> otlpEndpoint(String text) {
        String trimmed = text.trim();
        if (trimmed.isEmpty()) {
            return Optional.empty();
        }
        URI uri;
        try {
            uri = new URI(trimmed);
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException("'" + trimmed + "' is not a URL; give the collector's OTLP/HTTP traces"
                    + " URL, such as http://127.0.0.1:4318/v1/traces, or \"\" for no export");
        }
        if (!("http".equals(uri.getScheme()) || "https".equals(uri.getScheme())) || uri.getHost() == null) {
            throw new IllegalArgumentException("'" + trimmed + "' is not an http or https URL with a host; give the"
                    + " collector's OTLP/HTTP traces URL, such as http://127.0.0.1:4318/v1/traces");
        }
        return Optional.of(uri);
    }

    private static double probability(Object v) {
        double p;
        try {
            p = Double.parseDouble(String.valueOf(v).trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + v + "' is not a number; use 0 to 1 (1 keeps every trace)");
        }
        if (!(p >= 0 && p <= 1)) {
            throw new IllegalArgumentException("must be from 0 to 1 (1 keeps every trace), got " + v);
        }
        return p;
    }

    private static double share(Object v) {
        double p;
        try {
            p = Double.parseDouble(String.valueOf(v).trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("'" + v + "' is not a number; use more than 0 and at most 1 (0.25: a"
                    + " quarter of the role's blocks)");
        }
        if (!(p > 0 && p <= 1)) {
            throw new IllegalArgumentException("must be more than 0 and at most 1 (0.25: a quarter of the role's"
                    + " blocks), got " + v);
        }
        return p;
    }

    private static int port(Object v) {
        return intIn(v, 1, 65535);
    }
}
