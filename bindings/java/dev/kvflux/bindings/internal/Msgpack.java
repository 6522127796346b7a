package dev.kvflux.bindings.internal;

/**
 * Whether msgpack-core is there. It is an optional dependency of kvflux-bindings: only MoRI's and the GPU
 * engine's memory descriptors are msgpack, so an application that uses the operators or the pipeline alone
 * does not get it. The classes that read or write descriptors keep their msgpack calls in a nested class
 * that is loaded only after {@link #require} has passed.
 *
 * <p>The module descriptor does not require msgpack-core (its jar names no module, so the name would be guessed
 * from the file's), so when this class finds msgpack-core it makes {@code dev.kvflux.bindings} read msgpack-core's
 * module: the automatic one where msgpack-core is on the module path, the unnamed one where it is on the class
 * path and the bindings are not. Where both are on the class path it changes nothing.
 *
 * <p>Before msgpack-core's buffers are first loaded, it sets msgpack-core's own switch {@value #UNIVERSAL_BUFFER} to
 * {@code true} unless the application set it: its buffers then work over {@code java.nio} and never call
 * {@code sun.misc.Unsafe}, so JDK 24 and later print no warnings about it, whatever {@code
 * --sun-misc-unsafe-memory-access} says. Descriptors are a few hundred bytes; the faster buffers would gain nothing.
 */
public final class Msgpack {
    private static final String PROBE = "org.msgpack.core.MessagePack";
    /** msgpack-core's system property choosing its buffers that need no {@code sun.misc.Unsafe}. */
    public static final String UNIVERSAL_BUFFER = "msgpack.universal-buffer";
    private static final boolean PRESENT = readIfPresent(Msgpack.class.getClassLoader());

    private Msgpack() {
    }

    /**
     * Returns if msgpack-core can be loaded.
     *
     * @param what what needs it, in the plural ("GPU memory descriptors"), for the message
     * @throws IllegalStateException saying that {@code what} needs msgpack-core and how to add it
     */
    public static void require(String what) {
        if (!PRESENT) {
            throw missing(what);
        }
    }

    private static boolean readIfPresent(ClassLoader loader) {
        try {
            Module msgpack = Class.forName(PROBE, false, loader).getModule();
            if (System.getProperty(UNIVERSAL_BUFFER) == null) {
                System.setProperty(UNIVERSAL_BUFFER, "true"); // read once, when msgpack-core's buffers load
            }
            Msgpack.class.getModule().addReads(msgpack);
            return true;
        } catch (ClassNotFoundException | LinkageError e) {
            return false;
        }
    }

    private static IllegalStateException missing(String what) {
        return new IllegalStateException(what + " are msgpack, and msgpack-core is not available: add the"
                + " dependency org.msgpack:msgpack-core (0.9.x) beside kvflux-bindings (on the module path,"
                + " also --add-modules msgpack.core)");
    }
}
