package dev.kvflux.tools.bundle;

/** The bundle's {@code bin/kvflux} and its {@code README.txt}. */
final class Launcher {
    private Launcher() {
    }

    /**
     * A POSIX shell launcher that uses only shell built-ins, so it runs with an empty {@code PATH}: the bundle's
     * own Java runtime and jars, the role commands' JVM options from {@code config/role-jvm.options} then
     * {@code KVFLUX_JAVA_OPTS}, as {@code ./kvflux} in a checkout, and the bundle's MoRI shim unless
     * {@code KVFLUX_MORI_LIB} names another.
     */
    static String script() {
        return """
                #!/bin/sh
                # kvflux from this bundle: its own Java runtime and jars, and for a GPU platform the MoRI libraries;
                # nothing else is needed on this host (no JDK, Maven or network), not even a PATH.
                bin=${0%/*}
                [ "$bin" = "$0" ] && bin=.
                here=$(CDPATH= cd -P -- "$bin/.." && pwd -P) || exit 1
                if [ ! -x "$here/runtime/bin/java" ]; then
                    echo "kvflux: no runtime/bin/java beside $bin; run bin/kvflux by its real path, not through a link" >&2
                    exit 1
                fi
                role_opts=
                case "${1:-}" in
                    prefill|decode|proxy)
                        # one option a line; KVFLUX_JAVA_OPTS comes after them, and of two settings the last wins
                        while read -r line || [ -n "$line" ]; do
                            case "$line" in
                                ''|'#'*) ;;
                                *) role_opts="$role_opts $line" ;;
                            esac
                        done < "$here/config/role-jvm.options"
                        role_opts="$role_opts ${KVFLUX_JAVA_OPTS:-}"
                        # glibc keeps 8 malloc arenas per core by default, each holding the pages its threads freed
                        MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2}
                        export MALLOC_ARENA_MAX
                        ;;
                esac
                if [ -d "$here/mori" ]; then
                    # MoRI finds its own libraries beside it; the host libraries there (libpci's libudev) only
                    # through this path
                    LD_LIBRARY_PATH="$here/mori${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
                    export LD_LIBRARY_PATH
                    if [ -z "${KVFLUX_MORI_LIB:-}" ]; then
                        KVFLUX_MORI_LIB="$here/mori/libkvflux_mori.so"
                        export KVFLUX_MORI_LIB
                    fi
                fi
                # role_opts is unquoted on purpose, one word per option, and not expanded as file names
                set -f
                exec "$here/runtime/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow \\
                    $role_opts -cp "$here/lib/*" dev.kvflux.tools.cli.KvfluxCli "$@"
                """;
    }

    static String readme(Bundle.Platform platform, String top) {
        String gpu = platform == Bundle.Platform.SIM ? "" : """

                The GPU backends use this host's driver and runtime (libcudart for cuda, libamdhip64 for hip), which
                the bundle does not carry. mori/ holds MoRI IO and kvflux's shim over it, built for %s, with the
                libraries a GPU image often lacks; bin/kvflux points kvflux at them (KVFLUX_MORI_LIB overrides).

                  %s/bin/kvflux repro --backend mori --gpu 0
                """.formatted(platform.key(), top);
        return """
                kvflux, %s bundle: a Java runtime (runtime/), the application's jars (lib/) and bin/kvflux.
                Unpack it anywhere and run bin/kvflux; nothing needs installing.

                  tar -xzf %s.tar.gz
                  %s/bin/kvflux repro --backend native-sim
                  %s/bin/kvflux --help
                %s""".formatted(platform.key(), top, top, top, gpu);
    }
}
