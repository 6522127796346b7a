package dev.kvflux.architecture;

import static org.assertj.core.api.Assertions.assertThat;

import dev.kvflux.bindings.TransferEngine;
import dev.kvflux.operators.CompletionWait;
import dev.kvflux.pipeline.WritePipeline;
import java.io.IOException;
import java.lang.module.Configuration;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.lang.module.ResolvedModule;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;

/**
 * The library modules are named modules: they resolve on the module path from their own jars (or class
 * folders) and the jars they declare, without msgpack-core or anything of the application's, they export
 * their API and not their {@code internal} packages, and they run there. The suite itself runs on the
 * class path, where the descriptors are ignored.
 */
class LibraryModulesTest {
    private static final List<String> LIBRARY = List.of("dev.kvflux.bindings", "dev.kvflux.operators", "dev.kvflux.pipeline");

    /** The library modules and what they require, and nothing else: no msgpack-core, no logging backend, no vavr. */
    private static final ModuleFinder MODULE_PATH = ModuleFinder.of(Stream.of(TransferEngine.class,
                    CompletionWait.class, WritePipeline.class, Mono.class, Publisher.class, org.slf4j.Logger.class)
            .map(LibraryModulesTest::location)
            .toArray(Path[]::new));

    private static Path location(Class<?> type) {
        try {
            return Path.of(type.getProtectionDomain().getCodeSource().getLocation().toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    private static Configuration resolve() {
        return ModuleLayer.boot().configuration().resolve(MODULE_PATH, ModuleFinder.of(), Set.of("dev.kvflux.pipeline"));
    }

    private static ModuleDescriptor descriptor(String module) {
        return MODULE_PATH.find(module).orElseThrow().descriptor();
    }

    @Test
    void thePipelineResolvesAsANamedModuleWithoutMsgpackCore() {
        Set<String> resolved = resolve().modules().stream().map(ResolvedModule::name).collect(Collectors.toSet());

        assertThat(resolved).containsAll(LIBRARY).contains("reactor.core", "org.slf4j")
                .noneMatch(name -> name.contains("msgpack") || name.contains("logback") || name.contains("vavr"));
        for (String module : LIBRARY) {
            assertThat(descriptor(module).isAutomatic()).as(module + " has a module-info").isFalse();
        }
    }

    @Test
    void noLibraryModuleExportsAnInternalPackage() {
        for (String module : LIBRARY) {
            Set<String> exported = descriptor(module).exports().stream().map(ModuleDescriptor.Exports::source)
                    .collect(Collectors.toSet());
            assertThat(exported).as(module).noneMatch(p -> p.contains(".internal"));
            assertThat(descriptor(module).packages()).as(module + "'s packages").containsAll(exported);
        }
        assertThat(descriptor("dev.kvflux.bindings").packages())
                .contains("dev.kvflux.bindings.gpu.internal", "dev.kvflux.bindings.mori.internal");
        assertThat(descriptor("dev.kvflux.bindings").exports().stream().map(ModuleDescriptor.Exports::source))
                .containsExactlyInAnyOrder("dev.kvflux.bindings", "dev.kvflux.bindings.gpu",
                        "dev.kvflux.bindings.mori", "dev.kvflux.bindings.sim");
    }

    @Test
    void theOperatorsRequireOnlyReactorAndTheBindings() {
        assertThat(descriptor("dev.kvflux.operators").requires().stream().map(ModuleDescriptor.Requires::name))
                .containsExactlyInAnyOrder("java.base", "dev.kvflux.bindings", "reactor.core", "org.reactivestreams");
    }

    @Test
    void thePipelineRequiresOnlyTheOperatorsAndSlf4j() {
        assertThat(descriptor("dev.kvflux.pipeline").requires().stream().map(ModuleDescriptor.Requires::name))
                .containsExactlyInAnyOrder("java.base", "dev.kvflux.operators", "org.slf4j");
    }

    @Test
    void onTheModulePathAWaitCompletesAndTheNativeSimulatorLoadsWithNativeAccessByModuleName() throws Exception {
        ModuleLayer.Controller controller = ModuleLayer.defineModulesWithOneLoader(resolve(),
                List.of(ModuleLayer.boot()), ClassLoader.getPlatformClassLoader());
        ModuleLayer layer = controller.layer();
        Module bindings = layer.findModule("dev.kvflux.bindings").orElseThrow();
        controller.enableNativeAccess(bindings); // what --enable-native-access=dev.kvflux.bindings does at launch

        Class<?> completionWait = layer.findLoader("dev.kvflux.operators").loadClass(CompletionWait.class.getName());
        assertThat(completionWait.getModule().getName()).isEqualTo("dev.kvflux.operators");
        Object wait = completionWait.getMethod("failFast", Duration.class).invoke(null, Duration.ofSeconds(1));
        Object mono = completionWait.getMethod("await", List.class).invoke(wait, List.of());
        assertThat(mono.getClass().getMethod("block", Duration.class).invoke(mono, Duration.ofSeconds(5))).isNull();

        Class<?> moriIo = bindings.getClassLoader().loadClass("dev.kvflux.bindings.mori.MoriIo");
        assertThat(bindings.isNativeAccessEnabled()).isTrue();
        Object simulator = moriIo.getMethod("simulator").invoke(null);
        try (AutoCloseable engine = (AutoCloseable) moriIo.getMethod("createEngine", String.class, String.class, int.class)
                .invoke(simulator, "module-path", "127.0.0.1", 0)) {
            assertThat(engine.getClass().getModule()).isSameAs(bindings);
        }
    }

    /**
     * The bindings' descriptor does not require msgpack-core (its jar has no module name but the one its file name
     * gives), yet the GPU descriptors pack and unpack with msgpack-core on the module path beside the bindings or
     * on the class path under them: the bindings read its module, named or not, once they have found it.
     */
    @Test
    void theBindingsReadMsgpackCoreWithoutRequiringItFromTheModulePathOrTheClassPath() throws Exception {
        assertThat(descriptor("dev.kvflux.bindings").requires().stream().map(ModuleDescriptor.Requires::name))
                .containsExactlyInAnyOrder("java.base", "reactor.core");
        Path msgpackJar = location(org.msgpack.core.MessagePack.class);
        ModuleFinder msgpackFinder = ModuleFinder.of(msgpackJar);
        String msgpackName = msgpackFinder.findAll().iterator().next().descriptor().name();
        Configuration besideTheBindings = ModuleLayer.boot().configuration().resolve(
                ModuleFinder.compose(MODULE_PATH, msgpackFinder), ModuleFinder.of(), Set.of("dev.kvflux.bindings", msgpackName));
        Module onTheModulePath = roundTripsAGpuDescriptor(ModuleLayer.boot()
                .defineModulesWithOneLoader(besideTheBindings, ClassLoader.getPlatformClassLoader()));
        assertThat(onTheModulePath.getName()).isEqualTo(msgpackName);

        try (java.net.URLClassLoader classPath = new java.net.URLClassLoader(
                new java.net.URL[] {msgpackJar.toUri().toURL()}, ClassLoader.getPlatformClassLoader())) {
            Module onTheClassPath = roundTripsAGpuDescriptor(ModuleLayer.boot()
                    .defineModulesWithOneLoader(resolve(), classPath));
            assertThat(onTheClassPath.isNamed()).isFalse();
        }
    }

    /** Packs and unpacks a GPU memory descriptor in the layer's bindings; returns msgpack-core's module, which they read. */
    private static Module roundTripsAGpuDescriptor(ModuleLayer layer) throws Exception {
        Module bindings = layer.findModule("dev.kvflux.bindings").orElseThrow();
        ClassLoader loader = bindings.getClassLoader();
        Class<?> handle = loader.loadClass("dev.kvflux.bindings.gpu.IpcMemHandle");
        Class<?> descriptor = loader.loadClass("dev.kvflux.bindings.gpu.GpuMemoryDescriptor");
        Object ipc = handle.getConstructor(byte[].class).newInstance((Object) new byte[handle.getField("SIZE").getInt(null)]);
        Object written = descriptor.getConstructor(String.class, int.class, int.class, long.class, long.class, handle)
                .newInstance("module-path", 3, 0, 4096L, 1L << 20, ipc);
        byte[] bytes = (byte[]) descriptor.getMethod("pack").invoke(written);

        assertThat(descriptor.getMethod("unpack", byte[].class).invoke(null, (Object) bytes)).isEqualTo(written);
        Module msgpack = Class.forName("org.msgpack.core.MessagePack", false, loader).getModule();
        assertThat(bindings.canRead(msgpack)).isTrue();
        return msgpack;
    }

    @Test
    void theInternalPackagesAreNotReadableFromOutsideTheModule() {
        ModuleLayer layer = ModuleLayer.boot().defineModulesWithOneLoader(resolve(), ClassLoader.getPlatformClassLoader());
        Module bindings = layer.findModule("dev.kvflux.bindings").orElseThrow();
        Module operators = layer.findModule("dev.kvflux.operators").orElseThrow();
        Map<String, Boolean> visible = Stream.of("dev.kvflux.bindings.mori", "dev.kvflux.bindings.mori.internal",
                        "dev.kvflux.bindings.gpu.internal", "dev.kvflux.bindings.internal")
                .collect(Collectors.toMap(p -> p, p -> bindings.isExported(p, operators)));
        assertThat(visible).containsExactlyInAnyOrderEntriesOf(Map.of("dev.kvflux.bindings.mori", true,
                "dev.kvflux.bindings.mori.internal", false, "dev.kvflux.bindings.gpu.internal", false,
                "dev.kvflux.bindings.internal", false));
    }

    @Test
    void theLibraryJarsShipNoLoggingConfigurationNoLoggingBackendAndNoKvfluxConfiguration() throws IOException {
        for (Class<?> type : List.of(TransferEngine.class, CompletionWait.class, WritePipeline.class)) {
            List<String> entries = entries(location(type));
            assertThat(entries).as(type.getModule() + " at " + location(type)).isNotEmpty()
                    .noneMatch(e -> e.startsWith("logback") || e.startsWith("log4j") || e.equals("simplelogger.properties")
                            || e.endsWith(".yaml") || e.endsWith(".yml")
                            || e.equals("META-INF/services/org.slf4j.spi.SLF4JServiceProvider"));
        }
    }

    /** The file names in a jar or a class folder, relative to its root. */
    private static List<String> entries(Path location) throws IOException {
        if (Files.isDirectory(location)) {
            try (Stream<Path> files = Files.walk(location)) {
                return files.filter(Files::isRegularFile)
                        .map(f -> location.relativize(f).toString().replace('\\', '/'))
                        .toList();
            }
        }
        try (JarFile jar = new JarFile(location.toFile())) {
            return jar.stream().map(JarEntry::getName).toList();
        }
    }

    /**
     * The transfer library resolves as a named module from its jar, the library modules under it and the jars its
     * dependencies bring (Reactor Netty, Netty, slf4j-api, context-propagation), none of them a logging backend,
     * JSON, YAML or msgpack library, tracing SDK or metrics registry; it exports its API and the notify protocol.
     */
    @Test
    void theTransferLibraryResolvesAsANamedModuleWithoutTheApplicationsDependencies() {
        List<Path> path = new java.util.ArrayList<>(Stream.of(TransferEngine.class, CompletionWait.class,
                WritePipeline.class, dev.kvflux.transfer.PrefillSide.class).map(LibraryModulesTest::location).toList());
        for (String entry : System.getProperty("java.class.path").split(java.io.File.pathSeparator)) {
            String name = Path.of(entry).getFileName().toString();
            if (name.matches("(netty-|reactor-core-|reactor-netty-core-|reactive-streams-|jspecify-|slf4j-api-"
                    + "|context-propagation-|vavr-).*\\.jar") && !name.contains("macos")) {
                path.add(Path.of(entry));
            }
        }
        ModuleFinder finder = ModuleFinder.of(path.toArray(Path[]::new));
        Configuration resolved = ModuleLayer.boot().configuration().resolve(finder, ModuleFinder.of(),
                Set.of("dev.kvflux.transfer"));
        ModuleDescriptor transfer = finder.find("dev.kvflux.transfer").orElseThrow().descriptor();

        assertThat(transfer.isAutomatic()).as("kvflux-transfer has a module-info").isFalse();
        assertThat(transfer.exports().stream().map(ModuleDescriptor.Exports::source))
                .containsExactlyInAnyOrder("dev.kvflux.transfer", "dev.kvflux.transfer.notify");
        assertThat(resolved.modules().stream().map(ResolvedModule::name))
                .contains("dev.kvflux.pipeline", "reactor.netty.core", "io.netty.transport", "org.slf4j")
                .noneMatch(name -> name.contains("msgpack") || name.contains("logback") || name.contains("jackson")
                        || name.contains("picocli") || name.contains("yaml") || name.contains("opentelemetry")
                        || name.startsWith("micrometer.core") || name.contains("prometheus"));
    }
}
