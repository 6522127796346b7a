package dev.kvflux.tools.bundle;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import java.util.zip.GZIPOutputStream;

/**
 * Writes a folder as a gzip-compressed POSIX (ustar) tar archive: regular files, folders and symbolic links with
 * their permission bits, so an unpacked {@code bin/java} is still executable. Names longer than ustar allows
 * (255 bytes, split at a {@code /} into 155 and 100) are refused rather than cut.
 */
public final class TarGz {
    private static final int BLOCK = 512;

    private TarGz() {
    }

    /** Writes {@code folder} and everything under it to {@code archive}, named {@code top/...} inside. */
    public static void write(Path folder, String top, Path archive) throws IOException {
        try (OutputStream file = Files.newOutputStream(archive);
             GZIPOutputStream gzip = new GZIPOutputStream(new BufferedOutputStream(file, 1 << 16), 1 << 16);
             Stream<Path> walk = Files.walk(folder)) {
            List<Path> entries = walk.sorted().toList();
            for (Path path : entries) {
                String relative = folder.relativize(path).toString().replace('\\', '/');
                String name = relative.isEmpty() ? top : top + "/" + relative;
                entry(gzip, path, name);
            }
            gzip.write(new byte[2 * BLOCK]); // the end of the archive: two zero blocks
        }
    }

    private static void entry(OutputStream out, Path path, String name) throws IOException {
        if (Files.isSymbolicLink(path)) {
            out.write(header(name, 0777, 0, '2', Files.readSymbolicLink(path).toString(), path));
        } else if (Files.isDirectory(path, LinkOption.NOFOLLOW_LINKS)) {
            out.write(header(name + "/", mode(path), 0, '5', "", path));
        } else {
            long size = Files.size(path);
            out.write(header(name, mode(path), size, '0', "", path));
            try (InputStream in = Files.newInputStream(path)) {
                long copied = in.transferTo(out);
                if (copied != size) {
                    throw new IOException(path + " changed while it was archived (" + size + " bytes, then " + copied
                            + ")");
                }
            }
            int pad = (int) ((BLOCK - size % BLOCK) % BLOCK);
            out.write(new byte[pad]);
        }
    }

    private static int mode(Path path) throws IOException {
        Set<PosixFilePermission> permissions = Files.getPosixFilePermissions(path, LinkOption.NOFOLLOW_LINKS);
        int mode = 0;
        for (PosixFilePermission p : permissions) {
            mode |= switch (p) {
                case OWNER_READ -> 0400;
                case OWNER_WRITE -> 0200;
                case OWNER_EXECUTE -> 0100;
                case GROUP_READ -> 040;
                case GROUP_WRITE -> 020;
                case GROUP_EXECUTE -> 010;
                case OTHERS_READ -> 04;
                case OTHERS_WRITE -> 02;
                case OTHERS_EXECUTE -> 01;
            };
        }
        return mode;
    }

    /** One ustar header block. */
    static byte[] header(String name, int mode, long size, char type, String link, Path source) throws IOException {
        byte[] h = new byte[BLOCK];
        byte[] full = name.getBytes(StandardCharsets.UTF_8);
        String prefix = "";
        String rest = name;
        if (full.length > 100) {
            int cut = name.lastIndexOf('/', name.length() - 2);
            while (cut > 0 && (name.substring(0, cut).getBytes(StandardCharsets.UTF_8).length > 155
                    || name.substring(cut + 1).getBytes(StandardCharsets.UTF_8).length > 100)) {
                cut = name.lastIndexOf('/', cut - 1);
            }
            if (cut <= 0) {
                throw new IOException("cannot archive " + source + ": its name in the archive, " + name
                        + ", is longer than a tar header holds");
            }
            prefix = name.substring(0, cut);
            rest = name.substring(cut + 1);
        }
        byte[] linkBytes = link.getBytes(StandardCharsets.UTF_8);
        if (linkBytes.length > 100) {
            throw new IOException("cannot archive the link " + source + ": its target " + link + " is too long");
        }
        put(h, 0, 100, rest.getBytes(StandardCharsets.UTF_8));
        octal(h, 100, 8, mode);
        octal(h, 108, 8, 0); // uid
        octal(h, 116, 8, 0); // gid
        octal(h, 124, 12, size);
        octal(h, 136, 12, Files.getLastModifiedTime(source, LinkOption.NOFOLLOW_LINKS).toMillis() / 1000);
        h[156] = (byte) type;
        put(h, 157, 100, linkBytes);
        put(h, 257, 6, "ustar\0".getBytes(StandardCharsets.US_ASCII));
        put(h, 263, 2, "00".getBytes(StandardCharsets.US_ASCII));
        put(h, 345, 155, prefix.getBytes(StandardCharsets.UTF_8));
        // the checksum is taken with its own field as 8 spaces
        java.util.Arrays.fill(h, 148, 156, (byte) ' ');
        long sum = 0;
        for (byte b : h) {
            sum += b & 0xff;
        }
        String checksum = String.format("%06o", sum);
        put(h, 148, 6, checksum.getBytes(StandardCharsets.US_ASCII));
        h[154] = 0;
        h[155] = ' ';
        return h;
    }

    private static void put(byte[] h, int at, int width, byte[] value) {
        System.arraycopy(value, 0, h, at, Math.min(width, value.length));
    }

    private static void octal(byte[] h, int at, int width, long value) {
        String digits = Long.toOctalString(value);
        if (digits.length() > width - 1) {
            throw new IllegalArgumentException(value + " does not fit a tar field of " + width + " bytes");
        }
        String padded = "0".repeat(width - 1 - digits.length()) + digits;
        put(h, at, width - 1, padded.getBytes(StandardCharsets.US_ASCII));
        h[at + width - 1] = 0;
    }
}
