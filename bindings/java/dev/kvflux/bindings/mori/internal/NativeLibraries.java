package dev.kvflux.bindings.mori.internal;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

import dev.kvflux.bindings.mori.MoriIoException;
import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Finds and loads the libraries that implement {@code kvflux_mori.h}: the simulator shipped in the jar,
 * and the shim over the real MoRI. Each library is loaded once per JVM, for the JVM's lifetime.
 * Every failure is a {@link MoriIoException} that names the library and says how to get it.
 */
public final class NativeLibraries {
    /** The C ABI version this binding speaks ({@code KVFLUX_MORI_ABI_VERSION}). */
    public static final int ABI_VERSION = 1;
    /** Where the build puts the simulator inside the jar. */
    public static final String SIM_RESOURCE = "/native/linux-x86_64/libkvflux_mori_sim.so";
    /** The real shim's file name, looked up on the dynamic loader's path unless a path is given. */
    public static final String MORI_LIBRARY = "libkvflux_mori.so";
    public static final String MORI_PROPERTY = "kvflux.mori.lib";
    public static final String MORI_ENV = "KVFLUX_MORI_LIB";
    public static final String SIM_PROPERTY = "kvflux.mori.sim.lib";

    private static final String HOW_TO_BUILD_MORI = "Build it with MoRI from the pinned sources:"
            + " bindings/native/mori/build.sh --platform cuda|hip (lib/ of its output holds " + MORI_LIBRARY
            + " beside libmori_io.so), or over an installed MoRI with cmake -S bindings/native/mori -B build/mori"
            + " -DMORI_ROOT=<MoRI tree>; then pass -D" + MORI_PROPERTY + "=/path/to/" + MORI_LIBRARY + " or set "
            + MORI_ENV + " (the GPU runtime, libcudart or libamdhip64, must be loadable too)";
    private static final String HOW_TO_BUILD_SIM = "Build kvflux with 'mvn package' (needs gcc and libc6-dev), or build the"
            + " library with 'sh bindings/native/sim/build.sh DIR' and pass -D" + SIM_PROPERTY + "=DIR/libkvflux_mori_sim.so";

    private static final Map<String, MoriNative> LOADED = new ConcurrentHashMap<>();

    private NativeLibraries() {
    }

    /** The simulator: from {@code -Dkvflux.mori.sim.lib} if set, else the copy in the jar. */
    public static MoriNative simulator() {
        String override = System.getProperty(SIM_PROPERTY);
        if (override != null && !override.isBlank()) {
            return load(Path.of(override), "-D" + SIM_PROPERTY, HOW_TO_BUILD_SIM);
        }
        return load(simulatorPath(), "the kvflux jar", HOW_TO_BUILD_SIM);
    }

    private static Path extractedSimulator;

    /** The simulator's file: in the class path's directory, or extracted from the jar once per JVM. */
    private static synchronized Path simulatorPath() {
        if (extractedSimulator == null) {
            extractedSimulator = extractSimulator();
        }
        return extractedSimulator;
    }

    /**
     * The shim over the real MoRI: {@code -Dkvflux.mori.lib=/path}, else {@code KVFLUX_MORI_LIB}, else
     * {@value #MORI_LIBRARY} on the dynamic loader's path.
     */
    public static MoriNative mori() {
        String property = System.getProperty(MORI_PROPERTY);
        if (property != null && !property.isBlank()) {
            return load(Path.of(property), "-D" + MORI_PROPERTY, HOW_TO_BUILD_MORI);
        }
        String env = System.getenv(MORI_ENV);
        if (env != null && !env.isBlank()) {
            return load(Path.of(env), MORI_ENV, HOW_TO_BUILD_MORI);
        }
        return LOADED.computeIfAbsent("name:" + MORI_LIBRARY, key -> {
            SymbolLookup lookup;
            try {
                lookup = SymbolLookup.libraryLookup(MORI_LIBRARY, Arena.global());
            } catch (IllegalArgumentException | IllegalCallerException e) {
                throw unavailable(MORI_LIBRARY + " could not be loaded from the dynamic loader's path"
                        + loaderReason(MORI_LIBRARY) + ". " + HOW_TO_BUILD_MORI, e);
            }
            return bindChecked(lookup, MORI_LIBRARY, HOW_TO_BUILD_MORI);
        });
    }

