// The per-record work of the broker's commit log recovery, timed beside rmqtool in `make bench`.
//
// What CommitLog.recoverAbnormally does for each record at 4.9.8 (checkMessageAndReturnSize with
// checkCRC=true, readBody=true): read every header field, the body, topic and properties, check the
// body CRC (UtilAll.crc32: java.util.zip.CRC32 masked to 31 bits), build the properties map
// (MessageDecoder.string2messageProperties) and take KEYS, UNIQ_KEY and the tags code from it, and
// check that totalSize equals the length computed from the fields; roll to the next file on the
// end-of-file blank record and stop at the first record that is not one. Files are mapped as the
// broker maps them. Not done: dispatch (writing consume queue units and index entries), which the
// broker's abnormal recovery does on top of this loop.
//
// usage: java RecoveryScan.java COMMITLOG_DIR  ->  prints "messages bytes seconds"
import java.io.File;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.zip.CRC32;

public class RecoveryScan {
    static final int MAGIC_V1 = 0xDAA320A7;
    static final int MAGIC_V2 = 0xDAA320AB;
    static final int BLANK_MAGIC = 0xCBD43194;

    public static void main(String[] args) throws Exception {
        File[] files = new File(args[0]).listFiles((d, n) -> n.matches("\\d{20}"));
        Arrays.sort(files);
        long start = System.nanoTime();
        long messages = 0, bytes = 0;
        CRC32 crc = new CRC32();
        byte[] body = new byte[1 << 16];
        outer:
        for (File f : files) {
            try (RandomAccessFile raf = new RandomAccessFile(f, "r"); FileChannel ch = raf.getChannel()) {
                MappedByteBuffer buf = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
                while (buf.remaining() >= 8) {
                    int pos = buf.position();
                    int total = buf.getInt();
                    int magic = buf.getInt();
                    if (magic == BLANK_MAGIC) continue outer;
                    if (magic != MAGIC_V1 && magic != MAGIC_V2) break outer;
                    if (total <= 0 || pos + total > buf.limit()) break outer;
                    int bodyCrc = buf.getInt();
                    buf.getInt(); buf.getInt();               // queueId, flag
                    buf.getLong(); buf.getLong();             // queueOffset, physicalOffset
                    int sysFlag = buf.getInt();
                    buf.getLong();                            // bornTimestamp
                    int bornIp = (sysFlag & (1 << 4)) == 0 ? 4 : 16;
                    buf.position(buf.position() + bornIp + 4);
                    buf.getLong();                            // storeTimestamp
                    int storeIp = (sysFlag & (1 << 5)) == 0 ? 4 : 16;
                    buf.position(buf.position() + storeIp + 4);
                    buf.getInt(); buf.getLong();              // reconsumeTimes, preparedTransactionOffset
                    int bodyLen = buf.getInt();
                    if (bodyLen < 0 || bodyLen > total) break outer;
                    if (bodyLen > 0) {
                        if (body.length < bodyLen) body = new byte[bodyLen];
                        buf.get(body, 0, bodyLen);
                        crc.reset();
                        crc.update(body, 0, bodyLen);
                        if ((int) (crc.getValue() & 0x7FFFFFFF) != bodyCrc) break outer;
                    }
                    int topicLen = magic == MAGIC_V2 ? buf.getShort() : buf.get();
                    byte[] topic = new byte[topicLen];
                    buf.get(topic);
                    new String(topic, StandardCharsets.UTF_8);
                    short propsLen = buf.getShort();
                    if (propsLen > 0) {
                        byte[] props = new byte[propsLen];
                        buf.get(props);
                        Map<String, String> map = string2messageProperties(new String(props, StandardCharsets.UTF_8));
                        String keys = map.get("KEYS");
                        String uniqKey = map.get("UNIQ_KEY");
                        String tags = map.get("TAGS");
                        long tagsCode = tags != null && !tags.isEmpty() ? tags.hashCode() : 0;
                        sink += (keys == null ? 0 : keys.length()) + (uniqKey == null ? 0 : uniqKey.length()) + tagsCode;
                    }
                    int computed = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + bornIp + 4 + 8 + storeIp + 4 + 4 + 8
                        + 4 + Math.max(bodyLen, 0) + (magic == MAGIC_V2 ? 2 : 1) + topicLen + 2 + Math.max(propsLen, 0);
                    if (computed != total) break outer;
                    messages++;
                    bytes += total;
                }
            }
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        if (sink == 42) System.err.print("");  // keeps the JIT from dropping the map lookups
        System.out.println(messages + " " + bytes + " " + seconds);
    }

    static long sink;

    // MessageDecoder.string2messageProperties at 4.9.8: NAME\u0001VALUE\u0002 pairs into a HashMap.
    static Map<String, String> string2messageProperties(String properties) {
        Map<String, String> map = new HashMap<>();
        if (properties != null) {
            int len = properties.length();
            int index = 0;
            while (index < len) {
                int newIndex = properties.indexOf('\u0002', index);
                if (newIndex < 0) newIndex = len;
                if (newIndex - index >= 3) {
                    int kvSepIndex = properties.indexOf('\u0001', index);
                    if (kvSepIndex > index && kvSepIndex < newIndex - 1) {
                        map.put(properties.substring(index, kvSepIndex), properties.substring(kvSepIndex + 1, newIndex));
                    }
                }
                index = newIndex + 1;
            }
        }
        return map;
    }
}
