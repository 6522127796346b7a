package dev.kvflux.serving.http;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

/** The in-place UTF-8 check agrees with the JDK's strict decoder, and names the first malformed byte. */
class Utf8Test {

    private static boolean jdkAccepts(byte[] bytes) {
        try {
            StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes));
            return true;
        } catch (CharacterCodingException e) {
            return false;
        }
    }

    @Property(tries = 2000)
    void acceptsExactlyWhatTheStrictDecoderAccepts(@ForAll @Size(max = 12) byte[] bytes) {
        assertThat(Utf8.firstMalformed(bytes) < 0).isEqualTo(jdkAccepts(bytes));
    }

    @Property(tries = 500)
    void acceptsTheEncodingOfAnyWellFormedText(@ForAll String text) {
        // a lone surrogate is not well-formed text: the JDK encodes it as '?'
        assertThat(Utf8.firstMalformed(text.getBytes(StandardCharsets.UTF_8))).isEqualTo(-1);
    }

    @Test
    void namesTheFirstByteOfAnOverlongASurrogateOrATruncatedSequence() {
        assertThat(Utf8.firstMalformed(new byte[] {'a', (byte) 0xC0, (byte) 0x80})).isEqualTo(1);
        assertThat(Utf8.firstMalformed(new byte[] {'a', 'b', (byte) 0xED, (byte) 0xA0, (byte) 0x80})).isEqualTo(2);
        assertThat(Utf8.firstMalformed(new byte[] {(byte) 0xF4, (byte) 0x90, (byte) 0x80, (byte) 0x80})).isZero();
        assertThat(Utf8.firstMalformed(new byte[] {'x', (byte) 0xE2, (byte) 0x82})).isEqualTo(1);
        assertThat(Utf8.firstMalformed("é€𝄞".getBytes(StandardCharsets.UTF_8))).isEqualTo(-1);
    }
}
