package dev.kvflux.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Every bad argument of serve-bench and the serving roles ends the command before it starts anything: one
 * line naming the option and what it should be, exit code 2, no stack trace, nothing on stdout.
 */
class ArgumentChecksTest {
    @TempDir
    Path dir;

    private final StringWriter out = new StringWriter();
    private final StringWriter err = new StringWriter();

    private int run(String... args) {
        return KvfluxCli.commandLine().setOut(new PrintWriter(out, true)).setErr(new PrintWriter(err, true))
                .execute(args);
    }

    private void assertOneLineUsageError(int code, String... expected) {
        assertThat(code).isEqualTo(2);
        assertThat(err.toString().lines().toList()).as(err.toString()).singleElement().asString()
                .contains(expected).doesNotContain("Exception").doesNotContain("\tat ");
        assertThat(out.toString()).isEmpty();
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "--transfer-timeout 0               | --transfer-timeout must be greater than zero, got 0",
        "--transfer-timeout 25h             | --transfer-timeout must be at most 24h",
        "--num-prompts 0                    | --num-prompts must be from 1 to 10000000, got 0",
        "--num-prompts 4,0                  | --num-prompts must be from 1 to 10000000, got 0",
        "--concurrency 0                    | --concurrency must be from 1 to 10000, got 0",
        "--request-timeout 0                | --request-timeout must be greater than zero, got 0",
        "--receive-deadline 0ms             | --receive-deadline must be greater than zero",
        "--input-len 0                      | --input-len must be from 1 to 1048576, got 0",
        "--output-len 100000                | --output-len must be from 1 to 65536, got 100000",
        "--warmup -1                        | --warmup must be from 0 to 10000000, got -1",
        "--report /nonexistent/x.html       | --report /nonexistent/x.html: folder /nonexistent does not exist",
        "--inject-failures lots             | lots",
        "--policy fastest                   | fastest",
        "--transfer-timeout soon            | soon",
        "--first-token both                 | --first-token: unknown first-token source 'both'",
        "--model-time -1                    | model time must be a factor of 0 or more",
    })
    void serveBenchRefusesABadValueBeforeItRuns(String args, String message) {
        assertOneLineUsageError(run(("serve-bench " + args).trim().split("\\s+")), message);
    }

    @org.junit.jupiter.api.Test
    void serveBenchRefusesAReportPathThatIsAFolder() {
        assertOneLineUsageError(run("serve-bench", "--report", dir.toString()), "is a folder");
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "prefill --transfer-timeout 0                  | --transfer-timeout must be greater than zero",
        "prefill --http-port 70000                     | --http-port must be from 0 to 65535, got 70000",
        "decode --notify-port -1                       | --notify-port must be from 0 to 65535, got -1",
        "decode --proxy localhost:11353                | --proxy must be an http URL",
        "decode --receive-deadline 0s                  | --receive-deadline must be greater than zero",
        "decode --block-lease 0s                       | --block-lease must be greater than zero",
        "decode --kv-blocks 0                          | --kv-blocks must be from 1 to 16777216, got 0",
        "prefill --kv-blocks 100000000                 | --kv-blocks must be from 1 to 16777216, got 100000000",
        "proxy --port 70000                            | --port must be from 0 to 65535, got 70000",
        "proxy --instance-ttl 0                        | --instance-ttl must be greater than zero",
        "proxy --upstream-timeout 0                    | --upstream-timeout must be greater than zero",
        "proxy --max-instances-per-role 0              | --max-instances-per-role must be from 1 to 65536, got 0",
        "proxy --no-such-option                        | Unknown option: '--no-such-option'",
        "proxy --first-token both                      | unknown first-token source 'both'; choose decode",
    })
    void rolesRefuseABadValueBeforeTheyStart(String args, String message) {
        assertOneLineUsageError(run(args.trim().split("\\s+")), message);
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "proxy --discovery http://127.0.0.1:2379                                | --discovery 'http://127.0.0.1:2379' is not an etcd URL",
        "decode --discovery etcd://127.0.0.1                                    | is not etcd://HOST:PORT[,HOST:PORT...]",
        "prefill --discovery etcd://127.0.0.1:2379/v3                           | has no numeric port",
        "proxy --discovery etcd://127.0.0.1:2379 --cluster a/b                  | --cluster: cluster name 'a/b'",
        "decode --cluster prod                                                  | --cluster names a cluster in etcd",
        "decode --discovery etcd://127.0.0.1:2379 --proxy http://127.0.0.1:1    | give one of them",
        "decode --discovery etcd://127.0.0.1:2379 --lease-ttl 1500ms            | --lease-ttl: the lease TTL must be whole seconds",
        "prefill --lease-ttl 5s                                                 | --lease-ttl is the lease of a record in etcd",
    })
    void aBadMembershipOptionIsOneLineBeforeAnythingStarts(String args, String message) {
        assertOneLineUsageError(run(args.trim().split("\\s+")), message);
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "'- a\n- b\n'                         | holds a list at its top level",
        "'transfer:\n  timeout: 3s\ntransfer:\n  slice: 1ms\n' | holds a duplicate key transfer",
    })
    void aBadConfigurationFileEndsEveryCommandWithTheFileNamed(String yaml, String message) throws IOException {
        Path file = Files.writeString(dir.resolve("bad.yaml"), yaml);

        int code = run("proxy", "--config", file.toString(), "--port", "0", "--discovery-port", "0");

        assertThat(code).isEqualTo(2);
        assertThat(err.toString()).contains("configuration file " + file).contains(message)
                .doesNotContain("Exception");
    }
}
