package dev.kvflux.transfer.notify;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.constraints.StringLength;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/** kvflux's own msgpack writer writes byte for byte what msgpack's reference packer writes. */
class FlatMapWriterTest {

    @Property(tries = 2000)
    void integersTakeTheReferencePackersShortestForm(@ForAll long value) throws IOException {
        try (MessageBufferPacker reference = MessagePack.newDefaultBufferPacker()) {
            reference.packLong(value);
            assertThat(new FlatMapWriter().integer(value).toByteArray()).isEqualTo(reference.toByteArray());
        }
    }

    @Property(tries = 500)
    void stringsAreWrittenAsTheReferencePackerWritesThem(@ForAll @StringLength(max = 300) String value)
            throws IOException {
        assertSameString(value);
    }

    @Test
    void stringsAtEveryLengthBoundaryTakeTheReferencePackersForm() throws IOException {
        for (int length : new int[] {0, 31, 32, 255, 256, 65_535, 65_536, 70_000}) {
            assertSameString("é".repeat(length / 2) + "x".repeat(length % 2));
            assertSameString("x".repeat(length));
        }
    }

    @Property(tries = 200)
    void mapsOfArraysOfIntegersMatchTheReferencePacker(@ForAll @Size(max = 40) List<Long> blocks) throws IOException {
        assertSameHeaders(blocks);
    }

    @Test
    void headersAtEverySizeBoundaryTakeTheReferencePackersForm() throws IOException {
        for (int size : new int[] {15, 16, 65_535, 65_536}) {
            assertSameHeaders(java.util.Collections.nCopies(size, 7L));
        }
    }

    private static void assertSameString(String value) throws IOException {
        try (MessageBufferPacker reference = MessagePack.newDefaultBufferPacker()) {
            reference.packString(value);
            assertThat(new FlatMapWriter().string(value).toByteArray()).isEqualTo(reference.toByteArray());
        }
    }

    private static void assertSameHeaders(List<Long> blocks) throws IOException {
        try (MessageBufferPacker reference = MessagePack.newDefaultBufferPacker()) {
            reference.packMapHeader(blocks.size()).packArrayHeader(blocks.size());
            for (long block : blocks) {
                reference.packLong(block);
            }
            FlatMapWriter writer = new FlatMapWriter().map(blocks.size()).array(blocks.size());
            blocks.forEach(writer::integer);
            assertThat(writer.toByteArray()).isEqualTo(reference.toByteArray());
        }
    }
}
