// The per-record work of QMQ's message log recovery, timed beside rmqtool in `make bench`.
//
// What MessageLog.MessageLogSegmentValidator does for each record of a segment (qunarcorp/qmq
// 5abc92f4), with relative reads on a slice of the mapped segment as it reads them: the magic
// (V1, V2 or V3), the attributes and the timestamp; a blank record (2) gives its size, an
// end-of-segment record (1) ends the segment; for a message (0) the sequence, the subject's
// length, skip the subject, the payload CRC (read in every record, V1 too) and size, copy the
// payload out (new byte[]) and compare its CRC-32 with the stored one. The first bad record
// ends the walk of a segment, as it ends the validator's.
//
// The CRC is the one QMQ calls there: qunar.tc.qmq.utils.Crc32, Hadoop's PureJavaCrc32, a
// table-driven CRC-32 eight bytes a step in plain Java (below, written from the algorithm; its
// tables are built from the polynomial). "jdk" as the second argument uses java.util.zip.CRC32
// instead (the JDK's intrinsic, which QMQ's validator does not call), for comparison.
//
// usage: java QmqValidate MESSAGELOG_DIR [qmq|jdk]  ->  prints "records bytes seconds"
import java.io.File;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.Arrays;
import java.util.zip.CRC32;

public class QmqValidate {
    static final int MAGIC_V1 = 0xA1B2C300;
    static final int MAGIC_V2 = 0xA1B2C301;
    static final int MAGIC_V3 = 0xA1B2C302;
    static final byte ATTR_MESSAGE = 0, ATTR_EMPTY = 1, ATTR_BLANK = 2;

    // eight 256-entry tables: T[k * 256 + b] is byte b's CRC followed by k zero bytes
    static final int[] T = new int[8 * 256];
    static {
        for (int b = 0; b < 256; b++) {
            int c = b;
            for (int bit = 0; bit < 8; bit++) c = (c >>> 1) ^ ((c & 1) != 0 ? 0xEDB88320 : 0);
            T[b] = c;
        }
        for (int k = 1; k < 8; k++)
            for (int b = 0; b < 256; b++) {
                int prev = T[(k - 1) * 256 + b];
                T[k * 256 + b] = (prev >>> 8) ^ T[prev & 0xff];
            }
    }

    static long pureJavaCrc32(byte[] b) {
        int crc = 0xffffffff, off = 0, len = b.length;
        while (len > 7) {
            int lo = crc ^ ((b[off] & 0xff) | (b[off + 1] & 0xff) << 8 | (b[off + 2] & 0xff) << 16 | (b[off + 3] & 0xff) << 24);
            crc = T[7 * 256 + (lo & 0xff)] ^ T[6 * 256 + ((lo >>> 8) & 0xff)]
                ^ T[5 * 256 + ((lo >>> 16) & 0xff)] ^ T[4 * 256 + (lo >>> 24)]
                ^ T[3 * 256 + (b[off + 4] & 0xff)] ^ T[2 * 256 + (b[off + 5] & 0xff)]
                ^ T[256 + (b[off + 6] & 0xff)] ^ T[b[off + 7] & 0xff];
            off += 8;
            len -= 8;
        }
        while (len-- > 0) crc = (crc >>> 8) ^ T[(crc ^ b[off++]) & 0xff];
        return ~crc & 0xffffffffL;
    }

    static long records, bytes;

    // one segment, as the validator walks it: where its valid records end
    static int validate(ByteBuffer buffer, int fileSize, boolean jdk, CRC32 crc) {
        int position = 0;
        while (position != fileSize) {
            int magic = buffer.getInt();
            if (magic != MAGIC_V1 && magic != MAGIC_V2 && magic != MAGIC_V3) return position;
            byte attributes = buffer.get();
            buffer.getLong();  // timestamp
            if (attributes == ATTR_BLANK) {
                position += buffer.getInt();
                continue;
            }
            if (attributes == ATTR_EMPTY) return fileSize;
            if (attributes != ATTR_MESSAGE) return position;
            buffer.getLong();  // sequence
            short subjectSize = buffer.getShort();
            buffer.position(buffer.position() + subjectSize);
            long stored = buffer.getLong();
            int payloadSize = buffer.getInt();
            byte[] payload = new byte[payloadSize];
            buffer.get(payload);
            long computed;
            if (jdk) {
                crc.reset();
                crc.update(payload, 0, payloadSize);
                computed = crc.getValue();
            } else {
                computed = pureJavaCrc32(payload);
            }
            if (computed != stored) return position;
            int size = 4 + 1 + 8 + 8 + 2 + Math.max(subjectSize, 0) + 8 + 4 + payloadSize;
            records++;
            bytes += size;
            position += size;
        }
        return fileSize;
    }

    public static void main(String[] args) throws Exception {
        boolean jdk = args.length > 1 && args[1].equals("jdk");
        File[] files = new File(args[0]).listFiles((d, n) -> n.matches("\\d{20}"));
        Arrays.sort(files);
        long started = System.nanoTime();
        CRC32 crc = new CRC32();
        for (File f : files) {
            try (RandomAccessFile raf = new RandomAccessFile(f, "r"); FileChannel ch = raf.getChannel()) {
                int fileSize = (int) ch.size();
                validate(ch.map(FileChannel.MapMode.READ_ONLY, 0, fileSize).slice(), fileSize, jdk, crc);
            }
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        System.out.println(records + " " + bytes + " " + seconds);
    }
}
