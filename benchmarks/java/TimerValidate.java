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
//
// usage: java TimerValidate STORE  ->  prints "units bytes seconds" (bytes: of units read)
// exits 1 when a check fails (the bench's store is healthy).
import java.io.File;
import java.io.RandomAccessFile;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.util.Arrays;

public class TimerValidate {
    static final int UNIT_SIZE = 52;
    static final int BLANK_MAGIC_CODE = 0xBBCCDDEE ^ 1880681586 + 8;
    static final int SLOTS = 2 * 7 * 24 * 3600;
    static final long PRECISION_MS = 1000;
    static final int SLOT_SIZE = 32;

    static boolean magicOk(int magic) {
        return (magic | 0xF) == 0xF;
    }

    public static void main(String[] args) throws Exception {
        File root = new File(args[0]);
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
        long walked = 0;
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
        System.out.println(units + " " + units * UNIT_SIZE + " " + seconds);
    }
}
