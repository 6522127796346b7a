package dev.kvflux.serving.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.kvflux.transfer.notify.NotifyAuth;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

/**
 * A membership record in etcd: the key layout, the value's format, and what a reader refuses (a record signed with
 * another secret, altered, unsigned, moved to another key, cluster or lease, stale when just put, oversized).
 */
class EtcdMemberRecordTest {
    private static final String SECRET = "member-record-test-secret-0123456789";
    private static final RegistrationAuth AUTH = RegistrationAuth.of(NotifyAuth.of(SECRET));
    private static final Instance DECODE = new Instance(Role.DECODE, Instance.address("127.0.0.1:8200"),
            Instance.address("127.0.0.1:8201"));
    private static final MemberRecord RECORD = new MemberRecord("prod", DECODE, 42, 7);

    private static String reason(Runnable read) {
        try {
            read.run();
        } catch (MemberRecord.RefusedException e) {
            return e.reason();
        }
        throw new AssertionError("the record was accepted");
    }

    @Test
    void aRecordLivesUnderItsClusterRoleAndIncarnation() {
        assertThat(MemberRecord.prefix("prod")).isEqualTo("/kvflux/prod/instances/");
        assertThat(RECORD.key()).isEqualTo("/kvflux/prod/instances/decode/42");
    }

    @Test
    void aSignedRecordIsReadBackWithItsSigningTime() {
        byte[] value = RECORD.encode(AUTH);

        MemberRecord.Accepted accepted = MemberRecord.read("prod", RECORD.key(), value, 7, AUTH, true);

        assertThat(accepted.record()).isEqualTo(RECORD);
        assertThat(accepted.signedAtMillis()).isCloseTo(System.currentTimeMillis(), org.assertj.core.data.Offset.offset(5_000L));
        assertThat(new String(value, StandardCharsets.UTF_8)).startsWith("{\"record\":\"{\\\"cluster\\\":\\\"prod\\\"")
                .contains("\"ts\":").contains("\"signature\":\"");
    }

    @Test
    void anUnsignedRecordIsTakenByAReaderWithoutASecretAndRefusedByOneWithIt() {
        byte[] value = RECORD.encode(null);

        assertThat(MemberRecord.read("prod", RECORD.key(), value, 7, null, true).signedAtMillis())
                .isEqualTo(Long.MIN_VALUE);
        assertThat(reason(() -> MemberRecord.read("prod", RECORD.key(), value, 7, AUTH, true))).isEqualTo("unsigned");
    }

    @Test
    void aRecordSignedWithAnotherSecretOrAlteredIsRefused() {
        byte[] otherSecret = RECORD.encode(RegistrationAuth.of(NotifyAuth.of("another-secret-of-the-right-size")));
        byte[] altered = new String(RECORD.encode(AUTH), StandardCharsets.UTF_8).replace("8201", "9999")
                .getBytes(StandardCharsets.UTF_8);

        assertThat(reason(() -> MemberRecord.read("prod", RECORD.key(), otherSecret, 7, AUTH, false)))
                .isEqualTo("bad_signature");
        assertThat(reason(() -> MemberRecord.read("prod", RECORD.key(), altered, 7, AUTH, false)))
                .isEqualTo("bad_signature");
    }

    @Test
    void aSignedRecordMovedToAnotherKeyClusterOrLeaseIsRefused() {
        byte[] value = RECORD.encode(AUTH);

        assertThat(reason(() -> MemberRecord.read("prod", "/kvflux/prod/instances/decode/43", value, 7, AUTH, false)))
                .isEqualTo("mismatch");
        assertThat(reason(() -> MemberRecord.read("prod", "/kvflux/prod/instances/prefill/42", value, 7, AUTH, false)))
                .isEqualTo("mismatch");
        assertThat(reason(() -> MemberRecord.read("staging", "/kvflux/staging/instances/decode/42", value, 7, AUTH,
                false))).isEqualTo("mismatch");
        assertThat(reason(() -> MemberRecord.read("prod", RECORD.key(), value, 8, AUTH, false))).isEqualTo("mismatch");
    }

    @Test
    void aRecordSignedLongAgoIsTakenWhenReadBackButRefusedWhenJustPut() {
        VirtualTimeScheduler past = VirtualTimeScheduler.create();
        past.advanceTimeTo(Instant.ofEpochMilli(System.currentTimeMillis() - 60_000));
        byte[] old = RECORD.encode(RegistrationAuth.of(NotifyAuth.of(SECRET).clock(past)));

        assertThat(MemberRecord.read("prod", RECORD.key(), old, 7, AUTH, false).record()).isEqualTo(RECORD);
        assertThatThrownBy(() -> MemberRecord.read("prod", RECORD.key(), old, 7, AUTH, true))
                .isInstanceOfSatisfying(MemberRecord.RefusedException.class, e -> assertThat(e.reason()).isEqualTo("stale"))
                .hasMessageContaining("beyond the 30000 ms allowed");
    }

    @Test
    void keysOutsideTheLayoutAndOversizedOrMalformedValuesAreRefused() {
        byte[] value = RECORD.encode(AUTH);

        assertThat(reason(() -> MemberRecord.read("prod", "/kvflux/prod/other/decode/42", value, 7, AUTH, false)))
                .isEqualTo("malformed_key");
        assertThat(reason(() -> MemberRecord.read("prod", "/kvflux/prod/instances/chef/42", value, 7, AUTH, false)))
                .isEqualTo("malformed_key");
        assertThat(reason(() -> MemberRecord.read("prod", "/kvflux/prod/instances/decode/042", value, 7, AUTH, false)))
                .isEqualTo("malformed_key");
        assertThat(reason(() -> MemberRecord.read("prod", "/kvflux/prod/instances/decode/42/x", value, 7, AUTH, false)))
                .isEqualTo("malformed_key");
        assertThat(reason(() -> MemberRecord.read("prod", RECORD.key(), new byte[MemberRecord.MAX_BYTES + 1], 7, AUTH,
                false))).isEqualTo("oversized");
        assertThat(reason(() -> MemberRecord.read("prod", RECORD.key(), "[1, 2]".getBytes(StandardCharsets.UTF_8), 7,
                AUTH, false))).isEqualTo("malformed");
        assertThat(reason(() -> MemberRecord.read("prod", RECORD.key(), ("{\"record\": \"{\\\"cluster\\\": \\\"prod\\\","
                + " \\\"role\\\": \\\"decode\\\", \\\"http\\\": \\\"bad host:1\\\"}\"}").getBytes(StandardCharsets.UTF_8),
                7, null, false))).isEqualTo("malformed");
    }

    @Test
    void aRegistrationsSignatureDoesNotPassForARecords() {
        byte[] body = "{}".getBytes(StandardCharsets.UTF_8);
        io.netty.handler.codec.http.HttpHeaders signed = AUTH.sign(new io.netty.handler.codec.http.DefaultHttpHeaders(),
                body);
        RegistrationAuth.Signature asRecord = new RegistrationAuth.Signature(
                Long.parseLong(signed.get(RegistrationAuth.TS_HEADER)), signed.get(RegistrationAuth.SIGNATURE_HEADER));

        assertThatThrownBy(() -> AUTH.verifyRecord(asRecord, body)).hasMessageContaining("signature is wrong");
    }
}
