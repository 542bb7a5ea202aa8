"""QMQ's broker store (qunarcorp/qmq ``qmq-store``): every on-disk layout, declared once.

The second store family rmqtool reads. No I/O here, as for RocketMQ's layouts one level
up: each module opens with a box diagram and the QMQ source it mirrors (commit 5abc92f4).
All integers big-endian. QMQ maps every segment at its full size, so a file shorter than
its segment size reads as zero-extended: a reader treats the missing tail as zeros.
"""
