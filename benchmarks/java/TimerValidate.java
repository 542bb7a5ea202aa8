// The per-unit work of the 5.x timer store's recover and dequeue, timed beside rmqtool's timer
// verify in `make bench`.
//
// 1. The timer log (TimerMessageStore.recoverAndRevise / checkTimerLog, rocketmq-all-5.3.3): every
//    file of STORE/timerlog in offset order, mapped as MappedFileQueue maps it; a unit every 52 B:
//    read size, prevPos, magic, currWriteTime, delayedTime, offsetPy, sizePy, hashCodeOfRealTopic;
//    a blank (magic BLANK_MAGIC_CODE) ends the file, size != 52 or a magic that is not isMagicOK
//    ends the log. Per unit: slot index = (currWriteTime + delayedTime) / 1000 % 1,209,600
//    (TimerWheel.getSlotIndex), the unit's chain link checked (its prevPos is the slot's lastPos
//    so far, -1 for the first: what recover's reviseSlot leaves and dequeue follows), then the
//    slot's lastPos is set to the unit's position; per slot the units are counted.
// 2. The wheel (TimerWheel over STORE/timerwheel, 2 x 604,800 slots of 32 B, mapped): per used
//    slot (a non-zero time), its index against its stored time, lastPos and num against what the
//    log gave, then its chain walked as dequeue walks it (from lastPos through each unit's
//    prevPos down to -1, each unit read from the mapped log: size 52, magic ok, its slot index the
//    slot's), with a bound on the steps so a loop ends the walk.
// 3. With --dequeue-reads, each unit walked also has its message read as dequeue's get service
//    reads it (TimerMessageStore.getMessageByCommitOffset: getData of sizePy bytes at offsetPy from
//    the mapped commit log, inside one file, then MessageDecoder.decode(readBody, no body CRC):
//    every header field, the msgId, the body copied, the topic and the properties map), and the
//    message checked against its unit: totalSize = sizePy, topic rmq_sys_wheel_timer, REAL_TOPIC's
//    String.hashCode = hashCodeOfRealTopic.
//
// usage: java TimerValidate STORE [--dequeue-reads]  ->  prints "units bytes seconds" (bytes: of
// units read, and of their messages with --dequeue-reads)
// exits 1 when a check fails (the bench's store is healthy).
import java.io.File;
import java.io.RandomAccessFile;
import java.nio.MappedByteBuffer;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

public class TimerValidate {
    static final int UNIT_SIZE = 52;
    static final int BLANK_MAGIC_CODE = 0xBBCCDDEE ^ 1880681586 + 8;
    static final int SLOTS = 2 * 7 * 24 * 3600;
    static final long PRECISION_MS = 1000;
    static final int SLOT_SIZE = 32;

    static final int MAGIC_V1 = 0xDAA320A7;
    static final int MAGIC_V2 = 0xDAA320AB;
    static final String TIMER_TOPIC = "rmq_sys_wheel_timer";
    static final char[] HEX = "0123456789ABCDEF".toCharArray();

    static boolean magicOk(int magic) {
        return (magic | 0xF) == 0xF;
    }

