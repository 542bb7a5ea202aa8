// The per-record work of QMQ's message log recovery, timed beside rmqtool in `make bench`.
//
// What MessageLogSegmentValidator does for each record of a segment (qunarcorp/qmq 5abc92f4):
// read the magic (V1..V3), the attributes and the timestamp; an end-of-segment record (1) ends
// the segment; for a message (0) read the sequence, the subject's length and skip the subject,
// read the payload CRC and size, copy the payload out and check its CRC-32 against the stored
// one. Segments are mapped as QMQ maps them (FileChannel.map at the file's size). The first
// bad record, or zeros, ends the walk of a segment.
//
// usage: java QmqValidate MESSAGELOG_DIR  ->  prints "records bytes seconds"
import java.io.File;
import java.io.RandomAccessFile;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.util.Arrays;
import java.util.zip.CRC32;

public class QmqValidate {
    static final int MAGIC_V1 = 0xA1B2C300;
    static final int MAGIC_V3 = 0xA1B2C302;

    public static void main(String[] args) throws Exception {
        File[] files = new File(args[0]).listFiles((d, n) -> n.matches("\\d{20}"));
        Arrays.sort(files);
        long records = 0, bytes = 0;
        long started = System.nanoTime();
        CRC32 crc = new CRC32();
        for (File f : files) {
            try (RandomAccessFile raf = new RandomAccessFile(f, "r"); FileChannel ch = raf.getChannel()) {
                MappedByteBuffer buf = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
                int pos = 0;
                int limit = buf.limit();
                while (pos + 13 <= limit) {
                    int magic = buf.getInt(pos);
                    if (magic < MAGIC_V1 || magic > MAGIC_V3) break;  // both negative as ints
                    byte attributes = buf.get(pos + 4);
                    if (attributes == 1) break;  // the rest of the segment is unused
                    if (attributes != 0) break;
                    int at = pos + 13;
                    buf.getLong(at);  // sequence
                    short subjectSize = buf.getShort(at + 8);
                    at += 10 + subjectSize;
                    long stored = magic == MAGIC_V1 ? 0 : buf.getLong(at);
                    if (magic != MAGIC_V1) at += 8;
                    int payloadSize = buf.getInt(at);
                    at += 4;
                    byte[] payload = new byte[payloadSize];
                    buf.get(at, payload);
                    crc.reset();
                    crc.update(payload, 0, payloadSize);
                    if (magic != MAGIC_V1 && crc.getValue() != stored) break;
                    int size = at + payloadSize - pos;
                    records++;
                    bytes += size;
                    pos += size;
                }
            }
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        System.out.println(records + " " + bytes + " " + seconds);
    }
}