    /** A library at {@code path}; {@code source} says where the path came from, for the error. */
    public static MoriNative load(Path path, String source, String howToGet) {
        Path absolute = path.toAbsolutePath().normalize();
        return LOADED.computeIfAbsent("path:" + absolute, key -> {
            if (!Files.isRegularFile(absolute)) {
                throw unavailable(source + " names " + absolute + ", which is not a file. " + howToGet, null);
            }
            SymbolLookup lookup;
            try {
                lookup = SymbolLookup.libraryLookup(absolute, Arena.global());
            } catch (IllegalArgumentException | IllegalCallerException e) {
                throw unavailable(absolute + " (from " + source + ") could not be loaded"
                        + loaderReason(absolute.toString()) + ". " + howToGet, e);
            }
            return bindChecked(lookup, absolute.toString(), howToGet);
        });
    }

    private static MoriNative bindChecked(SymbolLookup lookup, String library, String howToGet) {
        MoriNative lib = new MoriNative(lookup, library);
        int version = lib.abiVersion();
        if (version != ABI_VERSION) {
            throw unavailable(library + " implements kvflux_mori.h ABI version " + version + ", this kvflux needs "
                    + ABI_VERSION + ". " + howToGet, null);
        }
        return lib;
    }

    private static Path extractSimulator() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (!os.startsWith("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
            throw unavailable("the kvflux jar carries libkvflux_mori_sim.so for linux-x86_64 only; this JVM runs on "
                    + os + "/" + arch + ". " + HOW_TO_BUILD_SIM, null);
        }
        URL url = NativeLibraries.class.getResource(SIM_RESOURCE);
        if (url == null) {
            throw unavailable("libkvflux_mori_sim.so is not on the class path (resource " + SIM_RESOURCE + "). "
                    + HOW_TO_BUILD_SIM, null);
        }
        try {
            if ("file".equals(url.getProtocol())) {
                return Path.of(url.toURI());
            }
            Path copy = Files.createTempFile("libkvflux_mori_sim-", ".so");
            copy.toFile().deleteOnExit();
            try (InputStream in = url.openStream()) {
                Files.copy(in, copy, StandardCopyOption.REPLACE_EXISTING);
            }
            return copy;
        } catch (IOException | URISyntaxException e) {
            throw unavailable("libkvflux_mori_sim.so could not be extracted from " + url + " to a temporary file ("
                    + e.getMessage() + "); check java.io.tmpdir is writable, or " + HOW_TO_BUILD_SIM, e);
        }
    }

    /** The dynamic loader's own reason (dlerror), such as a missing libmori_io.so, or empty. */
    private static String loaderReason(String library) {
        try (Arena arena = Arena.ofConfined()) {
            Linker linker = Linker.nativeLinker();
            Optional<MemorySegment> open = linker.defaultLookup().find("dlopen");
            Optional<MemorySegment> error = linker.defaultLookup().find("dlerror");
            if (open.isEmpty() || error.isEmpty()) {
                return "";
            }
            MethodHandle dlopen = linker.downcallHandle(open.get(), FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT));
            MethodHandle dlerror = linker.downcallHandle(error.get(), FunctionDescriptor.of(ADDRESS));
            MemorySegment handle = (MemorySegment) dlopen.invokeExact(arena.allocateFrom(library), 2 /* RTLD_NOW */);
            if (!handle.equals(MemorySegment.NULL)) {
                return "";
            }
            MemorySegment text = (MemorySegment) dlerror.invokeExact();
            return text.equals(MemorySegment.NULL) ? "" : " (" + text.reinterpret(4096).getString(0) + ")";
        } catch (Throwable t) {
            return "";
        }
    }

    private static MoriIoException unavailable(String message, Throwable cause) {
        return new MoriIoException(MoriIoException.LIBRARY_UNAVAILABLE, "KVFLUX_MORI_E_LIBRARY", message, cause);
    }
}