    public static void main(String[] args) throws Exception {
        File root = new File(args[0]);
        boolean dequeueReads = args.length > 1 && args[1].equals("--dequeue-reads");
        File[] files = new File(root, "timerlog").listFiles((d, n) -> n.matches("\\d{20}"));
        Arrays.sort(files);
        long started = System.nanoTime();
        MappedByteBuffer[] maps = new MappedByteBuffer[files.length];
        long fileSize = 0;
        for (int i = 0; i < files.length; i++) {
            try (RandomAccessFile raf = new RandomAccessFile(files[i], "r"); FileChannel ch = raf.getChannel()) {
                maps[i] = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
                fileSize = ch.size();
            }
        }
        long[] lastPos = new long[SLOTS];
        Arrays.fill(lastPos, -1);
        int[] count = new int[SLOTS];
        long units = 0, bad = 0;
        outer:
        for (int f = 0; f < maps.length; f++) {
            MappedByteBuffer buf = maps[f];
            long base = Long.parseLong(files[f].getName());
            int limit = buf.limit();
            for (int pos = 0; pos + UNIT_SIZE <= limit; pos += UNIT_SIZE) {
                int size = buf.getInt(pos);
                int magic = buf.getInt(pos + 12);
                if (magic == BLANK_MAGIC_CODE) continue outer;
                if (size != UNIT_SIZE || !magicOk(magic)) break outer;
                long prevPos = buf.getLong(pos + 4);
                long writeTime = buf.getLong(pos + 16);
                int delayed = buf.getInt(pos + 24);
                long offsetPy = buf.getLong(pos + 28);
                int sizePy = buf.getInt(pos + 36);
                int hash = buf.getInt(pos + 40);
                if (offsetPy < 0 || sizePy <= 0) bad++;
                int slot = (int) ((writeTime + delayed) / PRECISION_MS % SLOTS);
                if (prevPos != lastPos[slot]) bad++;
                lastPos[slot] = base + pos;
                count[slot]++;
                units++;
            }
        }
        long walked = 0, messageBytes = 0;
        CommitLog commitLog = dequeueReads ? new CommitLog(new File(root, "commitlog")) : null;
        try (RandomAccessFile raf = new RandomAccessFile(new File(root, "timerwheel"), "r");
             FileChannel ch = raf.getChannel()) {
            MappedByteBuffer wheel = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
            int slots = (int) (ch.size() / SLOT_SIZE);
            for (int i = 0; i < slots; i++) {
                int at = i * SLOT_SIZE;
                long timeValue = wheel.getLong(at);
                if (timeValue == 0) continue;
                long last = wheel.getLong(at + 16);
                int num = wheel.getInt(at + 24);
                if (timeValue % SLOTS != i || last != lastPos[i] || num != count[i]) bad++;
                long pos = last;
                long steps = 0;
                while (pos != -1) {
                    if (++steps > units) { bad++; break; }  // a loop: dequeue would never leave
                    int file = (int) (pos / fileSize);
                    if (pos < 0 || file >= maps.length) { bad++; break; }
                    MappedByteBuffer buf = maps[file];
                    int rel = (int) (pos % fileSize);
                    int magic = buf.getInt(rel + 12);
                    if (buf.getInt(rel) != UNIT_SIZE || !magicOk(magic)) { bad++; break; }
                    long writeTime = buf.getLong(rel + 16);
                    int delayed = buf.getInt(rel + 24);
                    if ((int) ((writeTime + delayed) / PRECISION_MS % SLOTS) != i) bad++;
                    if (commitLog != null) {
                        long offsetPy = buf.getLong(rel + 28);
                        int sizePy = buf.getInt(rel + 36);
                        ByteBuffer data = commitLog.getData(offsetPy, sizePy);
                        if (data == null || !checkMessage(data, sizePy, buf.getInt(rel + 40))) bad++;
                        messageBytes += sizePy;
                    }
                    pos = buf.getLong(rel + 4);
                    walked++;
                }
            }
        }
        double seconds = (System.nanoTime() - started) / 1e9;
        if (bad != 0 || walked != units) {
            System.err.println("TimerValidate: " + bad + " check(s) failed, " + walked + " of " + units + " units walked");
            System.exit(1);
        }
        System.out.println(units + " " + (units * UNIT_SIZE + messageBytes) + " " + seconds);
    }

    static long sink;

    // The commit log's files mapped as MappedFileQueue maps them; getData: the bytes of one
    // record, inside the file that holds its offset (null when they are not all there).
    static final class CommitLog {
        final MappedByteBuffer[] maps;
        final long[] bases;

