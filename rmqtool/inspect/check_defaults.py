"""The defaults of ``rmqtool check`` (inspect/check.py), apart so the command line reads
them without loading the probe (and numpy) at start."""

# The broker's recovery walk (checkMessageAndReturnSize with the body CRC, record by record):
# benchmarks/java/RecoveryScan.java on the 1,000,000-message bench store read 1.03 GB/s on the
# 2-CPU development machine, page cache warm. Cold disks read slower: --recovery-rate.
RECOVERY_RATE = 1_000_000_000  # bytes/s
TAIL_BYTES = 4 << 20  # the commit log tail whose records are checked for damage