        CommitLog(File dir) throws Exception {
            File[] files = dir.listFiles((d, n) -> n.matches("\\d{20}"));
            Arrays.sort(files);
            maps = new MappedByteBuffer[files.length];
            bases = new long[files.length];
            for (int i = 0; i < files.length; i++) {
                try (RandomAccessFile raf = new RandomAccessFile(files[i], "r"); FileChannel ch = raf.getChannel()) {
                    maps[i] = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
                    bases[i] = Long.parseLong(files[i].getName());
                }
            }
        }

        ByteBuffer getData(long offset, int size) {
            for (int i = maps.length - 1; i >= 0; i--) {
                if (offset >= bases[i]) {
                    int rel = (int) (offset - bases[i]);
                    if (size <= 0 || rel + size > maps[i].limit()) return null;
                    ByteBuffer b = maps[i].duplicate();
                    b.position(rel);
                    b.limit(rel + size);
                    return b.slice();
                }
            }
            return null;
        }
    }

    // MessageDecoder.decode(byteBuffer, readBody=true, deCompressBody=false, isClient=false) at
    // 5.3.3, without the body CRC check (decode's default): then the unit's checks.
    static boolean checkMessage(ByteBuffer b, int sizePy, int realTopicHash) {
        int total = b.getInt();
        int magic = b.getInt();
        if (total != sizePy || (magic != MAGIC_V1 && magic != MAGIC_V2)) return false;
        b.getInt();                               // bodyCRC
        int queueId = b.getInt();
        int flag = b.getInt();
        long queueOffset = b.getLong();
        long physicOffset = b.getLong();
        int sysFlag = b.getInt();
        long bornTimestamp = b.getLong();
        byte[] bornHost = new byte[(sysFlag & (1 << 4)) == 0 ? 4 : 16];
        b.get(bornHost);
        int bornPort = b.getInt();
        long storeTimestamp = b.getLong();
        byte[] storeHost = new byte[(sysFlag & (1 << 5)) == 0 ? 4 : 16];
        b.get(storeHost);
        int storePort = b.getInt();
        int reconsumeTimes = b.getInt();
        long preparedTransactionOffset = b.getLong();
        int bodyLen = b.getInt();
        byte[] body = null;
        if (bodyLen > 0) {
            if (bodyLen > b.remaining()) return false;
            body = new byte[bodyLen];
            b.get(body);
        }
        int topicLen = magic == MAGIC_V2 ? b.getShort() : b.get();
        if (topicLen < 0 || topicLen > b.remaining()) return false;
        byte[] topicBytes = new byte[topicLen];
        b.get(topicBytes);
        String topic = new String(topicBytes, StandardCharsets.UTF_8);
        short propsLen = b.getShort();
        Map<String, String> properties = null;
        if (propsLen > 0) {
            if (propsLen > b.remaining()) return false;
            byte[] props = new byte[propsLen];
            b.get(props);
            properties = string2messageProperties(new String(props, StandardCharsets.UTF_8));
        }
        // MessageDecoder.createMessageId: store host, port and commit log offset, as hex
        ByteBuffer id = ByteBuffer.allocate(storeHost.length + 4 + 8);
        id.put(storeHost).putInt(storePort).putLong(physicOffset);
        char[] hex = new char[id.capacity() * 2];
        for (int i = 0; i < id.capacity(); i++) {
            int v = id.get(i) & 0xFF;
            hex[i * 2] = HEX[v >>> 4];
            hex[i * 2 + 1] = HEX[v & 0xF];
        }
        String msgId = new String(hex);
        sink += queueId + flag + queueOffset + bornTimestamp + bornPort + storeTimestamp + reconsumeTimes
            + preparedTransactionOffset + msgId.length() + (body == null ? 0 : body.length) + bornHost.length;
        if (!TIMER_TOPIC.equals(topic) || properties == null) return false;
        String real = properties.get("REAL_TOPIC");
        return real != null && real.hashCode() == realTopicHash;
    }

    // MessageDecoder.string2messageProperties: NAME\u0001VALUE\u0002 pairs into a HashMap.
    static Map<String, String> string2messageProperties(String properties) {
        Map<String, String> map = new HashMap<>();
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
        return map;
    }
}
